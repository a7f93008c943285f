//===- mlstm.h - mLSTM (xLSTM) forward: chunkwise and recurrent -*- C++ -*-===//
//
// Per (batch, head), with s = DQK^-1/2, l_t = logsigmoid(f_t), i_t raw, the
// recurrent form from (C, n, m) (zeros when not given):
//   m_t = max(l_t + m_{t-1}, i_t), f' = exp(l_t + m_{t-1} - m_t),
//   i' = exp(i_t - m_t), C_t = f' C_{t-1} + i' k_t v_t^T,
//   n_t = f' n_{t-1} + i' k_t,
//   h_t = (s q_t)^T C_t / (max(|(s q_t)^T n_t|, exp(-m_t)) + eps).
//
// Kernels (one thread block per (b*NH + head, DV slice of kBlockDV columns);
// every block keeps the full n and m of its head, so h's normalizer needs no
// communication between slices):
//
//   recurrent  walks the tokens; C slice in registers (kRows rows of 4
//              columns per thread, 16-byte loads and stores), n in shared
//              memory, two barriers per token. Serves tiny S and the
//              decoding step (S = 1, states updated in place: each block
//              reads and writes only its own columns of C, and the last
//              block of a head writes n and m; see HeadCounter).
//   fused      walks the chunks of kChunk tokens, C slice and n in shared
//              memory: per chunk the intra-chunk outputs, then the state
//              update; per-chunk states never leave the block.
//   states +   two phases: `states` walks the chunks doing only the state
//   outputs    recurrence and writes the state entering every chunk to the
//              workspace; `outputs` runs one block per (chunk, slice, head)
//              from that state, in parallel over the chunks.
//   gateSums + gateTerms + fusedWgmma (mlstm_sm90.h)
//              the fused kernel on wgmma, after a pre-pass that scans every
//              chunk's gates in parallel, twice: for its sums, then, with
//              the m entering it composed from the sums before, for its
//              tokens' terms (ChunkTerms), to the workspace.
//   chunkStates + combine + outputs
//              chunk-parallel: `chunkStates` runs one block per (chunk,
//              slice, head), all in parallel, each writing its chunk's own
//              contribution from a zero state with its own stabilizer
//              (C_loc, n_loc, m_loc, g); `combine`, one thread per element
//              of C and n, runs the cheap elementwise recurrence over the
//              chunks and leaves the state entering every chunk where
//              `outputs` (the two-phase one, unchanged) reads it. Three
//              launches, but no chain of chunk steps: for few heads x
//              slices (small heads, B = 1) the states kernel's S / L
//              dependent steps are most of the two-phase time.
//
// Chunk k (length L, the last one may be short), inside: b_t = sum_{r<=t} l_r,
// g = b_L, a_t = i_t + g - b_t; between chunks m^k = max(g + m^{k-1},
// max_t a_t), C^k = exp(g + m^{k-1} - m^k) C^{k-1} + (K * exp(a - m^k))^T V;
// outputs for s <= t: log D_ts = b_t - b_s + i_s, m^comb_t = max(b_t +
// m^{k-1}, max_s log D_ts) (= the recurrent m_t), num = exp(b_t + m^{k-1} -
// m^comb_t) (s q_t)^T C^{k-1} + sum_s (s q_t . k_s) exp(log D_ts -
// m^comb_t) v_s, z likewise with n and 1 for v_s,
// h_t = num / (max(|z|, exp(-m^comb_t)) + eps).
//
// Matrix work: with bf16/f16 inputs and tiles that fit the atoms
// (Config::kMma, see mlstmUsesMma) the chunkwise kernels do their four
// products on tensor cores -- mma.sync m16n8k16 + ldmatrix on NVIDIA, MFMA
// 32x32x8 on AMD, one warp tile of 32x32 on both (WarpMma) -- with fp32
// accumulators (ChunkMma). Otherwise (fp32 inputs, chunk 16, narrow slices)
// they are plain fp32 FMAs from shared memory (Chunk). Gate math and states
// are fp32 throughout.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/common/prelude.h"
#include "kgen/common/shuffle.h"
#include "kgen/mlstm/params.h"
#if KGEN_NVIDIA
#include "kgen/common/mma_sm80.h"
#else
#include "kgen/common/mfma_cdna.h"
#endif

namespace kgen::mlstm {

KGEN_DEVICE float logSigmoid(float x) {
  // min(x, 0) - log(1 + exp(-|x|)): no overflow for either sign.
  return fminf(x, 0.f) - log1pf(expf(-fabsf(x)));
}

template <class T> KGEN_DEVICE float load(const void *p, long long idx) {
  return Convert<T>::toFloat(static_cast<const T *>(p)[idx]);
}

template <class T> KGEN_DEVICE void store(void *p, long long idx, float x) {
  static_cast<T *>(p)[idx] = Convert<T>::fromFloat(x);
}

/// Below every max the gate scans take (their identity for max).
constexpr double kBelowAll = -1e300;

/// An m^{k-1} below every g + m and every log D: gates() from it takes the
/// chunk's own stabilizer (m^k = max_t a_t, m^comb_t = max_{s<=t} log D_ts)
/// and decays whatever state to exp(-inf) = 0, as if the chunk started from
/// none.
constexpr double kNoState = kBelowAll;

template <bool kCond, class A, class B> struct Select { using type = A; };
template <class A, class B> struct Select<false, A, B> { using type = B; };

/// One warp's scan of a chunk's gates, independent of the state entering
/// the chunk: lane l holds tokens l kPer .. l kPer + kPer - 1 (serial within
/// the lane), and butterfly scans over the lanes give each lane the sum and
/// the max of the lanes before it, so the dependent chain is kPer + 3
/// log2(wave) steps, not 3 kChunk. fp64: see Chunk.
template <int kPer> struct GateScan {
  float it[kPer];   ///< i_t (0 past the chunk's length)
  double b[kPer];   ///< b_t = sum_{r<=t} l_r
  double own[kPer]; ///< max_{s<=t} (i_s - b_s)
  double g;         ///< b_L
  double aMax;      ///< max_t a_t, a_t = i_t + g - b_t
};

template <class T, int kL>
KGEN_DEVICE GateScan<(kL + kWaveSize - 1) / kWaveSize>
scanGates(const Params &p, long long row0, int len, int lane) {
  constexpr int kPer = (kL + kWaveSize - 1) / kWaveSize;
  GateScan<kPer> sc;
  const int t0 = lane * kPer;
  double b[kPer], sum = 0; // the lane's own prefix sums of l_t
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
    const int t = t0 + r;
    const bool in = t < len;
    sc.it[r] = in ? load<T>(p.i, row0 + t) : 0.f;
    sum += in ? double(logSigmoid(load<T>(p.f, row0 + t))) : 0.0;
    b[r] = sum;
  }
  // before = the sum of the lanes below, g = every lane's (b_L).
  double before = 0, g = sum;
#pragma unroll
  for (int m = 1; m < kWaveSize; m *= 2) {
    const double other = shuffleXor(g, m);
    if (lane & m)
      before += other;
    g += other;
  }
  // own_t: the lane's own running max of i_s - b_s, then the max of the
  // lanes below.
  double run = kBelowAll, own[kPer];
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
    if (t0 + r < len)
      run = fmax(run, double(sc.it[r]) - (before + b[r]));
    own[r] = run;
  }
  double below = kBelowAll, all = run;
#pragma unroll
  for (int m = 1; m < kWaveSize; m *= 2) {
    const double other = shuffleXor(all, m);
    if (lane & m)
      below = fmax(below, other);
    all = fmax(all, other);
  }
  double aMax = kBelowAll;
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
    sc.b[r] = before + b[r];
    sc.own[r] = fmax(below, own[r]);
    if (t0 + r < len)
      aMax = fmax(aMax, double(sc.it[r]) + (g - sc.b[r]));
  }
#pragma unroll
  for (int m = 1; m < kWaveSize; m *= 2)
    aMax = fmax(aMax, shuffleXor(aMax, m));
  sc.g = g;
  sc.aMax = aMax;
  return sc;
}

