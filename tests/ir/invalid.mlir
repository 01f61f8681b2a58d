// The qkv verifiers reject ill-formed IR with a message: the op table's shape rules
// through the ShapeRule trait (compiler/lib/ir/ShapeRuleVerifier.cpp: each op's checks,
// with operands named by position, and a result that does not fit), every diagnostic of
// compiler/lib/ir/QkvDialect.cpp (each message at least once), and each kind of ODS
// constraint of QkvOps.td (operand types, attributes, operand segments, region sizes,
// the yield's parents, isolation from above).
// RUN: qkv-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// ODS constraints.

func.func @float_operand(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'qkv.scale' op operand #0 must be ranked tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = qkv.scale %x by 2.0 : tensor<4xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @unranked_operand(%x: tensor<*xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'qkv.silu' op operand #0 must be ranked tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values, but got 'tensor<*xf32>'}}
  %0 = "qkv.silu"(%x) : (tensor<*xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @integer_ids(%t: tensor<5x2xf32>, %ids: tensor<?xf32>) -> tensor<?x2xf32> {
  // expected-error @+1 {{'qkv.embedding' op operand #0 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<?xf32>'}}
  %0 = qkv.embedding %t[%ids] : (tensor<?xf32>, tensor<5x2xf32>) -> tensor<?x2xf32>
  return %0 : tensor<?x2xf32>
}

// -----

func.func @missing_attribute(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'qkv.softmax' op requires attribute 'axis'}}
  %0 = "qkv.softmax"(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @attribute_type(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'qkv.softmax' op attribute 'axis' failed to satisfy constraint: 64-bit signless integer attribute}}
  %0 = "qkv.softmax"(%x) {axis = 1.0 : f32} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @operand_segments(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'qkv.layer_norm' op operand count (1) does not match with the total size (0) specified in attribute 'operandSegmentSizes'}}
  %0 = "qkv.layer_norm"(%x) {eps = 1.0e-5 : f64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @yield_outside_a_mod(%c: i1) {
  // expected-error @+1 {{'qkv.yield' op expects parent op to be one of 'qkv.mask, qkv.score_mod, qkv.attention'}}
  qkv.yield %c : i1
}

// -----

func.func @mask_two_blocks(%s: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'qkv.mask' op region #0 ('body') failed to verify constraint: region with 1 blocks}}
  %0 = qkv.mask %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    cf.br ^bb1
  ^bb1:
    qkv.yield %c : i1
  }
  return %0 : tensor<?x?xf32>
}

// -----

func.func @attention_two_blocks(%q: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.attention' op region #1 ('mask') failed to verify constraint: region with at most 1 blocks}}
  %0 = qkv.attention %q, %q, %q : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32> mask {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    cf.br ^bb1
  ^bb1:
    qkv.yield %c : i1
  }
  return %0 : tensor<?x4xf32>
}

// -----

func.func @isolated_from_above(%s: tensor<?x?xf32>, %t: index) -> tensor<?x?xf32> {
  // expected-note @+1 {{required by region isolation constraints}}
  %0 = qkv.mask %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    // expected-error @+1 {{'arith.cmpi' op using value defined outside the region}}
    %c = arith.cmpi sge, %qi, %t : index
    qkv.yield %c : i1
  }
  return %0 : tensor<?x?xf32>
}

// -----

// Same shape, axes.

func.func @result_rank(%x: tensor<?x5xf32>) -> tensor<?x5x1xf32> {
  // expected-error @+1 {{'qkv.scale' op requires the same shape for all operands and results}}
  %0 = qkv.scale %x by 2.0 : tensor<?x5xf32> -> tensor<?x5x1xf32>
  return %0 : tensor<?x5x1xf32>
}

// -----

func.func @result_dim(%x: tensor<?x5xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.gelu' op requires the same shape for all operands and results}}
  %0 = qkv.gelu %x : tensor<?x5xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @result_element_type(%x: tensor<?x5xf32>) -> tensor<?x5xf64> {
  // expected-error @+1 {{'qkv.elu' op requires the same element type for all operands and results}}
  %0 = qkv.elu %x alpha 1.0 : tensor<?x5xf32> -> tensor<?x5xf64>
  return %0 : tensor<?x5xf64>
}

// -----

func.func @silu_result(%x: tensor<3xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'qkv.silu' op requires the same shape for all operands and results}}
  %0 = qkv.silu %x : tensor<3xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @softplus_result(%x: tensor<?x3xf32>) -> tensor<?x3xf16> {
  // expected-error @+1 {{'qkv.softplus' op requires the same element type for all operands and results}}
  %0 = qkv.softplus %x : tensor<?x3xf32> -> tensor<?x3xf16>
  return %0 : tensor<?x3xf16>
}

// -----

func.func @softmax_axis(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{'qkv.softmax' op softmax of 'operand 0': axis 2 is out of range for 2 dims}}
  %0 = qkv.softmax %x axis 2 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// -----

func.func @softmax_negative_axis(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{'qkv.softmax' op softmax of 'operand 0': axis -3 is out of range for 2 dims}}
  %0 = qkv.softmax %x axis -3 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// -----

func.func @softmax_result(%x: tensor<?x5xf32>) -> tensor<?x6xf32> {
  // expected-error @+1 {{'qkv.softmax' op result 'tensor<?x6xf32>' does not fit tensor<?x5xf32>, what the op's shape rule gives}}
  %0 = qkv.softmax %x axis 1 : tensor<?x5xf32> -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}

// -----

