// REQUIRES: mlir
// RUN: kgen-opt %s -split-input-file -verify-diagnostics

// Every diagnostic a user can get from a kgen.gemm op. The problem and config
// messages come from the codegen core (kgen::checkProblem, checkConfig); the
// op attaches them to its location.

//===----------------------------------------------------------------------===//
// The problem
//===----------------------------------------------------------------------===//

// expected-error@+1 {{gemm: m = 0 must be >= 1}}
kgen.gemm @zero_m {m = 0, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt"}

// -----

// expected-error@+1 {{gemm: n = -5 must be >= 1}}
kgen.gemm @negative_n {m = 1, n = -5, k = 64, ab = bf16, c = bf16, layout = "nt"}

// -----

// expected-error@+1 {{gemm: k = 4294967296 exceeds 2^31-1 (kernels index with 32-bit dimensions)}}
kgen.gemm @huge_k {m = 1, n = 64, k = 4294967296, ab = bf16, c = bf16, layout = "nt"}

// -----

// expected-error@+1 {{gemm: unknown dtype 'i8' for ab; expected bf16, f16, f32, f8E4M3FN or f8E5M2}}
kgen.gemm @int_inputs {m = 1, n = 64, k = 64, ab = i8, c = bf16, layout = "nt"}

// -----

// expected-error@+1 {{gemm: unknown dtype 'f64' for c; expected bf16, f16, f32, f8E4M3FN or f8E5M2}}
kgen.gemm @f64_output {m = 1, n = 64, k = 64, ab = bf16, c = f64, layout = "nt"}

// -----

// expected-error@+1 {{gemm: input dtype f32 needs tf32 = true (TF32 tensor cores}}
kgen.gemm @f32_inputs {m = 1, n = 64, k = 64, ab = f32, c = f32, layout = "nt"}

// -----

// expected-error@+1 {{'kgen.gemm' op attribute 'ab' failed to satisfy constraint: any type attribute}}
kgen.gemm @dtype_as_string {m = 1, n = 64, k = 64, ab = "bf16", c = bf16, layout = "nt"}

// -----

// expected-error@+1 {{gemm: unknown layout "nx"; expected "nn", "nt", "tn" or "tt"}}
kgen.gemm @bad_layout {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nx"}

// -----

// expected-error@+1 {{gemm: unknown layout "NT"}}
kgen.gemm @upper_layout {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "NT"}

// -----

// expected-error@+1 {{'kgen.gemm' op requires attribute 'layout'}}
kgen.gemm @no_layout {m = 1, n = 64, k = 64, ab = bf16, c = bf16}

// -----

// expected-error@+1 {{'kgen.gemm' op attribute 'm' failed to satisfy constraint: 64-bit signless integer attribute}}
kgen.gemm @string_dim {m = "x", n = 64, k = 64, ab = bf16, c = bf16, layout = "nt"}

// -----

// expected-error@+1 {{gemm: unknown dimension "q" in static_dims; expected "m", "n" or "k"}}
kgen.gemm @bad_static {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt", static_dims = ["q"]}

// -----

// expected-error@+1 {{gemm: dimension "n" appears twice in static_dims}}
kgen.gemm @twice_static {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt", static_dims = ["n", "n"]}

// -----

// expected-error@+1 {{gemm: align lists 2 values; expected 3 (A, B, C)}}
kgen.gemm @short_align {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt", align = [8, 8]}

// -----

// expected-error@+1 {{gemm: alignB = 3 must be 1, 2, 4, 8 or 16 elements}}
kgen.gemm @odd_align {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt", align = [8, 3, 8]}

// -----

// expected-note@+1 {{see existing symbol definition here}}
kgen.gemm @twice {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt"}
// expected-error@+1 {{redefinition of symbol named 'twice'}}
kgen.gemm @twice {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt"}

//===----------------------------------------------------------------------===//
// The target
//===----------------------------------------------------------------------===//

// -----

// expected-error@+1 {{gemm: unknown target 'sm_75'; expected gfx90a, gfx942, sm_80 or sm_90a}}
kgen.gemm @old_gpu {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt", target = "sm_75"}

// -----

// expected-error@+1 {{gemm: unknown target 'native'; expected gfx90a, gfx942, sm_80 or sm_90a ('native' is resolved by the runtime on the current device)}}
kgen.gemm @native {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt", target = "native"}

//===----------------------------------------------------------------------===//
// The config, checked against the target's limits
//===----------------------------------------------------------------------===//

// -----

// 4 stages of 256x(64+8) A and B tiles in bf16: 294912 B.
// expected-error@+1 {{config: shared memory 294912 B exceeds sm_90a's 232448 B per block; lower stages, blockK or the block tile}}
kgen.gemm @smem_sm90a {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<block = [256, 256, 64], warps = [4, 4], stages = 4, smem = padded, pad = 8>}

// -----

// Fits sm_90a's 227 KiB, not CDNA's 64 KiB of LDS.
// expected-error@+1 {{config: shared memory 110592 B exceeds gfx90a's 65536 B per block; lower stages, blockK or the block tile}}
kgen.gemm @smem_gfx90a {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "gfx90a", config = #kgen.gemm_config<block = [128, 128, 64], warps = [2, 2], stages = 3, smem = padded, pad = 8>}

// -----

// expected-error@+1 {{config: 2048 threads per block (warps 8x8 of 32) exceed sm_90a's 1024; lower warpsM or warpsN}}
kgen.gemm @too_many_threads {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<block = [128, 128, 32], warps = [8, 8], stages = 3, smem = padded, pad = 8>}

// -----

// expected-error@+1 {{config: 2048 threads per block (warps 4x8 of 64) exceed gfx942's 1024; lower warpsM or warpsN}}
kgen.gemm @too_many_waves {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "gfx942", config = #kgen.gemm_config<block = [128, 256, 32], warps = [4, 8], stages = 2, smem = padded, pad = 8>}

// -----

// expected-error@+1 {{config: warp tile M = blockM / warpsM = 64/8 is not a multiple of 16 (the mma.sync m16n8k16 atom on sm_90a); raise blockM or lower warpsM}}
kgen.gemm @warp_tile_m {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<block = [64, 64, 32], warps = [8, 2], stages = 3, smem = padded, pad = 8>}

// -----

// A 16-wide warp tile suits mma.sync but not MFMA 32x32x8.
// expected-error@+1 {{config: warp tile N = blockN / warpsN = 64/4 is not a multiple of 32 (the MFMA 32x32x8 atom on gfx90a); raise blockN or lower warpsN}}
kgen.gemm @warp_tile_n {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "gfx90a", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 4], stages = 3, smem = padded, pad = 8>}

// -----

// expected-error@+1 {{config: blockK = 8 must be a multiple of 16 (the K step of the MMA atom)}}
kgen.gemm @block_k {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<block = [64, 64, 8], warps = [2, 2], stages = 3, smem = padded, pad = 8>}

// -----

// expected-error@+1 {{config: blockM = 96 must be a power of two >= 1}}
kgen.gemm @block_m_pow2 {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<block = [96, 64, 32], warps = [2, 2], stages = 3, smem = padded, pad = 8>}

// -----

// expected-error@+1 {{config: warpsN = 0 must be a power of two >= 1}}
kgen.gemm @zero_warps {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_80", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 0], stages = 3, smem = padded, pad = 8>}

// -----

// expected-error@+1 {{config: stages = 1 must be between 2 and 8 (the pipeline double-buffers at least)}}
kgen.gemm @one_stage {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 1, smem = padded, pad = 8>}

// -----

// expected-error@+1 {{config: smemPad = 8 with smem = swizzled; a swizzled layout takes no padding (set pad to 0)}}
kgen.gemm @pad_with_swizzle {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 3, smem = swizzled, pad = 8>}

// -----

// expected-error@+1 {{config: smemPad = 4 must be a non-negative multiple of 8 elements (16-byte rows keep vector stores aligned)}}
kgen.gemm @odd_pad {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 3, smem = padded, pad = 4>}

// -----

// expected-error@+1 {{config: 256 fp32 accumulators per thread (blockM*blockN/threads) exceed the 128 registers kgen allows on sm_90a; use more warps or a smaller block tile}}
kgen.gemm @accumulators {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<block = [256, 128, 32], warps = [2, 2], stages = 3, smem = padded, pad = 8>}

// -----

// expected-error@+1 {{config: the 32x16 A tile (64 vectors of 8) and the 32x16 B tile (64 vectors of 8) must each be a multiple of the 128 threads; use fewer warps or a larger tile}}
kgen.gemm @tile_vectors {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<block = [32, 32, 16], warps = [2, 2], stages = 3, smem = padded, pad = 8>}

// -----

// expected-error@+1 {{gemm: unknown bias "k"; expected "m" (one value a row), "n" (one a column) or "none"}}
kgen.gemm @bias_k {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt", bias = "k"}

// -----

// expected-error@+1 {{gemm: unknown activation "gelu"; expected "relu", "gelu_tanh", "gelu_erf", "silu" or "none"}}
kgen.gemm @gelu {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt", activation = "gelu"}

// -----

// expected-error@+1 {{gemm: batch = 0 must be between 1 and 65535 (batches are the grid's z dimension)}}
kgen.gemm @no_batches {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt", batch = 0}

// -----

// expected-error@+1 {{config: splitK = 32 must be between 1 and 16 (blocks sharing one tile's k-slices)}}
kgen.gemm @split32 {m = 16, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_80", config = #kgen.gemm_config<block = [16, 64, 64], warps = [1, 2], stages = 4, smem = padded, pad = 8, split_k = 32>}

//===----------------------------------------------------------------------===//
// The config's syntax
//===----------------------------------------------------------------------===//

// -----

// expected-error@+2 {{unknown shared-memory layout 'banked'; expected padded or swizzled}}
// expected-error@+1 {{failed to parse Kgen_GemmConfigAttr parameter 'smem'}}
kgen.gemm @banked {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 3, smem = banked>}

// -----

// expected-error@+2 {{integer value too large}}
// expected-error@+1 {{failed to parse Kgen_GemmConfigAttr parameter 'pad'}}
kgen.gemm @huge_pad {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 3, smem = padded, pad = 99999999999>}

// -----

// expected-error@+1 {{expected '['}}
kgen.gemm @flat_block {m = 1, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt", config = #kgen.gemm_config<block = 64, warps = [2, 2], stages = 3, smem = padded>}

// -----

// expected-error@+1 {{config: loop = wgmma reads A K-major; layout tn stores A as K x M ('T'); use loop = tiled}}
kgen.gemm @wgmma_a_transposed {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "tn", target = "sm_90a", config = #kgen.gemm_config<loop = wgmma, block = [128, 256, 64], warps = [2, 1], stages = 4, smem = swizzled>}

// -----

// expected-error@+1 {{config: cluster = 2 needs loop = wgmma (clusters share B through TMA multicast)}}
kgen.gemm @cluster_tiled {m = 4096, n = 4096, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<cluster = 2, block = [128, 128, 64], warps = [2, 2], stages = 4, smem = swizzled>}

// -----

// expected-error@+1 {{config: 128 fp32 accumulators per consumer thread, doubled for an f32 C (promoted sums), exceed the consumers' registers (at most 104 a set); use blockM / warpsM * blockN <= 13312 (e.g. block 128x208, warps 2x1)}}
kgen.gemm @wgmma_f32_regs {m = 4096, n = 4096, k = 4096, ab = bf16, c = f32, layout = "nt", target = "sm_90a", config = #kgen.gemm_config<loop = wgmma, block = [128, 256, 64], warps = [2, 1], stages = 4, smem = swizzled>}