/// The chunkwise kernels' shared memory and the steps they are made of.
/// Layout: C slice [kDQK][kBlockDV], n [kDQK], fp32; P [kChunk][kChunk]
/// (the decayed intra-chunk scores), Acc; the gate prefix sums b and m^comb
/// [kChunk] and the m entering the chunk, fp64; four fp32 per-token vectors
/// [kChunk] and two scalars; then Q, K [kChunk][kRow] and V
/// [kChunk][kBlockDV] in the input dtype.
///
/// The prefix sums are fp64 because the exponents of the chunkwise form are
/// differences of them (b_t - b_s, b_t + m - m^comb_t): in fp32 a sum of 64
/// log-gates near -30 carries an absolute error of ~2e-6, which every decay
/// factor would inherit as a relative error, several times the error of
/// the recurrent form in fp32. One warp computes them (gates()).
/// kScratch: the fp32 words of the P region, where the kernel keeps other
/// data than the scores there (0: the kL x kL scores in Acc).
template <class Config, int kScratch = 0> struct Chunk {
  using T = typename Config::Type;
  /// The scores and the output sums. With fp32 inputs they are fp64: where
  /// the normalizer z nearly cancels (h = num / z ill-conditioned), the
  /// chunkwise sums over q.k_s terms lose more than the recurrent loop,
  /// which sums the k_s into n first; fp64 there keeps the chunkwise form as
  /// accurate as the recurrent one in fp32. 16-bit inputs round h far above
  /// that error, and keep fp32.
  using Acc = typename Select<IsSame<T, float>::value, double, float>::type;
  static constexpr int kL = Config::kChunk, kDQK = Config::kDQK,
                       kDV = Config::kDV, kVB = Config::kBlockDV,
                       kThreads = Config::kThreads;
  /// C's fp32 slice, unless ChunkMma keeps it in registers.
  static constexpr int kCFloats = Config::kStateInRegisters ? 0 : kDQK * kVB;
  /// The P region's fp32 words: the scores (kL x kL in Acc), or kScratch.
  static constexpr int kScoreFloats = int(sizeof(Acc) / 4) * kL * kL;
  static constexpr int kPFloats = kScratch > 0 ? kScratch : kScoreFloats;
  static constexpr int kFloats = kCFloats + kDQK + kPFloats + 8 * kL + 8;
  /// Q and K rows are padded by one 32-bit word: the scores read K rows
  /// (and the normalizer Q rows) across a warp, which would otherwise all
  /// fall into one shared-memory bank.
  static constexpr int kRow = kDQK + 4 / int(sizeof(T));
  static constexpr int kBytes =
      (4 * kFloats + int(sizeof(T)) * (2 * kL * kRow + kL * kVB) + 15) / 16 *
      16;
  static_assert(Config::kMma || kBytes == Config::kSmemBytes,
                "kSmemBytes disagrees with the template's smem layout");
  static_assert(kDV % kVB == 0, "kBlockDV divides DV");
  static_assert((kCFloats + kDQK) % 2 == 0 && kPFloats % 2 == 0 && kL % 2 == 0,
                "the fp64 vectors stay 8-byte aligned");

  float *C, *n;
  Acc *P;
  double *bcum, *mcomb;         // per token of the chunk
  double *mState;               // [0]: the m entering the chunk
  // Per token of the chunk; zden is h's denominator (ChunkMma: its
  // reciprocal, one multiply per output instead of a division).
  float *ig, *qfac, *wa, *zden;
  float *scal; // [0] decay exp(g + m^{k-1} - m^k), [1] spare (alignment)
  T *Q, *K, *V;
  int tid;

  KGEN_DEVICE explicit Chunk(unsigned char *smem) : tid(int(threadIdx.x)) {
    float *f = reinterpret_cast<float *>(smem);
    C = f;
    n = C + kCFloats;
    P = reinterpret_cast<Acc *>(n + kDQK);
    bcum = reinterpret_cast<double *>(reinterpret_cast<float *>(P) + kPFloats);
    mcomb = bcum + kL;
    mState = mcomb + kL;
    ig = reinterpret_cast<float *>(mState + 1);
    qfac = ig + kL;
    wa = qfac + kL;
    zden = wa + kL;
    scal = zden + kL;
    Q = reinterpret_cast<T *>(scal + 2);
    K = Q + kL * kRow;
    V = K + kL * kRow;
  }

  /// C slice, n and m from (c, n, m) (rows of cStride floats, the slice at
  /// column j0), or zeros where a pointer is null. kAsState: whether the
  /// block updates this state (ChunkMma keeps it in registers then; the
  /// outputs kernel only reads C).
  template <bool kAsState = true>
  KGEN_DEVICE void loadState(const float *c, long long cStride, int j0,
                             const float *nn, const float *m) const {
    for (int e = tid; e < kDQK * kVB; e += kThreads) {
      const int i = e / kVB, j = e % kVB;
      C[e] = c ? c[i * cStride + j0 + j] : 0.f;
    }
    for (int i = tid; i < kDQK; i += kThreads)
      n[i] = nn ? nn[i] : 0.f;
    if (tid == 0)
      *mState = m ? *m : 0.f;
  }

  KGEN_DEVICE void storeState(float *c, long long cStride, int j0, float *nn,
                              float *m) const {
    if (c)
      for (int e = tid; e < kDQK * kVB; e += kThreads) {
        const int i = e / kVB, j = e % kVB;
        c[i * cStride + j0 + j] = C[e];
      }
    if (nn)
      for (int i = tid; i < kDQK; i += kThreads)
        nn[i] = n[i];
    if (m && tid == 0)
      *m = float(*mState);
  }

  /// Rows t0 .. t0+len of K and the V slice (and Q when kWithQ) to shared
  /// memory; rows past len are left as they are and never read.
  template <bool kWithQ>
  KGEN_DEVICE void loadTokens(const Params &p, long long row0, int j0,
                              int len) const {
    const T *q = static_cast<const T *>(p.q), *k = static_cast<const T *>(p.k),
            *v = static_cast<const T *>(p.v);
    for (int e = tid; e < len * kDQK; e += kThreads) {
      const int t = e / kDQK, i = e % kDQK;
      K[t * kRow + i] = k[row0 * kDQK + e];
      if constexpr (kWithQ)
        Q[t * kRow + i] = q[row0 * kDQK + e];
    }
    for (int e = tid; e < len * kVB; e += kThreads) {
      const int t = e / kVB, j = e % kVB;
      V[e] = v[(row0 + t) * kDV + j0 + j];
    }
  }

  /// loadTokens' copies are plain stores here: the barrier suffices.
  KGEN_DEVICE void tokensLanded() const {}

  /// The first thread that issues the token copies (loadTokens on
  /// cp.async) and L2 prefetches: with several warps, warp 0 is left to the
  /// gate scan, which runs at the same time.
  static constexpr int kCopier0 = kThreads > kWaveSize ? kWaveSize : 0;

  /// Asks L2 for the chunk at rows row0 .. row0+len (K, the V slice, the
  /// gates, and Q when kWithQ), one 128-byte line per thread at a time, so
  /// that its loadTokens, issued a chunk's work later, finds them there.
  /// Threads kCopier0 .. threads - 1 (ChunkWgmma's state warpgroups: the
  /// first 256). NVIDIA only (a hint; elsewhere nothing).
  template <bool kWithQ>
  KGEN_DEVICE void prefetch(const Params &p, long long row0, int j0, int len,
                            int threads = kThreads) const {
#if KGEN_NVIDIA
    constexpr int kLine = 128 / int(sizeof(T)); // elements per line
    constexpr int kVLines = (kVB + kLine - 1) / kLine;
    const T *q = static_cast<const T *>(p.q), *k = static_cast<const T *>(p.k),
            *v = static_cast<const T *>(p.v);
    const int nQK = (len * kDQK + kLine - 1) / kLine, nV = len * kVLines;
    const int n = nQK * (kWithQ ? 2 : 1) + nV + 2;
    // Warp 0 runs the gate scan meanwhile (kCopier0).
    for (int e = tid - kCopier0; e >= 0 && e < n && tid < threads;
         e += threads - kCopier0) {
      const void *at;
      if (e < nQK)
        at = k + row0 * kDQK + e * kLine;
      else if (kWithQ && e < 2 * nQK)
        at = q + row0 * kDQK + (e - nQK) * kLine;
      else if (e < n - 2) {
        const int x = e - nQK * (kWithQ ? 2 : 1);
        at = v + (row0 + x / kVLines) * kDV + j0 + x % kVLines * kLine;
      } else
        at = static_cast<const T *>(e == n - 2 ? p.f : p.i) + row0;
      sm80::prefetchL2(at);
    }
#endif
  }

  /// The gate prefix sums of the chunk: b, the combined stabilizer m^comb,
  /// the decays of the outputs and of the state update, by warp 0 alone
  /// (scanGates, then finishGate per token). The other warps return at
  /// once. Call with every thread (the caller's barrier publishes the
  /// results). Sets *mState to m^k (the m leaving the chunk) and scal[0] to
  /// the decay of C^{k-1}.
  KGEN_DEVICE void gates(const Params &p, long long row0, int len) const {
    constexpr int kPer = (kL + kWaveSize - 1) / kWaveSize;
    if (tid >= kWaveSize)
      return;
    syncWave(); // a lane-0 store to *mState before the call is seen
    const double mPrev = *mState;
    const GateScan<kPer> sc = scanGates<T, kL>(p, row0, len, tid);
    const double mNext = fmax(sc.g + mPrev, sc.aMax);
#pragma unroll
    for (int r = 0; r < kPer; ++r) {
      const int t = tid * kPer + r;
      if (t < len)
        finishGate(t, sc.it[r], sc.b[r], sc.own[r], sc.g, mPrev, mNext);
    }
    leaveChunk(sc.g, mPrev, mNext);
  }

  /// The end of the gates, on the warp that read *mState: once every lane
  /// has, lane 0 sets it to m^k and scal[0] to C^{k-1}'s decay.
  KGEN_DEVICE void leaveChunk(double g, double mPrev, double mNext) const {
    syncWave();
    if (tid == 0) {
      scal[0] = expf(float(g + mPrev - mNext));
      *mState = mNext;
    }
  }

  /// Token t's gate terms from its scan (GateScan) and the m entering and
  /// leaving the chunk: best = max(m^{k-1}, own_t), m^comb_t = b_t + best,
  /// qfac_t = exp(b_t + m^{k-1} - m^comb_t), w_t = exp(a_t - m^k). Returns
  /// m^comb_t.
  KGEN_DEVICE double finishGate(int t, float it, double bt, double own,
                                double g, double mPrev, double mNext) const {
    const double best = fmax(mPrev, own);
    bcum[t] = bt;
    ig[t] = it;
    mcomb[t] = bt + best;
    qfac[t] = expf(float(mPrev - best));
    wa[t] = expf(float(it + (g - bt) - mNext));
    return bt + best;
  }

  /// P[t][s] = (s q_t . k_s) exp(log D_ts - m^comb_t) for s <= t < len, else
  /// 0.
  KGEN_DEVICE void scores(int len) const {
    const Acc scale = Acc(1) / Acc(sqrtf(float(kDQK)));
    for (int e = tid; e < kL * kL; e += kThreads) {
      const int t = e / kL, s = e % kL;
      Acc x = 0;
      if (t < len && s <= t) {
        Acc dot = 0;
        for (int i = 0; i < kDQK; ++i)
          dot += Acc(Convert<T>::toFloat(Q[t * kRow + i])) *
                 Acc(Convert<T>::toFloat(K[s * kRow + i]));
        x = scale * dot *
            Acc(expf(float(bcum[t] - bcum[s] + ig[s] - mcomb[t])));
      }
      P[e] = x;
    }
  }

  /// The outputs kernel takes its gates and scores before the state
  /// entering the chunk has arrived (the kernel writing it may still run):
  /// from *mState = kNoState, so m^comb_t is the chunk's own max_{s<=t}
  /// log D_ts and qfac_t = 0. Once loadState has put m^{k-1} in *mState and
  /// a barrier followed, this sets m^comb_t = max(b_t + m^{k-1}, that one)
  /// and qfac_t, and puts the factor exp(old - new m^comb_t) <= 1 of P's row
  /// t in wa (the outputs kernel updates no state); rescaleScores applies
  /// it. P is then what scores() takes from the state, up to one rounding.
  KGEN_DEVICE void restabilize(int len) const {
    const double m = *mState;
    for (int t = tid; t < len; t += kThreads) {
      const double bt = bcum[t], own = mcomb[t], comb = fmax(bt + m, own);
      mcomb[t] = comb;
      qfac[t] = expf(float(bt + m - comb));
      wa[t] = expf(float(own - comb));
    }
  }

  /// P's rows times restabilize's factors; call after a barrier that
  /// follows restabilize.
  KGEN_DEVICE void rescaleScores(int len) const {
    for (int e = tid; e < len * kL; e += kThreads)
      P[e] *= Acc(wa[e / kL]);
  }

  /// The normalizer z_t = exp(b_t + m^{k-1} - m^comb_t) (s q_t)^T n +
  /// sum_s P[t][s], and from it h's denominator max(|z_t|, exp(-m^comb_t))
  /// + eps to zden[t]; reads n and P.
  KGEN_DEVICE void normalizer(int len, float eps) const {
    const Acc scale = Acc(1) / Acc(sqrtf(float(kDQK)));
    for (int t = tid; t < len; t += kThreads) {
      Acc dot = 0;
      for (int i = 0; i < kDQK; ++i)
        dot += Acc(Convert<T>::toFloat(Q[t * kRow + i])) * Acc(n[i]);
      Acc z = Acc(qfac[t]) * scale * dot;
      for (int s = 0; s <= t; ++s)
        z += P[t * kL + s];
      zden[t] = fmaxf(fabsf(float(z)), expf(float(-mcomb[t]))) + eps;
    }
  }

  /// h rows t0 .. t0+len, columns j0 .. j0+kVB; reads C, Q, V, P.
  KGEN_DEVICE void outputs(const Params &p, long long row0, int j0,
                           int len) const {
    const Acc scale = Acc(1) / Acc(sqrtf(float(kDQK)));
    for (int e = tid; e < len * kVB; e += kThreads) {
      const int t = e / kVB, j = e % kVB;
      Acc inter = 0;
      for (int i = 0; i < kDQK; ++i)
        inter +=
            Acc(Convert<T>::toFloat(Q[t * kRow + i])) * Acc(C[i * kVB + j]);
      Acc num = Acc(qfac[t]) * scale * inter;
      for (int s = 0; s <= t; ++s)
        num += P[t * kL + s] * Acc(Convert<T>::toFloat(V[s * kVB + j]));
      store<T>(p.h, (row0 + t) * kDV + j0 + j, float(num / Acc(zden[t])));
    }
  }

  /// C = decay C + (K * wa)^T V, n = decay n + (K * wa)^T 1.
  KGEN_DEVICE void update(int len) const {
    const float decay = scal[0];
    for (int e = tid; e < kDQK * kVB; e += kThreads) {
      const int i = e / kVB, j = e % kVB;
      float acc = 0.f;
      for (int t = 0; t < len; ++t)
        acc += Convert<T>::toFloat(K[t * kRow + i]) * wa[t] *
               Convert<T>::toFloat(V[t * kVB + j]);
      C[e] = decay * C[e] + acc;
    }
    for (int i = tid; i < kDQK; i += kThreads) {
      float acc = 0.f;
      for (int t = 0; t < len; ++t)
        acc += Convert<T>::toFloat(K[t * kRow + i]) * wa[t];
      n[i] = decay * n[i] + acc;
    }
  }
};

