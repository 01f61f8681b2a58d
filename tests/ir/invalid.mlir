// The qkv verifiers reject ill-formed IR with a message.
// RUN: qkv-opt %s -split-input-file -verify-diagnostics

func.func @matmul_contraction(%a: tensor<4x6xf32>, %b: tensor<5x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{contraction dims differ}}
  %0 = qkv.matmul %a, %b : (tensor<4x6xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @split_heads_features(%x: tensor<?x6xf32>) -> tensor<4x?x2xf32> {
  // expected-error @+1 {{input features 6 != heads 4 * head dim 2}}
  %0 = qkv.split_heads %x heads 4 : tensor<?x6xf32> -> tensor<4x?x2xf32>
  return %0 : tensor<4x?x2xf32>
}

// -----

func.func @gqa_heads(%q: tensor<3x?x4xf32>, %k: tensor<2x?x4xf32>) -> tensor<3x?x4xf32> {
  // expected-error @+1 {{query heads must be a static multiple of kv heads}}
  %0 = qkv.attention %q, %k, %k : tensor<3x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32> -> tensor<3x?x4xf32>
  return %0 : tensor<3x?x4xf32>
}

// -----

func.func @mask_yields_float(%s: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{mask region must yield 'i1', yields 'f32'}}
  %0 = qkv.mask %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.constant 1.0 : f32
    qkv.yield %c : f32
  }
  return %0 : tensor<?x?xf32>
}

// -----

func.func @score_region_arity(%q: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{score region needs 7 block arguments}}
  %0 = qkv.attention %q, %q, %q : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32> score {
  ^bb0(%s: f32, %b: index):
    qkv.yield %s : f32
  }
  return %0 : tensor<?x4xf32>
}

// -----

func.func @rope_odd(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{needs a static, even last dim}}
  %0 = qkv.rope %x base 10000.0 offset 0 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// -----

func.func @softmax_axis(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{axis 2 out of range for rank 2}}
  %0 = qkv.softmax %x axis 2 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}
