/*===- kgen_c.h - The C API: JIT GEMM kernels from any language ---*- C -*-===*
 *
 * A C99 interface over kgen::Runtime for bindings (python/kgen uses it
 * through ctypes) and C host programs:
 *
 *   kgen_runtime_t *rt;
 *   if (kgen_runtime_create(NULL, &rt) != KGEN_OK)
 *     fprintf(stderr, "%s\n", kgen_last_error());
 *   kgen_gemm(rt, "{\"m\":532,\"n\":2048,\"k\":2048,\"layout\":\"nt\"}",
 *             dA, dB, dC, 532, 0, 0, 0, 1.0f, 0.0f, stream);
 *   kgen_runtime_destroy(rt);
 *
 * Problems and configs are the JSON of `kgen emit` / `kgen compile`:
 *   problem: {"m":532,"n":2048,"k":2048,"ab":"bf16","c":"bf16",
 *             "layout":"nt","static":["n","k"],"align":[8,8,8]}
 *   config:  {"block":[128,128,32],"warps":[2,2],"stages":3,
 *             "smem":"padded","pad":8}
 * Only m, n and k are required; the rest default as shown.
 *
 * Every function that returns kgen_status_t catches all errors at the
 * boundary: nothing aborts and no C++ exception crosses it. On failure the
 * message (what went wrong and how to fix it) is kgen_last_error().
 *
 *===----------------------------------------------------------------------===*/

#ifndef KGEN_KGEN_C_H
#define KGEN_KGEN_C_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KGEN_C_API __attribute__((visibility("default")))
#else
#define KGEN_C_API
#endif

typedef enum kgen_status {
  KGEN_OK = 0,
  /** Bad JSON, an invalid problem or config, a bad argument (null pointer,
   *  leading dimension smaller than a row, unknown target). */
  KGEN_ERROR_INVALID_ARGUMENT = 1,
  /** No GPU runtime with a device: kernels compile but cannot run. */
  KGEN_ERROR_NO_DEVICE = 2,
  /** Anything the pipeline reports: compile errors (with the compiler log
   *  and where the source was saved), cache, module load, launch. */
  KGEN_ERROR_RUNTIME = 3,
  KGEN_ERROR_OUT_OF_MEMORY = 4,
  /** An unexpected error inside kgen; please report it. */
  KGEN_ERROR_INTERNAL = 5
} kgen_status_t;

/** A kgen::Runtime: the GPU (if any), the compilers and the kernel cache.
 *  Safe to use from several threads. */
typedef struct kgen_runtime kgen_runtime_t;

/** What kgen_compile built, or the kernel kgen_gemm_select found. Strings
 *  are NUL-terminated. */
typedef struct kgen_kernel_info {
  char name[256];        /**< the stable kernel name */
  char target[16];       /**< "sm_90a", "gfx942", ... */
  char config_json[256]; /**< the config that was compiled, as JSON */
  char cache_key[72];    /**< 64 hex chars */
  int cache_hit;         /**< 1 when it came from the cache */
  int loaded;            /**< 1 when loaded on this runtime's GPU */
  double compile_ms;     /**< time spent compiling (0 on a hit) */
  int64_t binary_bytes;  /**< size of the cubin / code object */
} kgen_kernel_info_t;

/** kgen's version, e.g. "0.1.0". */
KGEN_C_API const char *kgen_version(void);

/** Kernels this process has compiled so far (cache misses that ran nvrtc or
 *  hiprtc); 0 for a run served by the kernel cache and a bundle. */
KGEN_C_API uint64_t kgen_compiled_kernels(void);

/** The message of the last failing call on this thread, or "" when the
 *  last call succeeded. Valid until the next kgen call on this thread. */
KGEN_C_API const char *kgen_last_error(void);

/** A short name of a status code ("KGEN_ERROR_NO_DEVICE"). */
KGEN_C_API const char *kgen_status_name(kgen_status_t s);

/** Opens the GPU (CUDA or HIP, whichever has a device; device $KGEN_DEVICE,
 *  default 0) and the cache.
 *  `target`: NULL or "native" = the GPU's target (sm_90a without a GPU),
 *  else "sm_80", "sm_90a", "gfx90a" or "gfx942". Works without a GPU. */
KGEN_C_API kgen_status_t kgen_runtime_create(const char *target,
                                             kgen_runtime_t **out);
/** kgen_runtime_create on GPU `device` (its CUDA or HIP index; -1:
 *  $KGEN_DEVICE, else 0, as kgen_runtime_create). A device asked for by
 *  index must exist, else KGEN_ERROR_NO_DEVICE. A runtime drives one GPU:
 *  a program on several creates one for each. Every call makes the device
 *  current on the calling thread and the thread's previous one current
 *  again after it, so the caller's (PyTorch's) current device never moves. */
