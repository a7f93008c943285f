//===- EmulatorTest.cpp - GEMM kernels run on an emulated GPU -------------===//
//
// Runs generated GEMM kernels on the host, for NVIDIA and for AMD, with no
// GPU. The AMD path cannot run on this project's machines at all, so this is
// its only execution check; the NVIDIA path also runs on GPUs (test/gpu).
//
// What is real and what is emulated:
//
//   real      the kernel source kgen::emitGemm generates for each CASE of
//             cases.def (compiled as written, by g++), and through it
//             templates/gemm/gemm.h, templates/common/prelude.h and, on
//             NVIDIA, templates/common/hip_runtime_nvidia.h, all compiled
//             from templates/ as they are (the prelude's portable
//             conversions, the ones AMD uses; NVIDIA GPUs use its inline
//             PTX instead); the launch geometry comes from
//             kgen::gemmLaunchDims.
//   emulated  the target atoms and nothing else: on NVIDIA cp.async (+
//             commit/wait_group), ldmatrix.x4(.trans) and mma.sync
//             m16n8k16 (test/emu/include/kgen/common/mma_sm80.h replaces
//             templates/common/mma_sm80.h); on AMD the MFMA 32x32x8 bf16/f16
//             (include/kgen/common/mfma_cdna.h replaces mfma_cdna.h; LDS is
//             plain memory the template addresses itself); and the kernel
//             language (include/hip/hip_runtime.h: one host thread per GPU
//             thread, __syncthreads a barrier, warps exchanging operands
//             behind a barrier over their lanes; EmuRuntime.cpp).
//
// The emulated atoms follow the register layouts of the PTX ISA and the
// CDNA3 ISA as we read them, so this test checks our code against our
// reading of the ISA, not against hardware: a misread layout in both the
// template and the emulation would pass here (on NVIDIA the GPU tests would
// catch it; on AMD nothing in this project would).
//
// Inputs are integers in [-15, 15], exact in bf16 and f16; every product and
// sum is then exact in fp32 (|sum| < 2^23 for these K), so every result must
// equal the host reference bit for bit, whatever the accumulation order. The
// sums reach the thousands, so a bf16 or f16 C is rounded, ties included,
// and the conversion is checked too.
//
// f32 inputs run through TF32 (the problem's tf32 flag): there the inputs
// are an integer in [-15, 15] plus a random fraction, so that cvt.rna's
// rounding matters, and the host reference sums the inputs rounded to TF32
// (to nearest, ties away) in double. A result may differ from it by the
// fp32 accumulation's error, bounded by (K + 8) fp32 ulps of sum |a*b|: a
// kernel that left the inputs unrounded (the emulated tensor core then
// truncates them, as hardware does) misses that bound by far.
//
// Each run also checks: C full of NaN is never read when beta == 0; padding
// between rows and guards around each matrix (NaN, poisoned under ASan) are
// neither read into a result nor written; A and B stay unchanged; matrices
// sit at exactly their vector alignment; shared memory starts as NaN in
// every block, and no access goes past the launch's size; cp.async copies
// are aligned, read only A and B, and land lazily (at the wait_group that
// covers them) or eagerly (at issue), and none is left pending at exit.
//
//===----------------------------------------------------------------------===//

#include "EmuRuntime.h"
#include "kgen/Problem.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <random>
#include <set>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define EMU_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define EMU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define EMU_POISON(p, n) ((void)(p), (void)(n))
#define EMU_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace {

struct EmuRun {
  long long m, n, k;
  unsigned gridX, gridY, gridZ; ///< kgen::gemmLaunchDims
  int threads, smemBytes;
  long long workspaceBytes, counters; ///< kgen::gemmWorkspace (split-K)
};

