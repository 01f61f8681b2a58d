// libFuzzer target: qkv::load_npy on arbitrary bytes. A malformed file must be a qkv::Error;
// anything else (a crash, a sanitizer report, another exception) is a bug.
#include <cstdint>

#include <qkv/dsl/error.hpp>
#include <qkv/runtime/tensor.hpp>

#include "memfile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  qkv_fuzz::MemFile file(data, size);
  try {
    qkv::Tensor t = qkv::load_npy(file.path());
    // Touch every element: the tensor must own as many bytes as its shape says.
    volatile unsigned char sink = 0;
    const auto *p = static_cast<const unsigned char *>(t.data());
    for (std::size_t i = 0; i < t.nbytes(); ++i)
      sink = sink ^ p[i];
  } catch (const qkv::Error &) {
  }
  return 0;
}