KGEN_C_API kgen_status_t kgen_runtime_create_on(const char *target, int device,
                                                kgen_runtime_t **out);
KGEN_C_API void kgen_runtime_destroy(kgen_runtime_t *rt);

/** 1 when `rt` has a GPU to run on, else 0. */
KGEN_C_API int kgen_has_device(kgen_runtime_t *rt);
/** The index of `rt`'s GPU on its vendor's runtime; -1 without one. */
KGEN_C_API int kgen_runtime_device(kgen_runtime_t *rt);
/** The target `rt` compiles for ("sm_90a"); NULL for a NULL runtime. */
KGEN_C_API const char *kgen_runtime_target(kgen_runtime_t *rt);

/** C = alpha * op(A) * op(B) + beta * C on `stream` (CUstream / hipStream_t,
 *  NULL = the default stream), with the kernel the dispatcher picks for the
 *  problem, compiled on first use. `m` is the run-time M (-1: the problem's
 *  m). Leading dimensions of 0 mean packed. Storage is row-major:
 *    A 'n': M x K (lda >= K)   A 't': K x M (lda >= M)
 *    B 'n': K x N (ldb >= N)   B 't': N x K (ldb >= K)
 *    C    : M x N (ldc >= N)
 *  With beta == 0, C is not read. The runtime remembers each problem text it
 *  has parsed and checked (kgen_gemm_ex, kgen_attention and kgen_mlstm too),
 *  so a loop that sends the same text parses it once. */
KGEN_C_API kgen_status_t kgen_gemm(kgen_runtime_t *rt, const char *problem_json,
                                   const void *a, const void *b, void *c,
                                   int64_t m, int64_t lda, int64_t ldb,
                                   int64_t ldc, float alpha, float beta,
                                   void *stream);

/** Every argument of one GEMM call, for kgen_gemm_ex: kgen_gemm's, plus
 *  the fused epilogue's operands (problem fields "bias", "act", "residual";
 *  C's dtype) and strided batches (problem field "batch"). Fill it with
 *  kgen_gemm_args_init, then set what the call needs. */
typedef struct kgen_gemm_args {
  const void *a, *b;
  void *c;
  int64_t m;             /**< run-time M; -1: the problem's */
  int64_t lda, ldb, ldc; /**< 0: packed */
  float alpha, beta;
  const void *bias;     /**< M or N values ("bias": "m" or "n") */
  const void *residual; /**< M x N, added after the activation */
  int64_t ldr;          /**< the residual's leading dimension; 0: packed */
  int64_t batch;        /**< -1: the problem's */
  /** Elements between batches; -1: packed, 0: shared (not for C). */
  int64_t stride_a, stride_b, stride_c, stride_bias, stride_residual;
  /** fp8 inputs ("ab": "e4m3" or "e5m2"): device pointers to one float
   *  each, the per-tensor scales of A and B (C = alpha * *scale_a * *scale_b
   *  * A B + ...); NULL: 1. Other dtypes take none. */
  const float *scale_a, *scale_b;
} kgen_gemm_args_t;

/** Defaults: null pointers, m = -1, packed, alpha = 1, beta = 0, the
 *  problem's batch count, packed batch strides. */
KGEN_C_API void kgen_gemm_args_init(kgen_gemm_args_t *args);

/** kgen_gemm with every argument: C = act(alpha * op(A) * op(B) + beta * C
 *  + bias) + residual, per batch. */
KGEN_C_API kgen_status_t kgen_gemm_ex(kgen_runtime_t *rt,
                                      const char *problem_json,
                                      const kgen_gemm_args_t *args,
                                      void *stream);

/** The kernel kgen_gemm_ex runs for these arguments: the dispatcher's pick
 *  for the problem (the tuning DB's winner, else the heuristic), lowered to
 *  the alignment the pointers and leading dimensions allow, built or loaded
 *  on first use as a call's is. Only the arguments' values are looked at
 *  (no memory is touched) and nothing is launched; works without a GPU. */
KGEN_C_API kgen_status_t kgen_gemm_select(kgen_runtime_t *rt,
                                          const char *problem_json,
                                          const kgen_gemm_args_t *args,
                                          kgen_kernel_info_t *info_out);