/// Four fp32, one 16-byte access (C rows, n, P rows).
using F4 = Vec<float, 4>;

// WarpMma's members differ by vendor and do not depend on a kernel's
// Config, so in the host emulator, which links NVIDIA and AMD kernels into
// one program, the two layouts would share one symbol (ASan caught the AMD
// kernels' frames written by the NVIDIA constructor). An inline namespace
// per vendor keeps them apart; a device compile sees one vendor only.
#if KGEN_NVIDIA
inline namespace nvidia {
#else
inline namespace amd {
#endif

/// One warp's (wavefront's) 32x32 fp32 tile of D += A B from shared memory,
/// the same tile on both vendors: on NVIDIA 2 x 4 mma.sync m16n8k16 per 16
/// of k with ldmatrix fragments, on AMD one MFMA 32x32x8 per 8 of k. A is
/// [m][k] at a[m * lda + k] (kTransA: a[k * lda + m]); B is [k][n] at
/// b[n * ldb + k] (k contiguous) or, kTransB, at b[k * ldb + n]. Leading
/// dimensions are in elements and keep rows 16-byte aligned; m0, n0, k are
/// multiples of 32, 32 and 16. run() takes the k-steps of 16 from kBegin
/// every kStep (split-k: the warps of one tile take every kStep-th step,
/// see ChunkMma::splitK). Every lane of the warp calls together.
template <class T, bool kTransA, bool kTransB> struct WarpMma {
#if KGEN_NVIDIA
  float acc[2][4][4];
#else
  cdna::f32x16 acc;
#endif
  int lane;

  KGEN_DEVICE WarpMma() : lane(0) {}
  KGEN_DEVICE explicit WarpMma(int laneId) : lane(laneId) {
#if KGEN_NVIDIA
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j)
        for (int e = 0; e < 4; ++e)
          acc[i][j][e] = 0.f;
#else
    acc = cdna::f32x16{};
#endif
  }

  KGEN_DEVICE void run(const T *a, int lda, const T *b, int ldb, int m0, int n0,
                       int kLen, int kBegin = 0, int kStep = 16) {
#if KGEN_NVIDIA
    const int q = lane / 8, r = lane % 8;
    // Two k-steps in flight, not the whole loop: fully unrolled, the 16-warp
    // states kernel of 64/64 c128 spilled ~400 bytes at its 128 registers.
#pragma unroll 2
    for (int k0 = kBegin; k0 < kLen; k0 += kStep) {
      uint32_t af[2][4], bf[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        // a[0..3] = A[g][k..], A[g+8][k..], A[g][k+8..], A[g+8][k+8..].
        const int m = m0 + 16 * i;
        const T *at = kTransA ? a + (k0 + r + 8 * (q / 2)) * lda + m + 8 * (q % 2)
                              : a + (m + lane % 16) * lda + k0 + 8 * (lane / 16);
        sm80::ldmatrixX4<kTransA>(af[i], sm80::smemAddress(at));
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        // Two n8 tiles: {b[0], b[1]} of tile 2j and of tile 2j+1.
        const int n = n0 + 16 * j;
        const T *bt = kTransB ? b + (k0 + r + 8 * (q % 2)) * ldb + n + 8 * (q / 2)
                              : b + (n + r + 8 * (q / 2)) * ldb + k0 + 8 * (q % 2);
        sm80::ldmatrixX4<kTransB>(bf[j], sm80::smemAddress(bt));
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t bb[2] = {bf[j / 2][2 * (j % 2)],
                                  bf[j / 2][2 * (j % 2) + 1]};
          sm80::mma16816<T>(acc[i][j], af[i], bb);
        }
    }
#else
    const uint16_t *a16 = reinterpret_cast<const uint16_t *>(a);
    const uint16_t *b16 = reinterpret_cast<const uint16_t *>(b);
    const int mn = lane % 32, kq = 4 * (lane / 32);
    for (int k1 = kBegin; k1 < kLen; k1 += kStep) {
#pragma unroll
      for (int k0 = k1; k0 < k1 + 16; k0 += 8) {
        cdna::u16x4 av, bv;
        if constexpr (kTransA) {
          const uint16_t *c = a16 + (k0 + kq) * lda + m0 + mn;
          av = cdna::u16x4{c[0], c[lda], c[2 * lda], c[3 * lda]};
        } else {
          av = *reinterpret_cast<const cdna::u16x4 *>(a16 + (m0 + mn) * lda +
                                                      k0 + kq);
        }
        if constexpr (kTransB) {
          const uint16_t *c = b16 + (k0 + kq) * ldb + n0 + mn;
          bv = cdna::u16x4{c[0], c[ldb], c[2 * ldb], c[3 * ldb]};
        } else {
          bv = *reinterpret_cast<const cdna::u16x4 *>(b16 + (n0 + mn) * ldb +
                                                      k0 + kq);
        }
        acc = cdna::mfma32x32x8<T>(av, bv, acc);
      }
    }
#endif
  }

  /// Elements per lane: a 32x32 tile over the warp.
  static constexpr int kPerLane = 32 * 32 / kWaveSize;

  /// This lane's accumulators to a 32x32 fp32 scratch tile, element e at
  /// e * wave + lane (the lanes of one store hit distinct banks); at() gives
  /// the element's row and column.
  KGEN_DEVICE void save(float *s) const {
#if KGEN_NVIDIA
    const float *x = &acc[0][0][0];
#else
    const cdna::f32x16 &x = acc;
#endif
#pragma unroll
    for (int e = 0; e < kPerLane; ++e)
      s[e * kWaveSize + lane] = x[e];
  }

  /// Row and column of element e of `lane` (save()'s order) in the tile at
  /// (m0, n0): mma.sync's C fragment acc[i][j][e % 4] on NVIDIA, MFMA
  /// 32x32's 16 rows per lane on AMD.
  KGEN_DEVICE static void at(int lane, int e, int m0, int n0, int &row,
                             int &col) {
#if KGEN_NVIDIA
    row = m0 + 16 * (e / 16) + lane / 4 + 8 * (e % 4 / 2);
    col = n0 + 8 * (e / 4 % 4) + 2 * (lane % 4) + e % 2;
#else
    row = m0 + 8 * (e / 4) + 4 * (lane / 32) + e % 4;
    col = n0 + lane % 32;
#endif
  }

  /// f(row, col, value&) for every element of the tile this lane holds.
  template <class F> KGEN_DEVICE void forEach(int m0, int n0, F f) {
#if KGEN_NVIDIA
    float *x = &acc[0][0][0];
#else
    cdna::f32x16 &x = acc;
#endif
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      int row, col;
      at(lane, e, m0, n0, row, col);
      float y = x[e];
      f(row, col, y);
      x[e] = y;
    }
  }
};

} // inline namespace nvidia / amd

