// REQUIRES: mlir
// RUN: kgen-opt %s -split-input-file -verify-diagnostics

// fp8 inputs (f8E4M3FN, f8E5M2) run on sm_90a's wgmma with layout nt into a
// bf16 or f16 C; the rest is refused with the rule.

// expected-error@+1 {{gemm: e4m3 inputs need layout nt}}
kgen.gemm @nn {m = 64, n = 256, k = 256, ab = f8E4M3FN, c = bf16, layout = "nn", target = "sm_90a"}

// -----

// expected-error@+1 {{gemm: e5m2 inputs write bf16 or f16, not f32}}
kgen.gemm @f32 {m = 64, n = 256, k = 256, ab = f8E5M2, c = f32, layout = "nt", target = "sm_90a"}

// -----

// expected-error@+1 {{gemm: e4m3 inputs run on sm_90a's fp8 wgmma only, not on gfx942}}
kgen.gemm @amd {m = 64, n = 256, k = 256, ab = f8E4M3FN, c = bf16, layout = "nt", target = "gfx942"}
