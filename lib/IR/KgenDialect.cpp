//===- KgenDialect.cpp - The kgen dialect and its attributes --------------===//

#include "kgen/IR/KgenDialect.h"
#include "kgen/IR/KgenAttrs.h"
#include "kgen/IR/KgenOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kgen::ir;

#include "kgen/IR/KgenDialect.cpp.inc"

void KgenDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "kgen/IR/KgenAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "kgen/IR/KgenOps.cpp.inc"
      >();
}

FailureOr<kgen::SmemLayout> kgen::ir::parseSmemLayout(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  if (keyword == "padded")
    return SmemLayout::Padded;
  if (keyword == "swizzled")
    return SmemLayout::Swizzled;
  parser.emitError(loc) << "unknown shared-memory layout '" << keyword
                        << "'; expected padded or swizzled";
  return failure();
}

void kgen::ir::printSmemLayout(AsmPrinter &printer, SmemLayout layout) {
  printer << (layout == SmemLayout::Swizzled ? "swizzled" : "padded");
}

FailureOr<kgen::GemmLoop> kgen::ir::parseGemmLoop(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  if (std::optional<GemmLoop> l = kgen::parseGemmLoop(keyword))
    return *l;
  parser.emitError(loc) << "unknown GEMM loop '" << keyword
                        << "'; expected tiled, wgmma or gemv";
  return failure();
}

void kgen::ir::printGemmLoop(AsmPrinter &printer, GemmLoop loop) {
  printer << kgen::toString(loop);
}

FailureOr<kgen::AttentionLoop>
kgen::ir::parseAttentionLoop(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  if (std::optional<AttentionLoop> l = kgen::parseAttentionLoop(keyword))
    return *l;
  parser.emitError(loc) << "unknown attention loop '" << keyword
                        << "'; expected tiled or wgmma";
  return failure();
}

void kgen::ir::printAttentionLoop(AsmPrinter &printer, AttentionLoop loop) {
  printer << kgen::toString(loop);
}

kgen::GemmConfig GemmConfigAttr::getConfig() const {
  GemmConfig c;
  c.loop = getLoop();
  c.cluster = getCluster();
  c.splitK = getSplitK();
  c.streamK = getStreamK() != 0;
  c.repack = getRepack() != 0;
  c.swapAB = getSwapAB() != 0;
  c.blockM = getBlockM();
  c.blockN = getBlockN();
  c.blockK = getBlockK();
  c.warpsM = getWarpsM();
  c.warpsN = getWarpsN();
  c.stages = getStages();
  c.smem = getSmem();
  c.smemPad = getPad();
  return c;
}

kgen::AttentionConfig AttentionConfigAttr::getConfig() const {
  AttentionConfig c;
  c.loop = getLoop();
  c.blockM = getBlockM();
  c.blockN = getBlockN();
  c.warps = getWarps();
  c.stages = getStages();
  c.preloadV = getPreloadV() != 0;
  c.splits = getSplits();
  c.packGqa = getPackGqa() != 0;
  c.persistent = getPersistent() != 0;
  return c;
}

FailureOr<kgen::MlstmVariant> kgen::ir::parseMlstmVariant(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  if (std::optional<MlstmVariant> v = kgen::parseMlstmVariant(keyword))
    return *v;
  parser.emitError(loc) << "unknown mLSTM variant '" << keyword
                        << "'; expected recurrent, fused, twophase or chunkpar";
  return failure();
}

void kgen::ir::printMlstmVariant(AsmPrinter &printer, MlstmVariant variant) {
  printer << kgen::toString(variant);
}

kgen::MlstmConfig MlstmConfigAttr::getConfig() const {
  return MlstmConfig{getVariant(), getChunk(), getBlockDV(), getWarps(),
                     getWgmma()};
}

#define GET_ATTRDEF_CLASSES
#include "kgen/IR/KgenAttrs.cpp.inc"
