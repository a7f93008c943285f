kgen.gemm @qkv {m = 532, n = 6144, k = 4096, ab = bf16, c = bf16, layout = "nt", target = "sm_90a"}
kgen.gemm @down {m = 532, n = 4096, k = 14336, ab = bf16, c = f32, layout = "nt", target = "gfx90a",
                 config = #kgen.gemm_config<block = [64, 128, 32], warps = [2, 2], stages = 2, smem = padded, pad = 8>}
