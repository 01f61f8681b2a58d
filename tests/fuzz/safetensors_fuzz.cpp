// libFuzzer target: qkv::SafeTensors::open on arbitrary bytes, then every accessor on every
// tensor it accepts (info, bytes, load, load as F32). A malformed file must be a
// qkv::Error; anything else (a crash, a sanitizer report, another exception) is a bug.
#include <cstdint>

#include <qkv/dsl/error.hpp>
#include <qkv/runtime/safetensors.hpp>

#include "memfile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  qkv_fuzz::MemFile file(data, size);
  try {
    qkv::SafeTensors st = qkv::SafeTensors::open(file.path());
    volatile unsigned char sink = 0;
    for (const qkv::SafeTensorInfo &t : st.tensors()) {
      (void)st.info(t.name);
      (void)t.numel();
      for (std::byte b : st.bytes(t.name))
        sink = sink ^ static_cast<unsigned char>(b);
      if (!t.qkv_dtype())
        continue;
      qkv::Tensor a = st.load(t.name);
      qkv::Tensor f = st.load(t.name, qkv::DType::F32, t.shape);
      (void)a;
      (void)f;
    }
  } catch (const qkv::Error &) {
  }
  return 0;
}
