//===- AttentionGpuTest.cpp - Attention on the GPU against a reference ----===//
//
// The sweep (seqlen 1, 17, 128, 513, 2048, 8192; unequal q/k; every
// head dim, Dv != Dqk; GQA 8:1 and MQA; varlen with empty and length-1
// sequences; no mask, causal, sliding window, ALiBi, bias; LSE; split-KV
// decode; BSHD and BHSD) through Runtime::attention (the dispatcher's
// config), and every candidate config for a few problems through
// Runtime::launchAttention: causal GQA prefill and decode with GQA 4:1,
// 8:1 and MQA (GQA-packed, split-KV), and for the prefill and a varlen
// case also each candidate's twin with GQA packing flipped; every sm_90a
// wgmma config, one block per row block, GQA-packed and persistent
// (WgmmaLoopEveryConfig,
// WgmmaPersistentSchedules: work tiles fewer than, many times and not a
// multiple of the SMs). Fp8: e4m3 and e5m2 Q, K, V with a bf16 O (sm_90a):
// head dims 128 and 256 (V 128), seqlen 1 to 2048 and unequal, causal and
// not, GQA 4:1 and MQA, both layouts, window, ALiBi, a bf16 bias, with and
// without descale factors, values across each format's range, and every
// candidate of a causal GQA prefill and of a split-KV decode.
//
// The reference is a plain kernel (kgen::AttentionReference, which the tuner
// checks attention candidates with; compiled through Runtime::compileSource
// like any kernel; NVIDIA only, as the project's GPUs are), one block per
// query row:
//
//   ref    the mask built explicitly from the problem's definition, scores
//          and softmax in fp32 from the exact inputs (fp8 ones decoded, and
//          the scores times qDescale * kDescale, V times vDescale), O in
//          fp32 and the LSE in fp32;
//   naive  the same-dtype implementation. 16-bit inputs: scores rounded to
//          the dtype, fp32 softmax, P rounded to the dtype, fp32 P V
//          rounded to the dtype. fp8 inputs: scores (fp32 from the decoded
//          values, times the Q and K descale factors) rounded to O's bf16,
//          as an fp8 scaled matmul into bf16 gives them; fp32 softmax with
//          the bias and masks as for 16-bit; P rounded to the inputs' fp8
//          type, as the kernel feeds it to an fp8 P V, and like the kernel
//          (FlashAttention-3's fp8 forward) before the division by the row
//          sum: a normalized P of a long row would fall below e4m3's
//          subnormals and leave a naive O of 0 that bounds nothing; P (V *
//          vDescale) summed in fp32, divided by the row sum, rounded to
//          bf16.
//
// Rule (DESIGN.md, FlashAttention's): max|ours - ref| <= 2 * max|naive -
// ref|, never below half an ulp of O's dtype at max|ref|; rows with no
// visible key must be exactly 0 with LSE -inf; O and LSE start as NaN, so
// an element left unwritten fails. Without a GPU every test is skipped.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Runtime/Posix.h"
#include "kgen/Codegen/Reference.h"
#include "kgen/Runtime/Tuner.h"
#include "kgen/kgen.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

using namespace kgen;

