//===- MlstmGpuTest.cpp - mLSTM results on the GPU against a reference ----===//
//
// The issue's sweep: S in {1, 7, 64, 100, 1024, 4096}, (DQK, DV) in
// {64/64, 128/128, 256/512}, with and without initial states, final states
// returned (in place on some cases), gates from soft to saturated (f~
// uniform in [-5, 10], i~ in [-10, 15]), q, k, v uniform in [-1, 1]; bf16,
// and f16/f32 on part of it; every variant (the dispatcher's choice, and
// each variant forced through Runtime::compileMlstm with the model's best
// config of that variant).
//
// Reference, on the CPU from the exact (rounded) inputs: the recurrent form
// in fp64 (ref) and in fp32 with h rounded to the input dtype (naive: a
// straightforward same-dtype implementation). The rule (DESIGN.md):
// max|ours - ref| <= 2 * max|naive - ref|, never below half an ulp of the
// output's dtype at max|ref|; for h and for the returned C, n, m (fp32).
// Outputs and final states start as NaN. Without a GPU every test is
// skipped. KGEN_MLSTM_GPU_MAX_S (e.g. 100) limits S for compute-sanitizer
// runs.
//
//===----------------------------------------------------------------------===//

#include "kgen/Codegen/Reference.h"
#include "kgen/kgen.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace kgen;

