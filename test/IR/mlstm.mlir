// REQUIRES: mlir
// RUN: kgen-opt %s | kgen-opt | FileCheck %s
// RUN: kgen-opt -mlir-print-op-generic %s | kgen-opt | FileCheck %s

// kgen.mlstm round-trips with its config attribute.

// CHECK-LABEL: kgen.mlstm @xlstm7b
// CHECK-SAME: config = #kgen.mlstm_config<variant = fused, chunk = 64, block_dv = 32, warps = 4>
// CHECK-SAME: dqk = 256
// CHECK-SAME: dtype = bf16
// CHECK-SAME: dv = 512
kgen.mlstm @xlstm7b {dqk = 256, dv = 512, dtype = bf16, b = 8, nh = 8, s = 8192, target = "sm_90a", config = #kgen.mlstm_config<variant = fused, chunk = 64, block_dv = 32, warps = 4>}

// CHECK-LABEL: kgen.mlstm @xlstm7b_wgmma
// CHECK-SAME: config = #kgen.mlstm_config<variant = fused, chunk = 64, block_dv = 128, warps = 12, wgmma = true>
kgen.mlstm @xlstm7b_wgmma {dqk = 256, dv = 512, dtype = bf16, b = 8, nh = 8, s = 8192, target = "sm_90a", config = #kgen.mlstm_config<variant = fused, chunk = 64, block_dv = 128, warps = 12, wgmma = true>}

// CHECK-LABEL: kgen.mlstm @step
// CHECK-SAME: config = #kgen.mlstm_config<variant = recurrent, block_dv = 32, warps = 8>
// CHECK-SAME: final_state
// CHECK-SAME: initial_state
kgen.mlstm @step {dqk = 256, dv = 512, dtype = bf16, b = 64, s = 1, initial_state, final_state, target = "sm_90a", config = #kgen.mlstm_config<variant = recurrent, block_dv = 32, warps = 8>}

// CHECK-LABEL: kgen.mlstm @nothing_else
kgen.mlstm @nothing_else {dqk = 64, dv = 64, dtype = f32}
