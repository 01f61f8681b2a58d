// How the DSL spells a double wherever it prints one (Graph::str's attributes, a mod's
// constants, the numbers in its errors): the shortest text that reads back as the same
// double, with ".0" after a whole number so that it reads as a float.
#pragma once

#include <charconv>
#include <string>

namespace qkv::detail {

inline std::string format_double(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) // not 1e+39, inf or nan
    s += ".0";
  return s;
}

} // namespace qkv::detail
