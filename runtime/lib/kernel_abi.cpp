// The kernel calling convention's functions (qkv/runtime/kernel_abi.hpp).
#include <qkv/runtime/kernel_abi.hpp>

#include <cctype>

#include <qkv/runtime/tensor.hpp>

namespace qkv::abi {

std::string function_name(std::string_view graph_name) {
  std::string s(graph_name);
  for (char &c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      c = '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])))
    s = "g_" + s;
  return s;
}

std::vector<std::int64_t> descriptor(const Tensor &t) {
  std::vector<std::int64_t> d;
  auto p = reinterpret_cast<std::int64_t>(t.data());
  d.push_back(p);
  d.push_back(p);
  d.push_back(0);
  for (std::int64_t s : t.shape())
    d.push_back(s);
  for (std::int64_t s : t.strides())
    d.push_back(s);
  return d;
}

} // namespace qkv::abi
