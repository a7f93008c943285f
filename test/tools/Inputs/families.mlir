// An attention decode and an mLSTM layer (with a GEMM), for kgen bundle and
// kgen tune.
kgen.attention @decode {batch = 1, heads_q = 32, heads_kv = 8, seqlen_q = 1, seqlen_k = 4096, head_dim_qk = 128, head_dim_v = 128, dtype = bf16}
kgen.mlstm @layer {dqk = 64, dv = 64, dtype = bf16, b = 1, nh = 8, s = 512}
kgen.gemm @proj {m = 64, n = 256, k = 256, ab = bf16, c = bf16, layout = "nt"}