/// The chunkwise steps on tensor cores (16-bit inputs; Config::kMma). Same
/// interface and per-token vectors as Chunk, whose gates() and storeState()
/// it reuses; the matrix operands live in shared memory in the input dtype
/// with rows padded by 8 elements (16 bytes: ldmatrix's eight row addresses
/// then fall into distinct bank groups):
///   Q, K [kChunk][kDQK + 8]          the tokens (rows past the chunk zero)
///   V    [kChunk][kBlockDV + 8]      (rows past the chunk zero)
///   Pp   [kChunk][kChunk + 8]     the decayed scores P
///   Wp   [kChunk][kBlockDV + 8]   diag(exp(a - m^k)) V, in P's place
///                                 (update follows outputs)
///   Cp   [kDQK][kBlockDV + 8]     the state C
/// and, in fp32, the split-k scratch (splitK): kScratchTiles 32x32 tiles.
/// The last three are fp32 values rounded to the input dtype for the atoms,
/// as a 16-bit tensor-core implementation does (the xLSTM project's Triton
/// kernels too); the tests hold the results to 2x the error of a naive
/// chunkwise implementation that rounds the same operands
/// (lib/Runtime/MlstmHostReference.h), the same-dtype rule. The state
/// itself stays fp32 (C, the update's accumulators).
/// Products (fp32 accumulators):
///   scores   S = Q K^T (tiles above the diagonal skipped), P = mask(scale S
///            * exp(log D - m^comb)) to fp32 P (the normalizer's row sums)
///            and to Pp
///   outputs  num = qfac * scale * Q C + P V in one accumulator: Q C first,
///            scaled per row, then P V with k up to the tile's diagonal
///   update   C = decay C + K^T (diag(w) V): A = K read transposed; the
///            epilogue writes C and Cp.
/// The state update is written as K^T (diag(w) V) rather than (K w)^T V so
/// the fp32 factor lands in the small kChunk x kBlockDV operand.
///
/// Each product has few 32x32 tiles next to the block's warps (the scores
/// of a 32-token chunk are one tile, with k = DQK = 256 for xLSTM-7B), so
/// the warps split k: a product of n tiles runs on n x split warps (split:
/// Config::kSplit*, chosen by mlstmSplitK in lib/Codegen/MlstmProblem.cpp),
/// warp w taking tile w / split and the k-steps of 16 numbered w % split
/// modulo split. The slices leave their partial tiles in the scratch, and
/// after a barrier each sums a 1 / split share of the tile's elements and
/// runs the epilogue on them (splitK). Only the scores'
/// causal tiles run: the ones above the diagonal are never read (the
/// normalizer stops at s = t, P V at the tile's diagonal).
template <class Config> struct ChunkMma : Chunk<Config> {
  using Base = Chunk<Config>;
  using T = typename Config::Type;
  static constexpr int kL = Config::kChunk, kDQK = Config::kDQK,
                       kVB = Config::kBlockDV, kThreads = Config::kThreads;
  static constexpr int kWarps = kThreads / kWaveSize;
  static constexpr int kRowQ = kDQK + 8, kRowL = kL + 8, kRowV = kVB + 8;
  static constexpr int kFront = (4 * Base::kFloats + 15) / 16 * 16;
  /// P (scores, outputs) and diag(w) V (update) share one region.
  static constexpr int kRegionPW =
      kL * kRowL > kL * kRowV ? kL * kRowL : kL * kRowV;
  /// Tiles and split (warps per tile, mlstmSplitK) of the three products:
  /// the scores' causal tiles over DQK, outputs (num) over DQK, the update
  /// over the chunk.
  static constexpr int kTilesL = kL / 32, kTilesV = kVB / 32;
  static constexpr int kTilesS = kTilesL * (kTilesL + 1) / 2,
                       kTilesO = kTilesL * kTilesV,
                       kTilesU = kDQK / 32 * kTilesV;
  static constexpr int kSplitS = Config::kSplitS, kSplitO = Config::kSplitO,
                       kSplitU = Config::kSplitU;
  static constexpr int max3(int a, int b, int c) {
    return a > b ? (a > c ? a : c) : (b > c ? b : c);
  }
  /// Scratch tiles of a product's partial sums (splitK).
  static constexpr int partials(int tiles, int split) {
    return split > 1 ? tiles * split : 0;
  }
  static constexpr int kPartialsS = partials(kTilesS, kSplitS),
                       kPartialsO = partials(kTilesO, kSplitO),
                       kPartialsU = partials(kTilesU, kSplitU);
  static constexpr int kScratchTiles = max3(kPartialsS, kPartialsO, kPartialsU);
  static constexpr int kOperands =
      2 * (2 * kL * kRowQ + kL * kRowV + kRegionPW + kDQK * kRowV);
  static constexpr int kBytes = kFront + kOperands + 4 * 1024 * kScratchTiles;
  static_assert(kBytes == Config::kSmemBytes,
                "kSmemBytes disagrees with ChunkMma's smem layout");
  static_assert(kL % 32 == 0 && kDQK % 32 == 0 && kVB % 32 == 0,
                "the 32x32 warp tiles cover the chunk, DQK and the slice");
  static_assert(!IsSame<T, float>::value, "tensor cores take 16-bit inputs");
  /// Eight 16-bit elements, one 16-byte shared-memory access.
  using T8 = Vec<T, 8>;
  /// With Config::kStateInRegisters (mlstmStateInRegisters) the fp32 C is
  /// not in shared memory: warp w holds the update's tiles w, w + kWarps,
  /// ... as accumulators that live across the chunks (state[r]), so the
  /// update reads and writes no fp32 C, and writes only Cp.
  static constexpr bool kRegs = Config::kStateInRegisters;
  static constexpr int kOwn = (kTilesU + kWarps - 1) / kWarps;
  using StateMma = WarpMma<T, true, true>;

  T *Pp, *Cp, *Wp; // P, C, diag(w) V in the input dtype
  float *scratch;  // kScratchTiles tiles of 32x32 (WarpMma::save's order)
  int warp, lane;
  mutable StateMma state[kRegs ? kOwn : 1];

  KGEN_DEVICE explicit ChunkMma(unsigned char *smem)
      : Base(smem), warp(int(threadIdx.x) / kWaveSize),
        lane(int(threadIdx.x) % kWaveSize) {
#pragma unroll
    for (int r = 0; r < (kRegs ? kOwn : 1); ++r)
      state[r] = StateMma(lane);
    T *x = reinterpret_cast<T *>(smem + kFront);
    this->Q = x;
    this->K = this->Q + kL * kRowQ;
    this->V = this->K + kL * kRowQ;
    Pp = this->V + kL * kRowV;
    Wp = Pp;
    Cp = Pp + kRegionPW;
    scratch = reinterpret_cast<float *>(smem + kFront + kOperands);
  }

  /// Runs `product` over the whole k range of each of this warp's tiles
  /// (warp, warp + kWarps, ...) and hands its accumulators, with the tile's
  /// origin, to body(mma, m0, n0).
  template <int kTiles, class Mma, class Origin, class Product, class Body>
  KGEN_DEVICE void eachOwnTile(Origin origin, Product product,
                               Body body) const {
    for (int tile = warp; tile < kTiles; tile += kWarps) {
      Mma mma(lane);
      product(tile, mma, 0, 16);
      int m0, n0;
      origin(tile, m0, n0);
      body(mma, m0, n0);
    }
  }

  /// One product of kTiles warp tiles split kSplit ways (see above):
  /// origin(tile, m0, n0) places a tile, product(tile, mma, kBegin, kStep)
  /// accumulates the warp's k-steps, epilogue(row, col, x) consumes each
  /// element of the whole tile. Call with every thread; with kSplit > 1 it
  /// holds one barrier, and the epilogue of a tile is spread over its
  /// slices too: slice s sums elements s, s + kSplit, ... of every lane's
  /// partials (in slice order: the result does not depend on timing).
  template <int kTiles, int kSplit, class Mma, class Origin, class Product,
            class Epilogue>
  KGEN_DEVICE void splitK(Origin origin, Product product,
                          Epilogue epilogue) const {
    if constexpr (kSplit == 1) {
      eachOwnTile<kTiles, Mma>(origin, product, [&](Mma &mma, int m0, int n0) {
        mma.forEach(m0, n0, [&](int r, int c, float &x) { epilogue(r, c, x); });
      });
    } else {
      static_assert(kTiles * kSplit <= kWarps, "one item per warp");
      static_assert(kSplit <= Mma::kPerLane, "every slice has elements");
      const int tile = warp / kSplit, slice = warp % kSplit;
      const bool mine = tile < kTiles;
      const float *const part = scratch + tile * kSplit * 1024;
      if (mine) {
        Mma mma(lane);
        product(tile, mma, 16 * slice, 16 * kSplit);
        mma.save(scratch + (tile * kSplit + slice) * 1024);
      }
      __syncthreads();
      if (mine) {
        int m0, n0;
        origin(tile, m0, n0);
        for (int e = slice; e < Mma::kPerLane; e += kSplit) {
          float x = 0.f;
          for (int q = 0; q < kSplit; ++q)
            x += part[q * 1024 + e * kWaveSize + lane];
          int row, col;
          Mma::at(lane, e, m0, n0, row, col);
          epilogue(row, col, x);
        }
      }
    }
  }

  /// Where warp w's r-th tile of the state sits (kRegs), or false past
  /// the last tile.
  KGEN_DEVICE bool stateTile(int r, int &m0, int &n0) const {
    const int tile = warp + r * kWarps;
    m0 = 32 * (tile / kTilesV);
    n0 = 32 * (tile % kTilesV);
    return tile < kTilesU;
  }

  template <bool kAsState = true>
  KGEN_DEVICE void loadState(const float *c, long long cStride, int j0,
                             const float *nn, const float *m) const {
    if constexpr (kRegs && kAsState)
#pragma unroll
      for (int r = 0; r < kOwn; ++r) {
        int m0, n0;
        if (stateTile(r, m0, n0))
          state[r].forEach(m0, n0, [&](int i, int j, float &x) {
            x = c ? c[i * cStride + j0 + j] : 0.f;
          });
      }
    // n and m first, to registers: stored after C, so that their loads go
    // out with C's and not a round trip behind them.
    constexpr int kPerN = (kDQK + kThreads - 1) / kThreads;
    float nv[kPerN];
#pragma unroll
    for (int r = 0; r < kPerN; ++r) {
      const int i = this->tid + r * kThreads;
      nv[r] = nn && i < kDQK ? nn[i] : 0.f;
    }
    const float mv = m && this->tid == 0 ? *m : 0.f;
    // Four columns per thread and step, kBatch steps' loads issued before
    // their stores (the outputs kernel starts with a whole C slice to read).
    constexpr int kV4 = kVB / 4, kN = kDQK * kV4, kBatch = 8;
    const bool vec = (((unsigned long long)(c) | (unsigned long long)(j0)*4 |
                       (unsigned long long)(cStride)*4) %
                      16) == 0;
    for (int e0 = this->tid; e0 < kN; e0 += kBatch * kThreads) {
      F4 v[kBatch];
#pragma unroll
      for (int r = 0; r < kBatch; ++r) {
        const int e = e0 + r * kThreads, i = e / kV4, j = 4 * (e % kV4);
        v[r] = F4{};
        if (c && e < kN) {
          const float *at = c + i * cStride + j0 + j;
          if (vec)
            v[r] = *reinterpret_cast<const F4 *>(at);
          else
            v[r] = F4{{at[0], at[1], at[2], at[3]}};
        }
      }
#pragma unroll
      for (int r = 0; r < kBatch; ++r) {
        const int e = e0 + r * kThreads, i = e / kV4, j = 4 * (e % kV4);
        if (e < kN)
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            if constexpr (!kRegs)
              this->C[i * kVB + j + u] = v[r].x[u];
            Cp[i * kRowV + j + u] = Convert<T>::fromFloat(v[r].x[u]);
          }
      }
    }
#pragma unroll
    for (int r = 0; r < kPerN; ++r)
      if (this->tid + r * kThreads < kDQK)
        this->n[this->tid + r * kThreads] = nv[r];
    if (this->tid == 0)
      *this->mState = mv;
  }

  /// Chunk::storeState, C from the warps' tiles where they hold it.
  KGEN_DEVICE void storeState(float *c, long long cStride, int j0, float *nn,
                              float *m) const {
    if constexpr (kRegs) {
      if (c)
#pragma unroll
        for (int r = 0; r < kOwn; ++r) {
          int m0, n0;
          if (stateTile(r, m0, n0))
            state[r].forEach(m0, n0, [&](int i, int j, float &x) {
              c[i * cStride + j0 + j] = x;
            });
        }
      Base::storeState(nullptr, cStride, j0, nn, m);
    } else {
      Base::storeState(c, cStride, j0, nn, m);
    }
  }

  /// The chunk's rows of K and the V slice (and Q when kWithQ); rows past
  /// len are zero, since the products run over whole tiles.
  template <bool kWithQ>
  KGEN_DEVICE void loadTokens(const Params &p, long long row0, int j0,
                              int len) const {
    const T *q = static_cast<const T *>(p.q), *k = static_cast<const T *>(p.k),
            *v = static_cast<const T *>(p.v);
    const T zero = Convert<T>::fromFloat(0.f);
    // 16 bytes (8 elements) at a time where the tensors are 16-byte aligned
    // (rows are: DQK and DV are multiples of 16, slices of 32).
    if (((unsigned long long)(q) | (unsigned long long)(k) |
         (unsigned long long)(v)) %
            16 ==
        0) {
      constexpr int kQv = kDQK / 8, kVv = kVB / 8;
      constexpr int kNK = kL * kQv, kNV = kL * kVv;
#if KGEN_NVIDIA
      // cp.async: every copy of the chunk in flight at once, no registers
      // in between; rows past len are zero-filled. tokensLanded() waits.
      // Warp 0 leaves the copies to the others and goes to the gate scan,
      // whose global loads and serial steps are the chunk's first chain
      // (the other warps waited ~10% of the 7B fused kernel's time at the
      // barrier after it).
      constexpr int kCopiers = kThreads - Base::kCopier0;
      const int first = this->tid - Base::kCopier0;
      for (int e = first; e >= 0 && e < kNK; e += kCopiers) {
        const int t = e / kQv, i = 8 * (e % kQv);
        const long long src = (row0 + (t < len ? t : 0)) * kDQK + i;
        sm80::cpAsync<16>(sm80::smemAddress(this->K + t * kRowQ + i), k + src,
                          t < len);
        if constexpr (kWithQ)
          sm80::cpAsync<16>(sm80::smemAddress(this->Q + t * kRowQ + i),
                            q + src, t < len);
      }
      for (int e = first; e >= 0 && e < kNV; e += kCopiers) {
        const int t = e / kVv, j = 8 * (e % kVv);
        sm80::cpAsync<16>(
            sm80::smemAddress(this->V + t * kRowV + j),
            v + (row0 + (t < len ? t : 0)) * Config::kDV + j0 + j, t < len);
      }
      sm80::cpAsyncCommit();
      return;
#endif
      // One index space over K, Q, V; each thread issues kBatch loads
      // before it stores them, so their latencies overlap.
      constexpr int kNQ = kWithQ ? kNK : 0;
      constexpr int kN = kNK + kNQ + kNV, kBatch = 8;
      for (int e0 = this->tid; e0 < kN; e0 += kBatch * kThreads) {
        T8 x[kBatch];
#pragma unroll
        for (int r = 0; r < kBatch; ++r) {
          int e = e0 + r * kThreads;
          x[r] = T8{};
          if (e < kNK + kNQ) {
            const T *src = e < kNK ? k : q;
            e = e < kNK ? e : e - kNK;
            const int t = e / kQv, i = 8 * (e % kQv);
            if (t < len)
              x[r] =
                  *reinterpret_cast<const T8 *>(src + (row0 + t) * kDQK + i);
          } else if (e < kN) {
            e -= kNK + kNQ;
            const int t = e / kVv, j = 8 * (e % kVv);
            if (t < len)
              x[r] = *reinterpret_cast<const T8 *>(
                  v + (row0 + t) * Config::kDV + j0 + j);
          }
        }
#pragma unroll
        for (int r = 0; r < kBatch; ++r) {
          int e = e0 + r * kThreads;
          if (e < kNK + kNQ) {
            T *dst = e < kNK ? this->K : this->Q;
            e = e < kNK ? e : e - kNK;
            *reinterpret_cast<T8 *>(dst + e / kQv * kRowQ + 8 * (e % kQv)) =
                x[r];
          } else if (e < kN) {
            e -= kNK + kNQ;
            *reinterpret_cast<T8 *>(this->V + e / kVv * kRowV +
                                     8 * (e % kVv)) = x[r];
          }
        }
      }
      return;
    }
    for (int e = this->tid; e < kL * kDQK; e += kThreads) {
      const int t = e / kDQK, i = e % kDQK;
      const bool in = t < len;
      this->K[t * kRowQ + i] = in ? k[row0 * kDQK + e] : zero;
      if constexpr (kWithQ)
        this->Q[t * kRowQ + i] = in ? q[row0 * kDQK + e] : zero;
    }
    for (int e = this->tid; e < kL * kVB; e += kThreads) {
      const int t = e / kVB, j = e % kVB;
      this->V[t * kRowV + j] =
          t < len ? v[(row0 + t) * Config::kDV + j0 + j] : zero;
    }
  }

  /// Waits for this thread's copies of loadTokens; the caller's barrier
  /// then publishes every thread's.
  KGEN_DEVICE void tokensLanded() const {
#if KGEN_NVIDIA
    sm80::cpAsyncWait<0>();
#endif
  }

  KGEN_DEVICE void scores(int len) const {
    const float scale = 1.f / sqrtf(float(kDQK));
    using Mma = WarpMma<T, false, false>;
    // Causal tile c is (mi, ni) with c = mi (mi + 1) / 2 + ni, ni <= mi.
    auto origin = [](int c, int &m0, int &n0) {
      int mi = 0;
      while ((mi + 1) * (mi + 2) / 2 <= c)
        ++mi;
      m0 = 32 * mi;
      n0 = 32 * (c - mi * (mi + 1) / 2);
    };
    splitK<kTilesS, kSplitS, Mma>(
        origin,
        [&](int tile, Mma &mma, int kBegin, int kStep) {
          int m0, n0;
          origin(tile, m0, n0);
          mma.run(this->Q, kRowQ, this->K, kRowQ, m0, n0, kDQK, kBegin, kStep);
        },
        [&](int t, int s, float x) {
          float y = 0.f;
          if (t < len && s <= t)
            y = scale * x *
                expf(float(this->bcum[t] - this->bcum[s] + this->ig[s] -
                           this->mcomb[t]));
          this->P[t * kL + s] = y;
          Pp[t * kRowL + s] = Convert<T>::fromFloat(y);
        });
  }

  /// Chunk::rescaleScores, four fp32 of P a step, writing the rescaled rows
  /// to P's 16-bit copy too (P V's operand).
  KGEN_DEVICE void rescaleScores(int len) const {
    using T4 = Vec<T, 4>;
    for (int e = this->tid; e < len * kL / 4; e += kThreads) {
      const int t = 4 * e / kL, s = 4 * e % kL;
      const float r = this->wa[t];
      F4 x = *reinterpret_cast<const F4 *>(this->P + t * kL + s);
      T4 y;
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        x.x[u] *= r;
        y.x[u] = Convert<T>::fromFloat(x.x[u]);
      }
      *reinterpret_cast<F4 *>(this->P + t * kL + s) = x;
      *reinterpret_cast<T4 *>(Pp + t * kRowL + s) = y;
    }
  }

  /// z_t and h's denominator as Chunk::normalizer (its reciprocal to
  /// zden), kG consecutive lanes
  /// per row (every thread of the block busy: one warp per row left a
  /// chain of dependent shared loads and shuffles per row, ~19% of the 7B
  /// fused kernel's stall samples), 16-byte loads (8 elements of q_t, 4 of
  /// n and of P's row), then a butterfly sum within the group. P's row is
  /// read in fours up to the one holding t: the rest of that four lies in
  /// the diagonal tile, where the scores wrote zeros.
  KGEN_DEVICE void normalizer(int len, float eps) const {
    constexpr int kPerRow = kThreads / kL;
    constexpr int kG = kPerRow >= 32 ? 32 : kPerRow >= 1 ? kPerRow : 1;
    static_assert((kG & (kG - 1)) == 0 && kWaveSize % kG == 0,
                  "a row's group is a power of two within one warp");
    static_assert(kThreads / kG <= kL, "rows for every group");
    static_assert(kDQK % 8 == 0 && kL % 4 == 0, "16-byte steps");
    const float scale = 1.f / sqrtf(float(kDQK));
    const int g = this->tid % kG;
    // The same trip count on every lane: the shuffles take the whole warp.
    for (int t0 = 0; t0 < kL; t0 += kThreads / kG) {
      const int t = t0 + this->tid / kG;
      const bool in = t < len;
      float d0 = 0.f, d1 = 0.f, row = 0.f;
      if (in) {
#pragma unroll 4
        for (int i = 8 * g; i < kDQK; i += 8 * kG) {
          const T8 q8 = *reinterpret_cast<const T8 *>(this->Q + t * kRowQ + i);
          const F4 na = *reinterpret_cast<const F4 *>(this->n + i);
          const F4 nb = *reinterpret_cast<const F4 *>(this->n + i + 4);
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            d0 += Convert<T>::toFloat(q8.x[u]) * na.x[u];
            d1 += Convert<T>::toFloat(q8.x[4 + u]) * nb.x[u];
          }
        }
        for (int s = 4 * g; s <= t; s += 4 * kG) {
          const F4 pr = *reinterpret_cast<const F4 *>(this->P + t * kL + s);
          row += (pr.x[0] + pr.x[1]) + (pr.x[2] + pr.x[3]);
        }
      }
      float d = d0 + d1;
#pragma unroll
      for (int m = kG / 2; m > 0; m /= 2) {
        d += shuffleXor(d, m);
        row += shuffleXor(row, m);
      }
      if (in && g == 0)
        this->zden[t] = 1.f / (fmaxf(fabsf(this->qfac[t] * scale * d + row),
                                     expf(float(-this->mcomb[t]))) +
                               eps);
    }
  }

  KGEN_DEVICE void outputs(const Params &p, long long row0, int j0,
                           int len) const {
    const float scale = 1.f / sqrtf(float(kDQK));
    using Mma = WarpMma<T, false, true>;
    // num = qfac * scale * Q C + P V is linear in the k-steps: every slice
    // scales its own part of Q C.
    auto origin = [](int tile, int &m0, int &n0) {
      m0 = 32 * (tile / kTilesV);
      n0 = 32 * (tile % kTilesV);
    };
    auto product = [&](int tile, Mma &mma, int kBegin, int kStep) {
      int m0, n0;
      origin(tile, m0, n0);
      mma.run(this->Q, kRowQ, Cp, kRowV, m0, n0, kDQK, kBegin, kStep);
      mma.forEach(m0, n0, [&](int t, int, float &x) {
        x *= this->qfac[t < len ? t : 0] * scale;
      });
      // P is zero right of the diagonal: k runs to the tile's last row.
      mma.run(Pp, kRowL, this->V, kRowV, m0, n0, m0 + 32, kBegin, kStep);
    };
    T *h = static_cast<T *>(p.h) + row0 * Config::kDV + j0;
#if KGEN_NVIDIA
    if constexpr (kSplitO == 1) {
      // mma.sync's elements 2i and 2i + 1 are neighbours in a row: h gets
      // them as one 4-byte store (DV and the slice are even).
      eachOwnTile<kTilesO, Mma>(origin, product, [&](Mma &mma, int m0, int n0) {
        const float *x = &mma.acc[0][0][0];
#pragma unroll
        for (int e = 0; e < Mma::kPerLane; e += 2) {
          int t, j;
          Mma::at(lane, e, m0, n0, t, j);
          if (t < len) {
            const float r = this->zden[t];
            struct alignas(4) Pair {
              T x[2];
            } o{{Convert<T>::fromFloat(x[e] * r),
                 Convert<T>::fromFloat(x[e + 1] * r)}};
            *reinterpret_cast<Pair *>(h + t * Config::kDV + j) = o;
          }
        }
      });
      return;
    }
#endif
    splitK<kTilesO, kSplitO, Mma>(origin, product, [&](int t, int j, float x) {
      if (t < len)
        h[t * Config::kDV + j] = Convert<T>::fromFloat(x * this->zden[t]);
    });
  }

  KGEN_DEVICE void update(int len) const {
    const float decay = this->scal[0];
    // W = diag(w) V, 8 elements (16 bytes) a step.
    constexpr int kV8 = kVB / 8;
    for (int e = this->tid; e < kL * kV8; e += kThreads) {
      const int t = e / kV8, j = 8 * (e % kV8);
      const float w = t < len ? this->wa[t] : 0.f;
      const T8 v = *reinterpret_cast<const T8 *>(this->V + t * kRowV + j);
      T8 o;
#pragma unroll
      for (int u = 0; u < 8; ++u)
        o.x[u] = Convert<T>::fromFloat(w * Convert<T>::toFloat(v.x[u]));
      *reinterpret_cast<T8 *>(Wp + t * kRowV + j) = o;
    }
    // n = decay n + K^T w: kGroups threads per entry of n, each taking
    // every kGroups-th token; their sums meet in P's fp32 region (free: the
    // outputs are done with it) and are added in group order after the
    // barrier.
    constexpr int kGroups = kThreads >= 2 * kDQK ? kThreads / kDQK : 1;
    static_assert(kGroups * kDQK <= kL * kL, "the partial sums fit in P");
    if constexpr (kGroups == 1) {
      for (int i = this->tid; i < kDQK; i += kThreads) {
        // Four partial sums: the loads are independent, the adds need not
        // be one chain.
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
        for (int t = 0; t < len; ++t)
          acc[t % 4] += Convert<T>::toFloat(this->K[t * kRowQ + i]) * this->wa[t];
        this->n[i] = decay * this->n[i] + ((acc[0] + acc[1]) + (acc[2] + acc[3]));
      }
    } else if (this->tid < kGroups * kDQK) {
      const int i = this->tid % kDQK;
      float acc = 0.f;
      for (int t = this->tid / kDQK; t < len; t += kGroups)
        acc += Convert<T>::toFloat(this->K[t * kRowQ + i]) * this->wa[t];
      this->P[this->tid] = acc;
    }
    __syncthreads();
    if constexpr (kGroups > 1)
      if (this->tid < kDQK) {
        float acc = 0.f;
        for (int g = 0; g < kGroups; ++g)
          acc += this->P[g * kDQK + this->tid];
        this->n[this->tid] = decay * this->n[this->tid] + acc;
      }
    if constexpr (kRegs) {
      static_assert(kSplitU == 1 && kOwn <= 4,
                    "C in registers: whole update tiles, four per warp at most");
      // C = decay C + K^T W on the warp's own tiles, in place.
#pragma unroll
      for (int r = 0; r < kOwn; ++r) {
        int m0, n0;
        if (!stateTile(r, m0, n0))
          continue;
        state[r].forEach(m0, n0, [&](int, int, float &x) { x *= decay; });
        state[r].run(this->K, kRowQ, Wp, kRowV, m0, n0, kL);
        state[r].forEach(m0, n0, [&](int i, int j, float &x) {
          Cp[i * kRowV + j] = Convert<T>::fromFloat(x);
        });
      }
      return;
    }
    using Mma = WarpMma<T, true, true>;
    auto origin = [](int tile, int &m0, int &n0) {
      m0 = 32 * (tile / kTilesV);
      n0 = 32 * (tile % kTilesV);
    };
    splitK<kTilesU, kSplitU, Mma>(
        origin,
        [&](int tile, Mma &mma, int kBegin, int kStep) {
          int m0, n0;
          origin(tile, m0, n0);
          mma.run(this->K, kRowQ, Wp, kRowV, m0, n0, kL, kBegin, kStep);
        },
        [&](int i, int j, float x) {
          const float c = decay * this->C[i * kVB + j] + x;
          this->C[i * kVB + j] = c;
          Cp[i * kRowV + j] = Convert<T>::fromFloat(c);
        });
  }
};