namespace {

uint32_t encode(DType t, float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if (t == DType::F32)
    return u;
  if (t == DType::F16) {
    _Float16 h = static_cast<_Float16>(v);
    uint16_t b;
    std::memcpy(&b, &h, 2);
    return b;
  }
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

double roundTo(DType t, double x) {
  const uint32_t bits = encode(t, float(x));
  unsigned char b[4];
  std::memcpy(b, &bits, 4);
  return decodeElement(t, b, 0);
}

/// Host values of one input tensor: the stored bytes and their exact values.
struct HostTensor {
  DType type;
  std::vector<unsigned char> bytes;
  std::vector<double> value;
  HostTensor(DType t, size_t n)
      : type(t), bytes(n * size_t(sizeOf(t))), value(n) {}
  void set(size_t i, float v) {
    uint32_t bits = encode(type, v);
    std::memcpy(bytes.data() + i * sizeOf(type), &bits, size_t(sizeOf(type)));
    value[i] = decodeElement(type, bytes.data(), i);
  }
};

/// The recurrent form per head in Real arithmetic (one head per call, so
/// the heads run on several host threads).
template <class Real> struct Recurrent {
  std::vector<Real> h, C, n, m;
  void init(int64_t bh, int64_t S, int dqk, int dv) {
    h.assign(size_t(bh * S * dv), 0);
    C.assign(size_t(bh * dqk * dv), 0);
    n.assign(size_t(bh * dqk), 0);
    m.assign(size_t(bh), 0);
  }
  void head(int64_t x, int64_t S, int dqk, int dv, const HostTensor &q,
            const HostTensor &k, const HostTensor &v, const HostTensor &ig,
            const HostTensor &fg, const std::vector<float> *c0,
            const std::vector<float> *n0, const std::vector<float> *m0,
            Real eps) {
    const Real scale = Real(1) / std::sqrt(Real(dqk));
    Real *c = &C[size_t(x * dqk * dv)], *nn = &n[size_t(x * dqk)];
    Real &mm = m[size_t(x)];
    if (c0) {
      for (int64_t e = 0; e < int64_t(dqk) * dv; ++e)
        c[e] = Real((*c0)[size_t(x * dqk * dv + e)]);
      for (int i = 0; i < dqk; ++i)
        nn[i] = Real((*n0)[size_t(x * dqk + i)]);
      mm = Real((*m0)[size_t(x)]);
    }
    std::vector<Real> qs(size_t(dqk));
    for (int64_t t = 0; t < S; ++t) {
      const size_t row = size_t(x * S + t);
      const Real f = Real(fg.value[row]), it = Real(ig.value[row]);
      const Real lf = std::min(f, Real(0)) - std::log1p(std::exp(-std::abs(f)));
      const Real mNew = std::max(lf + mm, it);
      const Real fp = std::exp(lf + mm - mNew), ip = std::exp(it - mNew);
      mm = mNew;
      Real z = 0;
      for (int i = 0; i < dqk; ++i) {
        qs[size_t(i)] = scale * Real(q.value[row * dqk + i]);
        nn[i] = fp * nn[i] + ip * Real(k.value[row * dqk + i]);
        z += qs[size_t(i)] * nn[i];
      }
      const Real den = std::max(std::abs(z), std::exp(-mm)) + eps;
      Real *hr = &h[row * dv];
      for (int j = 0; j < dv; ++j)
        hr[j] = 0;
      for (int i = 0; i < dqk; ++i) {
        const Real ki = ip * Real(k.value[row * dqk + i]);
        Real *ci = c + size_t(i) * dv;
        const double *vr = &v.value[row * dv];
        for (int j = 0; j < dv; ++j) {
          ci[j] = fp * ci[j] + ki * Real(vr[j]);
          hr[j] += qs[size_t(i)] * ci[j];
        }
      }
      for (int j = 0; j < dv; ++j)
        hr[j] /= den;
    }
  }
};

struct Check {
  double errOurs = 0, errNaive = 0, maxRef = 0, floor = 0;
  int64_t nonFinite = 0, worst = -1;
  bool pass() const {
    return nonFinite == 0 && errOurs <= std::max(2 * errNaive, floor);
  }
  std::string describe(const char *what) const {
    char buf[320];
    std::snprintf(buf, sizeof(buf),
                  "%s: max|ours - ref| = %.3g (element %lld), bound %.3g (2 x "
                  "naive %.3g, half-ulp floor %.3g), ours/naive %.2f, %lld "
                  "non-finite",
                  what, errOurs, (long long)worst,
                  std::max(2 * errNaive, floor), errNaive, floor,
                  errNaive > 0 ? errOurs / errNaive : 0.0,
                  (long long)nonFinite);
    return buf;
  }
};

template <class Ours, class Naive>
Check compare(DType t, size_t count, Ours ours, const std::vector<double> &ref,
              Naive naive) {
  Check c;
  for (size_t i = 0; i < count; ++i) {
    const double o = ours(i), r = ref[i];
    c.maxRef = std::max(c.maxRef, std::abs(r));
    if (!std::isfinite(o)) {
      ++c.nonFinite;
      continue;
    }
    if (std::abs(o - r) > c.errOurs) {
      c.errOurs = std::abs(o - r);
      c.worst = int64_t(i);
    }
    c.errNaive = std::max(c.errNaive, std::abs(naive(i) - r));
  }
  c.floor = halfUlp(t, c.maxRef);
  return c;
}

struct DeviceBuffer {
  Backend *be;
  void *p = nullptr;
  size_t bytes;
  DeviceBuffer(Backend *be, size_t bytes) : be(be), bytes(bytes) {
    p = be->alloc(std::max<size_t>(bytes, 16));
  }
  ~DeviceBuffer() {
    try {
      be->free(p);
    } catch (...) {
    }
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  void upload(const void *src) { be->copyToDevice(p, src, bytes); }
  void fillNan() {
    std::vector<unsigned char> nan(bytes, 0xff);
    upload(nan.data());
  }
  template <class T> std::vector<T> download() const {
    std::vector<T> h(bytes / sizeof(T));
    be->copyToHost(h.data(), p, bytes);
    return h;
  }
};

struct Case {
  int64_t b, nh, s;
  int dqk, dv;
  DType dtype = DType::BF16;
  bool initial = false, final = true, inPlace = false;
  std::optional<MlstmVariant> variant; ///< forced, else the dispatcher's
  std::string describe() const {
    return "B=" + std::to_string(b) + " NH=" + std::to_string(nh) +
           " S=" + std::to_string(s) + " " + std::to_string(dqk) + "/" +
           std::to_string(dv) + " " + std::string(toString(dtype)) +
           (initial ? " initial" : "") + (final ? " final" : "") +
           (inPlace ? " in-place" : "") +
           (variant ? " variant " + std::string(toString(*variant))
                    : std::string(" dispatched"));
  }
};

Runtime &runtime() {
  static Runtime rt;
  return rt;
}

void runCase(const Case &cs) {
  SCOPED_TRACE(cs.describe());
  Runtime &rt = runtime();
  Backend *be = rt.backend();
  const int64_t BH = cs.b * cs.nh, S = cs.s;
  const int dqk = cs.dqk, dv = cs.dv;
  const DType dt = cs.dtype;
  std::mt19937 rng(uint32_t(S * 131 + dqk * 7 + dv + cs.initial));
  std::uniform_real_distribution<float> unit(-1.f, 1.f), fDist(-5.f, 10.f),
      iDist(-10.f, 15.f), mDist(-2.f, 6.f);
  HostTensor q(dt, size_t(BH * S * dqk)), k(dt, size_t(BH * S * dqk)),
      v(dt, size_t(BH * S * dv)), ig(dt, size_t(BH * S)),
      fg(dt, size_t(BH * S));
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
  if (cs.initial) {
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

  DeviceBuffer dq(be, q.bytes.size()), dk(be, k.bytes.size()),
      dvv(be, v.bytes.size()), di(be, ig.bytes.size()), df(be, fg.bytes.size()),
      dh(be, size_t(BH * S * dv) * size_t(sizeOf(dt)));
  dq.upload(q.bytes.data());
  dk.upload(k.bytes.data());
  dvv.upload(v.bytes.data());
  di.upload(ig.bytes.data());
  df.upload(fg.bytes.data());
  dh.fillNan();
  DeviceBuffer dc0(be, c0.size() * 4), dn0(be, n0.size() * 4),
      dm0(be, m0.size() * 4), dcT(be, size_t(BH * dqk * dv) * 4),
      dnT(be, size_t(BH * dqk) * 4), dmT(be, size_t(BH) * 4);
  if (cs.initial) {
    dc0.upload(c0.data());
    dn0.upload(n0.data());
    dm0.upload(m0.data());
  }
  dcT.fillNan();
  dnT.fillNan();
  dmT.fillNan();

  MlstmProblem p;
  p.b = cs.b;
  p.nh = cs.nh;
  p.s = cs.s;
  p.dqk = dqk;
  p.dv = dv;
  p.dtype = dt;
  p.initialState = cs.initial;
  p.finalState = cs.final;
  MlstmArgs a;
  a.q = dq.p;
  a.k = dk.p;
  a.v = dvv.p;
  a.i = di.p;
  a.f = df.p;
  a.h = dh.p;
  if (cs.initial) {
    a.c0 = static_cast<const float *>(dc0.p);
    a.n0 = static_cast<const float *>(dn0.p);
    a.m0 = static_cast<const float *>(dm0.p);
  }
  if (cs.final) {
    a.cT = static_cast<float *>(cs.inPlace ? dc0.p : dcT.p);
    a.nT = static_cast<float *>(cs.inPlace ? dn0.p : dnT.p);
    a.mT = static_cast<float *>(cs.inPlace ? dm0.p : dmT.p);
  }
  if (cs.variant) {
    MlstmConfig best{};
    bool found = false;
    for (const MlstmConfig &c : enumerateConfigs(p, rt.target()))
      if (c.variant == *cs.variant) {
        best = c;
        found = true;
        break;
      }
    if (!found)
      GTEST_SKIP() << "no " << toString(*cs.variant) << " config fits";
    auto plan = rt.compileMlstm(p, best);
    std::printf("[ mlstm    ] %s: %s\n", cs.describe().c_str(),
                plan->kernels[0]->source.name.c_str());
    rt.launchMlstm(*plan, a);
  } else {
    rt.mlstm(p, a);
  }
  be->synchronize();

  Recurrent<double> ref;
  Recurrent<float> naive;
  ref.init(BH, S, dqk, dv);
  naive.init(BH, S, dqk, dv);
  {
    const unsigned nt = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> ts;
    for (unsigned w = 0; w < nt; ++w)
      ts.emplace_back([&, w] {
        for (int64_t x = w; x < BH; x += nt) {
          ref.head(x, S, dqk, dv, q, k, v, ig, fg, cs.initial ? &c0 : nullptr,
                   cs.initial ? &n0 : nullptr, cs.initial ? &m0 : nullptr,
                   double(p.eps));
          naive.head(x, S, dqk, dv, q, k, v, ig, fg, cs.initial ? &c0 : nullptr,
                     cs.initial ? &n0 : nullptr, cs.initial ? &m0 : nullptr,
                     p.eps);
        }
      });
    for (auto &t : ts)
      t.join();
  }

  std::vector<unsigned char> h = dh.download<unsigned char>();
  Check ch = compare(
      dt, ref.h.size(),
      [&](size_t i) { return decodeElement(dt, h.data(), i); }, ref.h,
      [&](size_t i) { return roundTo(dt, naive.h[i]); });
  std::printf("[ mlstm    ] %s: %s\n", cs.describe().c_str(),
              ch.describe("h").c_str());
  EXPECT_TRUE(ch.pass()) << ch.describe("h");
  if (cs.final) {
    std::vector<float> oc = (cs.inPlace ? dc0 : dcT).download<float>(),
                       on = (cs.inPlace ? dn0 : dnT).download<float>(),
                       om = (cs.inPlace ? dm0 : dmT).download<float>();
    auto f32 = [](const std::vector<float> &x) {
      return [&x](size_t i) { return double(x[i]); };
    };
    Check cc = compare(DType::F32, ref.C.size(), f32(oc), ref.C,
                       [&](size_t i) { return double(naive.C[i]); });
    EXPECT_TRUE(cc.pass()) << cc.describe("C");
    Check nc = compare(DType::F32, ref.n.size(), f32(on), ref.n,
                       [&](size_t i) { return double(naive.n[i]); });
    EXPECT_TRUE(nc.pass()) << nc.describe("n");
    Check mc = compare(DType::F32, ref.m.size(), f32(om), ref.m,
                       [&](size_t i) { return double(naive.m[i]); });
    EXPECT_TRUE(mc.pass()) << mc.describe("m");
  }
}

class MlstmGpu : public ::testing::Test {
protected:
  void SetUp() override {
    if (!runtime().backend()) {
      std::string why;
      openBackend(std::nullopt, &why);
      GTEST_SKIP() << "no GPU: " << why;
    }
  }
  static int64_t maxS() {
    const char *v = std::getenv("KGEN_MLSTM_GPU_MAX_S");
    return v ? std::atoll(v) : INT64_MAX;
  }
};

TEST_F(MlstmGpu, IssueSweepDispatched) {
  const int dims[][2] = {{64, 64}, {128, 128}, {256, 512}};
  for (int64_t s : {1, 7, 64, 100, 1024, 4096})
    for (auto &d : dims)
      for (bool initial : {false, true}) {
        if (s > maxS())
          continue;
        Case c{2, 4, s, d[0], d[1]};
        c.initial = initial;
        c.inPlace = initial && s <= 7;
        runCase(c);
      }
}

TEST_F(MlstmGpu, EveryVariant) {
  const int dims[][2] = {{64, 64}, {128, 128}, {256, 512}};
  for (MlstmVariant var :
       {MlstmVariant::Recurrent, MlstmVariant::Fused, MlstmVariant::TwoPhase})
    for (int64_t s : {1, 7, 100, 1024})
      for (auto &d : dims) {
        if (s > maxS() || (var == MlstmVariant::Recurrent && s > 100))
          continue;
        Case c{1, 3, s, d[0], d[1]};
        c.initial = s % 2 == 1;
        c.variant = var;
        runCase(c);
      }
}

TEST_F(MlstmGpu, OtherDtypes) {
  for (DType dt : {DType::F16, DType::F32})
    for (MlstmVariant var : {MlstmVariant::Recurrent, MlstmVariant::Fused,
                             MlstmVariant::TwoPhase}) {
      Case c{2, 2, std::min<int64_t>(100, maxS()), 128, 64};
      c.dtype = dt;
      c.initial = true;
      c.variant = var;
      runCase(c);
    }
}

TEST_F(MlstmGpu, DecodeStepInPlace) {
  // The decoding step of the bench: S = 1, states updated in place.
  for (int64_t b : {1, 16}) {
    Case c{b, 8, 1, 256, 512};
    c.initial = true;
    c.inPlace = true;
    runCase(c);
  }
}

} // namespace