/** The generated HIP source of a problem for `target` (required: "sm_90a",
 *  ...) under `config_json` (NULL: the dispatcher's default for the
 *  problem). Every config_json below follows kgen/Codegen/PartialConfig.h:
 *  tile fields ("block", "warps", "stages", ...) spell a config, the fields
 *  not given at their plain defaults; strategy fields alone ({"loop":
 *  "gemv"}, {"swap_ab": true}, {"pack_gqa": true}, {"variant": "fused"})
 *  take the dispatcher's choice among the configs with them (for a launch:
 *  at the call's sizes, once per runtime). With `inline_` nonzero, template
 *  headers are pasted in.
 *  `*source_out` is allocated by kgen: release it with kgen_free. */
KGEN_C_API kgen_status_t kgen_emit(const char *problem_json,
                                   const char *config_json, const char *target,
                                   int inline_, char **source_out);

/** Builds one variant through the cache (compiling on a miss) and loads it
 *  when `rt` has a GPU of that target. `config_json` NULL: the default
 *  config; `target` NULL or "native": the runtime's target. */
KGEN_C_API kgen_status_t kgen_compile(kgen_runtime_t *rt,
                                      const char *problem_json,
                                      const char *config_json,
                                      const char *target,
                                      kgen_kernel_info_t *info_out);

/** Device pointers and run-time values of one attention call; zero-fill
 *  it, then set what the problem uses. Strides are in elements, {batch,
 *  seq, head} (head dim contiguous); all zero = packed in the problem's
 *  layout. Sizes of -1 take the problem's. See kgen::AttentionArgs. */
typedef struct kgen_attention_args {
  const void *q, *k, *v;
  void *o;
  float *lse;                 /**< with "lse": [batch, heads_q, seqlen_q] */
  const void *bias;           /**< with "bias": element (b, h, i, j) */
  const float *alibi_slopes;  /**< with "alibi": [heads_q] */
  const int *cu_seqlens_q, *cu_seqlens_k; /**< with "varlen": [batch + 1] */
  int64_t batch, seqlen_q, seqlen_k; /**< varlen: the longest sequences */
  int64_t total_q;            /**< varlen with lse: cu_seqlens_q[batch] */
  int64_t stride_q[3], stride_k[3], stride_v[3], stride_o[3];
  int64_t stride_bias[3];     /**< {batch, head, row}; 0: packed */
  float scale;                /**< 0: 1 / sqrt(head_dim_qk); else > 0 */
  /** fp8 inputs ("dtype": "e4m3" or "e5m2"; O and the bias are then bf16):
   *  device pointers to one float each, the per-tensor descale factors of
   *  Q, K and V. Scores are (Q K^T) * *q_descale * *k_descale * scale and O
   *  is softmax(...) (V * *v_descale); NULL: 1. Other dtypes take none. */
  const float *q_descale, *k_descale, *v_descale;
} kgen_attention_args_t;

/** O = softmax(scale * Q K^T + bias) V for an attention problem
 *  ({"family": "attention", "heads": [32, 8], "head_dim": 128, "dtype":
 *  "bf16", ...}, see kgen/Codegen/AttentionJson.h; "dtype" "e4m3" or "e5m2"
 *  on sm_90a: fp8 Q, K, V, a bf16 O, the descale factors above) on
 *  `stream`. `config_json` NULL: the dispatcher's config; else that
 *  variant. As kgen_gemm, the runtime remembers each problem text: a loop
 *  that keeps the features in the text and the sizes in `args` (batch,
 *  seqlen_q, seqlen_k: a decode loop) parses it once. */
KGEN_C_API kgen_status_t kgen_attention(kgen_runtime_t *rt,
                                        const char *problem_json,
                                        const char *config_json,
                                        const kgen_attention_args_t *args,
                                        void *stream);

/** The mLSTM forward on `stream` (see kgen/Mlstm.h for layouts; problem
 *  JSON as kgen::mlstmProblemFromJson, e.g. {"dqk":256,"dv":512,
 *  "dtype":"bf16","initial":true,"final":true}). `config_json` NULL: the
 *  dispatcher's choice, else that variant (e.g. {"variant":"fused",
 *  "chunk":64,"blockDV":64,"warps":4}). State pointers (fp32) must be given
 *  exactly when the problem says so; final ones may alias the initial ones.
 *  b, nh, s: the call's extents (-1: the problem's). */
KGEN_C_API kgen_status_t kgen_mlstm(
    kgen_runtime_t *rt, const char *problem_json, const char *config_json,
    const void *q, const void *k, const void *v, const void *i, const void *f,
    void *h, const float *c0, const float *n0, const float *m0, float *c_out,
    float *n_out, float *m_out, int64_t b, int64_t nh, int64_t s,
    void *stream);

/** Frees memory kgen allocated (kgen_emit's source). NULL is fine. */
KGEN_C_API void kgen_free(void *p);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KGEN_KGEN_C_H */
