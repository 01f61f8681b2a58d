// The AMX tile state a process needs before its first tile instruction.
#pragma once

namespace qkv {

/// Asks Linux for the AMX tile data state (arch_prctl(ARCH_REQ_XCOMP_PERM,
/// XFEATURE_XTILEDATA)), once per process: the permission then holds for every thread,
/// the OpenMP pool's included. Without it the first tile instruction kills the process
/// with SIGILL. A refusal (an old kernel, a hypervisor that hides the state, a non-Linux
/// host) is a qkv::Error saying why; later calls repeat the first answer.
void request_amx_tile_state();

} // namespace qkv