/// The chunkwise steps a kernel uses: on tensor cores where Config::kMma.
template <class Config>
using ChunkOf =
    typename Select<Config::kMma, ChunkMma<Config>, Chunk<Config>>::type;

/// Tokens of the chunk starting at t0; the last chunk may be short.
template <class Config> KGEN_DEVICE int chunkLength(const Params &p, int t0) {
  return p.seq - t0 < Config::kChunk ? p.seq - t0 : Config::kChunk;
}

/// Which block this is: head bh = b * NH + head, DV slice, (chunk).
template <class Config> struct BlockIndex {
  static constexpr int kSlices = Config::kDV / Config::kBlockDV;
  int bh, slice, j0;
  KGEN_DEVICE BlockIndex()
      : bh(int(blockIdx.y)), slice(int(blockIdx.x % unsigned(kSlices))),
        j0(slice * Config::kBlockDV) {}
};

/// Which block of a head writes the final n and m. Every block reads the
/// initial n and m and computes the same final ones, so the last block to
/// have read them writes them: then no block can still read the initial
/// values, and the states may be updated in place. A block counts itself
/// (count) as soon as it has read them and asks for the answer (last)
/// when it is done; the atomic's round trip hides behind the block's work.
/// The counter returns to zero for the next launch.
///
/// No fence: the count comes after a barrier that follows the block's
/// reads of n0 and m0 and the uses of their values (stores to shared
/// memory), so they have returned before the atomic, and the last block's
/// stores come after its own atomic, which follows every other block's. A
/// fence there waited for the block's C loads in flight (H200, decoding
/// step at B = 64: 149 -> 165 us); counted after the C stores, as before,
/// it waited for those and held the block's registers.
struct HeadCounter {
  long long bh;
  int blocks;     ///< blocks per head
  unsigned ahead; ///< blocks counted before this one (thread 0's)