struct EmuKernel {
  const char *name, *target;
  bool amd;
  kgen::DType ab, c;
  bool transA, transB;
  int vecA, vecB, vecC, waveSize;
  int warps, stages;
  bool swizzle;
  bool checkM, checkN, checkK;
  int bias, act; ///< kgen::BiasKind, kgen::Activation
  bool residual;
  int batch;
  int splitK;
  bool gemv; ///< the gemv loop (templates/gemm/gemv.h)
  int nRuns;
  EmuRun runs[4];
  bool (*launch)(const emu::Args &, const emu::Launch &, char *, size_t);
  /// A repack config's copy kernel (templates/gemm/repack.h), run first;
  /// null otherwise. vecA and vecB are then the caller's widths (1).
  bool (*copy)(const kgen::gemm::RepackParams &, const emu::Launch &, char *,
               size_t);
};

#include "registry.inc"

constexpr int kNumKernels = int(sizeof(kKernels) / sizeof(kKernels[0]));

//===----------------------------------------------------------------------===//
// Host values
//===----------------------------------------------------------------------===//

/// The bits of an exactly representable value v in `t`.
uint32_t encodeExact(kgen::DType t, float v) {
  if (t == kgen::DType::F32) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
  }
  if (t == kgen::DType::F16) {
    _Float16 h = static_cast<_Float16>(v);
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
  }
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u >> 16;
}

/// The reference's rounding of an fp32 value to `t`: to nearest, ties to
/// even (written out for bf16, the compiler's conversion for f16).
uint32_t roundTo(kgen::DType t, float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if (t == kgen::DType::F32)
    return u;
  if (t == kgen::DType::F16) {
    _Float16 h = static_cast<_Float16>(v);
    uint16_t b;
    std::memcpy(&b, &h, 2);
    return b;
  }
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; // values here are finite
}

/// One stored matrix (rows x cols, leading dimension ld) inside a buffer
/// that starts it at exactly `align` bytes of alignment, with guards before
/// and after. Guards and the padding of each row hold all-ones bytes, a NaN
/// in every dtype; under ASan the guards are also poisoned.
struct Matrix {
  int elem;
  long long rows, cols, ld;
  size_t lead, bytes, total;
  unsigned char *base;
  unsigned char *data;

  Matrix(kgen::DType t, long long rows, long long cols, long long ld,
         int alignBytes)
      : elem(kgen::sizeOf(t)), rows(rows), cols(cols), ld(ld) {
    bytes = size_t((rows - 1) * ld + cols) * size_t(elem);
    // Guards of two rows and more on each side, so that an access a row or
    // two out is caught here rather than in the heap.
    const size_t guard = 64 + 2 * size_t(ld) * size_t(elem);
    lead = guard + size_t(alignBytes);
    total = (lead + bytes + guard + 7) / 8 * 8;
    base = static_cast<unsigned char *>(
        ::operator new(total, std::align_val_t(64)));
    std::memset(base, 0xff, total);
    data = base + lead;
    EMU_POISON(base, lead);
    EMU_POISON(data + bytes, total - lead - bytes);
  }
  ~Matrix() {
    EMU_UNPOISON(base, total);
    ::operator delete(base, std::align_val_t(64));
  }
  Matrix(const Matrix &) = delete;
  Matrix &operator=(const Matrix &) = delete;

  void set(long long r, long long c, uint32_t bits) {
    std::memcpy(data + size_t(r * ld + c) * size_t(elem), &bits, size_t(elem));
  }
  uint32_t get(long long r, long long c) const {
    uint32_t bits = 0;
    std::memcpy(&bits, data + size_t(r * ld + c) * size_t(elem), size_t(elem));
    return bits;
  }
  /// The whole buffer, guards included (guards read through ASan's back).
  std::vector<unsigned char> snapshot() const {
    EMU_UNPOISON(base, total);
    std::vector<unsigned char> s(base, base + total);
    EMU_POISON(base, lead);
    EMU_POISON(data + bytes, total - lead - bytes);
    return s;
  }
  emu::Buffer buffer() const { return {data, bytes}; }
};

float valueOf(kgen::DType t, uint32_t bits) {
  if (t == kgen::DType::F32) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  return t == kgen::DType::BF16 ? emu::decodeBf16(uint16_t(bits))
                                : emu::decodeF16(uint16_t(bits));
}

