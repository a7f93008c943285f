//===- params.h - The one argument of every mLSTM kernel --------*- C++ -*-===//
//
// Shared by the kernel templates and the host (lib/Runtime/MlstmRuntime.cpp
// includes this file): every mLSTM kernel takes one Params by value, so the
// host and the device agree on the argument layout by construction. Plain
// types only: nvrtc and hiprtc see no system headers.
//
// Layouts (row-major, packed): q, k (B, NH, S, DQK); v, h (B, NH, S, DV);
// i, f (B, NH, S), all of the problem's input dtype. States are fp32:
// C (B, NH, DQK, DV), n (B, NH, DQK), m (B, NH). The per-chunk states of the
// two-phase variant (the state entering chunk k) live in a workspace:
// wsC (B*NH, chunks, DQK, DV), wsN (B*NH, chunks, DQK), wsM (B*NH, chunks).
// The chunk-parallel variant first writes each chunk's own contribution
// there (C_loc, n_loc) and its gate sums to wsGM (B*NH, chunks, 2) fp64
// (g, m_loc); its combine kernel then turns them, in place, into the states
// entering the chunks (see chunkStates and combine in mlstm.h). The sm_90a
// fused kernel's pre-pass writes every chunk's per-token terms to wsGates
// (B*NH, chunks) records of chunkTermsBytes(chunk) (ChunkTerms, mlstm.h).
// With its sequence split (segments > 1), wsC, wsN, wsM and wsGM hold one
// state per segment instead of per chunk, as the chunk-parallel variant's.
//
//===----------------------------------------------------------------------===//

#pragma once

namespace kgen::mlstm {

struct Params {
  const void *q, *k, *v;     ///< the problem's input dtype
  const void *i, *f;         ///< gate pre-activations, input dtype
  void *h;                   ///< output, input dtype
  const float *c0, *n0, *m0; ///< initial states; null when not given
  float *cT, *nT, *mT;       ///< final states; null when not returned
  float *wsC, *wsN, *wsM;    ///< per-chunk states (two-phase, chunk-parallel)
  double *wsGM;              ///< per chunk (g, m_loc) (chunk-parallel only)
  double *wsGates;           ///< per chunk terms (sm_90a fused only)
  /// One per head, zero before and after every launch: the last block of a
  /// head to count itself writes the final n and m (HeadCounter, mlstm.h).
  unsigned *counters;
  int batch, heads, seq; ///< run-time extents
  int chunks;            ///< ceil(seq / chunk)
  /// The sm_90a wgmma kernels' sequence split (segmentChunks,
  /// mlstm_sm90.h): 1, or the parts whose states segmentStatesWgmma and
  /// combine compute before fusedWgmma walks each part in parallel.
  int segments;
  int segmentChunks;     ///< ceil(chunks / segments)
  float eps;             ///< added to the normalizer
};

/// Bytes of one chunk's ChunkTerms (mlstm.h): seven fp32 per-token terms,
/// then the decay and a pad, and m^k, g and max a_t in fp64 (a multiple of
/// 16 for even chunks).
constexpr int chunkTermsBytes(int chunk) { return 28 * chunk + 32; }

/// The fp32 words of the wgmma walk's scratch, Chunk's P region there (P
/// itself stays in registers; ChunkWgmma's layout): the tokens' four
/// mbarriers (8), three ChunkTerms and the fp64 g sum (2). Sized to that
/// rather than chunk x chunk (the shared memory is close to the SM's 227
/// KiB at DQK 256).
constexpr int wgmmaScratchFloats(int chunk) {
  return 8 + 3 * chunkTermsBytes(chunk) / 4 + 2;
}

} // namespace kgen::mlstm