  /// Counts this block among its head's, from thread 0: call after a
  /// barrier that follows every read of the initial n and m and its use (a
  /// store to shared memory, or arithmetic whose result was stored), and
  /// only where the final n or m is written (p.counters may be null
  /// otherwise).
  KGEN_DEVICE void count(const Params &p) {
    if (threadIdx.x == 0 && blocks > 1)
      ahead = atomicAdd(p.counters + bh, 1u);
  }

  /// Whether this block was the last to count: thread 0's answer, spread
  /// by the barrier's reduction (no shared word, nothing for a later store
  /// to race with). Call with every thread.
  KGEN_DEVICE bool last(const Params &p) const {
    bool isLast = false;
    if (threadIdx.x == 0) {
      isLast = blocks <= 1 || ahead == unsigned(blocks - 1);
      if (isLast && blocks > 1)
        p.counters[bh] = 0;
    }
    return __syncthreads_or(isLast) != 0;
  }
};

/// HeadCounter::count after a barrier of its own; call with every thread.
KGEN_DEVICE HeadCounter syncCountHead(const Params &p, long long bh,
                                      int blocks) {
  HeadCounter c{bh, blocks, 0u};
  __syncthreads();
  c.count(p);
  return c;
}

/// The walk of a fused kernel (or of the two-phase states kernel) over one
/// head's chunks, whatever its steps (ch: Chunk, ChunkMma or ChunkWgmma):
/// the state in, the head counted,
/// then per chunk a barrier (the previous chunk is done with the tokens,
/// the gates and the state's copies) and chunk(t0, row0, len) (its first
/// token in the sequence and in the tensors, its length), then the state
/// out, n and m by the head's last block.
template <class Config, class Ch, class ChunkStep>
KGEN_DEVICE void walkChunks(const Params &p, const Ch &ch,
                            const BlockIndex<Config> &at, ChunkStep chunk) {
  const int dqk = Config::kDQK, dv = Config::kDV;
  const long long bh = at.bh;
  ch.loadState(p.c0 ? p.c0 + bh * dqk * dv : nullptr, dv, at.j0,
               p.n0 ? p.n0 + bh * dqk : nullptr, p.m0 ? p.m0 + bh : nullptr);
  const bool writesFinal = p.nT || p.mT;
  const HeadCounter counted =
      writesFinal ? syncCountHead(p, bh, BlockIndex<Config>::kSlices)
                  : HeadCounter{};
  for (int k = 0; k < p.chunks; ++k) {
    const int t0 = k * Config::kChunk;
    __syncthreads();
    chunk(t0, bh * p.seq + t0, chunkLength<Config>(p, t0));
  }
  // The tensor-core updates write C in their tiles' layout, not
  // storeState's.
  __syncthreads();
  const bool last = writesFinal && counted.last(p);
  ch.storeState(p.cT ? p.cT + bh * dqk * dv : nullptr, dv, at.j0,
                p.nT && last ? p.nT + bh * dqk : nullptr,
                p.mT && last ? p.mT + bh : nullptr);
}

/// Walks every chunk of one head and slice; grid (DV / kBlockDV, B * NH).
template <class Config> KGEN_DEVICE void fused(const Params &p) {
  waitForPreviousGrid(); // launched overlapping the kernel before it
  using Ch = ChunkOf<Config>;
  extern __shared__ __attribute__((aligned(16))) unsigned char kgen_smem[];
  const Ch ch(kgen_smem);
  const BlockIndex<Config> at;
  walkChunks<Config>(p, ch, at, [&](int t0, long long row0, int len) {
    ch.template loadTokens<true>(p, row0, at.j0, len);
    if (t0 + len < p.seq)
      ch.template prefetch<true>(p, row0 + len, at.j0,
                                 chunkLength<Config>(p, t0 + len));
    ch.gates(p, row0, len);
    ch.tokensLanded();
    __syncthreads();
    ch.scores(len);
    __syncthreads();
    ch.normalizer(len, p.eps);
    __syncthreads();
    ch.outputs(p, row0, at.j0, len);
    __syncthreads();
    ch.update(len);
  });
}

/// Two-phase, first kernel: the state recurrence alone, writing the state
/// entering each chunk to the workspace; grid (DV / kBlockDV, B * NH).
template <class Config> KGEN_DEVICE void states(const Params &p) {
  waitForPreviousGrid(); // launched overlapping the kernel before it
  allowNextGrid(); // outputs may launch; it waits for the states
  using Ch = ChunkOf<Config>;
  extern __shared__ __attribute__((aligned(16))) unsigned char kgen_smem[];
  const Ch ch(kgen_smem);
  const BlockIndex<Config> at;
  const int dqk = Config::kDQK, dv = Config::kDV;
  const bool first = at.slice == 0;
  walkChunks<Config>(p, ch, at, [&](int t0, long long row0, int len) {
    const long long ws = at.bh * p.chunks + t0 / Config::kChunk;
    // gates() below overwrites *mState from thread 0, which stores it first.
    ch.storeState(p.wsC + ws * dqk * dv, dv, at.j0,
                  first ? p.wsN + ws * dqk : nullptr,
                  first ? p.wsM + ws : nullptr);
    ch.template loadTokens<false>(p, row0, at.j0, len);
    if (t0 + len < p.seq)
      ch.template prefetch<false>(p, row0 + len, at.j0,
                                  chunkLength<Config>(p, t0 + len));
    ch.gates(p, row0, len);
    ch.tokensLanded();
    __syncthreads();
    ch.update(len);
  });
}

/// Two-phase, second kernel: one chunk's outputs from the state `states`
/// left in the workspace; grid (DV / kBlockDV * chunks, B * NH).
template <class Config> KGEN_DEVICE void outputs(const Params &p) {
  using Ch = ChunkOf<Config>;
  extern __shared__ __attribute__((aligned(16))) unsigned char kgen_smem[];
  const Ch ch(kgen_smem);
  const BlockIndex<Config> at;
  const int dqk = Config::kDQK, dv = Config::kDV;
  const long long bh = at.bh;
  const int k = int(blockIdx.x / unsigned(BlockIndex<Config>::kSlices));
  const int t0 = k * Config::kChunk;
  const int len = chunkLength<Config>(p, t0);
  const long long row0 = bh * p.seq + t0;
  const long long ws = bh * p.chunks + k;
  // The kernel before (states or combine) writes the state entering the
  // chunk, and mlstmLaunchDims lets this one start while it runs: what
  // needs only the chunk's tokens comes first, the gates and the scores
  // with the chunk's own stabilizer (no state: kNoState), while the tokens'
  // copies land and that kernel finishes. Then the state, and the scores
  // restabilized to m^comb (restabilize). Thread 0 sets *mState, which
  // gates() reads on warp 0 after a syncWave.
  if (threadIdx.x == 0)
    *ch.mState = kNoState;
  ch.template loadTokens<true>(p, row0, at.j0, len);
  ch.gates(p, row0, len);
  ch.tokensLanded();
  __syncthreads();
  ch.scores(len);
  waitForPreviousGrid();
  // Warp 0's gates() read and wrote *mState before this overwrites it.
  ch.template loadState<false>(p.wsC + ws * dqk * dv, dv, at.j0,
                               p.wsN + ws * dqk, p.wsM + ws);
  __syncthreads();
  ch.restabilize(len);
  __syncthreads();
  ch.rescaleScores(len);
  __syncthreads();
  ch.normalizer(len, p.eps);
  __syncthreads();
  ch.outputs(p, row0, at.j0, len);
}