struct Variant {
  float alpha, beta;
  bool paddedLd;
  bool eagerCopies;
};

/// The activation as the host reference computes it: in double, from the
/// formulas' definitions (not the template's code).
double activateRef(int act, double x) {
  switch (kgen::Activation(act)) {
  case kgen::Activation::None:
    return x;
  case kgen::Activation::ReLU:
    return x > 0 ? x : 0;
  case kgen::Activation::GeluTanh:
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  case kgen::Activation::GeluErf:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case kgen::Activation::SiLU:
    return x / (1 + std::exp(-x));
  }
  return x;
}

/// The spacing of `t`'s values at magnitude x (0 for 0).
double ulpOf(kgen::DType t, double x) {
  if (x == 0)
    return 0;
  int e;
  std::frexp(std::fabs(x), &e);
  const int mant = t == kgen::DType::F32 ? 24 : t == kgen::DType::F16 ? 11 : 8;
  return std::ldexp(1.0, e - mant);
}

/// Whether an element of `t` (bits `got`) may stand for the exact `want`
/// when the kernel computed it through an fp32 GELU or SiLU (tanhf, erff,
/// expf, each a few ulps off): the final rounding to `t` (one ulp of `t` at
/// |want|) plus 8 fp32 ulps of `scale`, the largest magnitude the fp32
/// computation went through (the pre-activation value, the residual).
/// Everything else in the epilogue is exact here and compared bit for bit.
bool closeEnough(kgen::DType t, uint32_t got, double want, double scale) {
  const double g = valueOf(t, got);
  return std::isfinite(g) &&
         std::fabs(g - want) <=
             ulpOf(t, want) + 8 * ulpOf(kgen::DType::F32, scale);
}

/// x rounded to TF32 (10-bit mantissa, to nearest, ties away from zero), as
/// cvt.rna.tf32.f32; written here with frexp/round, apart from the atoms.
float roundTf32(float x) {
  if (x == 0 || !std::isfinite(x))
    return x;
  int e;
  std::frexp(x, &e); // |x| in [2^(e-1), 2^e): 11 significant bits
  const double q = std::ldexp(1.0, e - 11);
  return float(std::round(double(x) / q) * q);
}