namespace {

/// A device buffer freed on scope exit.
struct Dev {
  Backend *be;
  void *p = nullptr;
  size_t bytes;
  Dev(Backend *be, size_t bytes) : be(be), bytes(bytes) {
    p = be->alloc(bytes ? bytes : 16);
  }
  ~Dev() {
    try {
      be->free(p);
    } catch (...) {
    }
  }
  template <class T> void up(const std::vector<T> &h) {
    be->copyToDevice(p, h.data(), h.size() * sizeof(T));
  }
  template <class T> std::vector<T> down(size_t n) const {
    std::vector<T> h(n);
    be->copyToHost(h.data(), p, n * sizeof(T));
    return h;
  }
};

struct Case {
  std::string name;
  AttentionProblem p;
  std::vector<int> sq, sk; // varlen: per batch entry
  bool allCandidates = false;
  bool packTwins = false; ///< with allCandidates: also packGqa flipped
  /// Q, K and V uniform in [-range, range] before rounding to the dtype.
  float range = 1;
  /// fp8: the descale factors of Q, K and V passed from device memory
  /// (AttentionArgs::qDescale, ...); 0 passes none (read as 1).
  float descale[3] = {0, 0, 0};
};

struct Gpu {
  std::unique_ptr<Runtime> rt;
  std::string whyNot;
  std::unique_ptr<AttentionReference> ref;
  static Gpu &get() {
    static Gpu g;
    return g;
  }

private:
  Gpu() {
    rt = std::make_unique<Runtime>();
    if (!rt->backend()) {
      openBackend(std::nullopt, &whyNot);
      return;
    }
    std::printf("[ gpu      ] %s (%s), kgen target %s\n",
                rt->backend()->deviceName().c_str(),
                rt->backend()->archName().c_str(),
                std::string(toString(rt->target())).c_str());
    if (targetInfo(rt->target()).vendor != Vendor::NVIDIA) {
      whyNot = "the attention reference kernel is NVIDIA-only";
      return;
    }
    ref = std::make_unique<AttentionReference>(*rt);
  }
};

/// Runs one case with `config` (null: Runtime::attention's choice);
/// returns what failed, or an empty string.
std::string runCase(const Case &cs, const AttentionConfig *config,
                    unsigned seed) {
  Gpu &g = Gpu::get();
  Backend *be = g.rt->backend();
  const AttentionProblem &p = cs.p;
  // Q, K, V in the dtype; O and the bias in O's (bf16 for fp8 inputs).
  const DType t = p.dtype, to = attentionOutputDType(p);
  const size_t es = size_t(sizeOf(t)), eo = size_t(sizeOf(to));
  const int batch = int(cs.sq.size());
  const int maxSq = *std::max_element(cs.sq.begin(), cs.sq.end());
  const int maxSk = *std::max_element(cs.sk.begin(), cs.sk.end());
  int totQ = 0, totK = 0;
  std::vector<int> cuQ{0}, cuK{0};
  for (int b = 0; b < batch; ++b) {
    cuQ.push_back(totQ += cs.sq[size_t(b)]);
    cuK.push_back(totK += cs.sk[size_t(b)]);
  }
  const bool bhsd = p.layout == AttentionLayout::BHSD && !p.varlen;
  // Strides {batch, seq, head} and element counts of each tensor.
  auto strides = [&](int rows, int heads, int dim, long long(&s)[3]) {
    if (p.varlen || !bhsd) {
      s[0] = p.varlen ? 0 : (long long)rows * heads * dim;
      s[1] = (long long)heads * dim;
      s[2] = dim;
    } else {
      s[0] = (long long)heads * rows * dim;
      s[1] = dim;
      s[2] = (long long)rows * dim;
    }
    return size_t(p.varlen ? 1 : batch) * size_t(rows) * heads * dim;
  };
  long long sQ[3], sK[3], sV[3], sO[3];
  const size_t nQ =
      strides(p.varlen ? totQ : maxSq, int(p.headsQ), p.headDimQk, sQ);
  const size_t nK =
      strides(p.varlen ? totK : maxSk, int(p.headsKv), p.headDimQk, sK);
  const size_t nV =
      strides(p.varlen ? totK : maxSk, int(p.headsKv), p.headDimV, sV);
  const size_t nO =
      strides(p.varlen ? totQ : maxSq, int(p.headsQ), p.headDimV, sO);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  auto fill = [&](size_t n, DType type, float range) {
    std::vector<unsigned char> h(n * size_t(sizeOf(type)));
    for (size_t i = 0; i < n; ++i)
      encodeElement(type, range * uni(rng), h.data(), i);
    return h;
  };
  const size_t nBias = p.bias ? size_t(batch) * p.headsQ * maxSq * maxSk : 1;
  std::vector<unsigned char> hq = fill(nQ, t, cs.range),
                             hk = fill(nK, t, cs.range),
                             hv = fill(nV, t, cs.range),
                             hb = fill(nBias, to, 1);
  std::vector<float> slopes(size_t(p.headsQ));
  for (size_t h = 0; h < slopes.size(); ++h)
    slopes[h] = std::exp2(-8.f * float(h + 1) / float(p.headsQ));
  Dev dq(be, nQ * es), dk(be, nK * es), dv(be, nV * es), db(be, nBias * eo),
      ds(be, slopes.size() * 4), dcq(be, cuQ.size() * 4),
      dck(be, cuK.size() * 4), dout(be, nO * eo), dds(be, sizeof cs.descale);
  dq.up(hq);
  dk.up(hk);
  dv.up(hv);
  db.up(hb);
  ds.up(slopes);
  dcq.up(cuQ);
  dck.up(cuK);
  dds.up(std::vector<float>(cs.descale, cs.descale + 3));
  be->memsetAsync(dout.p, 0xff, nO * eo, nullptr); // NaN
  const size_t lseRows =
      p.varlen ? size_t(p.headsQ) * totQ : size_t(batch) * p.headsQ * maxSq;
  Dev dlse(be, lseRows * 4);
  be->memsetAsync(dlse.p, 0xff, lseRows * 4, nullptr);
  const size_t refRows = size_t(batch) * p.headsQ * maxSq;
  Dev rO(be, refRows * p.headDimV * 4), rL(be, refRows * 4),
      nOut(be, refRows * p.headDimV * eo);

  AttentionArgs a;
  a.q = dq.p;
  a.k = dk.p;
  a.v = dv.p;
  a.o = dout.p;
  a.lse = p.lse ? static_cast<float *>(dlse.p) : nullptr;
  a.bias = p.bias ? db.p : nullptr;
  a.alibiSlopes = p.alibi ? static_cast<const float *>(ds.p) : nullptr;
  a.cuSeqlensQ = p.varlen ? static_cast<const int *>(dcq.p) : nullptr;
  a.cuSeqlensK = p.varlen ? static_cast<const int *>(dck.p) : nullptr;
  a.batch = batch;
  a.seqlenQ = maxSq;
  a.seqlenK = maxSk;
  a.totalQ = totQ;
  const float *descale = static_cast<const float *>(dds.p);
  a.qDescale = cs.descale[0] != 0 ? descale : nullptr;
  a.kDescale = cs.descale[1] != 0 ? descale + 1 : nullptr;
  a.vDescale = cs.descale[2] != 0 ? descale + 2 : nullptr;
  for (int i = 0; i < 3; ++i) {
    a.strideQ[i] = sQ[i];
    a.strideK[i] = sK[i];
    a.strideV[i] = sV[i];
    a.strideO[i] = sO[i];
  }
  g.ref->run(p, a, static_cast<float *>(rO.p), static_cast<float *>(rL.p),
             nOut.p, nullptr);
  if (config)
    g.rt->launchAttention(p, *config, a, nullptr);
  else
    g.rt->attention(p, a, nullptr);
  be->synchronize();

  const auto out = dout.down<unsigned char>(nO * eo);
  const auto lse = dlse.down<float>(lseRows);
  const auto ref = rO.down<float>(refRows * p.headDimV);
  const auto refL = rL.down<float>(refRows);
  const auto naive = nOut.down<unsigned char>(refRows * p.headDimV * eo);
  double errO = 0, errN = 0, maxRef = 0, errL = 0;
  std::string bad;
  auto note = [&](const std::string &m) {
    if (bad.size() < 1000)
      bad += m + "\n";
  };
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < p.headsQ; ++h)
      for (int i = 0; i < cs.sq[size_t(b)]; ++i) {
        const size_t row = (size_t(b) * p.headsQ + h) * maxSq + i;
        const bool empty = std::isinf(refL[row]);
        if (p.lse) {
          const size_t li =
              p.varlen ? size_t(h) * totQ + cuQ[size_t(b)] + i : row;
          if (empty ? !(std::isinf(lse[li]) && lse[li] < 0)
                    : !std::isfinite(lse[li]))
            note("LSE b" + std::to_string(b) + " h" + std::to_string(h) + " i" +
                 std::to_string(i) + " = " + std::to_string(lse[li]));
          else if (!empty)
            errL = std::max(errL, double(std::abs(lse[li] - refL[row])));
        }
        for (int d = 0; d < p.headDimV; ++d) {
          const long long bo = p.varlen ? 0 : b * sO[0];
          const size_t oi = size_t(
              bo + (cuQ[size_t(b)] * p.varlen + i) * sO[1] + h * sO[2] + d);
          const double got = decodeElement(to, out.data(), oi);
          const double want = ref[row * p.headDimV + d];
          if (!std::isfinite(got) || (empty && got != 0)) {
            note("O b" + std::to_string(b) + " h" + std::to_string(h) + " i" +
                 std::to_string(i) + " d" + std::to_string(d) + " = " +
                 std::to_string(got) + (empty ? " (empty row)" : ""));
            continue;
          }
          errO = std::max(errO, std::abs(got - want));
          errN = std::max(errN, std::abs(decodeElement(to, naive.data(),
                                                       row * p.headDimV + d) -
                                         want));
          maxRef = std::max(maxRef, std::abs(want));
        }
      }
  const double bound = std::max(2 * errN, halfUlp(to, maxRef));
  std::printf("[ case     ] %-28s %s: O err %.2e (naive %.2e, %.2fx), LSE err "
              "%.2e\n",
              cs.name.c_str(),
              config ? attentionKernelName(p, *config, g.rt->target()).c_str()
                     : "dispatch",
              errO, errN, errN > 0 ? errO / errN : 0.0, errL);
  if (errO > bound)
    note("max|O - ref| = " + std::to_string(errO) + " > bound " +
         std::to_string(bound) + " (2 x naive " + std::to_string(errN) + ")");
  return bad;
}

