// The stages of compilation: one enum for Kernel::ir, lower_to, the compiler's pipelines
// and the tools. Each stage has one name ("llvm-ir"), printed and parsed here only.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace qkv {

enum class Stage : std::uint8_t {
  Graph,  // the qkv::Graph's text
  Qkv,    // the qkv dialect: imported, canonicalized, attention recognized
  Linalg, // every op in linalg/tensor/arith/math; attention as the fused kernel
  Loops,  // bufferized; GEMMs and elementwise loops vectorized; parallel loops
  Llvm,   // the LLVM dialect
  LlvmIr, // LLVM IR, optimised (CPU)
  Asm,    // the host's assembly (CPU)
  Gpu,    // tiles as gpu.launch and kernels outlined (CUDA)
  Nvvm,   // the kernels in the NVVM dialect (CUDA)
  Ptx,    // each kernel module's PTX (CUDA)
};

constexpr std::string_view stage_name(Stage s) {
  switch (s) {
  case Stage::Graph: return "graph";
  case Stage::Qkv: return "qkv";
  case Stage::Linalg: return "linalg";
  case Stage::Loops: return "loops";
  case Stage::Llvm: return "llvm";
  case Stage::LlvmIr: return "llvm-ir";
  case Stage::Asm: return "asm";
  case Stage::Gpu: return "gpu";
  case Stage::Nvvm: return "nvvm";
  case Stage::Ptx: return "ptx";
  }
  return "?";
}

/// A CPU kernel's stages, in pipeline order.
inline constexpr std::array<Stage, 7> kCpuStages = {
    Stage::Graph, Stage::Qkv, Stage::Linalg, Stage::Loops, Stage::Llvm, Stage::LlvmIr, Stage::Asm};
/// A CUDA kernel's stages, in pipeline order.
inline constexpr std::array<Stage, 7> kCudaStages = {
    Stage::Graph, Stage::Qkv, Stage::Linalg, Stage::Loops, Stage::Gpu, Stage::Nvvm, Stage::Ptx};
/// The CPU stages that are MLIR pass pipelines (the rest are the graph's text and LLVM's
/// own steps).
inline constexpr std::array<Stage, 4> kCpuPassStages = {Stage::Qkv, Stage::Linalg, Stage::Loops,
                                                        Stage::Llvm};
/// The CUDA stages that are MLIR pass pipelines.
inline constexpr std::array<Stage, 6> kCudaPassStages = {Stage::Qkv, Stage::Linalg, Stage::Loops,
                                                         Stage::Gpu, Stage::Nvvm,   Stage::Ptx};

/// Whether `s` is one of `stages`.
template <std::size_t N> constexpr bool stage_in(const std::array<Stage, N> &stages, Stage s) {
  for (Stage x : stages)
    if (x == s)
      return true;
  return false;
}

/// The stage with this name, if any.
constexpr std::optional<Stage> parse_stage(std::string_view name) {
  for (Stage s : {Stage::Graph, Stage::Qkv, Stage::Linalg, Stage::Loops, Stage::Llvm, Stage::LlvmIr,
                  Stage::Asm, Stage::Gpu, Stage::Nvvm, Stage::Ptx})
    if (stage_name(s) == name)
      return s;
  return std::nullopt;
}

} // namespace qkv
