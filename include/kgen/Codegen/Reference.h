//===- Reference.h - The GEMM reference and the tolerance rule --*- C++ -*-===//
//
// Kernels are checked against a plain reference (templates/gemm/reference.h),
// emitted for a problem like the real kernels: a short file that includes
// the template and fixes the dtypes and the layout. Its module holds two
// kernels:
//
//   <name>(a, b, c, m, n, k, lda, ldb, ldc, alpha, beta, ref, naive)
//       ref: double accumulation from the exact inputs, m x n packed;
//       naive: the fp32 loop, k in order, rounded to C's dtype, packed;
//   <name>_fill(p, count, type, seed, poison)
//       uniform values in [-1, 1) of `type` (referenceTypeCode), a pure
//       function of (seed, index), or NaN with `poison`.
//
// The rule (DESIGN.md, as FlashAttention's tests): max|ours - ref| <=
// 2 * max|naive - ref|, with one floor. When the naive error is zero or
// tiny (K = 1, where every product is exact; or few elements, none of which
// happened to round far), twice it would demand that a correct kernel
// summing in another order never rounds an element differently; so the
// bound is never below half an ulp of C's dtype at max|ref|, the rounding
// error a kernel storing C in that dtype may make on its largest element.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_CODEGEN_REFERENCE_H
#define KGEN_CODEGEN_REFERENCE_H

#include "kgen/Codegen/Emitter.h"
#include "kgen/Problem.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kgen {

/// "kgen_gemm_reference_bf16_nt" (with "_c<dtype>" when C's dtype differs):
/// the reference depends on the dtypes and the layout only.
std::string gemmReferenceName(const GemmProblem &p);
/// The fill kernel of the same module: gemmReferenceName(p) + "_fill".
std::string gemmReferenceFillName(const GemmProblem &p);

/// The reference's source for `t`; compiles through the same Compiler as
/// the kernels (its headers are listed like emitGemm's).
KernelSource emitGemmReference(const GemmProblem &p, Target t);

/// 16x16 threads per block, one per element of C.
LaunchDims gemmReferenceLaunchDims(int64_t m, int64_t n);
/// 256 threads per block, a grid-stride loop over `count` elements.
LaunchDims referenceFillLaunchDims(int64_t count);
/// The `type` argument of the fill (and the template's kTypeA/kTypeC).
int referenceTypeCode(DType t);

/// Element `i` of a buffer of `t` values, exactly, as a double.
double decodeElement(DType t, const void *buf, size_t i);
/// Its inverse: stores `v` rounded to the nearest `t` value (ties to even)
/// as element `i` of `buf`. Past the largest finite value: infinity, or NaN
/// for e4m3, which has none (as torch's non-saturating .to(float8_e4m3fn));
/// NaN stays NaN.
void encodeElement(DType t, double v, void *buf, size_t i);
/// Half the spacing of `t`'s values at magnitude `x` (0 for 0).
double halfUlp(DType t, double x);

/// A result next to the reference, and the rule's verdict.
struct ReferenceCheck {
  double errOurs = 0;    ///< max|ours - ref| over the finite elements
  double errNaive = 0;   ///< max|naive - ref|
  double maxRef = 0;     ///< max|ref|
  double floor = 0;      ///< half an ulp of C's dtype at maxRef
  int64_t nonFinite = 0; ///< elements of ours that are NaN or inf
  int64_t worst = -1;    ///< i * n + j of the largest error
  int64_t firstBad = -1; ///< i * n + j of the first non-finite element
  double bound() const { return std::max(2 * errNaive, floor); }
  bool pass() const { return nonFinite == 0 && errOurs <= bound(); }
  /// One line for reports: "max|ours - ref| = 3e-2 > bound 1e-2 (2 x naive
  /// 5e-3, half-ulp floor 2e-3)", or the count of non-finite elements.
  std::string describe() const;
};

/// Compares `ours` (m x n of C's dtype, row stride `ldc` elements) with the
/// reference's `ref` and `naive` (m x n, packed).
ReferenceCheck checkAgainstReference(DType c, int64_t m, int64_t n,
                                     const void *ours, int64_t ldc,
                                     const double *ref, const void *naive);

} // namespace kgen

#endif // KGEN_CODEGEN_REFERENCE_H