Case fixed(const std::string &name, int b, int hq, int hkv, int sq, int sk,
           int d, int dv, DType t, bool bhsd) {
  Case c;
  c.name = name;
  c.p.batch = b;
  c.p.headsQ = hq;
  c.p.headsKv = hkv;
  c.p.seqlenQ = sq;
  c.p.seqlenK = sk;
  c.p.headDimQk = d;
  c.p.headDimV = dv;
  c.p.dtype = t;
  c.p.layout = bhsd ? AttentionLayout::BHSD : AttentionLayout::BSHD;
  c.p.lse = true;
  c.sq.assign(size_t(b), sq);
  c.sk.assign(size_t(b), sk);
  return c;
}

std::vector<Case> sweep() {
  std::vector<Case> cs;
  // Sequence lengths, GQA 8:1, causal and not, both layouts.
  for (int s : {1, 17, 128, 513, 2048, 8192})
    for (bool causal : {false, true}) {
      Case c =
          fixed("S" + std::to_string(s) + (causal ? " causal" : ""),
                s >= 2048 ? 1 : 2, 8, 1, s, s, 128, 128, DType::BF16, causal);
      c.p.causal = causal;
      cs.push_back(c);
    }
  // Unequal q/k (bottom-right causal leaves rows empty when Sq > Sk),
  // decode (split-KV), MQA.
  for (auto [sq, sk] : {std::pair{17, 513}, {513, 17}, {128, 2048}})
    for (bool causal : {false, true}) {
      Case c = fixed("Sq" + std::to_string(sq) + " Sk" + std::to_string(sk) +
                         (causal ? " causal" : ""),
                     2, 16, 2, sq, sk, 64, 64, DType::F16, false);
      c.p.causal = causal;
      cs.push_back(c);
    }
  for (int sk : {4096, 8192}) {
    Case c = fixed("decode Sk" + std::to_string(sk), 4, 32, 8, 1, sk, 128, 128,
                   DType::BF16, false);
    c.allCandidates = sk == 4096;
    cs.push_back(c);
  }
  cs.push_back(fixed("MQA", 2, 16, 1, 513, 513, 128, 128, DType::BF16, true));
  // GQA-packed decode (the dispatcher's and every candidate): 4:1, 8:1 and
  // MQA at Sk 4096, and 4 causal query rows (Sq != Sk) of a packed block.
  for (auto [name, b, hq, hkv, sq] :
       {std::tuple{"decode Sk4096 GQA 4:1", 1, 32, 8, 1},
        {"decode Sk4096 GQA 8:1", 2, 32, 4, 1},
        {"decode Sk4096 MQA", 2, 16, 1, 1},
        {"decode Sq4 Sk4096 GQA 4:1 causal", 3, 32, 8, 4}}) {
    Case c = fixed(name, b, hq, hkv, sq, 4096, 128, 128, DType::BF16, false);
    c.p.causal = sq > 1;
    c.allCandidates = true;
    cs.push_back(c);
  }
  // Every head dim, and V's differing from QK's.
  for (int d : {32, 64, 96, 128, 192, 256})
    for (DType t : {DType::BF16, DType::F16}) {
      Case c = fixed("D" + std::to_string(d) + " " + std::string(toString(t)),
                     1, 4, 2, 513, 513, d, d, t, t == DType::F16);
      c.p.causal = d >= 128;
      cs.push_back(c);
    }
  cs.push_back(
      fixed("D192 Dv128", 1, 4, 4, 513, 129, 192, 128, DType::BF16, false));
  cs.push_back(fixed("D128 Dv64", 1, 4, 4, 17, 513, 128, 64, DType::F16, true));
  // Masks and biases.
  {
    Case c =
        fixed("window 64,16", 2, 8, 2, 513, 513, 64, 64, DType::BF16, false);
    c.p.windowLeft = 64;
    c.p.windowRight = 16;
    cs.push_back(c);
    c.name = "causal + window 128";
    c.p.causal = true;
    c.p.windowLeft = 128;
    c.p.windowRight = -1;
    cs.push_back(c);
    c = fixed("alibi causal", 2, 8, 8, 513, 2048, 128, 128, DType::BF16, false);
    c.p.alibi = c.p.causal = true;
    cs.push_back(c);
    c = fixed("bias", 2, 4, 2, 128, 513, 64, 64, DType::F16, true);
    c.p.bias = true;
    cs.push_back(c);
  }
  // Causal GQA prefill: every candidate config.
  {
    Case c = fixed("causal GQA all configs", 2, 8, 1, 513, 513, 128, 128,
                   DType::BF16, false);
    c.p.causal = true;
    c.allCandidates = true;
    c.packTwins = true;
    cs.push_back(c);
  }
  // Varlen with an empty and a length-1 sequence (and one without keys).
  {
    Case c =
        fixed("varlen causal", 1, 8, 2, 513, 513, 128, 128, DType::BF16, false);
    c.p.varlen = c.p.causal = true;
    c.sq = {0, 1, 17, 513, 128, 40};
    c.sk = {5, 1, 513, 513, 2048, 0};
    c.p.batch = int64_t(c.sq.size());
    cs.push_back(c);
    c.name = "varlen causal all configs";
    c.allCandidates = c.packTwins = true;
    cs.push_back(c);
    c.allCandidates = c.packTwins = false;
    c.name = "varlen window alibi bias";
    c.p.causal = false;
    c.p.windowLeft = 32;
    c.p.windowRight = 8;
    c.p.alibi = c.p.bias = true;
    c.p.headDimQk = c.p.headDimV = 64;
    c.p.dtype = DType::F16;
    cs.push_back(c);
  }
  return cs;
}

