//===- CAPI.cpp - The C API over kgen::Runtime ----------------------------===//
//
// Every entry point runs its body inside `guard`, which turns each C++
// exception into a status code and a thread-local message: no exception
// crosses the C boundary and nothing aborts.
//
//===----------------------------------------------------------------------===//

#include "kgen/kgen_c.h"

#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Codegen/Candidates.h"
#include "kgen/Codegen/Json.h"
#include "kgen/Codegen/Limits.h"
#include "kgen/Codegen/PartialConfig.h"
#include "kgen/kgen.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>

struct kgen_runtime {
  explicit kgen_runtime(kgen::RuntimeOptions o) : rt(std::move(o)) {
    target = std::string(kgen::toString(rt.target()));
  }
  kgen::Runtime rt;
  std::string target;
  /// The configs launch calls' config_json gave (parseConfig), by the JSON
  /// and the call's sized problem: one given by strategy fields alone walks
  /// the candidates once, not on every launch.
  std::mutex mu;
  std::map<std::string, kgen::AttentionConfig> attentionConfigs;
  std::map<std::string, kgen::MlstmConfig> mlstmConfigs;
  /// The launch calls' problems, parsed and checked, by their JSON: a loop
  /// sends the same text every call (a decode loop's sizes travel in the
  /// args), so each call skips the parse (rememberedProblem). Each is
  /// cleared when it grows past kMaxProblems (callers that put every call's
  /// sizes in the JSON).
  std::unordered_map<std::string, kgen::AttentionProblem> attentionProblems;
  std::unordered_map<std::string, kgen::GemmProblem> gemmProblems;
  std::unordered_map<std::string, kgen::MlstmProblem> mlstmProblems;
  static constexpr size_t kMaxProblems = 1024;
};

namespace {

thread_local std::string lastError;

/// The caller's mistake (bad JSON, invalid problem, bad argument).
struct InvalidArgument : kgen::Error {
  using kgen::Error::Error;
};
/// A call that needs a GPU on a runtime that has none.
struct NoDevice : kgen::Error {
  using kgen::Error::Error;
};

template <class F> kgen_status_t guard(F &&body) {
  lastError.clear();
  try {
    body();
    return KGEN_OK;
  } catch (const InvalidArgument &e) {
    lastError = e.what();
    return KGEN_ERROR_INVALID_ARGUMENT;
  } catch (const NoDevice &e) {
    lastError = e.what();
    return KGEN_ERROR_NO_DEVICE;
  } catch (const kgen::Error &e) {
    lastError = e.what();
    return KGEN_ERROR_RUNTIME;
  } catch (const std::bad_alloc &) {
    lastError = "kgen: out of host memory";
    return KGEN_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    lastError = std::string("kgen internal error: ") + e.what();
    return KGEN_ERROR_INTERNAL;
  } catch (...) {
    lastError = "kgen internal error: unknown exception";
    return KGEN_ERROR_INTERNAL;
  }
}

nlohmann::json parseJson(const char *text, const char *what) {
  if (!text)
    throw InvalidArgument(std::string(what) + " is NULL");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception &e) {
    throw InvalidArgument(std::string(what) +
                          " is not valid JSON: " + e.what());
  }
}

kgen::GemmProblem parseProblem(const char *text) {
  nlohmann::json j = parseJson(text, "problem_json");
  kgen::GemmProblem p;
  try {
    p = kgen::gemmProblemFromJson(j);
  } catch (const kgen::Error &e) {
    throw InvalidArgument(e.what());
  }
  if (auto e = kgen::checkProblem(p))
    throw InvalidArgument(*e);
  return p;
}

/// What an invalid config that spells a tile hears (PartialConfig.h).
constexpr const char *kSpelledConfigHint =
    " (fields not given keep their plain defaults; strategy fields alone, "
    "such as {\"loop\": \"wgmma\"}, take the dispatcher's choice among the "
    "configs with them; `kgen compile --candidates` lists the valid ones)";

/// The config `text` gives (PartialConfig.h: tile fields spell it, strategy
/// fields alone pick among the candidates), or the dispatcher's default
/// when `text` is NULL; checked against the target's limits either way.
template <class Config, class Problem, class Parse, class Keys>
Config parseConfig(const char *text, const Problem &p, kgen::Target t,
                   Parse parse, const Keys &tileFields) {
  kgen::PartialConfig<Config> given; // nothing given: the default
  if (text) {
    try {
      given = kgen::partialConfigFromJson<Config>(
          parseJson(text, "config_json"), parse, tileFields);
    } catch (const kgen::Error &e) {
      throw InvalidArgument(e.what());
    }
  }
  const Config c = given.pick(p, t);
  if (auto e = kgen::checkConfig(p, c, t))
    throw InvalidArgument(*e + (given.tile ? kSpelledConfigHint : ""));
  return c;
}

