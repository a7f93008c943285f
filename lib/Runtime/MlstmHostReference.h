//===- MlstmHostReference.h - mLSTM on the host, and the rule -*- C++ -*-===//
//
// Shared by kgen tune's check of mLSTM candidates (Tuner.cpp),
// test/emu/MlstmEmulatorTest.cpp and test/gpu/MlstmGpuTest.cpp:
// input tensors with their exact values, the recurrent form (fp64: the
// reference; fp32: the naive recurrent implementation), the chunkwise form
// written plainly in fp32 (the naive chunkwise implementation), and the
// error rule.
//
// The rule (DESIGN.md, FlashAttention's): max|ours - ref| <= 2 * max|naive -
// ref|, never below half an ulp of the output's dtype at max|ref|; ref is
// the recurrent form in fp64 from the exact inputs. `naive` is a
// straightforward same-dtype implementation of the same formulation as the
// kernel (the recurrent one for the recurrent kernel, the chunkwise one with
// the same chunk for the chunkwise kernels), its h rounded to the input
// dtype: the two formulations have different conditioning (the chunkwise
// normalizer sums q.k_s terms that cancel where the recurrent one sums the
// k_s into n first), and where h = num / z is ill-conditioned (|z| small) a
// correct chunkwise kernel errs ~10x more than the recurrent loop. Both
// naive errors are printed, so the margin against each stays visible.
//
// Same-dtype, as the issue words FlashAttention's rule: the naive chunkwise
// form keeps gates, prefix sums, states and every sum in fp32 (the issue
// asks for fp32 gate math and states), and takes the operands of its matrix
// products in the input dtype, as a 16-bit tensor-core implementation does
// (the xLSTM project's Triton kernels do the same): q-bar, P, K * w and the
// state C are rounded to the input dtype where a product reads them. With
// fp32 inputs nothing is rounded. The naive recurrent form is fp32 (the
// recurrent kernel's fp32 FMAs are held to that).
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_RUNTIME_MLSTMHOSTREFERENCE_H
#define KGEN_RUNTIME_MLSTMHOSTREFERENCE_H

#include "kgen/Codegen/Reference.h"
#include "kgen/Problem.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace kgen::mlstm_ref {

/// The bits of fp32 `v` rounded to `t` (nearest, ties to even).
inline uint32_t encode(DType t, float v) {
  unsigned char b[4] = {};
  encodeElement(t, v, b, 0);
  uint32_t bits;
  std::memcpy(&bits, b, 4);
  return bits;
}

inline double roundTo(DType t, double x) {
  const uint32_t bits = encode(t, float(x));
  unsigned char b[4];
  std::memcpy(b, &bits, 4);
  return decodeElement(t, b, 0);
}

/// A tensor of `t` values (stored bytes, all-ones = NaN until set) and their
/// exact values.
struct HostTensor {
  DType type;
  std::vector<unsigned char> bytes;
  std::vector<double> value;
  HostTensor(DType t, size_t n)
      : type(t), bytes(n * size_t(sizeOf(t)), 0xff), value(n) {}
  void set(size_t i, float v) {
    uint32_t bits = encode(type, v);
    std::memcpy(bytes.data() + i * sizeOf(type), &bits, size_t(sizeOf(type)));
    value[i] = decodeElement(type, bytes.data(), i);
  }
  double get(size_t i) const { return decodeElement(type, bytes.data(), i); }
};

/// The inputs of one mLSTM call (B*NH heads of S tokens).
struct MlstmInputs {
  int64_t bh, S;
  int dqk, dv;
  const HostTensor &q, &k, &v, &i, &f;
  const std::vector<float> *c0, *n0, *m0; ///< null: zeros
};

/// Outputs in Real: h (BH*S*DV) and the final C, n, m.
template <class Real> struct MlstmOutputs {
  std::vector<Real> h, C, n, m;
  void init(const MlstmInputs &in) {
    h.assign(size_t(in.bh * in.S * in.dv), 0);
    C.assign(size_t(in.bh * in.dqk * in.dv), 0);
    n.assign(size_t(in.bh * in.dqk), 0);
    m.assign(size_t(in.bh), 0);
  }
  /// Head x's states from the inputs' initial ones (zeros without).
  void initialStates(const MlstmInputs &in, int64_t x) {
    if (!in.c0)
      return;
    const int64_t cs = int64_t(in.dqk) * in.dv;
    for (int64_t e = 0; e < cs; ++e)
      C[size_t(x * cs + e)] = Real((*in.c0)[size_t(x * cs + e)]);
    for (int i = 0; i < in.dqk; ++i)
      n[size_t(x * in.dqk + i)] = Real((*in.n0)[size_t(x * in.dqk + i)]);
    m[size_t(x)] = Real((*in.m0)[size_t(x)]);
  }
};