/// Runs kernel `kern` on one shape; returns an empty string or what failed.
std::string runOne(const EmuKernel &kern, const EmuRun &run, const Variant &v,
                   unsigned seed) {
  const long long M = run.m, N = run.n, K = run.k, nb = kern.batch;
  const bool act = kern.act != int(kgen::Activation::None);
  // ReLU is exact; the others go through fp32 math functions.
  const bool tf32 = kern.ab == kgen::DType::F32;
  const bool inexact = (act && kern.act != int(kgen::Activation::ReLU)) || tf32;
  std::uniform_real_distribution<float> fraction(-1.f, 1.f);
  // Activations are only interesting near 0: scale the products down by
  // 2^-10 and C, the bias and the residual by 2^-4 (powers of two: every
  // input and pre-activation value stays exact).
  const float alpha = act ? v.alpha * 0x1p-10f : v.alpha;
  const float small01 = act ? 0x1p-4f : 1.0f;
  // Leading dimensions: packed, or padded by a vector (3 elements for
  // vectors of 1), which keeps them multiples of the vector width. Batches
  // of a matrix sit one row apart (a NaN row, as the padding).
  auto pad = [&](int vec) { return v.paddedLd ? (vec == 1 ? 3 : vec) : 0; };
  const long long lda = (kern.transA ? M : K) + pad(kern.vecA);
  const long long ldb = (kern.transB ? K : N) + pad(kern.vecB);
  const long long ldc = N + pad(kern.vecC);
  const long long rowsA = kern.transA ? K : M, rowsB = kern.transB ? N : K;
  auto batchedRows = [&](long long rows) {
    return nb == 1 ? rows : nb * (rows + 1) - 1;
  };
  const long long strideA = (rowsA + 1) * lda, strideB = (rowsB + 1) * ldb,
                  strideC = (M + 1) * ldc;
  const int es = kgen::sizeOf(kern.ab), esC = kgen::sizeOf(kern.c);
  Matrix A(kern.ab, batchedRows(rowsA), kern.transA ? M : K, lda,
           kern.vecA * es);
  Matrix B(kern.ab, batchedRows(rowsB), kern.transB ? K : N, ldb,
           kern.vecB * es);
  Matrix C(kern.c, batchedRows(M), N, ldc, kern.vecC * esC);
  // The bias: one row per batch, of M or N elements, a vector's gap apart;
  // the residual: M x N batches like C's, with its own leading dimension.
  const long long biasLen = kern.bias == int(kgen::BiasKind::AlongM) ? M : N;
  const long long ldBias = biasLen + std::max(kern.vecC, 2);
  const long long ldr = N + (v.paddedLd ? 2 * kern.vecC : 0);
  std::unique_ptr<Matrix> bias, res;
  if (kern.bias)
    bias =
        std::make_unique<Matrix>(kern.c, nb, biasLen, ldBias, kern.vecC * esC);
  if (kern.residual)
    res = std::make_unique<Matrix>(kern.c, batchedRows(M), N, ldr,
                                   kern.vecC * esC);
  const long long strideR = (M + 1) * ldr;

  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-15, 15);
  const size_t mk = size_t(M * K), kn = size_t(K * N), mn = size_t(M * N);
  std::vector<float> a(nb * mk), b(nb * kn), c0(nb * mn), bv(nb * biasLen),
      rv(nb * mn);
  for (long long z = 0; z < nb; ++z) {
    for (long long i = 0; i < M; ++i)
      for (long long kk = 0; kk < K; ++kk) {
        const float x = float(small(rng)) + (tf32 ? fraction(rng) : 0.f);
        a[z * mk + size_t(i * K + kk)] = tf32 ? roundTf32(x) : x;
        const long long r0 = z * (rowsA + 1);
        kern.transA ? A.set(r0 + kk, i, encodeExact(kern.ab, x))
                    : A.set(r0 + i, kk, encodeExact(kern.ab, x));
      }
    for (long long kk = 0; kk < K; ++kk)
      for (long long j = 0; j < N; ++j) {
        const float x = float(small(rng)) + (tf32 ? fraction(rng) : 0.f);
        b[z * kn + size_t(kk * N + j)] = tf32 ? roundTf32(x) : x;
        const long long r0 = z * (rowsB + 1);
        kern.transB ? B.set(r0 + j, kk, encodeExact(kern.ab, x))
                    : B.set(r0 + kk, j, encodeExact(kern.ab, x));
      }
    if (v.beta != 0.f)
      for (long long i = 0; i < M; ++i)
        for (long long j = 0; j < N; ++j) {
          const float x = float(small(rng)) * small01;
          c0[z * mn + size_t(i * N + j)] = x;
          C.set(z * (M + 1) + i, j, encodeExact(kern.c, x));
        } // else C keeps its NaN fill: beta == 0 must not read it
    if (bias)
      for (long long i = 0; i < biasLen; ++i) {
        const float x = float(small(rng)) * small01;
        bv[size_t(z * biasLen + i)] = x;
        bias->set(z, i, encodeExact(kern.c, x));
      }
    if (res)
      for (long long i = 0; i < M; ++i)
        for (long long j = 0; j < N; ++j) {
          const float x = float(small(rng)) * small01;
          rv[z * mn + size_t(i * N + j)] = x;
          res->set(z * (M + 1) + i, j, encodeExact(kern.c, x));
        }
  }

  const std::vector<unsigned char> a0 = A.snapshot(), b0 = B.snapshot();
  const std::vector<unsigned char> bias0 =
      bias ? bias->snapshot() : std::vector<unsigned char>();
  const std::vector<unsigned char> res0 =
      res ? res->snapshot() : std::vector<unsigned char>();
  // What C's buffer must hold afterwards: the results, and every byte
  // around them as it was. Exact results are compared bit for bit; those
  // through an fp32 activation next to the double reference (closeEnough).
  std::vector<double> exact(nb * mn), scale(nb * mn);
  std::vector<unsigned char> cWant = C.snapshot();
  auto cOffset = [&](long long z, long long i, long long j) {
    return C.lead + size_t(((z * (M + 1) + i) * ldc + j) * esC);
  };
  for (long long z = 0; z < nb; ++z)
    for (long long i = 0; i < M; ++i)
      for (long long j = 0; j < N; ++j) {
        double acc = 0, mass = 0; // mass: sum |a*b|
        for (long long kk = 0; kk < K; ++kk) {
          const double prod = double(a[z * mk + size_t(i * K + kk)]) *
                              double(b[z * kn + size_t(kk * N + j)]);
          acc += prod;
          mass += std::fabs(prod);
        }
        double r =
            double(alpha) * acc +
            (v.beta != 0.f ? double(v.beta) * c0[z * mn + size_t(i * N + j)]
                           : 0.0);
        if (kern.bias)
          r += bv[size_t(z * biasLen + (kern.bias == 1 ? i : j))];
        const double pre = r, post = activateRef(kern.act, pre);
        const double resid = kern.residual ? rv[z * mn + size_t(i * N + j)] : 0;
        r = post + resid;
        exact[z * mn + size_t(i * N + j)] = r;
        // TF32: closeEnough grants 8 fp32 ulps of the scale; (K + 8) / 8
        // times alpha's mass gives the accumulation's (K + 8) ulps.
        scale[z * mn + size_t(i * N + j)] =
            std::fabs(pre) + std::fabs(post) + std::fabs(resid) +
            (tf32 ? double(K + 8) / 8 * std::fabs(alpha) * mass : 0.0);
        // float(r) is exact but with TF32 (compared by closeEnough).
        const uint32_t w = roundTo(kern.c, float(r));
        std::memcpy(cWant.data() + cOffset(z, i, j), &w, size_t(esC));
      }

  // Split-K's workspace: partials full of NaN (a partial read before it is
  // written shows in C), counters zero, as the runtime hands them over.
  std::vector<float> partials(size_t(run.workspaceBytes / 4),
                              std::numeric_limits<float>::quiet_NaN());
  std::vector<unsigned> counters(size_t(run.counters), 0u);

  emu::Launch l;
  l.grid[0] = run.gridX;
  l.grid[1] = run.gridY;
  l.grid[2] = run.gridZ;
  l.threads = run.threads;
  l.waveSize = kern.waveSize;
  l.smemBytes = run.smemBytes;
  l.eagerCopies = v.eagerCopies;
  l.buffers[0] = A.buffer();
  l.buffers[1] = B.buffer();
  l.buffers[2] = C.buffer();
  emu::Args args{};
  args.a = A.data;
  args.b = B.data;
  args.c = C.data;
  args.bias = bias ? bias->data : nullptr;
  args.residual = res ? res->data : nullptr;
  args.lda = lda;
  args.ldb = ldb;
  args.ldc = ldc;
  args.ldr = ldr;
  args.strideA = strideA;
  args.strideB = strideB;
  args.strideC = strideC;
  args.strideBias = ldBias;
  args.strideResidual = strideR;
  args.m = int(M);
  args.n = int(N);
  args.k = int(K);
  args.batch = int(nb);
  args.alpha = alpha;
  args.beta = v.beta;
  args.workspace = partials.empty() ? nullptr : partials.data();
  args.counters = counters.empty() ? nullptr : counters.data();
  char message[4096] = "";
  // Repack: the copy kernel pads the operands the main loop cannot read
  // with 16-byte vectors (kgen::gemm::repackNeeded, as the runtime decides)
  // into a workspace full of NaN (so a chunk it failed to write, the zero
  // tail of K included, shows in C); the main loop then reads the copies.
  std::unique_ptr<unsigned char, void (*)(unsigned char *)> copies(
      nullptr,
      [](unsigned char *p) { ::operator delete(p, std::align_val_t(256)); });
  if (kern.copy) {
    const bool needA = kgen::gemm::repackNeeded(
        A.data, lda, kern.transA ? M : K, nb > 1 ? strideA : 0, K);
    const bool needB = kgen::gemm::repackNeeded(
        B.data, ldb, kern.transB ? K : N, nb > 1 ? strideB : 0, K);
    kgen::gemm::RepackParams rp;
    emu::Args sizing = args;
    const long long bytes = kgen::gemm::planRepack(
        sizing, rp, kern.transA, kern.transB, needA, needB, nullptr);
    if (bytes > 0) {
      copies.reset(static_cast<unsigned char *>(
          ::operator new(size_t(bytes), std::align_val_t(256))));
      std::memset(copies.get(), 0xff, size_t(bytes));
    }
    kgen::gemm::planRepack(args, rp, kern.transA, kern.transB, needA, needB,
                           copies.get());
    emu::Launch cl;
    // Three blocks at most: the grid-stride loop wraps on every shape.
    kgen::gemm::repackGrid(rp, 3, cl.grid);
    cl.threads = kgen::gemm::kRepackThreads;
    cl.waveSize = kern.waveSize;
    cl.buffers[0] = A.buffer();
    cl.buffers[1] = B.buffer();
    if (!kern.copy(rp, cl, message, sizeof(message)))
      return std::string("copy kernel: ") + message;
    for (int i = 0; i < 2; ++i)
      if (rp.op[i].src)
        l.buffers[i] = {rp.op[i].dst, size_t(rp.op[i].batch * rp.op[i].dstRows *
                                             rp.op[i].dstLd * 2)};
  }
  if (!kern.launch(args, l, message, sizeof(message)))
    return message;

  std::string out;
  auto note = [&](const std::string &s) {
    if (out.size() < 2000)
      out += s + "\n";
  };
  if (A.snapshot() != a0)
    note("the kernel wrote into A");
  if (B.snapshot() != b0)
    note("the kernel wrote into B");
  if (bias && bias->snapshot() != bias0)
    note("the kernel wrote into the bias");
  if (res && res->snapshot() != res0)
    note("the kernel wrote into the residual");
  for (size_t t = 0; t < counters.size(); ++t)
    if (counters[t] != 0) {
      note("split-K counter of tile " + std::to_string(t) + " is " +
           std::to_string(counters[t]) + " after the launch, not 0");
      break;
    }
  const std::vector<unsigned char> cGot = C.snapshot();
  long bad = 0, outside = 0;
  for (size_t off = 0; off < cGot.size(); off += size_t(esC)) {
    const long long e = (long long)(off - C.lead) / esC;
    const long long row = e / ldc, col = e % ldc;
    const bool inside =
        off >= C.lead && off < C.lead + C.bytes && col < N && row % (M + 1) < M;
    if (std::memcmp(cGot.data() + off, cWant.data() + off, size_t(esC)) == 0)
      continue;
    uint32_t got = 0, exp = 0;
    std::memcpy(&got, cGot.data() + off, size_t(esC));
    std::memcpy(&exp, cWant.data() + off, size_t(esC));
    if (inside && inexact) {
      const size_t at =
          size_t(row / (M + 1)) * mn + size_t(row % (M + 1) * N + col);
      if (closeEnough(kern.c, got, exact[at], scale[at]))
        continue;
    }
    if (!inside) {
      if (outside++ < 3)
        note("write outside C's elements, at byte " +
             std::to_string((long long)off - (long long)C.lead) +
             " from C's start");
      continue;
    }
    if (bad++ < 5) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "C[%lld][%lld][%lld] = %g, want %g",
                    row / (M + 1), row % (M + 1), col,
                    double(valueOf(kern.c, got)), double(valueOf(kern.c, exp)));
      note(buf);
    }
  }
  if (bad)
    note(std::to_string(bad) + " of " + std::to_string(nb * M * N) +
         " elements of C wrong");
  if (outside)
    note(std::to_string(outside) + " elements outside C changed");
  return out;
}

