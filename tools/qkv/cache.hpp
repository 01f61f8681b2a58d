// `qkv cache info|clear`: the on-disk kernel cache's folder, entries and size, and
// emptying it.
#pragma once

#include "cli.hpp"

namespace qkv::tool {

extern const char *const kCacheHelp;
int cmd_cache(const cli::Args &a);

} // namespace qkv::tool