/// One chunk's terms for the sm_90a fused kernel's walk (ChunkWgmma), from
/// its gates and the m entering it, as the gate pre-pass (gateSums, then
/// gateTerms) leaves them in the workspace; the walk copies them as they
/// are. Chunk::finishGate's quantities in the form the walk's products take
/// them, each computed in fp64 and rounded once, with best_t = max(m^{k-1},
/// own_t) and m^comb_t = b_t + best_t:
///   row, col  the decay exponent of score (t, s), log2 D_ts - log2 m^comb_t
///             + log2 s = row[t] + col[s] (in log2 units, s = DQK^-1/2 in
///             col), each an fp32 pair hi + lo: -best_t log2 e, and (i_s -
///             b_s) log2 e + log2 s. The walk adds the pairs (see
///             ChunkWgmma::outputStep for why pairs).
///   qfac      exp(b_t + m^{k-1} - m^comb_t) = exp(m^{k-1} - best_t)
///   wa        exp(a_t - m^k), the update's token weights
///   floor     exp(-m^comb_t), the denominator's floor
///   decay     C^{k-1}'s, exp(g + m^{k-1} - m^k)
/// Tokens past the chunk's length have zero weights and terms (floor 1).
/// chunkTermsBytes (params.h) is its size.
template <int kL> struct ChunkTerms {
  float row[kL], col[kL], rowLo[kL], colLo[kL], qfac[kL], wa[kL], floor[kL];
  float decay, pad;
  double m;    ///< m^k, the m leaving the chunk
  double g;    ///< b_L (gateSums)
  double aMax; ///< max_t a_t (gateSums)
};

/// The m walk's step over a run of chunks, m -> max(m + G, A) (max-plus
/// affine: g and max_t a_t for one chunk); runs compose into one.
struct MStep {
  double G, A;
  /// This run, then `next`.
  KGEN_DEVICE MStep then(const MStep &next) const {
    return {G + next.G, fmax(A + next.G, next.A)};
  }
  KGEN_DEVICE double operator()(double m) const { return fmax(m + G, A); }
};

/// The sm_90a fused kernel's gate pre-pass, one warp a chunk, all chunks
/// in parallel, in two kernels:
///   gateSums (!kTerms): every chunk's g and max_t a_t (scanGates) into its
///     ChunkTerms;
///   gateTerms (kTerms): every chunk's terms, so that the walk only copies
///     them (their fp64 chain, finished in the walk, lay on its critical
///     path: clock64 traces, bench/results 2026-11-24). The warp scans its
///     chunk's gates again (the same g and max a as gateSums'), composes the
///     m steps of the chunks before it from gateSums' (MStep: a run of
///     chunks a lane, then a butterfly over the lanes in order) into the m
///     entering it, and writes its tokens' terms. The m entering the head
///     is the initial m (or 0), as the walk's; a split sequence's segments
///     use the same m (see walkWgmma).
/// Grid (ceil(chunks / warps), B * NH).
template <class Config, bool kTerms>
KGEN_DEVICE void gatePrePass(const Params &p) {
  if constexpr (kTerms) {
    // The gates are inputs (gateSums waited for their writers before it
    // let this kernel launch): the scan overlaps gateSums' end.
    allowNextGrid(); // the walk may launch; it waits for the terms
  } else {
    waitForPreviousGrid(); // launched overlapping the kernel before it
    allowNextGrid();       // gateTerms may launch; it waits for the sums
  }
  constexpr int kL = Config::kChunk, kPer = (kL + kWaveSize - 1) / kWaveSize;
  static_assert(sizeof(ChunkTerms<kL>) == chunkTermsBytes(kL),
                "ChunkTerms' size is chunkTermsBytes (params.h)");
  constexpr double kLog2e = 1.4426950408889634;
  const int lane = int(threadIdx.x) % kWaveSize;
  const int k = int(blockIdx.x) * (Config::kThreads / kWaveSize) +
                int(threadIdx.x) / kWaveSize;
  if (k >= p.chunks)
    return;
  const long long bh = blockIdx.y;
  const int t0 = k * kL, len = chunkLength<Config>(p, t0);
  const GateScan<kPer> sc =
      scanGates<typename Config::Type, kL>(p, bh * p.seq + t0, len, lane);
  if constexpr (!kTerms) {
    if (lane == 0) {
      ChunkTerms<kL> &out =
          reinterpret_cast<ChunkTerms<kL> *>(p.wsGates)[bh * p.chunks + k];
      out.g = sc.g;
      out.aMax = sc.aMax;
    }
    return;
  }
  waitForPreviousGrid(); // gateSums' sums
  ChunkTerms<kL> *const recs =
      reinterpret_cast<ChunkTerms<kL> *>(p.wsGates) + bh * p.chunks;
  const int per = (k + kWaveSize - 1) / kWaveSize;
  const int j1 = lane * per + per < k ? lane * per + per : k;
  MStep before{0.0, kBelowAll};
#pragma unroll 4
  for (int j = lane * per; j < j1; ++j)
    before = before.then(MStep{recs[j].g, recs[j].aMax});
#pragma unroll
  for (int m = 1; m < kWaveSize; m *= 2) {
    const MStep other{shuffleXor(before.G, m), shuffleXor(before.A, m)};
    before = lane & m ? other.then(before) : before.then(other);
  }
  const double mPrev = before(p.m0 ? double(p.m0[bh]) : 0.0),
               mNext = MStep{sc.g, sc.aMax}(mPrev);
  const double logScale = -0.5 * log2(double(Config::kDQK));
  ChunkTerms<kL> &out = recs[k];
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
    const int t = lane * kPer + r;
    if (t >= kL)
      break;
    const bool in = t < len;
    const double best = fmax(mPrev, sc.own[r]);
    const double row = -best * kLog2e;
    const double col = (double(sc.it[r]) - sc.b[r]) * kLog2e + logScale;
    out.row[t] = in ? float(row) : 0.f;
    out.rowLo[t] = in ? float(row - double(float(row))) : 0.f;
    out.col[t] = in ? float(col) : 0.f;
    out.colLo[t] = in ? float(col - double(float(col))) : 0.f;
    out.qfac[t] = in ? expf(float(mPrev - best)) : 0.f;
    out.wa[t] = in ? expf(float(sc.it[r] + (sc.g - sc.b[r]) - mNext)) : 0.f;
    out.floor[t] = in ? expf(float(-(sc.b[r] + best))) : 1.f;
  }
  if (lane == 0) {
    out.decay = expf(float(sc.g + mPrev - mNext));
    out.pad = 0.f;
    out.m = mNext;
  }
}

/// The pre-pass's two kernels (gatePrePass).
template <class Config> KGEN_DEVICE void gateSums(const Params &p) {
  gatePrePass<Config, false>(p);
}
template <class Config> KGEN_DEVICE void gateTerms(const Params &p) {
  gatePrePass<Config, true>(p);
}

/// Chunk-parallel, phase A: chunk k's own contribution, as if it started
/// from a zero state with its own stabilizer m_loc = max_t a_t: C_loc =
/// (K * exp(a - m_loc))^T V and n_loc to the workspace in the place of the
/// state entering chunk k, (g, m_loc) to wsGM; grid (DV / kBlockDV *
/// chunks, B * NH), every block independent. It is the states kernel's step
/// (gates, update) from C = 0, n = 0 and m^{k-1} = -inf: then m^k = m_loc,
/// the update's decay is exp(-inf) = 0 and its weights are exp(a - m_loc).
template <class Config> KGEN_DEVICE void chunkStates(const Params &p) {
  waitForPreviousGrid(); // launched overlapping the kernel before it
  allowNextGrid(); // combine may launch; it waits for the chunk states
  using Ch = ChunkOf<Config>;
  extern __shared__ __attribute__((aligned(16))) unsigned char kgen_smem[];
  const Ch ch(kgen_smem);
  const BlockIndex<Config> at;
  const int dqk = Config::kDQK, dv = Config::kDV;
  const long long bh = at.bh;
  const bool first = at.slice == 0;
  const int k = int(blockIdx.x / unsigned(BlockIndex<Config>::kSlices));
  const int t0 = k * Config::kChunk;
  const int len = chunkLength<Config>(p, t0);
  const long long row0 = bh * p.seq + t0;
  const long long ws = bh * p.chunks + k;
  ch.loadState(nullptr, dv, at.j0, nullptr, nullptr);
  // gates() reads it on warp 0 after a syncWave: no barrier needed.
  if (threadIdx.x == 0)
    *ch.mState = kNoState;
  ch.template loadTokens<false>(p, row0, at.j0, len);
  ch.gates(p, row0, len);
  ch.tokensLanded();
  __syncthreads();
  ch.update(len);
  // ChunkMma's update writes C in the warp tiles' layout, not storeState's.
  __syncthreads();
  ch.storeState(p.wsC + ws * dqk * dv, dv, at.j0,
                first ? p.wsN + ws * dqk : nullptr, nullptr);
  if (first && threadIdx.x == 0) {
    p.wsGM[2 * ws] = ch.bcum[len - 1]; // g = b_L
    p.wsGM[2 * ws + 1] = *ch.mState;   // m_loc
  }
}