func.func @pe_rank(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'qkv.sinusoidal_pe' op sinusoidal_pe: 'operand 0' (8) has 1 dims; it adds positions over the last two (position, feature)}}
  %0 = qkv.sinusoidal_pe %x base 10000.0 offset 0 : tensor<8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @pe_result(%x: tensor<?x8xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.sinusoidal_pe' op result 'tensor<?x4xf32>' does not fit tensor<?x8xf32>, what the op's shape rule gives}}
  %0 = qkv.sinusoidal_pe %x base 10000.0 offset 0 : tensor<?x8xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @rope_rank(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'qkv.rope' op rope: 'operand 0' (8) has 1 dims; rope needs (..., L, Dh)}}
  %0 = qkv.rope %x base 10000.0 offset 0 : tensor<8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @rope_odd(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{'qkv.rope' op rope: 'operand 0' (?, 5) ends in 5; rope rotates pairs of features and needs a static, even last dim}}
  %0 = qkv.rope %x base 10000.0 offset 0 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// -----

func.func @rope_dynamic(%x: tensor<4x?xf32>) -> tensor<4x?xf32> {
  // expected-error @+1 {{'qkv.rope' op rope: 'operand 0' (4, ?) ends in ?; rope rotates pairs of features and needs a static, even last dim}}
  %0 = qkv.rope %x base 10000.0 offset 0 : tensor<4x?xf32> -> tensor<4x?xf32>
  return %0 : tensor<4x?xf32>
}

// -----

func.func @rope_result(%x: tensor<?x4xf32>) -> tensor<?x4xf64> {
  // expected-error @+1 {{'qkv.rope' op result 'tensor<?x4xf64>' does not fit tensor<?x4xf32>, what the op's shape rule gives}}
  %0 = qkv.rope %x base 10000.0 offset 0 : tensor<?x4xf32> -> tensor<?x4xf64>
  return %0 : tensor<?x4xf64>
}

// -----

func.func @transpose_axis(%x: tensor<3x4xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'qkv.transpose' op transpose of 'operand 0': axis -3 is out of range for 2 dims}}
  %0 = qkv.transpose %x axes(0, -3) : tensor<3x4xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @transpose_rank(%x: tensor<3x4xf32>) -> tensor<4x3x1xf32> {
  // expected-error @+1 {{'qkv.transpose' op result 'tensor<4x3x1xf32>' does not fit tensor<4x3xf32>, what the op's shape rule gives}}
  %0 = qkv.transpose %x axes(0, 1) : tensor<3x4xf32> -> tensor<4x3x1xf32>
  return %0 : tensor<4x3x1xf32>
}

// -----

