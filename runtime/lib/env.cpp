#include <qkv/runtime/env.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include <qkv/dsl/error.hpp>

namespace qkv {

std::optional<bool> env_switch(const char *name) {
  const char *raw = std::getenv(name);
  if (!raw || !*raw)
    return std::nullopt;
  std::string v(raw);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "1" || v == "on" || v == "true" || v == "yes")
    return true;
  if (v == "0" || v == "off" || v == "false" || v == "no")
    return false;
  user_error(std::string(name) + " is '" + raw +
             "'; it takes 1, on, true or yes, or 0, off, false or no");
}

} // namespace qkv
