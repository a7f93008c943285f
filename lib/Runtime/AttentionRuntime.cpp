//===- AttentionRuntime.cpp - Runtime::attention --------------------------===//
//
// problem -> config (heuristic, remembered per problem) -> emitAttention ->
// Runtime::compileSource (bundle, memory, disk cache, compiler, module) ->
// one kgen::attention::Params filled from the call's arguments -> launch of
// the main kernel (and the combine kernel with split-KV).
//
//===----------------------------------------------------------------------===//

#include "DispatchKey.h"
#include "attention/params.h"
#include "kgen/kgen.h"

#include <cmath>
#include <cstdint>

namespace kgen {

namespace {

/// The fields baked into a kernel (the features and head dims), then
/// either the run-time sizes (the key of a call's choice: the heuristic
/// looks at them) or a config (the key of a built kernel, shared by every
/// size that picks it); each part starts with its own tag (appendKey).
std::string featureKey(const AttentionProblem &p) {
  std::string k;
  return appendKey(k, {1, int64_t(p.headDimQk), int64_t(p.headDimV),
                       int64_t(p.dtype), int64_t(p.causal),
                       int64_t(p.windowLeft >= 0 || p.windowRight >= 0),
                       int64_t(p.varlen), int64_t(p.alibi), int64_t(p.bias),
                       int64_t(p.lse)});
}

std::string &appendConfig(std::string &k, const AttentionConfig &c) {
  return appendKey(k, {2, int64_t(c.loop), c.blockM, c.blockN, c.warps,
                       c.stages, int64_t(c.preloadV), c.splits,
                       int64_t(c.packGqa), int64_t(c.persistent)});
}

std::string sizeKey(const AttentionProblem &p, const AttentionConfig *c) {
  std::string k = featureKey(p);
  appendKey(k, {3, p.batch, p.headsQ, p.headsKv, p.seqlenQ, p.seqlenK});
  return c ? appendConfig(k, *c) : k;
}

[[noreturn]] void argError(const std::string &what) {
  throw Error("attention: " + what);
}

/// Strides of a tensor of `heads` x `dim` per row: the caller's, or packed;
/// multiples of `align` elements (16 bytes).
void strides(const char *name, const int64_t (&given)[3], long long (&out)[3],
             const AttentionProblem &p, int64_t seqlen, int64_t heads,
             int64_t dim, int align) {
  if (given[0] == 0 && given[1] == 0 && given[2] == 0) {
    if (p.varlen || p.layout == AttentionLayout::BSHD) {
      out[0] = p.varlen ? 0 : seqlen * heads * dim;
      out[1] = heads * dim;
      out[2] = dim;
    } else {
      out[0] = heads * seqlen * dim;
      out[1] = dim;
      out[2] = seqlen * dim;
    }
  } else {
    for (int i = 0; i < 3; ++i)
      out[i] = given[i];
  }
  for (int i = p.varlen ? 1 : 0; i < 3; ++i)
    if (out[i] < 0 || out[i] % align != 0)
      argError(std::string(name) + " stride[" + std::to_string(i) +
               "] = " + std::to_string(out[i]) +
               " must be a non-negative multiple of " + std::to_string(align) +
               " elements (the kernels copy rows 16 bytes at a time); pad "
               "the tensor");
}

void aligned16(const char *name, const void *ptr) {
  if (!ptr)
    argError(std::string("null device pointer for ") + name);
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
    argError(std::string(name) +
             " is not 16-byte aligned (the kernels copy 16 bytes at a time)");
}

} // namespace

std::shared_ptr<Kernel> Runtime::compile(const AttentionProblem &p,
                                         const AttentionConfig &c,
                                         std::optional<Target> t) {
  const Target tt = t.value_or(target_);
  if (auto e = checkConfig(p, c, tt))
    throw Error(*e);
  return compileSource(emitAttention(p, c, tt));
}

Runtime::AttentionChoice Runtime::attentionChoice(const AttentionProblem &p,
                                                  const AttentionConfig *forced,
                                                  void *stream) {
  // A call's sizes map to a config, a config to a kernel: a new sequence
  // length (every decode step) costs one heuristic pass, not a build.
  const std::string bySize = sizeKey(p, forced);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = attentionDispatch_.find(bySize);
        it != attentionDispatch_.end())
      return it->second;
  }
  AttentionChoice ch;
  // Measured winners first (tuning DB, by policy), then the heuristic.
  ch.config = forced ? *forced : chooseAttentionConfig(p, stream);
  if (auto e = checkConfig(p, ch.config, target_))
    throw Error(*e);
  std::string byKernel = featureKey(p);
  appendConfig(byKernel, ch.config);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = attentionDispatch_.find(byKernel);
        it != attentionDispatch_.end())
      return attentionDispatch_.emplace(bySize, it->second).first->second;
  }
  if (stream && backend_ && backend_->isCapturing(stream))
    argError("no kernel is loaded yet for this problem and the stream is "
             "being captured into a graph; run the call once before capture");
  ch.kernel = compileSource(emitAttention(p, ch.config, target_), stream);
  if (ch.config.splits > 1 && backend_ && ch.kernel->function) {
    // The combine kernel lives in the same binary.
    Backend::Module mod = backend_->loadModule(ch.kernel->binary);
    ch.combine =
        backend_->getFunction(mod, attentionCombineName(p, ch.config, target_));
  }
  std::lock_guard<std::mutex> lock(mu_);
  attentionDispatch_.emplace(byKernel, ch);
  return attentionDispatch_.emplace(bySize, ch).first->second;
}

