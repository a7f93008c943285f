//===- MlstmEmulatorTest.cpp - mLSTM kernels on the emulated GPU ----------===//
//
// Runs the generated mLSTM kernels (every variant; NVIDIA and AMD builds;
// bf16, f16, f32) on host threads (test/emu, as EmulatorTest.cpp explains)
// against the recurrent form in fp64 from the same rounded inputs.
//
// The rule and the two naive implementations (recurrent and chunkwise in
// fp32; the kernel's own formulation sets the bound) are in
// lib/Runtime/MlstmHostReference.h. It holds for h, and for the returned C,
// n and m (fp32).
//
// Runs: S in {1, 7, 64, 100} (one short chunk, exact chunks, a ragged last
// one), with and without initial states, final states returned (updated in
// place on some runs: the final pointers alias the initial ones), gates from
// soft to saturated (f~ uniform in [-5, 10], i~ in [-10, 15]). Outputs and
// final states start as NaN, shared memory starts as NaN in every block, the
// workspace's states start as NaN; the per-head counters must be zero after
// every launch. The 256/512 plans run S = 7 and S = 70 on one head only
// (host time). Each plan prints its worst error / bound for h, C, n, m.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Runtime/MlstmHostReference.h"
#include "EmuRuntime.h"
#include "kgen/Codegen/Reference.h"
#include "kgen/Mlstm.h"
#include "kgen/mlstm/params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using kgen::DType;

struct MlstmEmuPlan {
  const char *label;
  kgen::Target target;
  DType dtype;
  int dqk, dv;
  kgen::MlstmConfig config;
  bool (*launch[3])(const kgen::mlstm::Params &, const emu::Launch &, char *,
                    size_t);
};

/// The wgmma fused kernel's gate pre-pass alone: gateSums, gateTerms.
struct MlstmGatePlan {
  const char *label;
  DType dtype;
  int dqk, dv;
  bool (*launch[2])(const kgen::mlstm::Params &, const emu::Launch &, char *,
                    size_t);
};

#include "mlstm_registry.inc"

using namespace kgen::mlstm_ref;

class MlstmEmulator : public ::testing::TestWithParam<int> {};

