// Helper of kernel_cache_test: compiles test::attention_graph("child") with the kernel
// cache in the folder argv[1] (several of these run at once on one folder), runs it and
// checks it against the interpreter. Exit 0: a correct kernel, compiled or loaded.
#include <iostream>

#include <unistd.h>

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/interpreter.hpp>

#include "kernel_cache_graph.hpp"

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: kernel_cache_child CACHE_DIR\n";
    return 2;
  }
  try {
    qkv::Graph g = qkv::test::attention_graph("child");
    qkv::CompileOptions o;
    o.cache.dir = argv[1];
    qkv::Kernel k = qkv::compile(g, qkv::Target::host(), o);
    qkv::TensorMap in = qkv::random_inputs(g, {{"B", 2}, {"L", 23}}, 3);
    qkv::Comparison c =
        qkv::compare(k.run(in).at("y"), qkv::reference::run(g, in).at("y"), 1e-5, 1e-4);
    std::cerr << "kernel_cache_child " << ::getpid() << ": " << k.stats().cache_note << ", "
              << (c.ok ? "correct" : "WRONG: " + c.message) << "\n";
    return c.ok ? 0 : 1;
  } catch (const std::exception &e) {
    std::cerr << "kernel_cache_child " << ::getpid() << ": " << e.what() << "\n";
    return 1;
  }
}
