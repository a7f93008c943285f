//===- AttentionEmulatorTest.cpp - Attention kernels on an emulated GPU ---===//
//
// Runs the attention kernels kgen::emitAttention generates for the cases of
// attn_cases.def on the host, NVIDIA and AMD, with no GPU: the generated
// source and templates/attention/attention.h compile as they are, the target
// atoms (mma.sync, ldmatrix, cp.async, MFMA, the lane shuffle) are emulated
// (test/emu/include), as in EmulatorTest.cpp, whose header says what that
// does and does not prove.
//
// Inputs are uniform in [-1, 1) rounded to the dtype, so rounding matters
// here (unlike the GEMM emulator's integers): each result is checked against
// an fp64 reference that builds the mask explicitly (visible(i, j) below,
// written from the problem's definition, not from the template), with
// FlashAttention's rule: max|ours - ref| <= 2 * max|naive - ref|, naive being
// a same-dtype implementation (scores rounded to the dtype, fp32 softmax, P
// rounded to the dtype, fp32 P V rounded to the dtype), never below half an
// ulp of the dtype at max|ref|. Rows with no visible key must be exactly 0
// with LSE -inf; any NaN fails; O's and LSE's buffers start as NaN, so an
// element left unwritten fails too.
//
//===----------------------------------------------------------------------===//

#include "EmuRuntime.h"
#include "kgen/Attention.h"
#include "kgen/Codegen/Reference.h"
#include "kgen/attention/params.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct AttnKernel {
  const char *name;
  kgen::Target target;
  kgen::DType dtype;
  int dqk, dv;
  bool causal;
  int windowLeft, windowRight;
  bool varlen, alibi, bias, lse;
  int blockM, blockN, warps, stages;
  bool preloadV;
  int splits;
  bool packGqa;
  const char *runs;
  bool (*launch)(const kgen::attention::Params &, const emu::Launch &, bool,
                 char *, size_t);
};

#include "attn_registry.inc"

constexpr int kNumAttn = int(sizeof(kAttnKernels) / sizeof(kAttnKernels[0]));

/// One run's shape: per batch entry its query and key lengths.
struct Shape {
  int batch = 1, hq = 1, hkv = 1;
  std::vector<int> sq, sk;
  bool bhsd = false;
  int maxSq() const { return *std::max_element(sq.begin(), sq.end()); }
  int maxSk() const { return *std::max_element(sk.begin(), sk.end()); }
};

std::vector<Shape> parseRuns(const AttnKernel &k) {
  std::vector<Shape> out;
  std::istringstream rs(k.runs);
  for (std::string r; rs >> r;) {
    Shape s;
    if (k.varlen) {
      int hq, hkv;
      char x, colon;
      std::istringstream one(r);
      one >> hq >> x >> hkv >> colon;
      s.hq = hq;
      s.hkv = hkv;
      std::string pairs;
      one >> pairs;
      std::istringstream ps(pairs);
      for (std::string pr; std::getline(ps, pr, ',');) {
        s.sq.push_back(std::stoi(pr.substr(0, pr.find('/'))));
        s.sk.push_back(std::stoi(pr.substr(pr.find('/') + 1)));
      }
      s.batch = int(s.sq.size());
    } else {
      int b, hq, hkv, sq, sk;
      char x;
      std::istringstream one(r);
      one >> b >> x >> hq >> x >> hkv >> x >> sq >> x >> sk;
      s.batch = b;
      s.hq = hq;
      s.hkv = hkv;
      s.sq.assign(size_t(b), sq);
      s.sk.assign(size_t(b), sk);
      s.bhsd = r.substr(r.find(':') + 1) == "bhsd";
    }
    out.push_back(s);
  }
  return out;
}

