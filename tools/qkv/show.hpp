// `qkv show NAME`: a graph's attention mask and the fused kernel's tiles, in the terminal
// and as a PNG.
#pragma once

#include "cli.hpp"

namespace qkv::tool {

extern const char *const kShowHelp;
int cmd_show(const cli::Args &a);

} // namespace qkv::tool
