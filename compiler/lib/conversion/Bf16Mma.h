// The mark qkv-warp-mma-to-nvgpu puts on a kernel whose bf16 warp tiles it carries as
// f16, and that qkv-restore-bf16-mma reads to make its mma.sync ops bf16 again.
#pragma once

#include "llvm/ADT/StringRef.h"

namespace qkv::ir {

inline constexpr llvm::StringLiteral kBf16MmaMark = "qkv.bf16_mma";

} // namespace qkv::ir
