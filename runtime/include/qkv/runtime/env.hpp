// The on/off switches qkv reads from the environment (QKV_CACHE, QKV_CHECKED,
// QKV_PASS_TIMING, QKV_PERF_MAP, QKV_VERIFY_EACH), all spelled the same way.
#pragma once

#include <optional>

namespace qkv {

/// The switch `name` in the environment: 1, on, true or yes (in any case) is on; 0, off,
/// false or no is off; unset or empty is nullopt (the caller's default). Any other value
/// is a qkv::Error naming the variable, its value and the spellings it takes.
std::optional<bool> env_switch(const char *name);

} // namespace qkv
