func.func @yield_outside_a_mod(%c: i1) {
  qkv.yield %c : i1
}