class AttentionGpu : public ::testing::Test {
protected:
  void SetUp() override {
    Gpu &g = Gpu::get();
    if (!g.rt->backend() || !g.ref)
      GTEST_SKIP() << "no GPU: " << g.whyNot;
  }
};

/// KGEN_GPU_TEST_CASE when set: the cases to run are those whose name
/// contains it (one case under a sanitizer, e.g. "persistent dynamic
/// walk"); the wgmma tests' coverage counts then ask for one run only.
const char *caseFilter() { return posix::envOrNull("KGEN_GPU_TEST_CASE"); }

/// KGEN_GPU_TEST_MAX_SEQLEN when set (selectedCases).
const char *seqlenLimit() {
  return posix::envOrNull("KGEN_GPU_TEST_MAX_SEQLEN");
}

/// KGEN_GPU_TEST_MAX_SEQLEN (e.g. 513) keeps the cases whose sequences are
/// at most that long: compute-sanitizer is too slow for 8192, and the short
/// cases run every code path (masks, varlen, splits, ragged tiles).
/// KGEN_GPU_TEST_CASE narrows them further (caseFilter).
std::vector<Case> selectedCases(std::vector<Case> cases) {
  if (const char *only = caseFilter()) {
    cases.erase(std::remove_if(cases.begin(), cases.end(),
                               [&](const Case &c) {
                                 return c.name.find(only) == std::string::npos;
                               }),
                cases.end());
    std::printf("[ gpu      ] KGEN_GPU_TEST_CASE=%s: %zu cases\n", only,
                cases.size());
  }
  if (const char *limit = seqlenLimit()) {
    const int max = std::atoi(limit);
    cases.erase(std::remove_if(cases.begin(), cases.end(),
                               [&](const Case &c) {
                                 return *std::max_element(c.sq.begin(),
                                                          c.sq.end()) > max ||
                                        *std::max_element(c.sk.begin(),
                                                          c.sk.end()) > max;
                               }),
                cases.end());
    std::printf("[ gpu      ] KGEN_GPU_TEST_MAX_SEQLEN=%d: %zu cases\n", max,
                cases.size());
  }
  return cases;
}