class Emulated : public ::testing::TestWithParam<int> {};

TEST_P(Emulated, MatchesReference) {
  const EmuKernel &kern = kKernels[GetParam()];
  const Variant variants[] = {
      {1.0f, 0.0f, false, false},               // C NaN, packed, lazy copies
      {0.5f, -1.5f, true, /*eager=*/!kern.amd}, // C read, padded ld
  };
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < kern.nRuns; ++r) {
    const EmuRun &run = kern.runs[r];
    for (int vi = 0; vi < 2; ++vi) {
      const Variant &v = variants[vi];
      const std::string err =
          runOne(kern, run, v, unsigned(GetParam() * 100 + r * 10 + vi + 1));
      if (!err.empty())
        ADD_FAILURE() << kern.target << " " << kern.name << ", " << run.m << "x"
                      << run.n << "x" << run.k << ", alpha " << v.alpha
                      << " beta " << v.beta
                      << (v.paddedLd ? ", padded ld" : ", packed ld")
                      << (kern.amd        ? ""
                          : v.eagerCopies ? ", cp.async eager"
                                          : ", cp.async lazy")
                      << ":\n"
                      << err;
    }
  }
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("  %-7s %s: %d shape(s) x 2, %.2f s\n", kern.target, kern.name,
              kern.nRuns, s);
}