TEST_P(MlstmEmulator, MatchesRecurrentReference) {
  const MlstmEmuPlan &pl = kPlans[GetParam()];
  SCOPED_TRACE(pl.label);
  const DType dt = pl.dtype;
  const int dqk = pl.dqk, dv = pl.dv;
  kgen::MlstmProblem prob;
  prob.dqk = dqk;
  prob.dv = dv;
  prob.dtype = dt;
  const auto kinds = kgen::mlstmKernels(pl.config);
  // KGEN_MLSTM_EMU_SEED varies the inputs (the default seed is fixed).
  const char *seed = std::getenv("KGEN_MLSTM_EMU_SEED");
  std::mt19937 rng(uint32_t(1234 + GetParam() + (seed ? std::atoi(seed) : 0)));
  std::uniform_real_distribution<float> unit(-1.f, 1.f), fDist(-5.f, 10.f),
      iDist(-10.f, 15.f), mDist(-2.f, 6.f);

  // The worst error / bound over the runs, per output: printed at the end,
  // so the margin each plan keeps stays visible when it passes.
  double worstRatio[4] = {0, 0, 0, 0}; // h, C, n, m
  auto note = [&](int which, const Check &c) {
    if (c.bound() > 0)
      worstRatio[which] = std::max(worstRatio[which], c.errOurs / c.bound());
  };
  // The xLSTM-7B head (256/512) costs the emulator ~30x a 64/64 one per
  // token (every mma.sync is a 32-thread rendezvous): one head, and two runs
  // -- S = 7 from zero states, S = 70 (two chunks of 64, or three of 32,
  // the last ragged) from initial ones -- keep it within the host's time.
  const bool heavy = dqk * dv > 128 * 128;
  int run = 0;
  for (int64_t S : {1, 7, 64, 100})
    for (bool initial : {false, true}) {
      ++run;
      if (heavy && !((S == 7 && !initial) || (S == 100 && initial)))
        continue;
      if (heavy && S == 100)
        S = 70;
      const int64_t B = heavy ? 1 : 1 + run % 2, NH = heavy ? 1 : 2,
                    BH = B * NH;
      const bool final = !(S == 7 && !initial);
      const bool inPlace = initial && final && run % 4 == 0;
      SCOPED_TRACE("S = " + std::to_string(S) + ", B = " + std::to_string(B) +
                   (initial ? ", initial states" : "") +
                   (final ? ", final states" : "") +
                   (inPlace ? " (in place)" : ""));
      HostTensor q(dt, size_t(BH * S * dqk)), k(dt, size_t(BH * S * dqk)),
          v(dt, size_t(BH * S * dv)), ig(dt, size_t(BH * S)),
          fg(dt, size_t(BH * S)), h(dt, size_t(BH * S * dv));
      for (size_t e = 0; e < q.value.size(); ++e) {
        q.set(e, unit(rng));
        k.set(e, unit(rng));
      }
      for (size_t e = 0; e < v.value.size(); ++e)
        v.set(e, unit(rng));
      for (size_t e = 0; e < ig.value.size(); ++e) {
        ig.set(e, iDist(rng));
        fg.set(e, fDist(rng));
      }
      std::vector<float> c0, n0, m0;
      if (initial) {
        c0.resize(size_t(BH * dqk * dv));
        n0.resize(size_t(BH * dqk));
        m0.resize(size_t(BH));
        for (float &x : c0)
          x = unit(rng);
        for (float &x : n0)
          x = unit(rng);
        for (float &x : m0)
          x = mDist(rng);
      }
      const float nan = std::nanf("");
      std::vector<float> cT(size_t(BH * dqk * dv), nan),
          nT(size_t(BH * dqk), nan), mT(size_t(BH), nan);
      // In place: the final states overwrite a copy of the initial ones.
      std::vector<float> cIo = c0, nIo = n0, mIo = m0;

      kgen::MlstmProblem rp = prob;
      rp.b = B;
      rp.nh = NH;
      rp.s = S;
      const int chunk = pl.config.chunk > 0 ? pl.config.chunk : 1;
      const int chunks = int((S + chunk - 1) / chunk);
      std::vector<unsigned> counters(size_t(BH), 0u);
      const kgen::MlstmWorkspaceLayout wl =
          kgen::mlstmWorkspaceLayout(rp, pl.config, B, NH, S);
      // NaN floats: the fp64 (g, m_loc) pairs read NaN too.
      std::vector<float> ws(wl.bytes / 4, nan);

      kgen::mlstm::Params prm{};
      prm.q = q.bytes.data();
      prm.k = k.bytes.data();
      prm.v = v.bytes.data();
      prm.i = ig.bytes.data();
      prm.f = fg.bytes.data();
      prm.h = h.bytes.data();
      if (initial) {
        prm.c0 = inPlace ? cIo.data() : c0.data();
        prm.n0 = inPlace ? nIo.data() : n0.data();
        prm.m0 = inPlace ? mIo.data() : m0.data();
      }
      if (final) {
        prm.cT = inPlace ? cIo.data() : cT.data();
        prm.nT = inPlace ? nIo.data() : nT.data();
        prm.mT = inPlace ? mIo.data() : mT.data();
      }
      if (wl.bytes) {
        unsigned char *base = reinterpret_cast<unsigned char *>(ws.data());
        if (pl.config.variant == kgen::MlstmVariant::ChunkPar)
          prm.wsGM = reinterpret_cast<double *>(base + wl.gm);
        prm.wsC = reinterpret_cast<float *>(base + wl.c);
        prm.wsN = reinterpret_cast<float *>(base + wl.n);
        prm.wsM = reinterpret_cast<float *>(base + wl.m);
      }
      prm.counters = counters.data();
      prm.batch = int(B);
      prm.heads = int(NH);
      prm.seq = int(S);
      prm.chunks = chunks;
      prm.eps = prob.eps;

      for (size_t n = 0; n < kinds.size(); ++n) {
        const kgen::LaunchDims d =
            kgen::mlstmLaunchDims(rp, pl.config, kinds[n], pl.target, B, NH, S);
        emu::Launch l;
        l.grid[0] = d.grid[0];
        l.grid[1] = d.grid[1];
        l.threads = int(d.block[0]);
        l.waveSize = kgen::targetInfo(pl.target).waveSize;
        l.smemBytes = int(d.smemBytes);
        // What the tensor-core kernels' cp.async may read: q, k, v.
        l.buffers[0] = {q.bytes.data(), q.bytes.size()};
        l.buffers[1] = {k.bytes.data(), k.bytes.size()};
        l.buffers[2] = {v.bytes.data(), v.bytes.size()};
        l.inputs = 3;
        char message[2048] = {};
        ASSERT_TRUE(pl.launch[n](prm, l, message, sizeof(message)))
            << kgen::toString(kinds[n]) << ": " << message;
      }
      for (unsigned c : counters)
        EXPECT_EQ(c, 0u) << "a per-head counter was left non-zero";

      const MlstmInputs in{BH,
                           S,
                           dqk,
                           dv,
                           q,
                           k,
                           v,
                           ig,
                           fg,
                           initial ? &c0 : nullptr,
                           initial ? &n0 : nullptr,
                           initial ? &m0 : nullptr};
      MlstmOutputs<double> ref;
      MlstmOutputs<float> rec, chw;
      ref.init(in);
      rec.init(in);
      chw.init(in);
      for (int64_t x = 0; x < BH; ++x) {
        recurrentHead<double>(in, x, double(prob.eps), ref);
        recurrentHead<float>(in, x, prob.eps, rec);
        chunkwiseHead(in, x, std::max(pl.config.chunk, 1), prob.eps, chw);
      }
      // The naive implementation of the kernel's own formulation.
      const bool recurrent = pl.config.variant == kgen::MlstmVariant::Recurrent;
      const MlstmOutputs<float> &same = recurrent ? rec : chw,
                                &other = recurrent ? chw : rec;

      Check ch = compare(
          dt, h.value.size(), [&](size_t i) { return h.get(i); }, ref.h,
          [&](size_t i) { return roundTo(dt, same.h[i]); },
          [&](size_t i) { return roundTo(dt, other.h[i]); });
      EXPECT_TRUE(ch.pass()) << ch.describe("h");
      note(0, ch);
      if (final) {
        const std::vector<float> &oc = inPlace ? cIo : cT,
                                 &on = inPlace ? nIo : nT,
                                 &om = inPlace ? mIo : mT;
        auto states = [&](int which, const char *what,
                          const std::vector<float> &ours,
                          const std::vector<double> &r,
                          const std::vector<float> &a,
                          const std::vector<float> &b) {
          Check c = compare(
              DType::F32, ours.size(),
              [&](size_t i) { return double(ours[i]); }, r,
              [&](size_t i) { return double(a[i]); },
              [&](size_t i) { return double(b[i]); });
          EXPECT_TRUE(c.pass()) << c.describe(what);
          note(which, c);
        };
        states(1, "C", oc, ref.C, same.C, other.C);
        states(2, "n", on, ref.n, same.n, other.n);
        states(3, "m", om, ref.m, same.m, other.m);
      }
    }
  std::printf("%s: worst error / bound: h %.3f, C %.3f, n %.3f, m %.3f\n",
              pl.label, worstRatio[0], worstRatio[1], worstRatio[2],
              worstRatio[3]);
}

