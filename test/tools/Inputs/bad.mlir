kgen.gemm @bad {m = 0, n = 64, k = 64, ab = bf16, c = bf16, layout = "nt"}