INSTANTIATE_TEST_SUITE_P(Kernels, Emulated, ::testing::Range(0, kNumKernels),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::string(kKernels[info.param].target) +
                                  "_" + kKernels[info.param].name;
                         });

/// cases.def is meant to cover these per vendor; trimming it must not drop
/// one silently.
TEST(EmulatedCoverage, EachVendorCoversTheCombinations) {
  for (bool amd : {false, true}) {
    std::set<std::string> layouts, types;
    std::set<int> vecs[3], stages;
    bool tiny = false, swizzled = false, padded = false, multiWarp = false;
    bool noChecks = false, allChecks = false;
    for (const EmuKernel &k : kKernels) {
      if (k.amd != amd)
        continue;
      if (k.ab == kgen::DType::F32 || k.gemv)
        continue; // NvidiaCoversTf32, NvidiaCoversGemv
      layouts.insert(std::string(k.transA ? "t" : "n") +
                     (k.transB ? "t" : "n"));
      types.insert(std::string(kgen::toString(k.ab)) + "->" +
                   std::string(kgen::toString(k.c)));
      vecs[0].insert(k.vecA);
      vecs[1].insert(k.vecB);
      vecs[2].insert(k.vecC);
      stages.insert(k.stages);
      (k.swizzle ? swizzled : padded) = true;
      multiWarp |= k.warps > 1;
      noChecks |= !k.checkM && !k.checkN && !k.checkK;
      allChecks |= k.checkM && k.checkN && k.checkK;
      for (int r = 0; r < k.nRuns; ++r)
        tiny |= k.runs[r].m == 1 && k.runs[r].n == 1 && k.runs[r].k == 1;
    }
    const char *vendor = amd ? "AMD" : "NVIDIA";
    EXPECT_EQ(layouts.size(), 4u) << vendor;
    EXPECT_EQ(types.size(), 6u) << vendor; // {bf16, f16} x {bf16, f16, f32}
    for (auto &v : vecs)
      EXPECT_EQ(v, (std::set<int>{1, 2, 4, 8})) << vendor;
    EXPECT_TRUE(tiny) << vendor << ": no 1x1x1 run";
    for (int st : {2, 3, 4})
      EXPECT_TRUE(stages.count(st))
          << vendor << ": no kernel of " << st << " stages";
    EXPECT_TRUE(swizzled && padded) << vendor;
    EXPECT_TRUE(multiWarp) << vendor;
    EXPECT_TRUE(noChecks && allChecks) << vendor;
  }
}