template <class Real> Real logSigmoid(Real x) {
  return std::min(x, Real(0)) - std::log1p(std::exp(-std::abs(x)));
}

/// The recurrent form, token by token, for head x.
template <class Real>
void recurrentHead(const MlstmInputs &in, int64_t x, Real eps,
                   MlstmOutputs<Real> &out) {
  const int dqk = in.dqk, dv = in.dv;
  out.initialStates(in, x);
  const Real scale = Real(1) / std::sqrt(Real(dqk));
  Real *c = &out.C[size_t(x * dqk * dv)], *nn = &out.n[size_t(x * dqk)];
  Real &mm = out.m[size_t(x)];
  std::vector<Real> qs(static_cast<size_t>(dqk));
  for (int64_t t = 0; t < in.S; ++t) {
    const size_t row = size_t(x * in.S + t);
    const Real lf = logSigmoid(Real(in.f.value[row]));
    const Real it = Real(in.i.value[row]);
    const Real mNew = std::max(lf + mm, it);
    const Real fp = std::exp(lf + mm - mNew), ip = std::exp(it - mNew);
    mm = mNew;
    Real z = 0;
    for (int a = 0; a < dqk; ++a) {
      qs[size_t(a)] = scale * Real(in.q.value[row * dqk + a]);
      nn[a] = fp * nn[a] + ip * Real(in.k.value[row * dqk + a]);
      z += qs[size_t(a)] * nn[a];
    }
    Real *hr = &out.h[row * dv];
    std::fill(hr, hr + dv, Real(0));
    for (int a = 0; a < dqk; ++a) {
      const Real ka = ip * Real(in.k.value[row * dqk + a]);
      Real *ca = c + size_t(a) * dv;
      const double *vr = &in.v.value[row * dv];
      for (int j = 0; j < dv; ++j) {
        ca[j] = fp * ca[j] + ka * Real(vr[j]);
        hr[j] += qs[size_t(a)] * ca[j];
      }
    }
    const Real den = std::max(std::abs(z), std::exp(-mm)) + eps;
    for (int j = 0; j < dv; ++j)
      hr[j] /= den;
  }
}

