//===- KgenOps.cpp - kgen operations --------------------------------------===//

#include "kgen/IR/KgenOps.h"
#include "kgen/Codegen/Limits.h"
#include "kgen/IR/Convert.h"
#include "kgen/Mlstm.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <algorithm>

using namespace mlir;
using namespace kgen::ir;

//===----------------------------------------------------------------------===//
// GemmOp
//===----------------------------------------------------------------------===//

// kgen.gemm @name {m = ..., n = ..., ...}
ParseResult GemmOp::parse(OpAsmParser &parser, OperationState &result) {
  StringAttr name;
  if (parser.parseSymbolName(name, getSymNameAttrName(result.name),
                             result.attributes) ||
      parser.parseOptionalAttrDict(result.attributes))
    return failure();
  return success();
}

void GemmOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  // The attributes in an order that reads as a sentence (shape, types,
  // layout, then where and how) rather than the dictionary's alphabetical
  // one; attributes kgen does not know come last.
  SmallVector<NamedAttribute> attrs;
  StringAttr order[] = {
      getMAttrName(),          getNAttrName(),        getKAttrName(),
      getAbAttrName(),         getCAttrName(),        getLayoutAttrName(),
      getStaticDimsAttrName(), getAlignAttrName(),    getBiasAttrName(),
      getActivationAttrName(), getResidualAttrName(), getBatchAttrName(),
      getTf32AttrName(),       getTargetAttrName(),   getConfigAttrName()};
  for (StringAttr name : order)
    if (Attribute value = (*this)->getAttr(name))
      attrs.emplace_back(name, value);
  for (NamedAttribute attr : (*this)->getAttrs())
    if (attr.getName() != getSymNameAttrName() &&
        !llvm::is_contained(order, attr.getName()))
      attrs.push_back(attr);
  // m, n and k are i64 by the op's definition: print `m = 532`, which parses
  // back as i64, rather than the dictionary's `m = 532 : i64`.
  StringAttr untyped[] = {getMAttrName(), getNAttrName(), getKAttrName(),
                          getBatchAttrName()};
  p << " {";
  llvm::interleaveComma(attrs, p, [&](NamedAttribute attr) {
    p.printKeywordOrString(attr.getName());
    if (isa<UnitAttr>(attr.getValue()))
      return;
    p << " = ";
    if (llvm::is_contained(untyped, attr.getName()))
      p.printAttributeWithoutType(attr.getValue());
    else
      p.printAttribute(attr.getValue());
  });
  p << '}';
}

LogicalResult GemmOp::verify() {
  FailureOr<GemmProblem> problem = getGemmProblem(*this);
  if (failed(problem))
    return failure();
  if (std::optional<std::string> error = checkProblem(*problem))
    return emitError(*error);
  FailureOr<std::optional<Target>> target = getGemmTarget(*this);
  if (failed(target))
    return failure();
  // Without a target only the problem can be checked: whether a config is
  // valid depends on the target's limits.
  if (!*target)
    return success();
  if (std::optional<std::string> error =
          checkProblemOnTarget(*problem, **target))
    return emitError(*error);
  if (std::optional<GemmConfig> config = getGemmConfig(*this))
    if (std::optional<std::string> error =
            checkConfig(*problem, *config, **target))
      return emitError(*error);
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  FailureOr<AttentionProblem> problem = getAttentionProblem(*this);
  if (failed(problem))
    return failure();
  if (std::optional<std::string> error = checkProblem(*problem))
    return emitError(*error);
  // O's type follows from the inputs' (kgen has no other kernel); the
  // attribute states it, so a declaration that expects another is refused.
  if (std::optional<Type> o = getODtype()) {
    const DType want = attentionOutputDType(*problem);
    std::optional<DType> got = toDType(*o);
    if (!got || *got != want)
      return emitError() << "attention: o_dtype " << *o << " does not match "
                         << std::string(toString(problem->dtype))
                         << " inputs, whose O (and bias) is "
                         << std::string(toString(want))
                         << (isFp8(problem->dtype)
                                 ? " (fp8 is an input type only)"
                                 : " (the inputs' type)");
  }
  FailureOr<std::optional<Target>> target = getAttentionTarget(*this);
  if (failed(target))
    return failure();
  if (!*target)
    return success();
  if (std::optional<std::string> error =
          checkProblemOnTarget(*problem, **target))
    return emitError(*error);
  if (std::optional<AttentionConfig> config = getAttentionConfig(*this))
    if (std::optional<std::string> error =
            checkConfig(*problem, *config, **target))
      return emitError(*error);
  return success();
}

//===----------------------------------------------------------------------===//
// MlstmOp
//===----------------------------------------------------------------------===//

FailureOr<kgen::MlstmProblem> MlstmOp::getProblem() {
  MlstmProblem p;
  p.dqk = int(std::clamp<int64_t>(getDqk(), INT32_MIN, INT32_MAX));
  p.dv = int(std::clamp<int64_t>(getDv(), INT32_MIN, INT32_MAX));
  std::optional<DType> d = toDType(getDtype());
  if (!d)
    return emitError() << "mlstm: dtype " << getDtype()
                       << " is not bf16, f16 or f32";
  p.dtype = *d;
  if (auto b = getB())
    p.b = int64_t(*b);
  if (auto nh = getNh())
    p.nh = int64_t(*nh);
  if (auto s = getS())
    p.s = int64_t(*s);
  p.initialState = getInitialState();
  p.finalState = getFinalState();
  if (auto eps = getEps())
    p.eps = eps->convertToFloat();
  return p;
}

FailureOr<std::optional<kgen::Target>> MlstmOp::getKgenTarget() {
  std::optional<StringRef> name = getTarget();
  if (!name)
    return std::optional<Target>();
  if (std::optional<Target> t = kgen::parseTarget(*name))
    return std::optional<Target>(*t);
  return emitError() << unknownTargetMessage(*name);
}

LogicalResult MlstmOp::verify() {
  FailureOr<MlstmProblem> problem = getProblem();
  if (failed(problem))
    return failure();
  if (std::optional<std::string> error = checkProblem(*problem))
    return emitError(*error);
  FailureOr<std::optional<Target>> target = getKgenTarget();
  if (failed(target))
    return failure();
  if (*target && getConfig())
    if (std::optional<std::string> error =
            checkConfig(*problem, getConfig()->getConfig(), **target))
      return emitError(*error);
  return success();
}

#define GET_OP_CLASSES
#include "kgen/IR/KgenOps.cpp.inc"