INSTANTIATE_TEST_SUITE_P(Plans, MlstmEmulator,
                         ::testing::Range(0, int(sizeof(kPlans) /
                                                 sizeof(kPlans[0]))),
                         [](const ::testing::TestParamInfo<int> &info) {
                           std::string s = kPlans[info.param].label;
                           for (char &c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           return s;
                         });

/// The wgmma walk's per-chunk terms (ChunkTerms) as the pre-pass writes
/// them, against their definitions evaluated on the host in fp64 from the
/// same rounded gates and the same fp32 log-sigmoid: the sequential m walk
/// over the chunks, b_t, own_t, a_t token by token. Two heads of S = 64 x 70
/// + 5 (71 chunks: the chunks before a chunk take up to three a lane where
/// gateTerms composes their m steps, the last chunk is ragged), from an
/// initial m and from none; gates from soft to saturated.
class MlstmEmulatorGates : public ::testing::TestWithParam<int> {};

TEST_P(MlstmEmulatorGates, TermsFollowTheirDefinitions) {
  const MlstmGatePlan &pl = kGatePlans[GetParam()];
  SCOPED_TRACE(pl.label);
  constexpr int kL = 64;
  constexpr int kTermsFloats = kgen::mlstm::chunkTermsBytes(kL) / 4;
  kgen::MlstmConfig c{kgen::MlstmVariant::Fused, kL, 128, 12};
  c.wgmma = true;
  kgen::MlstmProblem prob;
  prob.dqk = pl.dqk;
  prob.dv = pl.dv;
  prob.dtype = pl.dtype;
  std::mt19937 rng(uint32_t(99 + GetParam()));
  std::uniform_real_distribution<float> fDist(-5.f, 10.f), iDist(-10.f, 15.f);
  for (bool initial : {false, true}) {
    SCOPED_TRACE(initial ? "initial m" : "no initial m");
    const int64_t NH = 2, S = kL * 70 + 5;
    const int chunks = int((S + kL - 1) / kL);
    HostTensor ig(pl.dtype, size_t(NH * S)), fg(pl.dtype, size_t(NH * S));
    // Head 0: gates uniform over the ranges. Head 1: each chunk in a regime
    // of its own (forget gates open, f~ in [6, 10], g near 0; or closing,
    // f~ in [-5, 0]; input gates shifted by up to 10 down), so that the m
    // entering a chunk depends on the chunks long before it and the order
    // in which their steps compose.
    std::uniform_real_distribution<float> open(6.f, 10.f), closing(-5.f, 0.f),
        iLow(-10.f, 5.f);
    for (int64_t x = 0; x < NH; ++x)
      for (int k = 0; k < chunks; ++k) {
        const int regime = int(rng() % 3);
        for (int64_t t = int64_t(k) * kL;
             t < std::min<int64_t>(S, (k + 1) * kL); ++t) {
          const size_t e = size_t(x * S + t);
          const bool mixed = x == 1;
          ig.set(e, mixed && regime == 2 ? iLow(rng) : iDist(rng));
          fg.set(e, !mixed        ? fDist(rng)
                    : regime == 0 ? closing(rng)
                                  : open(rng));
        }
      }
    std::vector<float> m0 = {3.25f, -41.5f};
    prob.b = 1;
    prob.nh = NH;
    prob.s = S;
    const kgen::MlstmWorkspaceLayout wl =
        kgen::mlstmWorkspaceLayout(prob, c, 1, NH, S);
    // The terms first (then, split in segments, the segments' states).
    ASSERT_EQ(wl.gates, 0u);
    ASSERT_GE(wl.bytes, size_t(NH * chunks) * kTermsFloats * 4);
    std::vector<float> ws(wl.bytes / 4, std::nanf(""));
    kgen::mlstm::Params prm{};
    prm.i = ig.bytes.data();
    prm.f = fg.bytes.data();
    prm.m0 = initial ? m0.data() : nullptr;
    prm.wsGates = reinterpret_cast<double *>(ws.data());
    prm.batch = 1;
    prm.heads = int(NH);
    prm.seq = int(S);
    prm.chunks = chunks;
    prm.segments = 1;
    prm.segmentChunks = chunks;
    const kgen::MlstmKernel kinds[2] = {kgen::MlstmKernel::GateSums,
                                        kgen::MlstmKernel::Gates};
    for (int n = 0; n < 2; ++n) {
      const kgen::LaunchDims d = kgen::mlstmLaunchDims(
          prob, c, kinds[n], kgen::Target::SM90A, 1, NH, S);
      emu::Launch l;
      l.grid[0] = d.grid[0];
      l.grid[1] = d.grid[1];
      l.threads = int(d.block[0]);
      l.waveSize = 32;
      l.smemBytes = int(d.smemBytes);
      char message[2048] = {};
      ASSERT_TRUE(pl.launch[n](prm, l, message, sizeof(message)))
          << kgen::toString(kinds[n]) << ": " << message;
    }

    const double log2e = 1.4426950408889634,
                 logScale = -0.5 * std::log2(double(pl.dqk));
    int bad = 0;
    auto expect = [&](double ours, double want, double tol, const char *what,
                      int64_t head, int k, int t) {
      const bool ok = std::abs(ours - want) <= tol;
      if (!ok && ++bad <= 10)
        ADD_FAILURE() << what << " of head " << head << ", chunk " << k
                      << ", token " << t << ": " << ours << ", want " << want;
    };
    // An fp32 exp of an exponent rounded to fp32 once: the rounding moves
    // it by half an ulp of the exponent, up to ~4e-6 relative at |x| ~ 60.
    auto expTol = [](double x, double want) {
      return (std::abs(x) * 6e-8 + 1e-6) * std::abs(want) + 1e-37;
    };
    for (int64_t x = 0; x < NH; ++x) {
      double m = initial ? double(m0[size_t(x)]) : 0.0;
      for (int k = 0; k < chunks; ++k) {
        const int len = int(std::min<int64_t>(kL, S - int64_t(k) * kL));
        const size_t n = size_t(len);
        std::vector<double> b(n), own(n), it(n);
        double sum = 0, run = -1e300;
        for (int t = 0; t < len; ++t) {
          const size_t e = size_t(x * S + int64_t(k) * kL + t);
          it[size_t(t)] = double(float(ig.value[e]));
          sum += double(logSigmoid(float(fg.value[e])));
          b[size_t(t)] = sum;
          run = std::max(run, it[size_t(t)] - sum);
          own[size_t(t)] = run;
        }
        const double g = sum;
        double aMax = -1e300;
        for (int t = 0; t < len; ++t)
          aMax = std::max(aMax, it[size_t(t)] + (g - b[size_t(t)]));
        const double mPrev = m, mNext = std::max(g + mPrev, aMax);
        m = mNext;
        const float *tm = ws.data() + size_t(x * chunks + k) * kTermsFloats;
        const float *row = tm, *col = tm + kL, *rowLo = tm + 2 * kL,
                    *colLo = tm + 3 * kL, *qfac = tm + 4 * kL,
                    *wa = tm + 5 * kL, *floor = tm + 6 * kL;
        double tail[3];
        std::memcpy(tail, tm + 7 * kL + 2, sizeof(tail)); // m, g, max a
        expect(tail[0], mNext, 1e-9, "m", x, k, -1);
        expect(tail[1], g, 1e-9, "g", x, k, -1);
        expect(tail[2], aMax, 1e-9, "max a", x, k, -1);
        const double dx = g + mPrev - mNext;
        expect(tm[7 * kL], std::exp(double(float(dx))),
               expTol(dx, std::exp(dx)), "decay", x, k, -1);
        for (int t = 0; t < kL; ++t) {
          if (t >= len) { // past the sequence: no weight, no terms
            for (const float *f : {row, col, rowLo, colLo, qfac, wa})
              expect(f[t], 0.0, 0.0, "a term past the sequence", x, k, t);
            expect(floor[t], 1.0, 0.0, "floor past the sequence", x, k, t);
            continue;
          }
          const size_t u = size_t(t);
          const double best = std::max(mPrev, own[u]);
          // The pairs carry ~48 bits: their sum is the exponent to ~1e-12.
          expect(double(row[t]) + double(rowLo[t]), -best * log2e, 1e-9, "row",
                 x, k, t);
          expect(double(col[t]) + double(colLo[t]),
                 (it[u] - b[u]) * log2e + logScale, 1e-9, "col", x, k, t);
          expect(double(row[t]), double(float(-best * log2e)), 0.0,
                 "row's high part", x, k, t);
          const double qx = mPrev - best, wx = it[u] + (g - b[u]) - mNext,
                       fx = -(b[u] + best);
          expect(qfac[t], std::exp(qx), expTol(qx, std::exp(qx)), "qfac", x, k,
                 t);
          expect(wa[t], std::exp(wx), expTol(wx, std::exp(wx)), "wa", x, k, t);
          expect(floor[t], std::exp(fx), expTol(fx, std::exp(fx)), "floor", x,
                 k, t);
        }
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(GatePlans, MlstmEmulatorGates,
                         ::testing::Range(0, int(sizeof(kGatePlans) /
                                                 sizeof(kGatePlans[0]))),
                         [](const ::testing::TestParamInfo<int> &info) {
                           std::string s = kGatePlans[info.param].label;
                           for (char &c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           return s;
                         });

} // namespace