/// Why a test skips when selectedCases left it nothing.
std::string noCaseSelected() {
  const char *limit = seqlenLimit();
  return std::string("no case within KGEN_GPU_TEST_MAX_SEQLEN=") +
         (limit ? limit : "") + " and KGEN_GPU_TEST_CASE";
}

TEST_F(AttentionGpu, SweepMatchesReference) {
  unsigned seed = 1;
  for (const Case &c : selectedCases(sweep())) {
    const std::string bad = runCase(c, nullptr, seed++);
    EXPECT_TRUE(bad.empty()) << c.name << " (dispatch):\n" << bad;
    if (!c.allCandidates)
      continue;
    const Target t = Gpu::get().rt->target();
    for (const AttentionConfig &candidate : enumerateConfigs(c.p, t)) {
      std::vector<AttentionConfig> cfgs{candidate};
      AttentionConfig twin = candidate;
      twin.packGqa = !twin.packGqa;
      if (c.packTwins && !checkConfig(c.p, twin, t))
        cfgs.push_back(twin);
      for (const AttentionConfig &cfg : cfgs) {
        const std::string b = runCase(c, &cfg, seed++);
        EXPECT_TRUE(b.empty()) << c.name << " "
                               << attentionKernelName(c.p, cfg, t) << ":\n"
                               << b;
      }
    }
  }
}

} // namespace

