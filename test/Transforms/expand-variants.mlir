// REQUIRES: mlir
// RUN: kgen-opt %s -split-input-file -verify-diagnostics --kgen-expand-variants=max-variants=2 | FileCheck %s
// RUN: kgen-opt %s -split-input-file -verify-diagnostics --kgen-expand-variants | FileCheck %s --check-prefix=ALL

// @llama_qkv becomes one op per candidate config, best guess first, named
// _v0, _v1, ...; the first is kgen-select-config's choice.

// CHECK-LABEL: kgen.gemm @llama_qkv_v0
// CHECK-SAME: {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a",
// CHECK-SAME: config = #kgen.gemm_config<loop = wgmma, block = [128, 256, 64], warps = [2, 1], stages = 4, smem = swizzled>}
// CHECK-NEXT: kgen.gemm @llama_qkv_v1
// CHECK-SAME: config = #kgen.gemm_config<
// CHECK-NOT: kgen.gemm
// CHECK: // -----

// ALL-NOT: kgen.gemm @llama_qkv {
// ALL: kgen.gemm @llama_qkv_v0 {{.*}} config = #kgen.gemm_config<loop = wgmma, block = [128, 256, 64], warps = [2, 1], stages = 4, smem = swizzled>}
// ALL-NEXT: kgen.gemm @llama_qkv_v1 {{.*}} config = #kgen.gemm_config<
// ALL-NEXT: kgen.gemm @llama_qkv_v2 {{.*}} config = #kgen.gemm_config<
// ALL-NOT: kgen.gemm @llama_qkv {
// ALL: // -----
kgen.gemm @llama_qkv {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a"}

// -----

// Ops that have a config are kept; the others expand in place, in order.
// CHECK-LABEL: kgen.gemm @first
// CHECK-SAME: config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 2, smem = swizzled>}
// CHECK-NEXT: kgen.gemm @decode_v0 {m = 1, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "gfx90a", config = #kgen.gemm_config<
// CHECK-NEXT: kgen.gemm @decode_v1 {m = 1, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "gfx90a", config = #kgen.gemm_config<
// CHECK-NEXT: kgen.gemm @last
// CHECK-SAME: config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 3, smem = padded, pad = 8>}
kgen.gemm @first {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 2, smem = swizzled>}
kgen.gemm @decode {m = 1, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "gfx90a"}
kgen.gemm @last {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "gfx90a", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 3, smem = padded, pad = 8>}

// -----

// The problem's other attributes are copied to every variant.
// CHECK-LABEL: kgen.gemm @ragged_v0
// CHECK-SAME: {m = 127, n = 4099, k = 1023, ab = f16, c = f32, layout = "tn", static_dims = ["m", "n", "k"], align = [1, 1, 1], target = "sm_80", config = #kgen.gemm_config<
// CHECK-SAME: note = "keep me"}
kgen.gemm @ragged {m = 127, n = 4099, k = 1023, ab = f16, c = f32, layout = "tn", static_dims = ["m", "n", "k"], align = [1, 1, 1], target = "sm_80", note = "keep me"}

// -----

// The candidates depend on the target.
// expected-error@+1 {{gemm: kgen-expand-variants needs a target; set `target` or run kgen-verify-target{target=<name>} first}}
kgen.gemm @untargeted {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt"}

// -----

// Variant names must be free.
kgen.gemm @qkv_v1 {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 2, smem = swizzled>}
// expected-error@+1 {{gemm: cannot name variant @qkv_v1: the symbol already exists}}
kgen.gemm @qkv {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a"}