/// The fused epilogue's features and strided batches, per vendor (pairs on
/// NVIDIA, single elements on AMD): both bias directions, every activation,
/// the residual, several batches.
TEST(EmulatedCoverage, EachVendorCoversTheEpilogue) {
  for (bool amd : {false, true}) {
    std::set<int> biases, acts;
    bool residual = false, batched = false, splitK = false;
    for (const EmuKernel &k : kKernels) {
      if (k.amd != amd)
        continue;
      biases.insert(k.bias);
      acts.insert(k.act);
      residual |= k.residual;
      batched |= k.batch > 1;
      splitK |= k.splitK > 1;
    }
    const char *vendor = amd ? "AMD" : "NVIDIA";
    EXPECT_EQ(biases, (std::set<int>{0, 1, 2})) << vendor;
    EXPECT_EQ(acts, (std::set<int>{0, 1, 2, 3, 4})) << vendor;
    EXPECT_TRUE(residual) << vendor;
    EXPECT_TRUE(batched) << vendor;
    EXPECT_TRUE(splitK) << vendor;
  }
}

/// TF32 (NVIDIA only; AMD refuses tf32): every layout, an f32 and a 16-bit C,
/// the epilogue, batches and split-K.
TEST(EmulatedCoverage, NvidiaCoversTf32) {
  std::set<std::string> layouts;
  std::set<int> cTypes;
  bool epilogue = false, batched = false, splitK = false;
  for (const EmuKernel &k : kKernels) {
    if (k.ab != kgen::DType::F32)
      continue;
    EXPECT_FALSE(k.amd) << k.name;
    layouts.insert(std::string(k.transA ? "t" : "n") + (k.transB ? "t" : "n"));
    cTypes.insert(kgen::sizeOf(k.c));
    epilogue |= k.bias && k.act && k.residual;
    batched |= k.batch > 1;
    splitK |= k.splitK > 1;
  }
  EXPECT_EQ(layouts.size(), 4u);
  EXPECT_EQ(cTypes, (std::set<int>{2, 4}));
  EXPECT_TRUE(epilogue && batched && splitK);
}