func.func @transpose_dims(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'qkv.transpose' op result 'tensor<3x4xf32>' does not fit tensor<4x3xf32>, what the op's shape rule gives}}
  %0 = qkv.transpose %x axes(0, 1) : tensor<3x4xf32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Heads.

func.func @split_heads_rank(%x: tensor<?x6xf32>) -> tensor<?x6xf32> {
  // expected-error @+1 {{'qkv.split_heads' op (..., L, H*Dh) -> (..., H, L, Dh)}}
  %0 = qkv.split_heads %x heads 2 : tensor<?x6xf32> -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}

// -----

func.func @split_heads_heads(%x: tensor<?x6xf32>) -> tensor<3x?x2xf32> {
  // expected-error @+1 {{'qkv.split_heads' op result heads dim must be 2}}
  %0 = qkv.split_heads %x heads 2 : tensor<?x6xf32> -> tensor<3x?x2xf32>
  return %0 : tensor<3x?x2xf32>
}

// -----

func.func @split_heads_zero_heads(%x: tensor<?x6xf32>) -> tensor<?x?x2xf32> {
  // expected-error @+1 {{'qkv.split_heads' op result heads dim must be 0}}
  %0 = qkv.split_heads %x heads 0 : tensor<?x6xf32> -> tensor<?x?x2xf32>
  return %0 : tensor<?x?x2xf32>
}

// -----

func.func @split_heads_length(%x: tensor<5x6xf32>) -> tensor<2x4x3xf32> {
  // expected-error @+1 {{'qkv.split_heads' op result L must be the input's L}}
  %0 = qkv.split_heads %x heads 2 : tensor<5x6xf32> -> tensor<2x4x3xf32>
  return %0 : tensor<2x4x3xf32>
}

// -----

func.func @split_heads_dynamic_head_dim(%x: tensor<?x6xf32>) -> tensor<2x?x?xf32> {
  // expected-error @+1 {{'qkv.split_heads' op head dim must be static}}
  %0 = qkv.split_heads %x heads 2 : tensor<?x6xf32> -> tensor<2x?x?xf32>
  return %0 : tensor<2x?x?xf32>
}

// -----

func.func @split_heads_features(%x: tensor<?x6xf32>) -> tensor<4x?x2xf32> {
  // expected-error @+1 {{'qkv.split_heads' op input features 6 != heads 4 * head dim 2}}
  %0 = qkv.split_heads %x heads 4 : tensor<?x6xf32> -> tensor<4x?x2xf32>
  return %0 : tensor<4x?x2xf32>
}

// -----

func.func @merge_heads_rank(%x: tensor<?x6xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{'qkv.merge_heads' op merge_heads: 'operand 0' (?, 6) has 2 dims; merge_heads needs (..., H, L, Dh)}}
  %0 = qkv.merge_heads %x : tensor<?x6xf32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

func.func @merge_heads_features(%x: tensor<2x?x3xf32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{'qkv.merge_heads' op result 'tensor<?x5xf32>' does not fit tensor<?x6xf32>, what the op's shape rule gives}}
  %0 = qkv.merge_heads %x : tensor<2x?x3xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// -----

// Binary, contractions.

func.func @broadcast(%a: tensor<?x6xf32>, %b: tensor<5xf32>) -> tensor<?x6xf32> {
  // expected-error @+1 {{'qkv.add' op add: shapes do not match: 'operand 0' (?, 6) and 'operand 1' (5) (they must be equal, or the shorter must end the longer)}}
  %0 = qkv.add %a, %b : (tensor<?x6xf32>, tensor<5xf32>) -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}

// -----

func.func @broadcast_lhs_shorter(%a: tensor<5xf32>, %b: tensor<?x6xf32>) -> tensor<?x6xf32> {
  // expected-error @+1 {{'qkv.sub' op sub: shapes do not match: 'operand 0' (5) and 'operand 1' (?, 6) (they must be equal, or the shorter must end the longer)}}
  %0 = qkv.sub %a, %b : (tensor<5xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}

// -----

func.func @binary_result(%a: tensor<?x6xf32>, %b: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{'qkv.mul' op result 'tensor<6xf32>' does not fit tensor<?x6xf32>, what the op's shape rule gives}}
  %0 = qkv.mul %a, %b : (tensor<?x6xf32>, tensor<6xf32>) -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

func.func @div_result(%a: tensor<?x6xf32>, %b: tensor<?x6xf32>) -> tensor<?x6xf64> {
  // expected-error @+1 {{'qkv.div' op result 'tensor<?x6xf64>' does not fit tensor<?x6xf32>, what the op's shape rule gives}}
  %0 = qkv.div %a, %b : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf64>
  return %0 : tensor<?x6xf64>
}

// -----

func.func @swiglu_gate_up(%a: tensor<?x6xf32>, %b: tensor<?x5xf32>) -> tensor<?x6xf32> {
  // expected-error @+1 {{'qkv.swiglu' op swiglu: the tensors must have exactly the same dims: 'operand 0' (?, 6); 'operand 1' (?, 5)}}
  %0 = qkv.swiglu %a, %b : (tensor<?x6xf32>, tensor<?x5xf32>) -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}

// -----

func.func @swiglu_result(%a: tensor<?x6xf32>, %b: tensor<?x6xf32>) -> tensor<?x6x1xf32> {
  // expected-error @+1 {{'qkv.swiglu' op result 'tensor<?x6x1xf32>' does not fit tensor<?x6xf32>, what the op's shape rule gives}}
  %0 = qkv.swiglu %a, %b : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6x1xf32>
  return %0 : tensor<?x6x1xf32>
}

// -----

func.func @matmul_rank(%a: tensor<4xf32>, %b: tensor<4x3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'qkv.matmul' op matmul: 'operand 0' (4) has 1 dims; matmul needs at least 2 (rows, cols)}}
  %0 = qkv.matmul %a, %b : (tensor<4xf32>, tensor<4x3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @matmul_contraction(%a: tensor<4x6xf32>, %b: tensor<5x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'qkv.matmul' op matmul: contraction dims differ: 'operand 0' (4, 6) has 6 last, 'operand 1' (5, 3) has 5 second to last}}
  %0 = qkv.matmul %a, %b : (tensor<4x6xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @matmul_batch(%a: tensor<2x3x4x6xf32>, %b: tensor<3x6x5xf32>) -> tensor<2x3x4x5xf32> {
  // expected-error @+1 {{'qkv.matmul' op matmul: batch dims differ: 'operand 0' (2, 3, 4, 6) has (2, 3), 'operand 1' (3, 6, 5) has (3) (they must be equal, or one side must be 2-D)}}
  %0 = qkv.matmul %a, %b : (tensor<2x3x4x6xf32>, tensor<3x6x5xf32>) -> tensor<2x3x4x5xf32>
  return %0 : tensor<2x3x4x5xf32>
}

// -----

func.func @matmul_result_rank(%a: tensor<2x4x6xf32>, %b: tensor<6x5xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'qkv.matmul' op result 'tensor<4x5xf32>' does not fit tensor<2x4x5xf32>, what the op's shape rule gives}}
  %0 = qkv.matmul %a, %b : (tensor<2x4x6xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @matmul_result_dims(%a: tensor<4x6xf32>, %b: tensor<6x5xf32>) -> tensor<5x4xf32> {
  // expected-error @+1 {{'qkv.matmul' op result 'tensor<5x4xf32>' does not fit tensor<4x5xf32>, what the op's shape rule gives}}
  %0 = qkv.matmul %a, %b : (tensor<4x6xf32>, tensor<6x5xf32>) -> tensor<5x4xf32>
  return %0 : tensor<5x4xf32>
}

// -----

func.func @linformer_ranks(%x: tensor<2x?x4xf32>, %e: tensor<3x?x1xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'qkv.linformer_project' op linformer_project: the tensor must have 2 dims: 'operand 1' (3, ?, 1) has 3 dims}}
  %0 = qkv.linformer_project %x, %e : (tensor<2x?x4xf32>, tensor<3x?x1xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

func.func @linformer_seq(%x: tensor<2x7x4xf32>, %e: tensor<3x8xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'qkv.linformer_project' op linformer_project: the projection's last dim must be the input's sequence dim, its second-to-last: 'operand 1' (3, 8), its 8 at dim 1; 'operand 0' (2, 7, 4), its 7 at dim 1}}
  %0 = qkv.linformer_project %x, %e : (tensor<2x7x4xf32>, tensor<3x8xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

func.func @linear_weight(%x: tensor<?x4xf32>, %w: tensor<4x3x1xf32>) -> tensor<?x3xf32> {
  // expected-error @+1 {{'qkv.linear' op linear: weight 'operand 1' (4, 3, 1) must have 2 dims (in, out)}}
  %0 = qkv.linear %x, %w : tensor<?x4xf32>, tensor<4x3x1xf32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @linear_in(%x: tensor<?x4xf32>, %w: tensor<5x3xf32>) -> tensor<?x3xf32> {
  // expected-error @+1 {{'qkv.linear' op linear: 'operand 0' (?, 4) ends in 4 but weight 'operand 1' (5, 3) starts with 5 (the input dim must be the weight's first dim)}}
  %0 = qkv.linear %x, %w : tensor<?x4xf32>, tensor<5x3xf32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @linear_bias(%x: tensor<?x4xf32>, %w: tensor<4x3xf32>, %b: tensor<4xf32>) -> tensor<?x3xf32> {
  // expected-error @+1 {{'qkv.linear' op linear: bias 'operand 2' (4) must be (3), the weight's output dim 3}}
  %0 = qkv.linear %x, %w bias %b : tensor<?x4xf32>, tensor<4x3xf32>, tensor<4xf32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// -----

func.func @linear_result(%x: tensor<?x4xf32>, %w: tensor<4x3xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.linear' op result 'tensor<?x4xf32>' does not fit tensor<?x3xf32>, what the op's shape rule gives}}
  %0 = qkv.linear %x, %w : tensor<?x4xf32>, tensor<4x3xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// Norms, concat, embedding.

func.func @layer_norm_gamma(%x: tensor<?x4xf32>, %g: tensor<5xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.layer_norm' op layer_norm: gamma 'operand 1' (5) must be (4), the last dim of 'operand 0' (?, 4)}}
  %0 = qkv.layer_norm %x gamma %g : tensor<5xf32> eps 0.00001 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @layer_norm_beta(%x: tensor<?x4xf32>, %g: tensor<4xf32>, %b: tensor<1x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.layer_norm' op layer_norm: beta 'operand 2' (1, 4) must be (4), the last dim of 'operand 0' (?, 4)}}
  %0 = qkv.layer_norm %x gamma %g : tensor<4xf32> beta %b : tensor<1x4xf32> eps 0.00001 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @layer_norm_result(%x: tensor<?x4xf32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{'qkv.layer_norm' op result 'tensor<?x5xf32>' does not fit tensor<?x4xf32>, what the op's shape rule gives}}
  %0 = qkv.layer_norm %x eps 0.00001 : tensor<?x4xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// -----

func.func @rms_norm_gamma(%x: tensor<?x4xf32>, %g: tensor<3xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.rms_norm' op rms_norm: gamma 'operand 1' (3) must be (4), the last dim of 'operand 0' (?, 4)}}
  %0 = qkv.rms_norm %x gamma %g : tensor<3xf32> eps 0.00001 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @rms_norm_result(%x: tensor<?x4xf32>) -> tensor<?x4xf64> {
  // expected-error @+1 {{'qkv.rms_norm' op result 'tensor<?x4xf64>' does not fit tensor<?x4xf32>, what the op's shape rule gives}}
  %0 = qkv.rms_norm %x eps 0.00001 : tensor<?x4xf32> -> tensor<?x4xf64>
  return %0 : tensor<?x4xf64>
}

// -----

func.func @concat_empty() -> tensor<4x2xf32> {
  // expected-error @+1 {{'qkv.concat' op concat: needs at least one tensor}}
  %0 = "qkv.concat"() {axis = 0 : i64} : () -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @concat_axis(%a: tensor<?x2xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.concat' op concat of 'operand 0': axis 2 is out of range for 2 dims}}
  %0 = qkv.concat %a, %a axis 2 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @concat_rank(%a: tensor<?x2xf32>, %b: tensor<2xf32>) -> tensor<?x2xf32> {
  // expected-error @+1 {{'qkv.concat' op concat: 'operand 0' (?, 2) and 'operand 1' (2) have different numbers of dims}}
  %0 = qkv.concat %a, %b axis 0 : (tensor<?x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  return %0 : tensor<?x2xf32>
}

// -----

func.func @concat_dims(%a: tensor<?x2xf32>, %b: tensor<?x3xf32>) -> tensor<?x2xf32> {
  // expected-error @+1 {{'qkv.concat' op concat: along axis 0, the other dims must match: 'operand 0' (?, 2) has 2, 'operand 1' (?, 3) has 3}}
  %0 = qkv.concat %a, %b axis 0 : (tensor<?x2xf32>, tensor<?x3xf32>) -> tensor<?x2xf32>
  return %0 : tensor<?x2xf32>
}

// -----

func.func @embedding_table(%t: tensor<5xf32>, %ids: tensor<?xi32>) -> tensor<?x2xf32> {
  // expected-error @+1 {{'qkv.embedding' op embedding: table 'operand 1' (5) must have 2 dims (vocab, features)}}
  %0 = qkv.embedding %t[%ids] : (tensor<?xi32>, tensor<5xf32>) -> tensor<?x2xf32>
  return %0 : tensor<?x2xf32>
}

// -----

func.func @embedding_result(%t: tensor<5x2xf32>, %ids: tensor<?xi64>) -> tensor<?xf32> {
  // expected-error @+1 {{'qkv.embedding' op result 'tensor<?xf32>' does not fit tensor<?x2xf32>, what the op's shape rule gives}}
  %0 = qkv.embedding %t[%ids] : (tensor<?xi64>, tensor<5x2xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// Mod regions.

func.func @mask_rank(%s: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{'qkv.mask' op scores must have 2, 3 or 4 dims}}
  %0 = qkv.mask %s : tensor<?xf32> -> tensor<?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  return %0 : tensor<?xf32>
}

// -----

func.func @score_mod_rank(%s: tensor<1x1x1x?x?xf32>) -> tensor<1x1x1x?x?xf32> {
  // expected-error @+1 {{'qkv.score_mod' op scores must have 2, 3 or 4 dims}}
  %0 = qkv.score_mod %s : tensor<1x1x1x?x?xf32> -> tensor<1x1x1x?x?xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    qkv.yield %x : f32
  }
  return %0 : tensor<1x1x1x?x?xf32>
}

// -----

func.func @mask_arity(%s: tensor<?x?xf32>, %t: tensor<2xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'qkv.mask' op mask region needs 7 block arguments (b, h, q, kv, len_q, len_kv, then one per capture), got 6}}
  %0 = qkv.mask %s captures(%t : tensor<2xf32>) : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  return %0 : tensor<?x?xf32>
}

// -----

func.func @score_region_arity(%q: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.attention' op score region needs 7 block arguments (score, b, h, q, kv, len_q, len_kv, then one per capture), got 2}}
  %0 = qkv.attention %q, %q, %q : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32> score {
  ^bb0(%s: f32, %b: index):
    qkv.yield %s : f32
  }
  return %0 : tensor<?x4xf32>
}

// -----

func.func @score_mod_first_argument(%s: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'qkv.score_mod' op score_mod region's first argument must be the score ('f32')}}
  %0 = qkv.score_mod %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%x: f64, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %y = arith.truncf %x : f64 to f32
    qkv.yield %y : f32
  }
  return %0 : tensor<?x?xf32>
}

// -----

func.func @attention_score_argument(%q: tensor<?x4xf64>) -> tensor<?x4xf64> {
  // expected-error @+1 {{'qkv.attention' op score region's first argument must be the score ('f64')}}
  %0 = qkv.attention %q, %q, %q : tensor<?x4xf64>, tensor<?x4xf64>, tensor<?x4xf64> -> tensor<?x4xf64> score {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %y = arith.extf %x : f32 to f64
    qkv.yield %y : f64
  }
  return %0 : tensor<?x4xf64>
}

// -----

func.func @mask_positions(%s: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'qkv.mask' op mask region's position arguments must be index}}
  %0 = qkv.mask %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: i64, %ki: i64, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : i64
    qkv.yield %c : i1
  }
  return %0 : tensor<?x?xf32>
}

// -----

func.func @mask_capture_type(%s: tensor<?x?xf32>, %t: tensor<2xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'qkv.mask' op mask region's capture argument types must match the captured operands}}
  %0 = qkv.mask %s captures(%t : tensor<2xf32>) : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %u: tensor<3xf32>):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  return %0 : tensor<?x?xf32>
}

// -----

func.func @mask_terminator(%s: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'qkv.mask' op mask region must end in qkv.yield}}
  %0 = qkv.mask %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    "test.terminator"(%c) : (i1) -> ()
  }
  return %0 : tensor<?x?xf32>
}

// -----

func.func @mask_yields_float(%s: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'qkv.mask' op mask region must yield 'i1', yields 'f32'}}
  %0 = qkv.mask %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.constant 1.0 : f32
    qkv.yield %c : f32
  }
  return %0 : tensor<?x?xf32>
}

// -----

func.func @score_mod_yields_condition(%s: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'qkv.score_mod' op score_mod region must yield 'f32', yields 'i1'}}
  %0 = qkv.score_mod %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  return %0 : tensor<?x?xf32>
}

// -----

func.func @attention_mask_arity(%q: tensor<?x4xf32>, %t: tensor<2xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.attention' op mask region needs 7 block arguments (b, h, q, kv, len_q, len_kv, then one per capture), got 6}}
  %0 = qkv.attention %q, %q, %q captures(%t : tensor<2xf32>) : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32> mask {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  return %0 : tensor<?x4xf32>
}

// -----

// Attention shapes.

func.func @attention_rank(%q: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{'qkv.attention' op attention: 'operand 0' (?) must have 2 (L, Dh), 3 (H, L, Dh) or 4 (B, H, L, Dh) dims}}
  %0 = qkv.attention %q, %q, %q : tensor<?xf32>, tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

func.func @attention_mixed_ranks(%q: tensor<2x?x4xf32>, %k: tensor<?x4xf32>) -> tensor<2x?x4xf32> {
  // expected-error @+1 {{'qkv.attention' op attention: q, k and v must have the same number of dims: 'operand 0' (2, ?, 4), 'operand 1' (?, 4), 'operand 2' (?, 4)}}
  %0 = qkv.attention %q, %k, %k : tensor<2x?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32> -> tensor<2x?x4xf32>
  return %0 : tensor<2x?x4xf32>
}

// -----

func.func @attention_head_dim(%q: tensor<?x4xf32>, %k: tensor<?x5xf32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{'qkv.attention' op attention: q and k must share the head dim: 'operand 0' ends in 4, 'operand 1' in 5}}
  %0 = qkv.attention %q, %k, %k : tensor<?x4xf32>, tensor<?x5xf32>, tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// -----

func.func @attention_sequence(%q: tensor<?x4xf32>, %k: tensor<7x4xf32>, %v: tensor<8x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.attention' op attention: k and v must share the sequence dim: 'operand 1' has 7, 'operand 2' has 8}}
  %0 = qkv.attention %q, %k, %v : tensor<?x4xf32>, tensor<7x4xf32>, tensor<8x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @attention_batch(%q: tensor<2x1x?x4xf32>, %k: tensor<3x1x?x4xf32>) -> tensor<2x1x?x4xf32> {
  // expected-error @+1 {{'qkv.attention' op attention: q, k and v must share the batch dim: 'operand 0' (2, 1, ?, 4), 'operand 1' (3, 1, ?, 4), 'operand 2' (3, 1, ?, 4)}}
  %0 = qkv.attention %q, %k, %k : tensor<2x1x?x4xf32>, tensor<3x1x?x4xf32>, tensor<3x1x?x4xf32> -> tensor<2x1x?x4xf32>
  return %0 : tensor<2x1x?x4xf32>
}

// -----

func.func @attention_kv_heads(%q: tensor<4x?x4xf32>, %k: tensor<2x?x4xf32>, %v: tensor<1x?x4xf32>) -> tensor<4x?x4xf32> {
  // expected-error @+1 {{'qkv.attention' op attention: k and v must have the same heads: 'operand 1' has 2, 'operand 2' has 1}}
  %0 = qkv.attention %q, %k, %v : tensor<4x?x4xf32>, tensor<2x?x4xf32>, tensor<1x?x4xf32> -> tensor<4x?x4xf32>
  return %0 : tensor<4x?x4xf32>
}

// -----

func.func @gqa_heads(%q: tensor<3x?x4xf32>, %k: tensor<2x?x4xf32>) -> tensor<3x?x4xf32> {
  // expected-error @+1 {{'qkv.attention' op attention: 3 query heads 3 cannot share 2 kv heads 2 (grouped-query attention needs a whole number of query heads per kv head)}}
  %0 = qkv.attention %q, %k, %k : tensor<3x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32> -> tensor<3x?x4xf32>
  return %0 : tensor<3x?x4xf32>
}

// -----

func.func @gqa_dynamic_heads(%q: tensor<?x?x4xf32>, %k: tensor<2x?x4xf32>) -> tensor<?x?x4xf32> {
  // expected-error @+1 {{'qkv.attention' op attention: q has heads ? and k has heads 2; grouped-query attention needs both head counts static}}
  %0 = qkv.attention %q, %k, %k : tensor<?x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32> -> tensor<?x?x4xf32>
  return %0 : tensor<?x?x4xf32>
}

// -----

func.func @attention_result(%q: tensor<?x4xf32>, %v: tensor<?x3xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.attention' op result 'tensor<?x4xf32>' does not fit tensor<?x3xf32>, what the op's shape rule gives}}
  %0 = qkv.attention %q, %q, %v : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x3xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @linear_attention_feature_map(%q: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.linear_attention' op feature_map must be "elu_plus_one" or "relu"}}
  %0 = qkv.linear_attention %q, %q, %q feature_map "softmax" : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @linear_attention_shapes(%q: tensor<?x4xf32>, %k: tensor<?x5xf32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{'qkv.linear_attention' op linear_attention: q and k must share the head dim: 'operand 0' ends in 4, 'operand 1' in 5}}
  %0 = qkv.linear_attention %q, %k, %k feature_map "relu" : tensor<?x4xf32>, tensor<?x5xf32>, tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// -----

func.func @rope_positions_shape(%x: tensor<2x?x4xf32>, %p: tensor<3x?xi64>) -> tensor<2x?x4xf32> {
  // expected-error @+1 {{'qkv.rope' op rope: positions 'operand 1' (3, ?) must be (?) or (2, ?) for 'operand 0' (2, ?, 4)}}
  %0 = qkv.rope %x positions %p : tensor<3x?xi64> base 10000.0 offset 0 : tensor<2x?x4xf32> -> tensor<2x?x4xf32>
  return %0 : tensor<2x?x4xf32>
}

// -----

func.func @rope_positions_offset(%x: tensor<?x4xf32>, %p: tensor<?xi64>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.rope' op rope: positions and an offset cannot be combined}}
  %0 = qkv.rope %x positions %p : tensor<?xi64> base 10000.0 offset 3 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @cache_view_rank(%past: tensor<2x16x8xf32>, %len: tensor<2xi64>, %new: tensor<2x2x1x8xf32>) -> tensor<2x2x17x8xf32> {
  // expected-error @+1 {{'qkv.cache_view' op cache_view: 'operand 0' (2, 16, 8) and 'operand 2' (2, 2, 1, 8) must have 4 dims (B, Hkv, C, Dh)}}
  %0 = qkv.cache_view %past[%len], %new : (tensor<2x16x8xf32>, tensor<2xi64>, tensor<2x2x1x8xf32>) -> tensor<2x2x17x8xf32>
  return %0 : tensor<2x2x17x8xf32>
}

// -----

func.func @cache_view_batch(%past: tensor<3x2x16x8xf32>, %len: tensor<2xi64>, %new: tensor<2x2x1x8xf32>) -> tensor<2x2x17x8xf32> {
  // expected-error @+1 {{'qkv.cache_view' op cache_view: 'operand 0' (3, 2, 16, 8) and 'operand 2' (2, 2, 1, 8) must share the batch dim}}
  %0 = qkv.cache_view %past[%len], %new : (tensor<3x2x16x8xf32>, tensor<2xi64>, tensor<2x2x1x8xf32>) -> tensor<2x2x17x8xf32>
  return %0 : tensor<2x2x17x8xf32>
}

// -----

func.func @cache_view_heads(%past: tensor<2x4x16x8xf32>, %len: tensor<2xi64>, %new: tensor<2x2x1x8xf32>) -> tensor<2x2x17x8xf32> {
  // expected-error @+1 {{'qkv.cache_view' op cache_view: 'operand 0' (2, 4, 16, 8) and 'operand 2' (2, 2, 1, 8) must share kv heads (dim 1) and head dim (dim 3)}}
  %0 = qkv.cache_view %past[%len], %new : (tensor<2x4x16x8xf32>, tensor<2xi64>, tensor<2x2x1x8xf32>) -> tensor<2x2x17x8xf32>
  return %0 : tensor<2x2x17x8xf32>
}

// -----

func.func @cache_view_lengths(%past: tensor<2x2x16x8xf32>, %len: tensor<3xi64>, %new: tensor<2x2x1x8xf32>) -> tensor<2x2x17x8xf32> {
  // expected-error @+1 {{'qkv.cache_view' op cache_view: lengths 'operand 1' (3) must be an i32 or i64 (2)}}
  %0 = qkv.cache_view %past[%len], %new : (tensor<2x2x16x8xf32>, tensor<3xi64>, tensor<2x2x1x8xf32>) -> tensor<2x2x17x8xf32>
  return %0 : tensor<2x2x17x8xf32>
}

// -----

func.func @cache_view_result(%past: tensor<2x2x16x8xf32>, %len: tensor<2xi64>, %new: tensor<2x2x1x8xf32>) -> tensor<2x2x16x8xf32> {
  // expected-error @+1 {{'qkv.cache_view' op result 'tensor<2x2x16x8xf32>' does not fit tensor<2x2x17x8xf32>, what the op's shape rule gives}}
  %0 = qkv.cache_view %past[%len], %new : (tensor<2x2x16x8xf32>, tensor<2xi64>, tensor<2x2x1x8xf32>) -> tensor<2x2x16x8xf32>
  return %0 : tensor<2x2x16x8xf32>
}

// -----

func.func @paged_cache_view_table(%pool: tensor<9x2x4x8xf32>, %table: tensor<3xi32>, %len: tensor<2xi64>, %new: tensor<2x2x1x8xf32>) -> tensor<2x2x13x8xf32> {
  // expected-error @+1 {{'qkv.paged_cache_view' op paged_cache_view: table 'operand 1' (3) must be an i32 or i64 (2, pages per sequence)}}
  %0 = qkv.paged_cache_view %pool[%table, %len], %new : (tensor<9x2x4x8xf32>, tensor<3xi32>, tensor<2xi64>, tensor<2x2x1x8xf32>) -> tensor<2x2x13x8xf32>
  return %0 : tensor<2x2x13x8xf32>
}

// -----

func.func @paged_cache_view_result(%pool: tensor<9x2x4x8xf32>, %table: tensor<2x3xi32>, %len: tensor<2xi64>, %new: tensor<2x2x1x8xf32>) -> tensor<2x2x12x8xf32> {
  // expected-error @+1 {{'qkv.paged_cache_view' op result 'tensor<2x2x12x8xf32>' does not fit tensor<2x2x13x8xf32>, what the op's shape rule gives}}
  %0 = qkv.paged_cache_view %pool[%table, %len], %new : (tensor<9x2x4x8xf32>, tensor<2x3xi32>, tensor<2xi64>, tensor<2x2x1x8xf32>) -> tensor<2x2x12x8xf32>
  return %0 : tensor<2x2x12x8xf32>
}

// -----

// Checks added for bad IR that used to crash a lowering or pass the verifier wrongly.

func.func @attention_zero_kv_heads(%q: tensor<4x?x4xf32>, %k: tensor<0x?x4xf32>) -> tensor<4x?x4xf32> {
  // expected-error @+1 {{'qkv.attention' op attention: query and kv heads must not be 0: 'operand 0' (4, ?, 4), 'operand 1' (0, ?, 4)}}
  %0 = qkv.attention %q, %k, %k : tensor<4x?x4xf32>, tensor<0x?x4xf32>, tensor<0x?x4xf32> -> tensor<4x?x4xf32>
  return %0 : tensor<4x?x4xf32>
}

// -----

func.func @matmul_batch_dims_differ(%a: tensor<2x4x6xf32>, %b: tensor<3x6x5xf32>) -> tensor<2x4x5xf32> {
  // expected-error @+1 {{'qkv.matmul' op matmul: batch dims differ: 'operand 0' (2, 4, 6) has (2), 'operand 1' (3, 6, 5) has (3) (they must be equal, or one side must be 2-D)}}
  %0 = qkv.matmul %a, %b : (tensor<2x4x6xf32>, tensor<3x6x5xf32>) -> tensor<2x4x5xf32>
  return %0 : tensor<2x4x5xf32>
}

// -----

func.func @matmul_result_batch(%a: tensor<2x4x6xf32>, %b: tensor<6x5xf32>) -> tensor<7x4x5xf32> {
  // expected-error @+1 {{'qkv.matmul' op result 'tensor<7x4x5xf32>' does not fit tensor<2x4x5xf32>, what the op's shape rule gives}}
  %0 = qkv.matmul %a, %b : (tensor<2x4x6xf32>, tensor<6x5xf32>) -> tensor<7x4x5xf32>
  return %0 : tensor<7x4x5xf32>
}

// -----

func.func @linear_rank0(%x: tensor<f32>, %w: tensor<4x3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'qkv.linear' op linear: 'operand 0' () has 0 dims; linear needs at least one dim}}
  %0 = qkv.linear %x, %w : tensor<f32>, tensor<4x3xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @rms_norm_rank0(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'qkv.rms_norm' op rms_norm: 'operand 0' () has 0 dims; it normalises over the last dim}}
  %0 = "qkv.rms_norm"(%x) {eps = 1.0e-5 : f64} : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @layer_norm_rank0(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'qkv.layer_norm' op layer_norm: 'operand 0' () has 0 dims; it normalises over the last dim}}
  %0 = "qkv.layer_norm"(%x) {eps = 1.0e-5 : f64, operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @concat_result_sum(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<5x3xf32> {
  // expected-error @+1 {{'qkv.concat' op result 'tensor<5x3xf32>' does not fit tensor<6x3xf32>, what the op's shape rule gives}}
  %0 = qkv.concat %a, %b axis 0 : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

func.func @concat_result_other_dim(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<6x2xf32> {
  // expected-error @+1 {{'qkv.concat' op result 'tensor<6x2xf32>' does not fit tensor<6x3xf32>, what the op's shape rule gives}}
  %0 = qkv.concat %a, %b axis -2 : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<6x2xf32>
  return %0 : tensor<6x2xf32>
}

// -----

func.func @concat_element_types(%a: tensor<2x3xf32>, %b: tensor<4x3xf64>) -> tensor<6x3xf32> {
  // expected-error @+1 {{'qkv.concat' op concat: dtypes differ: 'operand 0' (2, 3) is f32, 'operand 1' (4, 3) is f64}}
  %0 = qkv.concat %a, %b axis 0 : (tensor<2x3xf32>, tensor<4x3xf64>) -> tensor<6x3xf32>
  return %0 : tensor<6x3xf32>
}

// -----

func.func @concat_result_type(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<6x3xf64> {
  // expected-error @+1 {{'qkv.concat' op result 'tensor<6x3xf64>' does not fit tensor<6x3xf32>, what the op's shape rule gives}}
  %0 = qkv.concat %a, %b axis 0 : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<6x3xf64>
  return %0 : tensor<6x3xf64>
}

// -----

func.func @embedding_result_dims(%t: tensor<5x2xf32>, %ids: tensor<3xi64>) -> tensor<4x2xf32> {
  // expected-error @+1 {{'qkv.embedding' op result 'tensor<4x2xf32>' does not fit tensor<3x2xf32>, what the op's shape rule gives}}
  %0 = qkv.embedding %t[%ids] : (tensor<3xi64>, tensor<5x2xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @embedding_result_features(%t: tensor<5x2xf32>, %ids: tensor<3xi64>) -> tensor<3x7xf32> {
  // expected-error @+1 {{'qkv.embedding' op result 'tensor<3x7xf32>' does not fit tensor<3x2xf32>, what the op's shape rule gives}}
  %0 = qkv.embedding %t[%ids] : (tensor<3xi64>, tensor<5x2xf32>) -> tensor<3x7xf32>
  return %0 : tensor<3x7xf32>
}

// -----

func.func @embedding_result_type(%t: tensor<5x2xf32>, %ids: tensor<3xi64>) -> tensor<3x2xf64> {
  // expected-error @+1 {{'qkv.embedding' op result 'tensor<3x2xf64>' does not fit tensor<3x2xf32>, what the op's shape rule gives}}
  %0 = qkv.embedding %t[%ids] : (tensor<3xi64>, tensor<5x2xf32>) -> tensor<3x2xf64>
  return %0 : tensor<3x2xf64>
}

// -----

func.func @mask_result_shape(%s: tensor<?x4xf32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{'qkv.mask' op result: dim 1 is 4 vs 5}}
  %0 = qkv.mask %s : tensor<?x4xf32> -> tensor<?x5xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  return %0 : tensor<?x5xf32>
}

// -----

func.func @score_mod_result_type(%s: tensor<?x4xf32>) -> tensor<?x4xf64> {
  // expected-error @+1 {{'qkv.score_mod' op result: element types differ}}
  %0 = qkv.score_mod %s : tensor<?x4xf32> -> tensor<?x4xf64> {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    qkv.yield %x : f32
  }
  return %0 : tensor<?x4xf64>
}

// -----

func.func @lse_rank(%q: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.attention' op lse must be (..., Hq, L) of the result's element type}}
  %0:2 = qkv.attention %q, %q, %q : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32> lse tensor<?x4xf32>
  return %0#0 : tensor<?x4xf32>
}

// -----

func.func @lse_rows(%q: tensor<2x5x4xf32>) -> tensor<2x5x4xf32> {
  // expected-error @+1 {{'qkv.attention' op lse must be (..., Hq, L): dim 1 differs from q's}}
  %0:2 = qkv.attention %q, %q, %q : tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<2x5x4xf32> -> tensor<2x5x4xf32> lse tensor<2x6xf32>
  return %0#0 : tensor<2x5x4xf32>
}

// -----

func.func @merge_rows(%o: tensor<2x5x4xf32>, %l: tensor<2x4xf32>) -> tensor<2x5x4xf32> {
  // expected-error @+1 {{'qkv.merge_attention' op merge_attention: the partial output 'operand 0' (2, 5, 4) must be its log-sum-exp's dims (2, 4) and one more (Dv); 'operand 1' does not fit}}
  %0 = qkv.merge_attention %o, %l, %o, %l : tensor<2x5x4xf32>, tensor<2x4xf32>
  return %0 : tensor<2x5x4xf32>
}

// -----

// A tensor a mod captures may have any element type; the shape rule still checks q, k, v.
func.func @attention_capture_of_other_type(%q: tensor<?x4xf32>, %k: tensor<?x5xf32>, %c: tensor<3xi8>) -> tensor<?x5xf32> {
  // expected-error @+1 {{'qkv.attention' op attention: q and k must share the head dim: 'operand 0' ends in 4, 'operand 1' in 5}}
  %0 = qkv.attention %q, %k, %k captures(%c : tensor<3xi8>) : tensor<?x4xf32>, tensor<?x5xf32>, tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// -----

// The attributes the shape rules refuse, the DSL's builders and the dialect alike.
func.func @rope_base(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.rope' op rope: base must be positive}}
  %0 = qkv.rope %x base 0.0 offset 0 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @sinusoidal_pe_offset(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.sinusoidal_pe' op sinusoidal_pe: offset must not be negative}}
  %0 = qkv.sinusoidal_pe %x base 10000.0 offset -1 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @softcap_cap(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.softcap' op softcap of 'operand 0': cap must be a finite number above 0, not 0.0}}
  %0 = qkv.softcap %x cap 0.0 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @rms_norm_eps(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'qkv.rms_norm' op rms_norm: eps must not be negative}}
  %0 = qkv.rms_norm %x eps -1.0e-05 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// Extents whose product overflows 64 bits are refused, not multiplied.
func.func @merge_heads_overflow(%x: tensor<1099511627776x?x1099511627776xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{'qkv.merge_heads' op dim 1099511627776*1099511627776: 1099511627776 * 1099511627776 overflows 64 bits}}
  %0 = qkv.merge_heads %x : tensor<1099511627776x?x1099511627776xf32> -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}