/// Chunk-parallel, phase B: the recurrence between chunks, one thread per
/// element of C (DQK x DV) and of n (DQK) of one head, from the initial
/// state (or zeros): m^k = max(g_k + m^{k-1}, m_loc_k), X^k = exp(g_k +
/// m^{k-1} - m^k) X^{k-1} + exp(m_loc_k - m^k) X_loc_k. It replaces X_loc_k
/// in the workspace by the state entering chunk k (and writes wsM), the
/// layout the outputs kernel reads, and returns the final states. m is
/// carried in fp64 and each chunk's decay taken in fp32, as the states
/// kernel does; every thread walks the same m. Grid (ceil((DQK * DV +
/// DQK) / kThreads), B * NH); no shared memory.
template <class Config> KGEN_DEVICE void combine(const Params &p) {
  constexpr int kC = Config::kDQK * Config::kDV, kN = kC + Config::kDQK;
  constexpr int kBlocks = (kN + Config::kThreads - 1) / Config::kThreads;
  /// Chunks whose loads are issued together: they do not depend on the
  /// recurrence, so only the arithmetic is a chain.
  constexpr int kBatch = 8;
  static_assert(Config::kSmemBytes == 0, "no shared memory");
  // Launched to overlap chunkStates (mlstmLaunchDims): outputs may launch
  // in turn, and every load here waits for chunkStates' stores.
  allowNextGrid();
  waitForPreviousGrid();
  const long long bh = blockIdx.y;
  const int e = int(blockIdx.x) * Config::kThreads + int(threadIdx.x);
  const bool mine = e < kN, isC = e < kC;
  const long long stride = isC ? kC : Config::kDQK;
  float *const ws = isC ? p.wsC + bh * p.chunks * kC + e
                        : p.wsN + bh * p.chunks * Config::kDQK + (e - kC);
  const float *const init =
      isC ? (p.c0 ? p.c0 + bh * kC + e : nullptr)
          : (p.n0 ? p.n0 + bh * Config::kDQK + (e - kC) : nullptr);
  const double *const gm = p.wsGM + bh * p.chunks * 2;
  float *const wsM = p.wsM + bh * p.chunks;
  const bool writesM = blockIdx.x == 0 && threadIdx.x == 0;
  double m = p.m0 ? double(p.m0[bh]) : 0.0;
  float x = mine && init ? *init : 0.f;
  for (int k0 = 0; k0 < p.chunks; k0 += kBatch) {
    // The batch's (g, m_loc) are loaded with its states, before the stores
    // below: loaded in the chain, each would wait for a global round trip
    // behind the stores (which the compiler may not move them above).
    float loc[kBatch];
    double gs[kBatch], ms[kBatch];
#pragma unroll
    for (int r = 0; r < kBatch; ++r) {
      const bool in = k0 + r < p.chunks;
      loc[r] = mine && in ? ws[(k0 + r) * stride] : 0.f;
      gs[r] = in ? gm[2 * (k0 + r)] : 0.0;
      ms[r] = in ? gm[2 * (k0 + r) + 1] : 0.0;
    }
#pragma unroll
    for (int r = 0; r < kBatch; ++r) {
      const int k = k0 + r;
      if (k >= p.chunks)
        break;
      if (mine)
        ws[k * stride] = x;
      if (writesM)
        wsM[k] = float(m);
      const double g = gs[r], mLoc = ms[r];
      const double mNext = fmax(g + m, mLoc);
      x = expf(float(g + m - mNext)) * x + expf(float(mLoc - mNext)) * loc[r];
      m = mNext;
    }
  }
  if (mine && isC && p.cT)
    p.cT[bh * kC + e] = x;
  if (mine && !isC && p.nT)
    p.nT[bh * Config::kDQK + (e - kC)] = x;
  // Every block reads the initial m: the last one writes the final m. The
  // reads have returned: their value went into the stores above.
  if (p.mT && syncCountHead(p, bh, kBlocks).last(p) && threadIdx.x == 0)
    p.mT[bh] = float(m);
}

/// The recurrent form token by token; grid (DV / kBlockDV, B * NH). Thread
/// (rg, jg) = (tid / (kBlockDV / 4), tid % (kBlockDV / 4)) owns C rows
/// rg + kGroups * r, columns 4 jg .. 4 jg + 3, in registers, read and
/// written as 16-byte vectors (a warp covers whole 128-512-byte row runs).
/// n lives in shared memory, updated by threads x < DQK: keeping it beside
/// C in every thread's registers cost a third of them, and so blocks per
/// multiprocessor (the decoding step at B = 64 ran at 62% of HBM).
template <class Config> KGEN_DEVICE void recurrent(const Params &p) {
  waitForPreviousGrid(); // launched overlapping the kernel before it
  using T = typename Config::Type;
  constexpr int kDQK = Config::kDQK, kDV = Config::kDV, kVB = Config::kBlockDV,
                kThreads = Config::kThreads;
  constexpr int kCols = kVB / 4; // 4-column groups of the slice
  constexpr int kGroups = kThreads / kCols;
  constexpr int kRows = kDQK / kGroups;
  constexpr int kWarps = (kThreads + 31) / 32; // 32-lane groups
  constexpr int kZ = (kWarps + 3) / 4 * 4; // zpart, whole 16-byte vectors
  // Column partial sums kept per column: the row groups of one 32-lane
  // group are added by shuffles first, so the final sum runs over at most
  // kWarps (or kGroups, with 32 or more column groups) partials.
  constexpr int kParts = kCols < 32 ? kWarps : kGroups;
  static_assert(kVB % 4 == 0 && kThreads % kCols == 0 && kGroups > 0 &&
                    kDQK % kGroups == 0,
                "threads tile the C slice exactly, 4 columns a thread");
  // q, k, n [kDQK], v [kVB], then two buffers (by token parity) of the
  // column partial sums [kParts][kVB] and the normalizer's [kZ].
  static_assert(4 * (3 * kDQK + kVB + 2 * (kParts * kVB + kZ)) ==
                    Config::kSmemBytes,
                "kSmemBytes disagrees with the template's smem layout");
  extern __shared__ __attribute__((aligned(16))) unsigned char kgen_smem[];
  float *const sq = reinterpret_cast<float *>(kgen_smem);
  float *const sk = sq + kDQK;
  float *const sn = sk + kDQK;
  float *const sv = sn + kDQK;
  float *const red = sv + kVB;

  const BlockIndex<Config> at;
  const long long bh = at.bh;
  const int tid = int(threadIdx.x);
  const int jg = tid % kCols, rg = tid / kCols;
  const float scale = 1.f / sqrtf(float(kDQK));

  // 16-byte accesses where the state pointers allow (rows are, DV being a
  // multiple of 4), else four 4-byte ones.
  const bool vec = ((unsigned long long)(p.c0) | (unsigned long long)(p.cT)) %
                       16 == 0;
  // This thread's first element of C; row r is kGroups * r rows below
  // (constant offsets: one address register for all rows).
  const long long mine = (bh * kDQK + rg) * kDV + at.j0 + 4 * jg;
  float *const cTo = p.cT ? p.cT + mine : nullptr;
  // One branch around all the loads (and stores below), not one per row:
  // the rows' accesses then issue back to back.
  F4 c[kRows];
  if (p.c0 && vec) {
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      c[r] = *reinterpret_cast<const F4 *>(p.c0 + mine + r * kGroups * kDV);
  } else {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float *src = p.c0 + mine + r * kGroups * kDV;
      c[r] = p.c0 ? F4{{src[0], src[1], src[2], src[3]}} : F4{};
    }
  }
  // n0 and m0 go to registers here and to shared memory with token 0's
  // q, k and v (m0 too, HeadCounter's rule; it sits in the partial sums of
  // odd tokens, read after token 0's first barrier, first written after
  // token 1's). A shared store waits for its load: stored here, n0 cost
  // every block a round trip before its q, k and v loads went out (H200
  // step, B = 64, d64 w8: 154 -> 136 us). The loops over a vector have
  // constant trip counts for the same reason: all loads issue before the
  // first store.
  constexpr int kPerDQK = (kDQK + kThreads - 1) / kThreads,
                kPerVB = (kVB + kThreads - 1) / kThreads;
  float nInit[kPerDQK];
#pragma unroll
  for (int j = 0; j < kPerDQK; ++j) {
    const int x = tid + j * kThreads;
    nInit[j] = p.n0 && x < kDQK ? p.n0[bh * kDQK + x] : 0.f;
  }
  const float mInit = p.m0 && tid == 0 ? p.m0[bh] : 0.f;
  float *const mSlot = red + kParts * kVB + kZ;
  const bool writesFinal = p.nT || p.mT;
  HeadCounter counted{bh, BlockIndex<Config>::kSlices, 0u};
  float m = 0.f;

  for (int t = 0; t < p.seq; ++t) {
    const long long row = bh * p.seq + t;
    float qx[kPerDQK], kx[kPerDQK], vx[kPerVB];
#pragma unroll
    for (int j = 0; j < kPerDQK; ++j) {
      const int x = tid + j * kThreads;
      qx[j] = x < kDQK ? load<T>(p.q, row * kDQK + x) : 0.f;
      kx[j] = x < kDQK ? load<T>(p.k, row * kDQK + x) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < kPerVB; ++j) {
      const int x = tid + j * kThreads;
      vx[j] = x < kVB ? load<T>(p.v, row * kDV + at.j0 + x) : 0.f;
    }
    const float lf = logSigmoid(load<T>(p.f, row));
    const float it = load<T>(p.i, row);
#pragma unroll
    for (int j = 0; j < kPerDQK; ++j) {
      const int x = tid + j * kThreads;
      if (x < kDQK) {
        sq[x] = scale * qx[j];
        sk[x] = kx[j];
        if (t == 0)
          sn[x] = nInit[j];
      }
    }
#pragma unroll
    for (int j = 0; j < kPerVB; ++j)
      if (tid + j * kThreads < kVB)
        sv[tid + j * kThreads] = vx[j];
    if (t == 0 && tid == 0)
      *mSlot = mInit;
    __syncthreads();
    if (t == 0) {
      // Counted here, with no barrier of its own: one ahead of the C loads
      // delayed q, k and v by a round trip.
      m = *mSlot;
      if (writesFinal)
        counted.count(p);
    }
    const float mNew = fmaxf(lf + m, it);
    const float fg = expf(lf + m - mNew), ia = expf(it - mNew);
    m = mNew;

    float *const part = red + (t & 1) * (kParts * kVB + kZ);
    float *const zpart = part + kParts * kVB;
    // n and its normalizer term: each thread its rows x of n, then a sum
    // over each 32 lanes (a warp, or half an AMD wavefront) into zpart.
    float zacc = 0.f;
    for (int x = tid; x < kDQK; x += kThreads) {
      sn[x] = fg * sn[x] + ia * sk[x];
      zacc += sq[x] * sn[x];
    }
#pragma unroll
    for (int mask = 16; mask > 0; mask /= 2) // a sum over 32 lanes
      zacc += shuffleXor(zacc, mask);
    if (tid % 32 == 0)
      zpart[tid / 32] = zacc;
    const F4 vj = *reinterpret_cast<const F4 *>(sv + 4 * jg);
    F4 acc{};
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int i = rg + kGroups * r;
      const float kv = ia * sk[i], qi = sq[i];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        c[r].x[e] = fg * c[r].x[e] + kv * vj.x[e];
        acc.x[e] += qi * c[r].x[e];
      }
    }
    // After the last token C is stored here, ahead of the column sums'
    // barrier, not after it.
    if (p.cT && t + 1 == p.seq) {
      if (vec) {
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          *reinterpret_cast<F4 *>(cTo + r * kGroups * kDV) = c[r];
      } else {
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            cTo[r * kGroups * kDV + e] = c[r].x[e];
      }
    }
    if constexpr (kCols < 32) {
      // Lanes kCols apart hold the same columns.
#pragma unroll
      for (int mask = kCols; mask < 32; mask *= 2)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc.x[e] += shuffleXor(acc.x[e], mask);
      if (tid % 32 < kCols)
        *reinterpret_cast<F4 *>(part + tid / 32 * kVB + 4 * jg) = acc;
    } else {
      *reinterpret_cast<F4 *>(part + rg * kVB + 4 * jg) = acc;
    }
    __syncthreads();
    // The next token writes q, k, v after this barrier and the other
    // partial-sum buffer, so one more barrier is not needed (n is written
    // only by the threads that read it).
    if (tid < kVB) {
      float num = 0.f, z = 0.f;
      for (int g = 0; g < kParts; ++g)
        num += part[g * kVB + tid];
      for (int w = 0; w < kWarps; ++w)
        z += zpart[w];
      const float den = fmaxf(fabsf(z), expf(-m)) + p.eps;
      store<T>(p.h, row * kDV + at.j0 + tid, num / den);
    }
  }

  const bool last = writesFinal && counted.last(p);
  if (p.nT && last)
    for (int x = tid; x < kDQK; x += kThreads)
      p.nT[bh * kDQK + x] = sn[x];
  if (p.mT && last && tid == 0)
    p.mT[bh] = m;
}

} // namespace kgen::mlstm