kgen::GemmConfig parseConfig(const char *text, const kgen::GemmProblem &p,
                             kgen::Target t) {
  return parseConfig<kgen::GemmConfig>(text, p, t, kgen::gemmConfigFromJson,
                                       kgen::kGemmTileFields);
}

/// parseConfig for a launch on `r`, with the call's sized problem `p`,
/// remembered in `known`.
template <class Config, class Problem, class Parse, class Keys>
Config launchConfig(kgen_runtime &r, std::map<std::string, Config> &known,
                    const char *text, const Problem &p, Parse parse,
                    const Keys &tileFields) {
  std::string key = std::string(text) + '\n' + toJson(p).dump();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (auto it = known.find(key); it != known.end())
      return it->second;
  }
  const Config c =
      parseConfig<Config>(text, p, r.rt.target(), parse, tileFields);
  std::lock_guard<std::mutex> lock(r.mu);
  return known.emplace(std::move(key), c).first->second;
}

/// `parse(json)` (which throws for a bad text), remembered in `known` by the
/// text: texts that fail are not remembered, so every call meets their
/// checks again.
template <class Problem, class Parse>
Problem rememberedProblem(kgen_runtime &r,
                          std::unordered_map<std::string, Problem> &known,
                          const char *json, Parse parse) {
  if (json) {
    std::lock_guard<std::mutex> lock(r.mu);
    if (auto it = known.find(json); it != known.end())
      return it->second;
  }
  const Problem p = parse(json);
  std::lock_guard<std::mutex> lock(r.mu);
  if (known.size() >= kgen_runtime::kMaxProblems)
    known.clear();
  known.emplace(json, p);
  return p;
}

/// kgen_attention's problem_json, parsed and checked on `r`'s target.
kgen::AttentionProblem attentionProblem(kgen_runtime &r, const char *json) {
  return rememberedProblem(r, r.attentionProblems, json, [&](const char *t) {
    kgen::AttentionProblem p;
    try {
      p = kgen::attentionProblemFromJson(parseJson(t, "problem_json"));
    } catch (const kgen::Error &e) {
      throw InvalidArgument(e.what());
    }
    if (auto e = kgen::checkProblemOnTarget(p, r.rt.target()))
      throw InvalidArgument(*e);
    return p;
  });
}

/// A GEMM launch's problem_json, parsed and checked.
kgen::GemmProblem gemmProblem(kgen_runtime &r, const char *json) {
  return rememberedProblem(r, r.gemmProblems, json, parseProblem);
}

/// kgen_mlstm's problem_json (not NULL), parsed.
kgen::MlstmProblem mlstmProblem(kgen_runtime &r, const char *json) {
  return rememberedProblem(r, r.mlstmProblems, json, [](const char *t) {
    try {
      return kgen::mlstmProblemFromJson(nlohmann::json::parse(t));
    } catch (const nlohmann::json::exception &e) {
      throw InvalidArgument(std::string("kgen_mlstm: malformed JSON: ") +
                            e.what());
    } catch (const kgen::Error &e) {
      throw InvalidArgument(e.what());
    }
  });
}

/// `name` as a target; NULL and "native" give `native`.
kgen::Target parseTarget(const char *name, std::optional<kgen::Target> native) {
  if ((!name || std::strcmp(name, "native") == 0) && native)
    return *native;
  if (!name)
    throw InvalidArgument("target is NULL; pass sm_80, sm_90a, gfx90a or "
                          "gfx942");
  if (auto t = kgen::parseTarget(name))
    return *t;
  throw InvalidArgument(std::string("unknown target '") + name +
                        "'; kgen targets are sm_80, sm_90a, gfx90a, gfx942" +
                        (native ? " and native" : ""));
}

kgen_runtime &runtime(kgen_runtime_t *rt) {
  if (!rt)
    throw InvalidArgument("runtime is NULL; create one with "
                          "kgen_runtime_create");
  return *rt;
}

/// Copies `s` into a fixed-size field of kgen_kernel_info_t.
template <size_t N>
void copyField(char (&dst)[N], const std::string &s, const char *what) {
  if (s.size() >= N)
    throw kgen::Error(std::string("kgen_kernel_info_t: the ") + what + " (" +
                      std::to_string(s.size()) +
                      " chars) does not fit kgen_kernel_info_t");
  std::memcpy(dst, s.c_str(), s.size() + 1);
}

