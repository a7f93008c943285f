// REQUIRES: mlir
// RUN: kgen-translate --kgen-to-hip %s | FileCheck %s
// RUN: kgen-translate --kgen-to-hip --kgen-inline-templates %s | FileCheck %s --check-prefix=INLINE
// RUN: kgen-opt %s | FileCheck %s --check-prefix=ROUND

// f32 inputs through TF32, asked for explicitly (`tf32`): the tiled loop
// with f32 tiles in shared memory and mma.sync m16n8k8 .tf32.
// CHECK:      // problem: f32 inputs through TF32, f32 output, fp32 accumulation, layout nt
// CHECK:      // instructions: mma.sync m16n8k8 .tf32 (cvt.rna.tf32.f32), shared loads, cp.async
// CHECK:      using TypeA = float;
// CHECK:      static constexpr int kVecA = 4, kVecB = 4, kVecC = 8;
// CHECK:      kgen_gemm_f32_tf32_nt_mdyn_n4096_k4096_b64x64x32_w2x2_s3_pad8_v448(const kgen::gemm::Params p) {
// ROUND:      kgen.gemm @proj {m = 127, n = 4096, k = 4096, ab = f32, c = f32, layout = "nt", tf32, target = "sm_80"
kgen.gemm @proj {m = 127, n = 4096, k = 4096, ab = f32, c = f32, layout = "nt", tf32, target = "sm_80", config = #kgen.gemm_config<block = [64, 64, 32], warps = [2, 2], stages = 3, smem = padded, pad = 8>}

// The atom: each operand rounded to TF32, then the m16n8k8 .tf32 mma; 16-byte
// cp.async copies of 4 floats.
// INLINE:     cp.async.cg.shared.global [%0], [%1], 16, %2;
// INLINE:     cvt.rna.tf32.f32
// INLINE:     mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
// INLINE:     if constexpr (Tile::kTf32)
