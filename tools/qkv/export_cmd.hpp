// `qkv export NAME -o DIR`: a registered graph compiled into an ahead-of-time bundle
// (qkv::export_kernel), which qkv-bundle or any program linking qkv_runtime alone runs.
#pragma once

#include "cli.hpp"

namespace qkv::tool {

extern const char *const kExportHelp;
int cmd_export(const cli::Args &a);

} // namespace qkv::tool
