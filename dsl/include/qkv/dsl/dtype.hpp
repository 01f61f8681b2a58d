// Element types. f32 is what every path computes today; bf16/f16 are declared so graphs,
// tensors and later kernels can carry them; i32/i64 hold token ids and index tables
// (document ids, positions) that mods load from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace qkv {

enum class DType : std::uint8_t { F32, F64, F16, BF16, I32, I64 };

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::I32: return "i32";
  case DType::I64: return "i64";
  }
  return "?";
}

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
  case DType::F32: case DType::I32: return 4;
  case DType::F64: case DType::I64: return 8;
  case DType::F16: case DType::BF16: return 2;
  }
  return 0;
}

constexpr bool is_float(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}
constexpr bool is_int(DType t) { return t == DType::I32 || t == DType::I64; }
/// f16 or bf16: computed in f32 and rounded at every node (the interpreter and kernels).
constexpr bool is_half(DType t) { return t == DType::F16 || t == DType::BF16; }

/// Parses "f32", "i64", ...; throws qkv::Error on anything else.
DType parse_dtype(std::string_view s);

// Tag types for the typed front end: g.input<f32>("x", L, D).
struct f32 { static constexpr DType value = DType::F32; };
struct f64 { static constexpr DType value = DType::F64; };
struct f16 { static constexpr DType value = DType::F16; };
struct bf16 { static constexpr DType value = DType::BF16; };
struct i32 { static constexpr DType value = DType::I32; };
struct i64 { static constexpr DType value = DType::I64; };

} // namespace qkv
