// REQUIRES: mlir
// RUN: kgen-translate --kgen-to-hip -split-input-file %s | FileCheck %s
// RUN: kgen-translate --kgen-to-hip --kgen-inline-templates %s | FileCheck %s --check-prefix=INLINE

// The fused epilogue is fixed at compile time: the Config names the
// features, the kernel name carries them, and the file's comment states the
// formula. Batches are the grid's z dimension and change no code.

// A linear layer with a bias along N, GELU (tanh) and a residual, batched.
// CHECK-LABEL: for sm_90a
// CHECK:      // launch: grid (ceil(N/128), ceil(M/128), batch), 128 threads
// CHECK-NEXT: // epilogue: C = gelu_tanh(alpha * acc + beta * C + bias[n]) + R[m][n]
// CHECK:      #include "kgen/gemm/gemm.h"
// CHECK:      static constexpr int kBias = kgen::gemm::kBiasN, kActivation = kgen::gemm::kActGeluTanh;
// CHECK-NEXT: static constexpr bool kResidual = true;
// CHECK:      kgen_gemm_bf16_nt_mdyn_n2048_k2048_b128x128x32_w2x2_s3_pad8_v888_biasn_gelu_tanh_res(const kgen::gemm::Params p) {
// CHECK-NEXT:   kgen::gemm::run<Config>(p);
kgen.gemm @mlp {m = 532, n = 2048, k = 2048, ab = bf16, c = bf16, layout = "nt", bias = "n", activation = "gelu_tanh", residual, batch = 4, target = "sm_90a", config = #kgen.gemm_config<block = [128, 128, 32], warps = [2, 2], stages = 3, smem = padded, pad = 8>}

// -----

// A bias along M with SiLU on AMD, ragged N: the epilogue's checks follow
// kCheckM/kCheckN.
// CHECK-LABEL: for gfx90a
// CHECK:      // epilogue: C = silu(alpha * acc + beta * C + bias[m])
// CHECK:      static constexpr bool kCheckM = true, kCheckN = true, kCheckK = true;
// CHECK:      static constexpr int kBias = kgen::gemm::kBiasM, kActivation = kgen::gemm::kActSiLU;
// CHECK-NEXT: static constexpr bool kResidual = false;
// CHECK:      kgen_gemm_f16_cf32_nn_mdyn_n4099_k1023_b64x64x32_w2x2_s2_pad8_v111_biasm_silu(
kgen.gemm @gate {m = 127, n = 4099, k = 1023, ab = f16, c = f32, layout = "nn", bias = "m", activation = "silu", target = "gfx90a", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 2, smem = padded, pad = 8>}

// -----

// Without features, the Config says so and the name has no suffix.
// CHECK-LABEL: for sm_80
// CHECK-NOT:  // epilogue:
// CHECK:      static constexpr int kBias = kgen::gemm::kBiasNone, kActivation = kgen::gemm::kActNone;
// CHECK-NEXT: static constexpr bool kResidual = false;
// CHECK:      kgen_gemm_bf16_nt_mdyn_n4096_k4096_b128x128x32_w2x2_s3_pad8_v888(
kgen.gemm @plain {m = 1, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_80", config = #kgen.gemm_config<block = [128, 128, 32], warps = [2, 2], stages = 3, smem = padded, pad = 8>}

// The epilogue template itself, inlined: one function every main loop
// calls per run of accumulators, reading C only when beta != 0.
// INLINE:     begin kgen/gemm/params.h
// INLINE:     struct Params {
// INLINE:     begin kgen/gemm/epilogue.h
// INLINE:     KGEN_DEVICE void epilogue(const Params &p, int batch, int row, int col,
// INLINE:     if (p.beta != 0.f)
// INLINE-NEXT:  add(c, p.beta);
// INLINE:     v[e] = activate<Config::kActivation>(v[e]);
// INLINE:     begin kgen/gemm/gemm.h
// INLINE:     epilogue<Config, 2>(p, batch, row0 + 16 * i + 8 * h + g,
// INLINE:     const int batch = int(blockIdx.z / unsigned(kSplitK));
