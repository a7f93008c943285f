//===- Convert.cpp - kgen ops <-> kgen's problem structs ------------------===//

#include "kgen/IR/Convert.h"

#include "mlir/IR/BuiltinTypes.h"

#include <climits>

using namespace mlir;

namespace kgen::ir {

// Problem.h has no list of targets; the message names every one.
static constexpr Target kTargets[] = {Target::GFX90A, Target::GFX942,
                                      Target::SM80, Target::SM90A};

Type toMlirType(MLIRContext *ctx, DType t) {
  switch (t) {
  case DType::F16:
    return Float16Type::get(ctx);
  case DType::BF16:
    return BFloat16Type::get(ctx);
  case DType::F32:
    return Float32Type::get(ctx);
  case DType::E4M3:
    return Float8E4M3FNType::get(ctx);
  case DType::E5M2:
    return Float8E5M2Type::get(ctx);
  }
  return {};
}

std::optional<DType> toDType(Type t) {
  if (t.isBF16())
    return DType::BF16;
  if (t.isF16())
    return DType::F16;
  if (t.isF32())
    return DType::F32;
  if (t.isFloat8E4M3FN())
    return DType::E4M3;
  if (t.isFloat8E5M2())
    return DType::E5M2;
  return std::nullopt;
}

std::string unknownTargetMessage(StringRef name) {
  std::string msg = "unknown target '" + name.str() + "'; expected ";
  for (size_t i = 0; i < std::size(kTargets); ++i) {
    if (i)
      msg += i + 1 == std::size(kTargets) ? " or " : ", ";
    msg += toString(kTargets[i]);
  }
  if (name == "native")
    msg += " ('native' is resolved by the runtime on the current device)";
  return msg;
}

FailureOr<GemmProblem> getGemmProblem(GemmOp op) {
  GemmProblem p;
  p.m = op.getMAttr().getInt();
  p.n = op.getNAttr().getInt();
  p.k = op.getKAttr().getInt();

  auto dtype = [&](StringRef attr, Type type) -> FailureOr<DType> {
    if (std::optional<DType> t = toDType(type))
      return *t;
    return op.emitError() << "gemm: unknown dtype " << type << " for " << attr
                          << "; expected bf16, f16, f32, f8E4M3FN or f8E5M2";
  };
  FailureOr<DType> ab = dtype("ab", op.getAb());
  if (failed(ab))
    return failure();
  FailureOr<DType> c = dtype("c", op.getC());
  if (failed(c))
    return failure();
  p.ab = *ab;
  p.c = *c;
  p.alignA = p.alignB = defaultAlign(p.ab); // unless `align` says otherwise

  StringRef layout = op.getLayout();
  auto isLetter = [](char l) { return l == 'n' || l == 't'; };
  if (layout.size() != 2 || !isLetter(layout[0]) || !isLetter(layout[1]))
    return op.emitError() << "gemm: unknown layout \"" << layout
                          << "\"; expected \"nn\", \"nt\", \"tn\" or \"tt\" "
                             "(A then B; 't' = stored transposed)";
  p.transA = layout[0] == 't';
  p.transB = layout[1] == 't';

  if (std::optional<ArrayAttr> dims = op.getStaticDims()) {
    p.staticM = p.staticN = p.staticK = false;
    for (StringRef dim : dims->getAsValueRange<StringAttr>()) {
      bool *flag = dim == "m"   ? &p.staticM
                   : dim == "n" ? &p.staticN
                   : dim == "k" ? &p.staticK
                                : nullptr;
      if (!flag)
        return op.emitError() << "gemm: unknown dimension \"" << dim
                              << "\" in static_dims; expected \"m\", \"n\" "
                                 "or \"k\"";
      if (*flag)
        return op.emitError() << "gemm: dimension \"" << dim
                              << "\" appears twice in static_dims";
      *flag = true;
    }
  }

  if (std::optional<ArrayAttr> align = op.getAlign()) {
    if (align->size() != 3)
      return op.emitError() << "gemm: align lists " << align->size()
                            << " values; expected 3 (A, B, C)";
    int *fields[] = {&p.alignA, &p.alignB, &p.alignC};
    for (auto [field, value] :
         llvm::zip(fields, align->getAsValueRange<IntegerAttr>())) {
      int64_t v = value.getSExtValue();
      // checkProblem names the rule; just keep the value representable.
      *field = v < INT_MIN || v > INT_MAX ? 0 : int(v);
    }
  }

  if (std::optional<StringRef> bias = op.getBias()) {
    std::optional<BiasKind> kind = parseBiasKind(std::string_view(*bias));
    if (!kind)
      return op.emitError() << "gemm: unknown bias \"" << *bias
                            << "\"; expected \"m\" (one value a row), \"n\" "
                               "(one a column) or \"none\"";
    p.bias = *kind;
  }
  if (std::optional<StringRef> act = op.getActivation()) {
    std::optional<Activation> a = parseActivation(std::string_view(*act));
    if (!a)
      return op.emitError() << "gemm: unknown activation \"" << *act
                            << "\"; expected \"relu\", \"gelu_tanh\", "
                               "\"gelu_erf\", \"silu\" or \"none\"";
    p.act = *a;
  }
  p.residual = op.getResidual();
  p.tf32 = op.getTf32();
  if (IntegerAttr batch = op.getBatchAttr())
    p.batch = batch.getInt(); // checkProblem names the range
  return p;
}

FailureOr<std::optional<Target>> getGemmTarget(GemmOp op) {
  std::optional<StringRef> name = op.getTarget();
  if (!name)
    return std::optional<Target>();
  if (std::optional<Target> t = parseTarget(std::string_view(*name)))
    return t;
  return op.emitError() << "gemm: " << unknownTargetMessage(*name);
}

std::optional<GemmConfig> getGemmConfig(GemmOp op) {
  if (GemmConfigAttr config = op.getConfigAttr())
    return config.getConfig();
  return std::nullopt;
}

FailureOr<AttentionProblem> getAttentionProblem(AttentionOp op) {
  AttentionProblem p;
  p.batch = op.getBatchAttr().getInt();
  p.headsQ = op.getHeadsQAttr().getInt();
  p.headsKv = op.getHeadsKvAttr().getInt();
  p.seqlenQ = op.getSeqlenQAttr().getInt();
  p.seqlenK = op.getSeqlenKAttr().getInt();
  p.headDimQk = int(op.getHeadDimQkAttr().getInt());
  p.headDimV = int(op.getHeadDimVAttr().getInt());
  std::optional<DType> t = toDType(op.getDtype());
  if (!t)
    return op.emitError() << "attention: unknown dtype " << op.getDtype()
                          << "; expected bf16, f16, f8E4M3FN or f8E5M2";
  p.dtype = *t;
  if (std::optional<StringRef> l = op.getLayout()) {
    std::optional<AttentionLayout> layout =
        parseAttentionLayout(std::string_view(*l));
    if (!layout)
      return op.emitError() << "attention: unknown layout \"" << *l
                            << "\"; expected \"bshd\" or \"bhsd\"";
    p.layout = *layout;
  }
  p.causal = op.getCausal();
  if (std::optional<ArrayAttr> w = op.getWindow()) {
    if (w->size() != 2)
      return op.emitError() << "attention: window has " << w->size()
                            << " values; expected [left, right]";
    p.windowLeft = int(cast<IntegerAttr>((*w)[0]).getInt());
    p.windowRight = int(cast<IntegerAttr>((*w)[1]).getInt());
  }
  p.varlen = op.getVarlen();
  p.alibi = op.getAlibi();
  p.bias = op.getBias();
  p.lse = op.getLse();
  return p;
}

FailureOr<std::optional<Target>> getAttentionTarget(AttentionOp op) {
  std::optional<StringRef> name = op.getTarget();
  if (!name)
    return std::optional<Target>();
  if (std::optional<Target> t = parseTarget(std::string_view(*name)))
    return t;
  return op.emitError() << "attention: " << unknownTargetMessage(*name);
}

std::optional<AttentionConfig> getAttentionConfig(AttentionOp op) {
  if (AttentionConfigAttr config = op.getConfigAttr())
    return config.getConfig();
  return std::nullopt;
}

FailureOr<std::pair<GemmProblem, std::optional<GemmConfig>>>
toProblem(GemmOp op) {
  FailureOr<GemmProblem> p = getGemmProblem(op);
  if (failed(p))
    return failure();
  return std::make_pair(*p, getGemmConfig(op));
}

GemmOp buildGemmOp(OpBuilder &builder, Location loc, StringRef name,
                   const GemmProblem &p, std::optional<Target> target,
                   std::optional<GemmConfig> config) {
  MLIRContext *ctx = builder.getContext();
  const GemmProblem defaults;
  ArrayAttr staticDims;
  if (p.staticM != defaults.staticM || p.staticN != defaults.staticN ||
      p.staticK != defaults.staticK) {
    SmallVector<StringRef> dims;
    for (auto [dim, isStatic] :
         {std::pair{"m", p.staticM}, {"n", p.staticN}, {"k", p.staticK}})
      if (isStatic)
        dims.push_back(dim);
    staticDims = builder.getStrArrayAttr(dims);
  }
  ArrayAttr align;
  if (p.alignA != defaults.alignA || p.alignB != defaults.alignB ||
      p.alignC != defaults.alignC)
    align = builder.getI64ArrayAttr({p.alignA, p.alignB, p.alignC});
  return builder.create<GemmOp>(
      loc, builder.getStringAttr(name), builder.getI64IntegerAttr(p.m),
      builder.getI64IntegerAttr(p.n), builder.getI64IntegerAttr(p.k),
      TypeAttr::get(toMlirType(ctx, p.ab)), TypeAttr::get(toMlirType(ctx, p.c)),
      builder.getStringAttr(p.layoutName()), staticDims, align,
      target ? builder.getStringAttr(toString(*target)) : StringAttr(),
      config ? GemmConfigAttr::get(ctx, *config) : GemmConfigAttr(),
      p.bias != BiasKind::None ? builder.getStringAttr(toString(p.bias))
                               : StringAttr(),
      p.act != Activation::None ? builder.getStringAttr(toString(p.act))
                                : StringAttr(),
      p.residual ? builder.getUnitAttr() : UnitAttr(),
      p.batch != 1 ? builder.getI64IntegerAttr(p.batch) : IntegerAttr(),
      p.tf32 ? builder.getUnitAttr() : UnitAttr());
}

} // namespace kgen::ir