namespace {

/// Every config of the sm_90a wgmma loop (blockM 64/128/192, blockN 64/128,
/// 2-3 stages, with and without split-KV) on ragged sequence lengths, both
/// layouts, GQA, causal, a window with ALiBi and a bias, head dims 64 to
/// 256 and Dv != Dqk: the kernel's TMA boxes, swizzled descriptors and the
/// P-from-registers wgmma all meet partial tiles here.
TEST_F(AttentionGpu, WgmmaLoopEveryConfig) {
  const Target t = Gpu::get().rt->target();
  if (t != Target::SM90A)
    GTEST_SKIP() << "the wgmma loop needs sm_90a, the GPU is "
                 << toString(t);
  std::vector<Case> cases;
  {
    Case c = fixed("wgmma causal GQA", 2, 8, 2, 513, 1000, 128, 128,
                   DType::BF16, false);
    c.p.causal = true;
    cases.push_back(c);
    c = fixed("wgmma bhsd f16 D64", 1, 4, 4, 200, 77, 64, 64, DType::F16,
              true);
    cases.push_back(c);
    c = fixed("wgmma D256", 1, 2, 1, 300, 300, 256, 256, DType::BF16, false);
    c.p.causal = true;
    cases.push_back(c);
    c = fixed("wgmma D192 Dv128", 1, 4, 4, 129, 513, 192, 128, DType::BF16,
              false);
    cases.push_back(c);
    c = fixed("wgmma window alibi bias", 2, 4, 2, 257, 513, 64, 64,
              DType::F16, false);
    c.p.windowLeft = 100;
    c.p.windowRight = 20;
    c.p.alibi = c.p.bias = true;
    cases.push_back(c);
    c = fixed("wgmma decode", 2, 32, 8, 1, 4096, 128, 128, DType::BF16,
              false);
    cases.push_back(c);
  }
  // KGEN_GPU_TEST_MAX_SEQLEN (compute-sanitizer runs) keeps the short cases.
  cases = selectedCases(std::move(cases));
  // A limit below every case (the shortest is 200 x 77), or a
  // KGEN_GPU_TEST_CASE that names none, leaves nothing to check: say so
  // rather than fail the run count below.
  if (cases.empty())
    GTEST_SKIP() << noCaseSelected();
  unsigned seed = 1000;
  int ran = 0;
  for (const Case &c : cases)
    for (int bm : {64, 128, 192})
      for (int bn : {64, 128})
        for (int stages : {2, 3})
          for (int splits : {1, 3})
            for (int grid : {0, 1, 2}) { // per row block, persistent, packed
              AttentionConfig cfg;
              cfg.loop = AttentionLoop::Wgmma;
              cfg.blockM = bm;
              cfg.warps = bm / 16;
              cfg.blockN = bn;
              cfg.stages = stages;
              cfg.splits = splits;
              cfg.persistent = grid == 1; // refused with splits: skipped
              // GQA packing: the GQA cases only (MHA has g = 1, the
              // unpacked kernel's rows).
              cfg.packGqa = grid == 2;
              if ((cfg.packGqa && c.p.headsQ == c.p.headsKv) ||
                  checkConfig(c.p, cfg, t))
                continue;
              const std::string b = runCase(c, &cfg, seed++);
              EXPECT_TRUE(b.empty())
                  << c.name << " " << attentionKernelName(c.p, cfg, t) << ":\n"
                  << b;
              ++ran;
            }
  std::printf("[ gpu      ] wgmma loop: %d (case, config) runs\n", ran);
  EXPECT_GT(ran, caseFilter() ? 0 : seqlenLimit() ? 20 : 40);
}

/// The persistent grid's schedules: fewer work tiles than multiprocessors
/// (every block gets at most one), many times more (every block walks a
/// long list, its barrier phases carried across work tiles and K/V stage
/// rings wrapping mid-tile), counts that are no multiple of the grid (the
/// last round partial), causal with seqlenQ < seqlenK (row blocks of
/// different lengths, scheduled longest first) and seqlenQ > seqlenK
/// (whole row blocks above the diagonal see no key: work tiles with no
/// key tile, which still load and release Q and store zeros with LSE
/// -inf), single key tiles, and GQA. Every wgmma tile shape runs each.
TEST_F(AttentionGpu, WgmmaPersistentSchedules) {
  const Target t = Gpu::get().rt->target();
  if (t != Target::SM90A)
    GTEST_SKIP() << "the wgmma loop needs sm_90a, the GPU is " << toString(t);
  const int sms = Gpu::get().rt->backend()->computeUnits();
  std::vector<Case> cases;
  {
    // 1 to 2 work tiles: far fewer than the multiprocessors.
    Case c = fixed("persistent tiny", 1, 1, 1, 100, 100, 128, 128, DType::BF16,
                   false);
    c.p.causal = true;
    cases.push_back(c);
    // 5 * 11 * ceil(513 / blockM) work tiles (495 at 64 rows): several
    // rounds, the last one partial on 132 SMs; GQA 11:1 and causal with
    // more keys than queries.
    c = fixed("persistent causal GQA ragged", 5, 11, 1, 513, 700, 128, 128,
              DType::BF16, false);
    c.p.causal = true;
    cases.push_back(c);
    // More queries than keys, causal: the first row blocks see no key.
    c = fixed("persistent causal Sq > Sk", 3, 7, 7, 700, 300, 64, 64,
              DType::F16, true);
    c.p.causal = true;
    cases.push_back(c);
    // Thousands of short work tiles (one key tile each at blockN 128).
    c = fixed("persistent many tiles", 32, 16, 4, 128, 100, 64, 64, DType::BF16,
              false);
    cases.push_back(c);
    // Long rows: many key tiles per work tile, stage rings wrapping.
    c = fixed("persistent long causal", 1, 6, 2, 2048, 2048, 128, 128,
              DType::BF16, true);
    c.p.causal = true;
    cases.push_back(c);
    // The dynamic schedule (causal, seqlen_q > 512 or D > 64: work tiles
    // claimed through the stream's counter) at a size compute-sanitizer's
    // racecheck gets through (KGEN_GPU_TEST_MAX_SEQLEN=520).
    c = fixed("persistent causal dynamic", 2, 3, 3, 520, 520, 64, 64,
              DType::BF16, false);
    c.p.causal = true;
    cases.push_back(c);
    // The dynamic schedule's two tile slots each rewritten many times, at
    // sequences racecheck runs take (KGEN_GPU_TEST_MAX_SEQLEN=130): 512 to
    // 1024 work tiles, so every block claims several; with Sq > Sk the
    // 64-row tiles of the first row block see no key. (Racecheck found the
    // slot's reads unordered against its rewrite with one consumer
    // warpgroup and in keyless work tiles, 2026-12-07.)
    c = fixed("persistent dynamic walk", 16, 32, 8, 128, 64, 128, 128,
              DType::BF16, false);
    c.p.causal = true;
    cases.push_back(c);
    // Window, ALiBi and bias: the masks of the tiled loop in a work tile.
    c = fixed("persistent window alibi bias", 3, 5, 5, 257, 513, 64, 64,
              DType::F16, false);
    c.p.windowLeft = 100;
    c.p.windowRight = 20;
    c.p.alibi = c.p.bias = true;
    cases.push_back(c);
  }
  cases = selectedCases(std::move(cases));
  if (cases.empty())
    GTEST_SKIP() << noCaseSelected();
  unsigned seed = 5000;
  int ran = 0, fewer = 0, more = 0, ragged = 0, dynamic = 0;
  for (const Case &c : cases) {
    for (int bm : {64, 128, 192})
      for (int bn : {64, 128})
        for (int stages : {2, 3}) {
          AttentionConfig cfg;
          cfg.loop = AttentionLoop::Wgmma;
          cfg.blockM = bm;
          cfg.warps = bm / 16;
          cfg.blockN = bn;
          cfg.stages = stages;
          cfg.persistent = true;
          if (checkConfig(c.p, cfg, t))
            continue;
          const int64_t tiles =
              attentionWorkTiles(c.p, cfg, c.p.batch, c.p.seqlenQ);
          fewer += tiles < sms;
          more += tiles >= 4 * sms;
          ragged += tiles > sms && tiles % sms != 0;
          dynamic += attentionDynamicSchedule(c.p);
          const std::string b = runCase(c, &cfg, seed++);
          EXPECT_TRUE(b.empty())
              << c.name << " " << attentionKernelName(c.p, cfg, t) << " ("
              << tiles << " work tiles on " << sms << " SMs):\n"
              << b;
          ++ran;
        }
  }
  std::printf("[ gpu      ] persistent wgmma loop: %d (case, config) runs: %d "
              "with fewer work tiles than SMs, %d with 4x more or beyond, %d "
              "with a partial last round, %d on the dynamic schedule\n",
              ran, fewer, more, ragged, dynamic);
  if (caseFilter()) {
    EXPECT_GT(ran, 0);
    return;
  }
  EXPECT_GT(fewer, 0);
  EXPECT_GT(ragged, 0);
  EXPECT_GT(dynamic, 0); // "persistent tiny" (causal D 128) at any limit
  if (!seqlenLimit())
    EXPECT_GT(more, 0);
  EXPECT_GT(ran, seqlenLimit() ? 20 : 40);
}

} // namespace

