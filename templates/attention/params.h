//===- params.h - The attention kernels' one argument ------------*- C++
//-*-===//
//
// Every attention kernel (main and combine) takes this struct by value, so a
// new feature adds a field here and nothing changes in the launch code. The
// host (lib/Runtime/AttentionRuntime.cpp, through include path templates/)
// and the device template include this same file; it uses builtin types
// only, since nvrtc and hiprtc see no system headers.
//
// Element (b, s, h, d) of a tensor X lives at
//   X + b * strideX[0] + (rowOffset + s) * strideX[1] + h * strideX[2] + d
// where rowOffset is cuSeqlens[b] with varlen (strideX[0] unused), else 0.
//
//===----------------------------------------------------------------------===//

#pragma once

namespace kgen::attention {

struct Params {
  const void *q, *k, *v;
  void *o;
  float *lse;               ///< [b][h][s] through lseStride; may be null
  const void *bias;         ///< additive matrix, element (b, h, i, j)
  const float *alibiSlopes; ///< [headsQ]
  const int *cuSeqlensQ, *cuSeqlensK; ///< [batch + 1] with varlen
  float *partialO;   ///< split-KV: [split][b][h][seqlenQ][headDimV]
  float *partialLse; ///< split-KV: [split][b][h][seqlenQ]
  int batch, headsQ, headsKv;
  int seqlenQ, seqlenK; ///< with varlen: the largest of the batch
  int splits;           ///< as launched (the config's)
  long long strideQ[3], strideK[3], strideV[3], strideO[3]; ///< b, s, h
  long long strideBias[3];     ///< b, h, i (j contiguous)
  long long lseStride[2];      ///< b, h (varlen: b unused, rows packed)
  float scaleLog2;             ///< softmax scale * log2(e)
  int windowLeft, windowRight; ///< -1: unbounded
  /// The persistent wgmma loop's work tiles, ceil(seqlenQ / blockM) *
  /// headsQ * batch (0 for every other launch).
  int tiles;
  /// The persistent wgmma loop's two counters (the next work tile past the
  /// first round, blocks done), zero at launch and left zero at exit; null:
  /// the static schedule.
  unsigned *tileCounter;
  /// fp8 inputs: the per-tensor descale factors (device fp32; null reads
  /// as 1).
  const float *qDescale, *kDescale, *vDescale;
};

} // namespace kgen::attention