/// The gemv loop (NVIDIA only): both B layouts, ragged M from 1 to 64, M
/// tiles of several blocks, ragged N and K and divisible ones, vectors of
/// 1, 2, 4 and 8 (cp.async and through registers, in one kernel too), the
/// epilogue's features, batches and split-K, rings of 1 to 16 slots and
/// runs of k-chunks long enough that the ring wraps around.
TEST(EmulatedCoverage, NvidiaCoversGemv) {
  std::set<bool> layouts;
  std::set<int> vecs, biases, acts, blockMs, stages;
  std::set<long long> ms;
  bool residual = false, batched = false, splitK = false, noChecks = false,
       allChecks = false, mixed = false, wraps = false;
  for (const EmuKernel &k : kKernels) {
    if (!k.gemv)
      continue;
    EXPECT_FALSE(k.amd) << k.name;
    layouts.insert(k.transB);
    vecs.insert({k.vecA, k.vecB, k.vecC});
    biases.insert(k.bias);
    acts.insert(k.act);
    residual |= k.residual;
    batched |= k.batch > 1;
    splitK |= k.splitK > 1;
    noChecks |= !k.checkM && !k.checkN && !k.checkK;
    allChecks |= k.checkM && k.checkN && k.checkK;
    stages.insert(k.stages);
    mixed |= (k.vecA == 8) != (k.vecB == 8);
    for (int r = 0; r < k.nRuns; ++r) {
      ms.insert(k.runs[r].m);
      const long long chunks = (k.runs[r].k + 31) / 32;
      wraps |= k.stages > 1 &&
               (chunks + k.splitK - 1) / k.splitK > (long long)k.stages;
    }
  }
  EXPECT_EQ(layouts.size(), 2u);
  EXPECT_EQ(vecs, (std::set<int>{1, 2, 4, 8}));
  EXPECT_EQ(biases, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(acts, (std::set<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(residual && batched && splitK && noChecks && allChecks);
  EXPECT_TRUE(ms.count(1) && ms.count(64)) << "M from 1 to 64";
  EXPECT_TRUE(stages.count(1) && stages.count(16)) << "rings of 1 to 16";
  EXPECT_TRUE(mixed && wraps);
}

} // namespace