/// kgen_gemm_args_t as kgen::GemmArgs, checked against the problem (which
/// `resolve` fills in from them).
kgen::GemmArgs gemmArgs(const kgen_gemm_args_t *in, kgen::GemmProblem &p,
                        const char *fn) {
  if (!in)
    throw InvalidArgument(std::string(fn) + ": args is NULL");
  kgen::GemmArgs args;
  args.a = in->a;
  args.b = in->b;
  args.c = in->c;
  args.m = in->m;
  args.lda = in->lda;
  args.ldb = in->ldb;
  args.ldc = in->ldc;
  args.alpha = in->alpha;
  args.beta = in->beta;
  args.bias = in->bias;
  args.residual = in->residual;
  args.ldr = in->ldr;
  args.batch = in->batch;
  args.strideA = in->stride_a;
  args.strideB = in->stride_b;
  args.strideC = in->stride_c;
  args.strideBias = in->stride_bias;
  args.strideResidual = in->stride_residual;
  args.scaleA = in->scale_a;
  args.scaleB = in->scale_b;
  try {
    kgen::Runtime::resolve(p, args);
  } catch (const kgen::Error &e) {
    throw InvalidArgument(e.what());
  }
  return args;
}

/// Fills `info` with what describes kernel `k`.
void fillInfo(kgen_kernel_info_t *info, const kgen::Kernel &k, kgen::Target t) {
  std::memset(info, 0, sizeof(*info));
  copyField(info->name, k.source.name, "kernel name");
  copyField(info->target, std::string(kgen::toString(t)), "target");
  copyField(info->config_json, kgen::toJson(k.config).dump(), "config JSON");
  copyField(info->cache_key, k.cacheKey, "cache key");
  info->cache_hit = k.cacheHit ? 1 : 0;
  info->loaded = k.function ? 1 : 0;
  info->compile_ms = k.compileMs;
  info->binary_bytes = int64_t(k.binary.size());
}

} // namespace