AttentionProblem sizedForCall(const AttentionProblem &p,
                              const AttentionArgs &args) {
  AttentionProblem r = p;
  if (args.batch >= 0)
    r.batch = args.batch;
  if (args.seqlenQ >= 0)
    r.seqlenQ = args.seqlenQ;
  if (args.seqlenK >= 0)
    r.seqlenK = args.seqlenK;
  if (auto e = checkProblem(r))
    throw Error(*e);
  return r;
}

AttentionConfig Runtime::selectAttention(const AttentionProblem &p,
                                         const AttentionArgs &args) {
  (void)args;
  if (auto e = checkProblem(p))
    throw Error(*e);
  return attentionChoice(p, nullptr, nullptr).config;
}

void Runtime::attention(const AttentionProblem &p, const AttentionArgs &args,
                        void *stream) {
  if (!backend_)
    throw Error("attention: no GPU runtime with a device was found, so "
                "nothing can run (kernels can still be compiled: kgen "
                "compile)");
  const AttentionProblem r = sizedForCall(p, args);
  launchAttention(r, attentionChoice(r, nullptr, stream), args, stream);
}

void Runtime::launchAttention(const AttentionProblem &p,
                              const AttentionConfig &c,
                              const AttentionArgs &args, void *stream) {
  if (!backend_)
    throw Error("attention: no GPU to launch on");
  const AttentionProblem r = sizedForCall(p, args);
  launchAttention(r, attentionChoice(r, &c, stream), args, stream);
}