namespace {

/// An fp8 case (fixed()'s, head dim V 128) with the descale factors of set
/// `descaled`: 0 none (null, read as 1), 1 {0.5, 1.25, 2} (scores x 0.625,
/// O x 2), 2 {2, 2, 0.5} (scores x 4: sharper rows; O x 0.5). e5m2's inputs
/// span [-2, 2], e4m3's [-1, 1]: e5m2 trades a mantissa bit for range, and
/// its scores (std ~1.3 at [-2, 2], 0.33 at [-1, 1]) give peaked rows,
/// where P's 2-bit rounding decides the largest terms.
Case fp8Case(const std::string &name, int b, int hq, int hkv, int sq, int sk,
             int d, DType t, bool bhsd, int descaled) {
  static const float kDescales[3][3] = {
      {0, 0, 0}, {0.5f, 1.25f, 2.0f}, {2.0f, 2.0f, 0.5f}};
  Case c = fixed(std::string(toString(t)) + " " + name +
                     (descaled ? " descale" + std::to_string(descaled) : ""),
                 b, hq, hkv, sq, sk, d, 128, t, bhsd);
  c.range = t == DType::E5M2 ? 2 : 1;
  std::copy(kDescales[descaled], kDescales[descaled] + 3, c.descale);
  return c;
}

/// fp8 inputs: both formats, head dims 128 and 256, every sequence length
/// of the sweep and unequal ones, GQA 4:1 and MQA, both layouts, LSE (every
/// case), window, ALiBi and bias, with and without descale factors, values
/// across each format's range, and every candidate of a causal GQA prefill
/// and of a split-KV decode.
std::vector<Case> fp8Cases() {
  std::vector<Case> cs;
  const DType e4m3 = DType::E4M3, e5m2 = DType::E5M2;
  // Sequence lengths, causal and not, GQA 4:1; head dims, layouts and
  // descale sets take turns so that each format meets each of them.
  int turn = 0;
  for (int s : {1, 17, 128, 513, 2048})
    for (bool causal : {false, true})
      for (DType t : {e4m3, e5m2}) {
        const int d = turn % 8 < 4 ? 128 : 256;
        Case c = fp8Case("S" + std::to_string(s) + (causal ? " causal" : "") +
                             " D" + std::to_string(d),
                         s >= 2048 ? 1 : 2, 8, 2, s, s, d, t, turn % 3 == 0,
                         turn % 3);
        c.p.causal = causal;
        cs.push_back(c);
        ++turn;
      }
  // Unequal q/k (causal with Sq > Sk leaves rows empty), MQA.
  for (auto [sq, sk] : {std::pair{100, 700}, {700, 100}})
    for (bool causal : {false, true}) {
      const DType t = causal ? e5m2 : e4m3;
      Case c = fp8Case("MQA Sq" + std::to_string(sq) + " Sk" +
                           std::to_string(sk) + (causal ? " causal" : ""),
                       2, 8, 1, sq, sk, sq < sk ? 256 : 128, t, !causal,
                       sq < sk ? 1 : 0);
      c.p.causal = causal;
      cs.push_back(c);
    }
  cs.push_back(
      fp8Case("decode Sk4096 MQA", 2, 16, 1, 1, 4096, 128, e4m3, false, 0));
  // Masks and biases (the bias in bf16, O's type).
  {
    Case c = fp8Case("window 64,16", 2, 8, 2, 513, 513, 128, e4m3, false, 1);
    c.p.windowLeft = 64;
    c.p.windowRight = 16;
    cs.push_back(c);
    c = fp8Case("causal + window 128", 2, 8, 2, 513, 513, 256, e5m2, true, 0);
    c.p.causal = true;
    c.p.windowLeft = 128;
    cs.push_back(c);
    c = fp8Case("alibi causal", 2, 8, 8, 513, 2048, 128, e5m2, false, 2);
    c.p.alibi = c.p.causal = true;
    cs.push_back(c);
    c = fp8Case("bias", 2, 4, 2, 128, 513, 128, e4m3, true, 1);
    c.p.bias = true;
    cs.push_back(c);
    c = fp8Case("window alibi bias", 2, 4, 2, 257, 513, 256, e5m2, false, 0);
    c.p.windowLeft = 100;
    c.p.windowRight = 20;
    c.p.alibi = c.p.bias = true;
    cs.push_back(c);
  }
  // Values across each format's range, the descale factors bringing the
  // scores back to the unit case's: e4m3 up to 256 (its largest is 448),
  // e5m2 up to 16384 (past any e4m3) and down to 2^-6 (its subnormals,
  // below 2^-14, in reach).
  for (auto [t, e] : {std::pair{e4m3, 8}, {e5m2, 14}, {e5m2, -6}}) {
    Case c = fp8Case("values to 2^" + std::to_string(e), 2, 8, 2, 300, 300, 128,
                     t, false, 0);
    c.range = std::ldexp(1.f, e);
    std::fill(c.descale, c.descale + 3, std::ldexp(1.f, -e));
    c.p.causal = true;
    cs.push_back(c);
  }
  // Every candidate: a causal GQA prefill, a decode (split-KV candidates).
  {
    Case c = fp8Case("causal GQA all configs", 2, 8, 2, 513, 513, 128, e4m3,
                     false, 1);
    c.p.causal = true;
    c.allCandidates = true;
    cs.push_back(c);
    c = fp8Case("decode Sk4096 GQA 4:1 all configs", 2, 32, 8, 1, 4096, 128,
                e5m2, false, 2);
    c.allCandidates = true;
    cs.push_back(c);
  }
  return cs;
}

/// Builds the kernels of `runs` (a null config: the dispatcher's) on up to
/// 8 threads before they run: one at a time, a cold cache's builds would
/// take most of the test's time. Errors are left for the run to report.
void prebuild(
    const std::vector<std::pair<const Case *, std::optional<AttentionConfig>>>
        &runs) {
  Runtime &rt = *Gpu::get().rt;
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> pool;
  const unsigned threads =
      std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  for (unsigned i = 0; i < threads; ++i)
    pool.emplace_back([&] {
      for (size_t j; (j = next++) < runs.size();) {
        const auto &[c, config] = runs[j];
        try {
          if (config)
            rt.compile(c->p, *config);
          else
            rt.selectAttention(c->p, AttentionArgs{});
        } catch (const std::exception &) {
          ++failed;
        }
      }
    });
  for (std::thread &th : pool)
    th.join();
  std::printf(
      "[ gpu      ] %zu runs' kernels ready in %.1f s (%d failed to "
      "build; %u threads)\n",
      runs.size(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count(),
      failed.load(), threads);
}

/// fp8 Q, K, V (e4m3, e5m2) with a bf16 O on sm_90a's wgmma loop, through
/// the dispatcher and, for two problems, every candidate config.
TEST_F(AttentionGpu, Fp8) {
  const Target t = Gpu::get().rt->target();
  if (t != Target::SM90A)
    GTEST_SKIP() << "fp8 attention needs sm_90a (fp8 wgmma); the GPU is "
                 << toString(t);
  const std::vector<Case> cases = selectedCases(fp8Cases());
  std::vector<std::pair<const Case *, std::optional<AttentionConfig>>> runs;
  int splitKv = 0;
  bool decode = false; // KGEN_GPU_TEST_MAX_SEQLEN may leave it out
  for (const Case &c : cases) {
    runs.push_back({&c, std::nullopt});
    if (!c.allCandidates)
      continue;
    const std::vector<AttentionConfig> cfgs = enumerateConfigs(c.p, t);
    EXPECT_FALSE(cfgs.empty()) << c.name;
    decode |= c.p.seqlenQ == 1;
    for (const AttentionConfig &cfg : cfgs) {
      runs.push_back({&c, cfg});
      splitKv += cfg.splits > 1;
    }
  }
  if (decode)
    EXPECT_GT(splitKv, 0) << "the decode problem has no split-KV candidate";
  prebuild(runs);
  unsigned seed = 7000;
  for (const auto &[c, config] : runs) {
    const std::string b = runCase(*c, config ? &*config : nullptr, seed++);
    EXPECT_TRUE(b.empty()) << c->name << " "
                           << (config ? attentionKernelName(c->p, *config, t)
                                      : std::string("(dispatch)"))
                           << ":\n"
                           << b;
  }
}

} // namespace
