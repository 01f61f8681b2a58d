// Errors. A user error (bad shape, unbound dim, wrong dtype, bad file, unsupported mod) is
// a qkv::Error whose message names the user's tensors, dims and op. An InternalError is a
// bug in qkv. Nothing in qkv aborts on user input.
#pragma once

#include <stdexcept>
#include <string>

namespace qkv {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string &msg) : std::runtime_error(msg) {}
};

class InternalError : public std::logic_error {
public:
  explicit InternalError(const std::string &msg)
      : std::logic_error("qkv internal error (a bug, please report): " + msg) {}
};

[[noreturn]] inline void user_error(const std::string &msg) { throw Error(msg); }
[[noreturn]] inline void internal_error(const std::string &msg) { throw InternalError(msg); }

inline void user_check(bool ok, const std::string &msg) {
  if (!ok)
    throw Error(msg);
}

} // namespace qkv