/// The chunkwise form of the issue, written plainly in fp32 (prefix sums
/// included), chunk length L, for head x; the operands of its products
/// (q-bar, P, K * w, C) rounded to the inputs' dtype (see above).
inline void chunkwiseHead(const MlstmInputs &in, int64_t x, int L, float eps,
                          MlstmOutputs<float> &out) {
  const int dqk = in.dqk, dv = in.dv;
  const DType dt = in.q.type;
  auto op = [dt](float y) { return float(roundTo(dt, y)); };
  out.initialStates(in, x);
  const float scale = 1.f / std::sqrt(float(dqk));
  float *C = &out.C[size_t(x * dqk * dv)], *n = &out.n[size_t(x * dqk)];
  float &m = out.m[size_t(x)];
  std::vector<float> b(static_cast<size_t>(L)), mc(b), a(b), P(b), kw(b);
  // The product operands in the input dtype: C, q-bar of one token.
  std::vector<float> Cop(static_cast<size_t>(dqk) * size_t(dv)),
      qbar(static_cast<size_t>(dqk));
  auto qv = [&](int64_t row, int e) {
    return float(in.q.value[size_t(row) * dqk + e]);
  };
  auto kv = [&](int64_t row, int e) {
    return float(in.k.value[size_t(row) * dqk + e]);
  };
  auto vv = [&](int64_t row, int j) {
    return float(in.v.value[size_t(row) * dv + j]);
  };
  for (int64_t t0 = 0; t0 < in.S; t0 += L) {
    const int len = int(std::min<int64_t>(L, in.S - t0));
    const int64_t r0 = x * in.S + t0;
    float acc = 0;
    for (int t = 0; t < len; ++t) {
      acc += logSigmoid(float(in.f.value[size_t(r0 + t)]));
      b[size_t(t)] = acc;
    }
    const float g = b[size_t(len - 1)];
    auto it = [&](int t) { return float(in.i.value[size_t(r0 + t)]); };
    for (int t = 0; t < len; ++t) {
      float mx = b[size_t(t)] + m;
      for (int s = 0; s <= t; ++s)
        mx = std::max(mx, b[size_t(t)] - b[size_t(s)] + it(s));
      mc[size_t(t)] = mx;
      a[size_t(t)] = it(t) + g - b[size_t(t)];
    }
    for (size_t e = 0; e < Cop.size(); ++e)
      Cop[e] = op(C[e]);
    for (int t = 0; t < len; ++t) {
      const float qf = std::exp(b[size_t(t)] + m - mc[size_t(t)]);
      float z = 0;
      for (int e = 0; e < dqk; ++e) {
        z += scale * qv(r0 + t, e) * qf * n[e];
        qbar[size_t(e)] = op(scale * qv(r0 + t, e) * qf);
      }
      for (int s = 0; s <= t; ++s) {
        float d = 0;
        for (int e = 0; e < dqk; ++e)
          d += scale * qv(r0 + t, e) * kv(r0 + s, e);
        P[size_t(s)] =
            d * std::exp(b[size_t(t)] - b[size_t(s)] + it(s) - mc[size_t(t)]);
        z += P[size_t(s)];
        P[size_t(s)] = op(P[size_t(s)]);
      }
      const float den = std::max(std::abs(z), std::exp(-mc[size_t(t)])) + eps;
      for (int j = 0; j < dv; ++j) {
        float num = 0;
        for (int e = 0; e < dqk; ++e)
          num += qbar[size_t(e)] * Cop[size_t(e) * dv + j];
        for (int s = 0; s <= t; ++s)
          num += P[size_t(s)] * vv(r0 + s, j);
        out.h[size_t((r0 + t) * dv + j)] = num / den;
      }
    }
    float mNew = g + m;
    for (int t = 0; t < len; ++t)
      mNew = std::max(mNew, a[size_t(t)]);
    const float decay = std::exp(g + m - mNew);
    for (int e = 0; e < dqk; ++e) {
      float ns = 0;
      for (int t = 0; t < len; ++t) {
        const float w = kv(r0 + t, e) * std::exp(a[size_t(t)] - mNew);
        ns += w;
        kw[size_t(t)] = op(w);
      }
      n[e] = decay * n[e] + ns;
      for (int j = 0; j < dv; ++j) {
        float cs = 0;
        for (int t = 0; t < len; ++t)
          cs += kw[size_t(t)] * vv(r0 + t, j);
        C[size_t(e) * dv + j] = decay * C[size_t(e) * dv + j] + cs;
      }
    }
    m = mNew;
  }
}

/// The rule's verdict on one output, against both naive implementations.
struct Check {
  double errOurs = 0, errNaive = 0, errOther = 0, maxRef = 0, floor = 0;
  int64_t nonFinite = 0, worst = -1;
  double bound() const { return std::max(2 * errNaive, floor); }
  bool pass() const { return nonFinite == 0 && errOurs <= bound(); }
  std::string describe(const char *what) const {
    char buf[400];
    std::snprintf(buf, sizeof(buf),
                  "%s: max|ours - ref| = %.3g (element %lld, |ref| <= %.3g), "
                  "bound %.3g (2 x naive %.3g, half-ulp floor %.3g; the other "
                  "formulation's naive %.3g), %lld non-finite",
                  what, errOurs, (long long)worst, maxRef, bound(), errNaive,
                  floor, errOther, (long long)nonFinite);
    return buf;
  }
};

/// ours(i) against ref, with naive(i) the same-formulation naive value and
/// other(i) the other formulation's (both already rounded to `t`).
template <class Ours, class Naive, class Other>
Check compare(DType t, size_t count, Ours ours, const std::vector<double> &ref,
              Naive naive, Other other) {
  Check c;
  for (size_t i = 0; i < count; ++i) {
    const double o = ours(i), r = ref[i];
    c.maxRef = std::max(c.maxRef, std::abs(r));
    c.errNaive = std::max(c.errNaive, std::abs(naive(i) - r));
    c.errOther = std::max(c.errOther, std::abs(other(i) - r));
    if (!std::isfinite(o)) {
      ++c.nonFinite;
      continue;
    }
    if (std::abs(o - r) > c.errOurs) {
      c.errOurs = std::abs(o - r);
      c.worst = int64_t(i);
    }
  }
  c.floor = halfUlp(t, c.maxRef);
  return c;
}

} // namespace kgen::mlstm_ref

#endif