extern "C" {

const char *kgen_version(void) {
  static const std::string v(kgen::kVersion);
  return v.c_str();
}

uint64_t kgen_compiled_kernels(void) { return kgen::compiledKernelCount(); }

const char *kgen_last_error(void) { return lastError.c_str(); }

const char *kgen_status_name(kgen_status_t s) {
  switch (s) {
  case KGEN_OK:
    return "KGEN_OK";
  case KGEN_ERROR_INVALID_ARGUMENT:
    return "KGEN_ERROR_INVALID_ARGUMENT";
  case KGEN_ERROR_NO_DEVICE:
    return "KGEN_ERROR_NO_DEVICE";
  case KGEN_ERROR_RUNTIME:
    return "KGEN_ERROR_RUNTIME";
  case KGEN_ERROR_OUT_OF_MEMORY:
    return "KGEN_ERROR_OUT_OF_MEMORY";
  case KGEN_ERROR_INTERNAL:
    return "KGEN_ERROR_INTERNAL";
  }
  return "KGEN_ERROR_UNKNOWN";
}

kgen_status_t kgen_runtime_create(const char *target, kgen_runtime_t **out) {
  return kgen_runtime_create_on(target, -1, out);
}

kgen_status_t kgen_runtime_create_on(const char *target, int device,
                                     kgen_runtime_t **out) {
  return guard([&] {
    if (!out)
      throw InvalidArgument("kgen_runtime_create: out is NULL");
    *out = nullptr;
    if (device < -1)
      throw InvalidArgument("kgen_runtime_create_on: device " +
                            std::to_string(device) +
                            " is neither -1 (KGEN_DEVICE) nor a device index");
    kgen::RuntimeOptions opts;
    if (target && std::strcmp(target, "native") != 0)
      opts.target = parseTarget(target, std::nullopt);
    if (device >= 0)
      opts.device = device;
    auto rt = std::make_unique<kgen_runtime>(std::move(opts));
    if (device >= 0 && !rt->rt.backend()) // asked for by index: that GPU
      throw NoDevice("kgen_runtime_create_on: device " +
                     std::to_string(device) + ": " + rt->rt.whyNoDevice());
    *out = rt.release();
  });
}

void kgen_runtime_destroy(kgen_runtime_t *rt) {
  // A destructor that throws would be a kgen bug; still never let it out.
  try {
    delete rt;
  } catch (...) {
  }
}

int kgen_has_device(kgen_runtime_t *rt) {
  return rt && rt->rt.backend() ? 1 : 0;
}

int kgen_runtime_device(kgen_runtime_t *rt) {
  return rt && rt->rt.backend() ? rt->rt.backend()->deviceOrdinal() : -1;
}

const char *kgen_runtime_target(kgen_runtime_t *rt) {
  return rt ? rt->target.c_str() : nullptr;
}

kgen_status_t kgen_gemm(kgen_runtime_t *rt, const char *problem_json,
                        const void *a, const void *b, void *c, int64_t m,
                        int64_t lda, int64_t ldb, int64_t ldc, float alpha,
                        float beta, void *stream) {
  return guard([&] {
    kgen_runtime &r = runtime(rt);
    kgen::GemmProblem p = gemmProblem(r, problem_json);
    if (!r.rt.backend())
      throw NoDevice("kgen_gemm: no GPU runtime with a device was found, so "
                     "nothing can run; kernels can still be built with "
                     "kgen_compile or `kgen compile`");
    kgen::GemmArgs args;
    args.a = a;
    args.b = b;
    args.c = c;
    args.m = m;
    args.lda = lda;
    args.ldb = ldb;
    args.ldc = ldc;
    args.alpha = alpha;
    args.beta = beta;
    // Argument errors are the caller's: classify them before the pipeline
    // runs (Runtime::gemm checks the same things again).
    try {
      kgen::Runtime::resolve(p, args);
    } catch (const kgen::Error &e) {
      throw InvalidArgument(e.what());
    }
    r.rt.gemm(p, args, stream);
  });
}

kgen_status_t kgen_attention(kgen_runtime_t *rt, const char *problem_json,
                             const char *config_json,
                             const kgen_attention_args_t *args, void *stream) {
  return guard([&] {
    kgen_runtime &r = runtime(rt);
    kgen::AttentionProblem p = attentionProblem(r, problem_json);
    if (!args)
      throw InvalidArgument("kgen_attention: args is NULL");
    // The caller's mistake, classified before the device check below.
    if (auto e = kgen::checkAttentionDescales(
            p, args->q_descale || args->k_descale || args->v_descale))
      throw InvalidArgument(*e);
    std::optional<kgen::AttentionConfig> c;
    if (config_json) {
      kgen::AttentionArgs sizes;
      sizes.batch = args->batch;
      sizes.seqlenQ = args->seqlen_q;
      sizes.seqlenK = args->seqlen_k;
      try {
        p = kgen::sizedForCall(p, sizes);
      } catch (const kgen::Error &e) {
        throw InvalidArgument(e.what());
      }
      c = launchConfig(r, r.attentionConfigs, config_json, p,
                       kgen::attentionConfigFromJson,
                       kgen::kAttentionTileFields);
    }
    if (!r.rt.backend())
      throw NoDevice("kgen_attention: no GPU runtime with a device was "
                     "found, so nothing can run");
    kgen::AttentionArgs a;
    a.q = args->q;
    a.k = args->k;
    a.v = args->v;
    a.o = args->o;
    a.lse = args->lse;
    a.bias = args->bias;
    a.alibiSlopes = args->alibi_slopes;
    a.cuSeqlensQ = args->cu_seqlens_q;
    a.cuSeqlensK = args->cu_seqlens_k;
    a.batch = args->batch;
    a.seqlenQ = args->seqlen_q;
    a.seqlenK = args->seqlen_k;
    a.totalQ = args->total_q;
    for (int i = 0; i < 3; ++i) {
      a.strideQ[i] = args->stride_q[i];
      a.strideK[i] = args->stride_k[i];
      a.strideV[i] = args->stride_v[i];
      a.strideO[i] = args->stride_o[i];
      a.strideBias[i] = args->stride_bias[i];
    }
    a.scale = args->scale;
    a.qDescale = args->q_descale;
    a.kDescale = args->k_descale;
    a.vDescale = args->v_descale;
    if (c)
      r.rt.launchAttention(p, *c, a, stream);
    else
      r.rt.attention(p, a, stream);
  });
}

kgen_status_t kgen_mlstm(kgen_runtime_t *rt, const char *problem_json,
                         const char *config_json, const void *q, const void *k,
                         const void *v, const void *i, const void *f, void *h,
                         const float *c0, const float *n0, const float *m0,
                         float *c_out, float *n_out, float *m_out, int64_t b,
                         int64_t nh, int64_t s, void *stream) {
  return guard([&] {
    kgen_runtime &r = runtime(rt);
    if (!problem_json)
      throw InvalidArgument("kgen_mlstm: problem_json is NULL");
    const kgen::MlstmProblem p = mlstmProblem(r, problem_json);
    kgen::MlstmArgs a;
    a.b = b;
    a.nh = nh;
    a.s = s;
    std::optional<kgen::MlstmConfig> cfg;
    if (config_json)
      cfg =
          launchConfig(r, r.mlstmConfigs, config_json, kgen::sizedForCall(p, a),
                       kgen::mlstmConfigFromJson, kgen::kMlstmTileFields);
    if (!r.rt.backend())
      throw NoDevice("kgen_mlstm: no GPU runtime with a device was found, so "
                     "nothing can run");
    a.q = q;
    a.k = k;
    a.v = v;
    a.i = i;
    a.f = f;
    a.h = h;
    a.c0 = c0;
    a.n0 = n0;
    a.m0 = m0;
    a.cT = c_out;
    a.nT = n_out;
    a.mT = m_out;
    a.config = cfg ? &*cfg : nullptr;
    r.rt.mlstm(p, a, stream);
  });
}

void kgen_gemm_args_init(kgen_gemm_args_t *args) {
  if (!args)
    return;
  const kgen::GemmArgs d;
  *args = kgen_gemm_args_t{};
  args->m = d.m;
  args->alpha = d.alpha;
  args->beta = d.beta;
  args->batch = d.batch;
  args->stride_a = d.strideA;
  args->stride_b = d.strideB;
  args->stride_c = d.strideC;
  args->stride_bias = d.strideBias;
  args->stride_residual = d.strideResidual;
}

kgen_status_t kgen_gemm_ex(kgen_runtime_t *rt, const char *problem_json,
                           const kgen_gemm_args_t *in, void *stream) {
  return guard([&] {
    kgen_runtime &r = runtime(rt);
    kgen::GemmProblem p = gemmProblem(r, problem_json);
    if (in && !r.rt.backend())
      throw NoDevice("kgen_gemm_ex: no GPU runtime with a device was found, "
                     "so nothing can run; kernels can still be built with "
                     "kgen_compile or `kgen compile`");
    kgen::GemmArgs args = gemmArgs(in, p, "kgen_gemm_ex");
    r.rt.gemm(p, args, stream);
  });
}

kgen_status_t kgen_gemm_select(kgen_runtime_t *rt, const char *problem_json,
                               const kgen_gemm_args_t *in,
                               kgen_kernel_info_t *info_out) {
  return guard([&] {
    kgen_runtime &r = runtime(rt);
    if (!info_out)
      throw InvalidArgument("kgen_gemm_select: info_out is NULL");
    std::memset(info_out, 0, sizeof(*info_out));
    kgen::GemmProblem p = parseProblem(problem_json);
    kgen::GemmArgs args = gemmArgs(in, p, "kgen_gemm_select");
    fillInfo(info_out, *r.rt.select(p, args), r.rt.target());
  });
}

kgen_status_t kgen_emit(const char *problem_json, const char *config_json,
                        const char *target, int inline_, char **source_out) {
  return guard([&] {
    if (!source_out)
      throw InvalidArgument("kgen_emit: source_out is NULL");
    *source_out = nullptr;
    kgen::GemmProblem p = parseProblem(problem_json);
    kgen::Target t = parseTarget(target, std::nullopt);
    kgen::GemmConfig c = parseConfig(config_json, p, t);
    kgen::KernelSource ks = kgen::emitGemm(p, c, t, inline_ != 0);
    char *s = static_cast<char *>(std::malloc(ks.source.size() + 1));
    if (!s)
      throw std::bad_alloc();
    std::memcpy(s, ks.source.c_str(), ks.source.size() + 1);
    *source_out = s;
  });
}

kgen_status_t kgen_compile(kgen_runtime_t *rt, const char *problem_json,
                           const char *config_json, const char *target,
                           kgen_kernel_info_t *info_out) {
  return guard([&] {
    kgen_runtime &r = runtime(rt);
    if (!info_out)
      throw InvalidArgument("kgen_compile: info_out is NULL");
    std::memset(info_out, 0, sizeof(*info_out));
    kgen::GemmProblem p = parseProblem(problem_json);
    kgen::Target t = parseTarget(target, r.rt.target());
    kgen::GemmConfig c = parseConfig(config_json, p, t);
    fillInfo(info_out, *r.rt.compile(p, c, t), t);
  });
}

void kgen_free(void *p) { std::free(p); }

} // extern "C"