uint16_t encode(kgen::DType t, float v) {
  if (t == kgen::DType::F16) {
    _Float16 h = static_cast<_Float16>(v);
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
  }
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float decode(kgen::DType t, uint16_t bits) {
  return t == kgen::DType::BF16 ? emu::decodeBf16(bits) : emu::decodeF16(bits);
}

float roundTo(kgen::DType t, float v) { return decode(t, encode(t, v)); }

/// A [batch][seq][heads][dim] tensor (seq packed over the batch with
/// varlen) stored as BSHD or BHSD, with the strides the kernel gets.
struct Tensor {
  kgen::DType t;
  int heads, dim;
  std::vector<int> rowOffset; // first row of each batch entry
  int rows;                   // per batch entry (fixed) or total (varlen)
  bool bhsd, varlen;
  std::vector<uint16_t> data;
  long long stride[3];

  Tensor(kgen::DType t, const std::vector<int> &lens, int heads, int dim,
         bool bhsd, bool varlen)
      : t(t), heads(heads), dim(dim), bhsd(bhsd), varlen(varlen) {
    int total = 0;
    for (int l : lens) {
      rowOffset.push_back(varlen ? total : 0);
      total += l;
    }
    rows = varlen ? total : lens.front();
    const int batch = varlen ? 1 : int(lens.size());
    data.assign(size_t(batch) * rows * heads * dim + 1, 0xffff); // NaN
    if (bhsd) {
      stride[0] = (long long)heads * rows * dim;
      stride[1] = dim;
      stride[2] = (long long)rows * dim;
    } else {
      stride[0] = (long long)rows * heads * dim;
      stride[1] = (long long)heads * dim;
      stride[2] = dim;
    }
  }
  size_t index(int b, int s, int h, int d) const {
    const long long bo = varlen ? 0 : b * stride[0];
    return size_t(bo + (rowOffset[size_t(b)] + s) * stride[1] + h * stride[2] +
                  d);
  }
  float get(int b, int s, int h, int d) const {
    return decode(t, data[index(b, s, h, d)]);
  }
  emu::Buffer buffer() const {
    return {data.data(), (data.size() - 1) * sizeof(uint16_t)};
  }
};

/// The mask, from the problem's definition (kgen/Attention.h).
bool visible(const AttnKernel &k, int i, int j, int sq, int sk) {
  const int off = sk - sq;
  if (k.causal && j > i + off)
    return false;
  if (k.windowRight >= 0 && j > i + off + k.windowRight)
    return false;
  if (k.windowLeft >= 0 && j < i + off - k.windowLeft)
    return false;
  return true;
}

struct Errors {
  double ours = 0, naive = 0, maxRef = 0, lseOurs = 0, lseNaive = 0, maxLse = 0;
};

/// rising: scores that grow along the keys, about 10 log2 units every 32
/// keys (Q in [0, 1), key j's elements j * c plus [-1/4, 1/4)), so that the
/// softmax's running maximum moves on some key tiles by more than its
/// rescale slack of 8 and on others by less (WarpAttention::probabilities;
/// 16-key tiles alternate).
std::string runOne(const AttnKernel &k, const Shape &s, unsigned seed,
                   bool rising = false) {
  if (s.hq % s.hkv != 0)
    return "attn_cases.def: Hq = " + std::to_string(s.hq) +
           " is not a multiple of Hkv = " + std::to_string(s.hkv);
  const kgen::DType t = k.dtype;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  Tensor Q(t, s.sq, s.hq, k.dqk, s.bhsd, k.varlen);
  Tensor K(t, s.sk, s.hkv, k.dqk, s.bhsd, k.varlen);
  Tensor V(t, s.sk, s.hkv, k.dv, s.bhsd, k.varlen);
  Tensor O(t, s.sq, s.hq, k.dv, s.bhsd, k.varlen);
  // 10 log2 units (6.93 natural) over 32 keys: scale * (dqk / 2) * c * 32.
  const float ramp = 6.93f / (16.f * std::sqrt(float(k.dqk)));
  for (Tensor *x : {&Q, &K, &V})
    for (int b = 0; b < s.batch; ++b)
      for (int i = 0; i < (x == &Q ? s.sq : s.sk)[size_t(b)]; ++i)
        for (int h = 0; h < x->heads; ++h)
          for (int d = 0; d < x->dim; ++d) {
            float v = uni(rng);
            if (rising && x == &Q)
              v = 0.5f * (v + 1.f);
            else if (rising && x == &K)
              v = 0.25f * v + ramp * float(i);
            x->data[x->index(b, i, h, d)] = encode(t, v);
          }
  const int maxSq = s.maxSq(), maxSk = s.maxSk();
  // Bias [batch][hq][maxSq][maxSk] (row stride maxSk), ALiBi slopes.
  std::vector<uint16_t> bias;
  if (k.bias) {
    bias.resize(size_t(s.batch) * s.hq * maxSq * maxSk);
    for (auto &x : bias)
      x = encode(t, uni(rng));
  }
  std::vector<float> slopes(size_t(s.hq));
  for (int h = 0; h < s.hq; ++h)
    slopes[size_t(h)] = std::exp2(-8.f * float(h + 1) / float(s.hq));
  auto biasAt = [&](int b, int h, int i, int j) {
    return decode(t, bias[((size_t(b) * s.hq + h) * maxSq + i) * maxSk + j]);
  };
  std::vector<int> cuQ{0}, cuK{0};
  for (int b = 0; b < s.batch; ++b) {
    cuQ.push_back(cuQ.back() + s.sq[size_t(b)]);
    cuK.push_back(cuK.back() + s.sk[size_t(b)]);
  }
  // LSE: [batch][hq][maxSq], or [hq][totalQ] with varlen.
  const int lseRows = k.varlen ? cuQ.back() : maxSq;
  std::vector<float> lse(size_t(k.varlen ? 1 : s.batch) * s.hq * lseRows + 1,
                         std::numeric_limits<float>::quiet_NaN());
  const float scale = 1.f / std::sqrt(float(k.dqk));

  kgen::AttentionProblem p;
  p.dtype = t;
  p.headDimQk = k.dqk;
  p.headDimV = k.dv;
  p.headsQ = s.hq;
  p.headsKv = s.hkv;
  p.causal = k.causal;
  p.windowLeft = k.windowLeft;
  p.windowRight = k.windowRight;
  p.varlen = k.varlen;
  p.alibi = k.alibi;
  p.bias = k.bias;
  p.lse = k.lse;
  kgen::AttentionConfig c;
  c.blockM = k.blockM;
  c.blockN = k.blockN;
  c.warps = k.warps;
  c.stages = k.stages;
  c.preloadV = k.preloadV;
  c.splits = k.splits;
  c.packGqa = k.packGqa;
  std::vector<float> work(
      kgen::attentionWorkspaceBytes(p, c, s.batch, maxSq) / sizeof(float) + 1,
      std::numeric_limits<float>::quiet_NaN());

  kgen::attention::Params prm{};
  prm.q = Q.data.data();
  prm.k = K.data.data();
  prm.v = V.data.data();
  prm.o = O.data.data();
  prm.lse = k.lse ? lse.data() : nullptr;
  prm.bias = k.bias ? bias.data() : nullptr;
  prm.alibiSlopes = k.alibi ? slopes.data() : nullptr;
  prm.cuSeqlensQ = k.varlen ? cuQ.data() : nullptr;
  prm.cuSeqlensK = k.varlen ? cuK.data() : nullptr;
  const size_t partRows = size_t(k.splits) * s.batch * s.hq * maxSq;
  prm.partialO = k.splits > 1 ? work.data() : nullptr;
  prm.partialLse = k.splits > 1 ? work.data() + partRows * k.dv : nullptr;
  prm.batch = s.batch;
  prm.headsQ = s.hq;
  prm.headsKv = s.hkv;
  prm.seqlenQ = maxSq;
  prm.seqlenK = maxSk;
  prm.splits = k.splits;
  for (int i = 0; i < 3; ++i) {
    prm.strideQ[i] = Q.stride[i];
    prm.strideK[i] = K.stride[i];
    prm.strideV[i] = V.stride[i];
    prm.strideO[i] = O.stride[i];
  }
  prm.strideBias[0] = (long long)s.hq * maxSq * maxSk;
  prm.strideBias[1] = (long long)maxSq * maxSk;
  prm.strideBias[2] = maxSk;
  prm.lseStride[0] = k.varlen ? 0 : (long long)s.hq * maxSq;
  prm.lseStride[1] = lseRows;
  prm.scaleLog2 = scale * 1.4426950408889634f;
  prm.windowLeft = k.windowLeft;
  prm.windowRight = k.windowRight;

  const kgen::LaunchDims d =
      kgen::attentionLaunchDims(p, c, k.target, s.batch, maxSq);
  emu::Launch l;
  for (int i = 0; i < 3; ++i)
    l.grid[i] = d.grid[i];
  l.threads = int(d.block[0]);
  l.waveSize = kgen::targetInfo(k.target).waveSize;
  l.smemBytes = int(d.smemBytes);
  l.buffers[0] = Q.buffer();
  l.buffers[1] = K.buffer();
  l.buffers[2] = V.buffer();
  l.inputs = 3;
  char message[4096] = "";
  if (!k.launch(prm, l, false, message, sizeof(message)))
    return std::string("main kernel: ") + message;
  if (k.splits > 1) {
    const kgen::LaunchDims dc =
        kgen::attentionCombineLaunchDims(p, c, k.target, s.batch, maxSq);
    emu::Launch lc;
    for (int i = 0; i < 3; ++i)
      lc.grid[i] = dc.grid[i];
    lc.threads = int(dc.block[0]);
    lc.waveSize = 32; // the combine kernel uses no warp-level operation
    lc.smemBytes = int(dc.smemBytes);
    lc.inputs = 0;
    if (!k.launch(prm, lc, true, message, sizeof(message)))
      return std::string("combine kernel: ") + message;
  }

  // The references, row by row.
  Errors e;
  std::string out;
  auto note = [&](const std::string &m) {
    if (out.size() < 1500)
      out += m + "\n";
  };
  const float negInf = -std::numeric_limits<float>::infinity();
  for (int b = 0; b < s.batch; ++b) {
    const int sq = s.sq[size_t(b)], sk = s.sk[size_t(b)];
    for (int h = 0; h < s.hq; ++h) {
      const int hk = h / (s.hq / s.hkv);
      for (int i = 0; i < sq; ++i) {
        std::vector<double> sref(static_cast<size_t>(sk));
        std::vector<float> snaive(static_cast<size_t>(sk));
        std::vector<char> vis(static_cast<size_t>(sk));
        double mref = -INFINITY;
        float mnaive = negInf;
        for (int j = 0; j < sk; ++j) {
          vis[size_t(j)] = visible(k, i, j, sq, sk);
          if (!vis[size_t(j)])
            continue;
          double dot = 0;
          float dotf = 0;
          for (int dd = 0; dd < k.dqk; ++dd) {
            dot += double(Q.get(b, i, h, dd)) * K.get(b, j, hk, dd);
            dotf += Q.get(b, i, h, dd) * K.get(b, j, hk, dd);
          }
          double add = 0;
          if (k.alibi)
            add -= double(slopes[size_t(h)]) * std::abs(i + sk - sq - j);
          if (k.bias)
            add += biasAt(b, h, i, j);
          sref[size_t(j)] = double(scale) * dot + add;
          snaive[size_t(j)] = roundTo(t, dotf) * scale + float(add);
          mref = std::max(mref, sref[size_t(j)]);
          mnaive = std::max(mnaive, snaive[size_t(j)]);
        }
        const bool empty = mref == -INFINITY;
        double lref = 0;
        float lnaive = 0;
        for (int j = 0; j < sk; ++j)
          if (vis[size_t(j)]) {
            lref += std::exp(sref[size_t(j)] - mref);
            lnaive += std::exp(snaive[size_t(j)] - mnaive);
          }
        const size_t lseIdx = k.varlen
                                  ? size_t(h) * lseRows + cuQ[size_t(b)] + i
                                  : (size_t(b) * s.hq + h) * maxSq + i;
        if (k.lse) {
          const float got = lse[lseIdx];
          if (empty) {
            if (!(got == negInf))
              note("LSE b" + std::to_string(b) + " h" + std::to_string(h) +
                   " i" + std::to_string(i) + " = " + std::to_string(got) +
                   ", want -inf (no visible key)");
          } else {
            const double want = mref + std::log(lref);
            const double naive = double(mnaive) + std::log(double(lnaive));
            if (!std::isfinite(got))
              note("LSE b" + std::to_string(b) + " h" + std::to_string(h) +
                   " i" + std::to_string(i) + " is not finite");
            e.lseOurs = std::max(e.lseOurs, std::abs(got - want));
            e.lseNaive = std::max(e.lseNaive, std::abs(naive - want));
            e.maxLse = std::max(e.maxLse, std::abs(want));
          }
        }
        for (int dd = 0; dd < k.dv; ++dd) {
          double oref = 0;
          float onaive = 0;
          for (int j = 0; j < sk; ++j)
            if (vis[size_t(j)]) {
              oref +=
                  std::exp(sref[size_t(j)] - mref) / lref * V.get(b, j, hk, dd);
              onaive +=
                  roundTo(t, std::exp(snaive[size_t(j)] - mnaive) / lnaive) *
                  V.get(b, j, hk, dd);
            }
          onaive = roundTo(t, onaive);
          const float got = O.get(b, i, h, dd);
          if (std::isnan(got) || std::isinf(got)) {
            note("O b" + std::to_string(b) + " h" + std::to_string(h) + " i" +
                 std::to_string(i) + " d" + std::to_string(dd) +
                 " is not finite");
            continue;
          }
          if (empty) {
            if (got != 0.f)
              note("O b" + std::to_string(b) + " h" + std::to_string(h) + " i" +
                   std::to_string(i) + " = " + std::to_string(got) +
                   ", want 0 (no visible key)");
            continue;
          }
          e.ours = std::max(e.ours, std::abs(got - oref));
          e.naive = std::max(e.naive, std::abs(onaive - oref));
          e.maxRef = std::max(e.maxRef, std::abs(oref));
        }
      }
    }
  }
  const double bound = std::max(2 * e.naive, kgen::halfUlp(t, e.maxRef));
  if (e.ours > bound)
    note("max|O - ref| = " + std::to_string(e.ours) + " > bound " +
         std::to_string(bound) + " (2 x naive " + std::to_string(e.naive) +
         ")");
  if (k.lse) {
    const double lbound =
        std::max(2 * e.lseNaive, kgen::halfUlp(kgen::DType::F32, e.maxLse));
    if (e.lseOurs > lbound)
      note("max|LSE - ref| = " + std::to_string(e.lseOurs) + " > bound " +
           std::to_string(lbound) + " (2 x naive " +
           std::to_string(e.lseNaive) + ")");
  }
  std::printf("    B%d Hq%d Hkv%d Sq%d Sk%d%s: O err %.2e (naive %.2e), LSE "
              "err %.2e (naive %.2e)\n",
              s.batch, s.hq, s.hkv, maxSq, maxSk,
              k.varlen ? " varlen"
              : s.bhsd ? " bhsd"
                       : " bshd",
              e.ours, e.naive, e.lseOurs, e.lseNaive);
  return out;
}

class AttentionEmulated : public ::testing::TestWithParam<int> {};

/// Every run of kernel `index` (seeds from `seed0`), each failure reported.
void runAll(int index, unsigned seed0, bool rising) {
  const AttnKernel &k = kAttnKernels[index];
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Shape> shapes = parseRuns(k);
  ASSERT_FALSE(shapes.empty()) << k.name << ": no runs";
  for (size_t r = 0; r < shapes.size(); ++r) {
    const std::string err =
        runOne(k, shapes[r], seed0 + unsigned(index * 100 + int(r)), rising);
    if (!err.empty())
      ADD_FAILURE() << kgen::toString(k.target) << " " << k.name << ", run "
                    << r << (rising ? " (rising scores)" : "") << ":\n"
                    << err;
  }
  std::printf(
      "  %-7s %s%s: %zu run(s), %.2f s\n",
      std::string(kgen::toString(k.target)).c_str(), k.name,
      rising ? " (rising)" : "", shapes.size(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count());
}

TEST_P(AttentionEmulated, MatchesReference) { runAll(GetParam(), 1, false); }

/// The same kernels on scores that rise along the keys: the running
/// maximum moves past the softmax's rescale slack on some key tiles and
/// stays within it on others.
TEST_P(AttentionEmulated, RisingScoresMatchReference) {
  runAll(GetParam(), 51, true);
}

INSTANTIATE_TEST_SUITE_P(Kernels, AttentionEmulated,
                         ::testing::Range(0, kNumAttn),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::string(kgen::toString(
                                      kAttnKernels[info.param].target)) +
                                  "_" + kAttnKernels[info.param].name;
                         });

/// attn_cases.def is meant to touch every feature per vendor.
TEST(AttentionEmulatedCoverage, EachVendorTouchesTheFeatures) {
  for (bool amd : {false, true}) {
    bool causal = false, window = false, varlen = false, alibi = false,
         bias = false, lse = false, split = false, dvDiffers = false,
         packed = false, packedSplit = false, packedVarlen = false;
    for (const AttnKernel &k : kAttnKernels) {
      if ((kgen::targetInfo(k.target).vendor == kgen::Vendor::AMD) != amd)
        continue;
      causal |= k.causal;
      window |= k.windowLeft >= 0 || k.windowRight >= 0;
      varlen |= k.varlen;
      alibi |= k.alibi;
      bias |= k.bias;
      lse |= k.lse;
      split |= k.splits > 1;
      dvDiffers |= k.dv != k.dqk;
      packed |= k.packGqa;
      packedSplit |= k.packGqa && k.splits > 1;
      packedVarlen |= k.packGqa && k.varlen;
    }
    const char *vendor = amd ? "AMD" : "NVIDIA";
    EXPECT_TRUE(causal && window && varlen && alibi && bias && lse && split &&
                dvDiffers)
        << vendor;
    EXPECT_TRUE(packed && packedSplit && packedVarlen) << vendor;
  }
}

} // namespace