void Runtime::launchAttention(const AttentionProblem &p,
                              const AttentionChoice &ch,
                              const AttentionArgs &args, void *stream) {
  const Kernel &k = *ch.kernel;
  if (!k.function)
    throw Error("attention: kernel " + k.source.name +
                " is not loaded on a GPU (compiled for " +
                std::string(toString(k.source.target)) + ")");
  aligned16("q", args.q);
  aligned16("k", args.k);
  aligned16("v", args.v);
  aligned16("o", args.o);
  if (p.lse && !args.lse)
    argError("the problem has lse = true but args.lse is null");
  if (p.bias && !args.bias)
    argError("the problem has bias = true but args.bias is null");
  if (p.alibi && !args.alibiSlopes)
    argError("the problem has alibi = true but args.alibiSlopes is null");
  if (p.varlen && (!args.cuSeqlensQ || !args.cuSeqlensK))
    argError("the problem has varlen = true but cuSeqlensQ or cuSeqlensK is "
             "null");
  if (auto e = checkAttentionDescales(p, args.qDescale || args.kDescale ||
                                             args.vDescale))
    throw Error(*e);
  if (p.varlen && p.lse && args.totalQ < 0)
    argError("varlen with LSE needs args.totalQ (cuSeqlensQ[batch]), the "
             "row count of LSE's [headsQ, totalQ] layout");

  attention::Params prm{};
  prm.q = args.q;
  prm.k = args.k;
  prm.v = args.v;
  prm.o = args.o;
  prm.lse = args.lse;
  prm.bias = args.bias;
  prm.alibiSlopes = args.alibiSlopes;
  prm.cuSeqlensQ = args.cuSeqlensQ;
  prm.cuSeqlensK = args.cuSeqlensK;
  prm.batch = int(p.batch);
  prm.headsQ = int(p.headsQ);
  prm.headsKv = int(p.headsKv);
  prm.seqlenQ = int(p.seqlenQ);
  prm.seqlenK = int(p.seqlenK);
  prm.splits = ch.config.splits;
  const int alignIn = 16 / sizeOf(p.dtype),
            alignOut = 16 / sizeOf(attentionOutputDType(p));
  strides("q", args.strideQ, prm.strideQ, p, p.seqlenQ, p.headsQ, p.headDimQk,
          alignIn);
  strides("k", args.strideK, prm.strideK, p, p.seqlenK, p.headsKv, p.headDimQk,
          alignIn);
  strides("v", args.strideV, prm.strideV, p, p.seqlenK, p.headsKv, p.headDimV,
          alignIn);
  strides("o", args.strideO, prm.strideO, p, p.seqlenQ, p.headsQ, p.headDimV,
          alignOut);
  prm.qDescale = args.qDescale;
  prm.kDescale = args.kDescale;
  prm.vDescale = args.vDescale;
  const bool packedBias = args.strideBias[0] == 0 && args.strideBias[1] == 0 &&
                          args.strideBias[2] == 0;
  prm.strideBias[0] =
      packedBias ? p.headsQ * p.seqlenQ * p.seqlenK : args.strideBias[0];
  prm.strideBias[1] = packedBias ? p.seqlenQ * p.seqlenK : args.strideBias[1];
  prm.strideBias[2] = packedBias ? p.seqlenK : args.strideBias[2];
  prm.lseStride[0] = p.varlen ? 0 : p.headsQ * p.seqlenQ;
  prm.lseStride[1] = p.varlen ? args.totalQ : p.seqlenQ;
  const float scale =
      args.scale != 0.f ? args.scale : 1.f / std::sqrt(float(p.headDimQk));
  // The kernels fold the scale into exp2's FMA after the row maximum, which
  // holds for a positive scale only.
  if (!(scale > 0.f) || !std::isfinite(scale))
    argError("scale = " + std::to_string(scale) +
             " must be positive and finite (0 means 1/sqrt(headDimQk))");
  prm.scaleLog2 = scale * 1.4426950408889634f;
  prm.windowLeft = p.windowLeft;
  prm.windowRight = p.windowRight;

  if (ch.config.splits > 1) {
    const size_t need =
        attentionWorkspaceBytes(p, ch.config, p.batch, p.seqlenQ);
    void *ws = args.workspace;
    if (ws && args.workspaceBytes < need)
      argError("workspace of " + std::to_string(args.workspaceBytes) +
               " B is smaller than the " + std::to_string(need) +
               " B split-KV needs (attentionWorkspaceBytes)");
    if (!ws) {
      std::lock_guard<std::mutex> lock(mu_);
      if (attentionWorkspaceBytes_ < need) {
        if (stream && backend_->isCapturing(stream))
          argError("split-KV needs a larger workspace and the stream is being "
                   "captured; pass args.workspace or run once before capture");
        Backend *be = backend_.get();
        attentionWorkspace_ = std::shared_ptr<void>(
            be->alloc(need), [be](void *ptr) { be->free(ptr); });
        attentionWorkspaceBytes_ = need;
      }
      ws = attentionWorkspace_.get();
    }
    const size_t rows = size_t(ch.config.splits) * size_t(p.batch) *
                        size_t(p.headsQ) * size_t(p.seqlenQ);
    prm.partialO = static_cast<float *>(ws);
    prm.partialLse = prm.partialO + rows * size_t(p.headDimV);
    if (!ch.combine)
      throw Error("attention: the combine kernel of " + k.source.name +
                  " is not loaded");
  }

  // The persistent grid: one block per multiprocessor of this device; with
  // the dynamic schedule (attentionDynamicSchedule) its work tiles are
  // claimed through two counters of the stream's workspace (the GEMM's,
  // which every kernel leaves zero), and without them (first use during a
  // capture) walked statically.
  if (ch.config.persistent) {
    prm.tiles = int(attentionWorkTiles(p, ch.config, p.batch, p.seqlenQ));
    if (attentionDynamicSchedule(p))
      prm.tileCounter = streamCounters(stream, 2);
  }
  const LaunchDims d =
      attentionLaunchDims(p, ch.config, k.source.target, p.batch, p.seqlenQ,
                          backend_->computeUnits());
  if (d.grid[1] > 65535 || d.grid[2] > 65535)
    argError("heads * splits = " + std::to_string(d.grid[1]) + " or batch = " +
             std::to_string(d.grid[2]) + " exceeds the grid limit 65535");
  void *params[] = {&prm};
  if (ch.config.loop == AttentionLoop::Wgmma) {
    // TMA reads Q, K and V as (dim, head, sequence, batch) through the
    // call's strides, in boxes of one 128-byte swizzle row of dims (64 or
    // fp8's 128) by one tile of rows; rows past a sequence read as zeros.
    Backend::TensorMap maps[3];
    const uint32_t rowElems = uint32_t(128 / sizeOf(p.dtype));
    auto encode = [&](Backend::TensorMap &m, const void *base, int64_t dim,
                      int64_t heads, int64_t seqlen, const long long(&st)[3],
                      int rows, int boxHeads = 1) {
      const uint64_t dims[4] = {uint64_t(dim), uint64_t(heads),
                                uint64_t(seqlen), uint64_t(p.batch)};
      const uint64_t str[4] = {1, uint64_t(st[2]), uint64_t(st[1]),
                               uint64_t(st[0])};
      const uint32_t box[4] = {rowElems, uint32_t(boxHeads), uint32_t(rows), 1};
      backend_->encodeTensorMap(&m, base, p.dtype, 4, dims, str, box);
    };
    // GQA packing: Q's box holds the g heads of a KV head for blockM / g
    // queries, packed row r = query r / g of head r % g.
    const int g = ch.config.packGqa ? int(p.headsQ / p.headsKv) : 1;
    encode(maps[0], prm.q, p.headDimQk, p.headsQ, p.seqlenQ, prm.strideQ,
           ch.config.blockM / g, g);
    encode(maps[1], prm.k, p.headDimQk, p.headsKv, p.seqlenK, prm.strideK,
           ch.config.blockN);
    encode(maps[2], prm.v, p.headDimV, p.headsKv, p.seqlenK, prm.strideV,
           ch.config.blockN);
    void *wgmmaParams[] = {&maps[0], &maps[1], &maps[2], &prm};
    backend_->launch(k.function, d, wgmmaParams, stream);
  } else {
    backend_->launch(k.function, d, params, stream);
  }
  if (ch.config.splits > 1) {
    const LaunchDims dc = attentionCombineLaunchDims(
        p, ch.config, k.source.target, p.batch, p.seqlenQ);
    backend_->launch(ch.combine, dc, params, stream);
  }
}

} // namespace kgen
