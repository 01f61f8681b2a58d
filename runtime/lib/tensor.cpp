// Tensors: storage, element access, conversions, printing and comparison.
#include <qkv/runtime/tensor.hpp>

#include <qkv/runtime/buffer_cache.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <random>
#include <sstream>

#include <sys/mman.h>
#include <unistd.h>

#include "bounds_messages.hpp"

namespace qkv {

std::string detail::shape_str(const Shape &s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

using detail::shape_str;

namespace {

// Kernels load whole cache lines and AVX-512 vectors: every buffer starts on 64 bytes.
constexpr std::size_t kAlign = 64;
constexpr std::size_t kHugePage = std::size_t{2} << 20;

/// "1.5 GB": bytes in powers of 1000, for messages.
std::string human_bytes(double b) {
  const char *units[] = {"bytes", "KB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (b >= 1000 && u < 6) {
    b /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

std::size_t parse_memory_limit(const char *text) {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  double scale = 1;
  if (end && *end) {
    switch (*end) {
    case 'K': case 'k': scale = 1024.0; break;
    case 'M': case 'm': scale = 1024.0 * 1024; break;
    case 'G': case 'g': scale = 1024.0 * 1024 * 1024; break;
    case 'T': case 't': scale = 1024.0 * 1024 * 1024 * 1024; break;
    default: end = nullptr;
    }
    if (end && end[1] != '\0' && !(end[1] == 'B' && end[2] == '\0'))
      end = nullptr;
  }
  if (!end || end == text || errno || !(v > 0) || v * scale > 1.8e19)
    user_error(std::string("QKV_MEMORY_LIMIT: expected a positive number of bytes, optionally "
                           "with a K, M, G or T suffix, got '") + text + "'");
  return static_cast<std::size_t>(v * scale);
}

/// A buffer of nbytes for tensor t (its dtype and shape set), within memory_limit().
std::shared_ptr<std::byte[]> allocate(std::size_t nbytes, const Tensor &t, bool zero = true) {
  // Without QKV_MEMORY_LIMIT, small buffers skip the /proc read: any machine has 64 MB.
  if (std::getenv("QKV_MEMORY_LIMIT") || nbytes > (std::size_t{64} << 20)) {
    std::size_t limit = memory_limit();
    if (nbytes > limit)
      user_error("tensor " + t.type_str() + " needs " + human_bytes(static_cast<double>(nbytes)) +
                 ", more than the memory limit of " + human_bytes(static_cast<double>(limit)) +
                 (std::getenv("QKV_MEMORY_LIMIT") ? " (QKV_MEMORY_LIMIT)"
                                                  : " (the memory available now; "
                                                    "QKV_MEMORY_LIMIT sets another)"));
  }
  // Never a null pointer, even for zero elements: a null buffer means "no tensor".
  std::size_t n = std::max<std::size_t>(nbytes, 1);
  // Large buffers (weights, KV caches, activations of long sequences) start on a 2 MiB
  // boundary and ask for transparent huge pages: a kernel walking a paged KV cache in
  // block-table order jumps between pages, and with 4 KiB pages every jump is a TLB miss.
  std::size_t align = n >= 2 * kHugePage ? kHugePage : kAlign;
  // From the buffer cache (qkv/runtime/buffer_cache.hpp): a model's activations, freed
  // and allocated again at every layer, reuse the same pages.
  std::byte *p = nullptr;
  try {
    p = static_cast<std::byte *>(buffer_alloc(n, align));
  } catch (const std::bad_alloc &) {
    user_error("tensor " + t.type_str() + ": cannot allocate " + human_bytes(static_cast<double>(n)));
  }
  if (align == kHugePage)
    madvise(p, n / kHugePage * kHugePage, MADV_HUGEPAGE); // advice: failure changes nothing
  if (zero)
    std::memset(p, 0, n);
  return std::shared_ptr<std::byte[]>(p, [](std::byte *q) { buffer_free(q); });
}


std::int64_t count(const Shape &shape) {
  std::int64_t n = 1;
  bool overflow = false, zero = false;
  for (std::int64_t e : shape) {
    if (e < 0)
      user_error("tensor: negative extent in shape " + shape_str(shape));
    zero = zero || e == 0;
    overflow = __builtin_mul_overflow(n, e, &n) || overflow;
  }
  // A zero extent anywhere makes the tensor empty, however large the others are.
  if (zero)
    return 0;
  if (overflow)
    user_error("tensor: shape " + shape_str(shape) + " has more elements than fit in int64");
  return n;
}

/// Enough digits to tell any two doubles apart.
std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

template <class T> T load(const void *base, std::int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const std::byte *>(base) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T> void store(void *base, std::int64_t i, T v) {
  std::memcpy(static_cast<std::byte *>(base) + i * sizeof(T), &v, sizeof(T));
}

std::int64_t to_integer(double v, DType dtype) {
  // Nearest integer, halves away from zero; out-of-range values are a user error rather
  // than C++'s undefined float-to-int conversion.
  double r = std::round(v);
  bool fits =
      dtype == DType::I32 ? r >= -2147483648.0 && r <= 2147483647.0 : r >= -0x1p63 && r < 0x1p63;
  if (!std::isfinite(v) || !fits)
    user_error("tensor: " + num(v) + " does not fit in " + std::string(dtype_name(dtype)));
  return static_cast<std::int64_t>(r);
}

} // namespace

Shape unravel_index(std::int64_t flat, const Shape &shape) {
  Shape idx(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    idx[i] = flat % shape[i];
    flat /= shape[i];
  }
  return idx;
}

// ---- half precision -------------------------------------------------------------------

std::uint16_t float_to_f16(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) // inf, or NaN kept quiet with the top payload bits
    return sign | 0x7c00u | (x > 0x7f800000u ? 0x0200u | ((x >> 13) & 0x3ffu) : 0u);
  if (x >= 0x477ff000u) // >= 65520, halfway above the largest f16 (65504): rounds to inf
    return sign | 0x7c00u;
  if (x < 0x38800000u) {
    // Below 2^-14: an f16 subnormal m * 2^-24. With the implicit bit, the float is
    // mant * 2^(exp-150), so m = mant >> (126 - exp), rounded to nearest even.
    std::uint32_t exp = x >> 23;
    std::uint32_t shift = 126 - exp;
    if (exp == 0 || shift > 24)
      return sign; // < 2^-25 (or a float subnormal): rounds to zero
    std::uint32_t mant = (x & 0x7fffffu) | 0x800000u;
    std::uint32_t m = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (m & 1u)))
      ++m; // may carry into the smallest normal, 0x0400, which is the right encoding
    return sign | static_cast<std::uint16_t>(m);
  }
  std::uint32_t h = ((((x >> 23) - 127 + 15) << 10) | ((x & 0x7fffffu) >> 13));
  std::uint32_t rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    ++h; // a carry out of the mantissa bumps the exponent, as it should
  return sign | static_cast<std::uint16_t>(h);
}

float f16_to_float(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float mag;
  if (exp == 0)
    mag = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    mag = std::bit_cast<float>(0x7f800000u | (mant << 13));
  else
    mag = std::bit_cast<float>(((exp - 15 + 127) << 23) | (mant << 13));
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(mag) | sign);
}

std::uint16_t float_to_bf16(float f) {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a (quiet) NaN, never round to inf
    return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  x += 0x7fffu + ((x >> 16) & 1u); // round to nearest even; overflow becomes inf
  return static_cast<std::uint16_t>(x >> 16);
}

float bf16_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

// ---- construction ---------------------------------------------------------------------

std::size_t memory_limit() {
  if (const char *env = std::getenv("QKV_MEMORY_LIMIT"))
    return parse_memory_limit(env);
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::size_t kb = 0;
  while (meminfo >> key >> kb) {
    if (key == "MemAvailable:")
      return kb * 1024;
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                               : std::numeric_limits<std::size_t>::max();
}

std::shared_ptr<Tensor::Stamp> Tensor::new_stamp() {
  static std::atomic<std::uint64_t> next{1};
  return std::make_shared<Stamp>(next.fetch_add(1, std::memory_order_relaxed));
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  auto n = static_cast<std::size_t>(count(shape_));
  if (n > std::numeric_limits<std::size_t>::max() / dtype_size(dtype_))
    user_error("tensor: " + type_str() + " is too large to address");
  storage_ = allocate(n * dtype_size(dtype_), *this);
  stamp_ = new_stamp();
}

Tensor Tensor::uninitialized(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  auto n = static_cast<std::size_t>(count(t.shape_));
  if (n > std::numeric_limits<std::size_t>::max() / dtype_size(dtype))
    user_error("tensor: " + t.type_str() + " is too large to address");
  t.storage_ = allocate(n * dtype_size(dtype), t, /*zero=*/false);
  t.stamp_ = new_stamp();
  return t;
}

namespace {
template <class T>
Tensor from_vector(DType dtype, Shape shape, const std::vector<T> &values, const char *fn) {
  Tensor t(dtype, std::move(shape));
  if (static_cast<std::int64_t>(values.size()) != t.numel())
    user_error(std::string("Tensor::") + fn + ": shape " + shape_str(t.shape()) + " needs " +
               std::to_string(t.numel()) + " values, got " + std::to_string(values.size()));
  std::memcpy(t.data(), values.data(), values.size() * sizeof(T));
  return t;
}
} // namespace

Tensor Tensor::from_f32(Shape shape, const std::vector<float> &values) {
  return from_vector(DType::F32, std::move(shape), values, "from_f32");
}
Tensor Tensor::from_f64(Shape shape, const std::vector<double> &values) {
  return from_vector(DType::F64, std::move(shape), values, "from_f64");
}
Tensor Tensor::from_i32(Shape shape, const std::vector<std::int32_t> &values) {
  return from_vector(DType::I32, std::move(shape), values, "from_i32");
}
Tensor Tensor::from_i64(Shape shape, const std::vector<std::int64_t> &values) {
  return from_vector(DType::I64, std::move(shape), values, "from_i64");
}

Tensor Tensor::from_values(DType dtype, Shape shape, const std::vector<double> &values) {
  Tensor t(dtype, std::move(shape));
  if (static_cast<std::int64_t>(values.size()) != t.numel())
    user_error("Tensor::from_values: shape " + shape_str(t.shape()) + " needs " +
               std::to_string(t.numel()) + " values, got " + std::to_string(values.size()));
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.set(i, values[i]);
  return t;
}

Tensor Tensor::random(DType dtype, Shape shape, std::uint64_t seed, double lo, double hi) {
  // std::mt19937_64's output sequence is fixed by the standard; the distributions of
  // <random> are not, so the mapping to [lo, hi) is done here to give the same tensor on
  // every platform and standard library.
  if (!(lo < hi))
    user_error("Tensor::random: need lo < hi, got [" + num(lo) + ", " + num(hi) + ")");
  Tensor t(dtype, std::move(shape));
  std::mt19937_64 gen(seed);
  if (is_int(dtype)) {
    std::int64_t a = static_cast<std::int64_t>(std::ceil(lo));
    std::int64_t b = static_cast<std::int64_t>(std::ceil(hi)); // exclusive
    if (a >= b)
      user_error("Tensor::random: no integer in [" + num(lo) + ", " + num(hi) + ")");
    std::uint64_t n = static_cast<std::uint64_t>(b) - static_cast<std::uint64_t>(a);
    // Rejection sampling: drop the top partial block so every residue is equally likely.
    std::uint64_t limit =
        std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % n;
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      std::uint64_t r;
      do
        r = gen();
      while (r >= limit);
      t.set(i, static_cast<double>(a + static_cast<std::int64_t>(r % n)));
    }
    return t;
  }
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    double u = static_cast<double>(gen() >> 11) * 0x1.0p-53; // 53 random bits in [0, 1)
    double v = lo + (hi - lo) * u;
    t.set(i, v);
    if (t.get(i) >= hi) // rounding to the dtype (or lo + (hi-lo)*u) reached hi
      t.set(i, lo);
  }
  return t;
}

// ---- access -----------------------------------------------------------------------------

std::int64_t Tensor::numel() const { return count(shape_); }

Shape Tensor::strides() const {
  Shape s(shape_.size());
  std::int64_t st = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    s[i] = st;
    st *= shape_[i];
  }
  return s;
}

void Tensor::check_access(bool ok, std::size_t elem_size) const {
  if (empty())
    user_error("tensor: access to the data of an empty tensor");
  if (!ok)
    user_error("tensor " + type_str() + ": data_as with an element type of " +
               std::to_string(elem_size) + " bytes that is not its dtype " +
               std::string(dtype_name(dtype_)));
}

double Tensor::get(std::int64_t flat) const {
  if (empty())
    user_error("tensor: read from an empty tensor");
  const void *p = data();
  switch (dtype_) {
  case DType::F32: return load<float>(p, flat);
  case DType::F64: return load<double>(p, flat);
  case DType::F16: return f16_to_float(load<std::uint16_t>(p, flat));
  case DType::BF16: return bf16_to_float(load<std::uint16_t>(p, flat));
  case DType::I32: return load<std::int32_t>(p, flat);
  case DType::I64: return static_cast<double>(load<std::int64_t>(p, flat));
  }
  internal_error("Tensor::get: bad dtype");
}

void Tensor::set(std::int64_t flat, double v) {
  if (empty())
    user_error("tensor: write to an empty tensor");
  void *p = data();
  // Half types go through float: rounding double -> float -> half is the same as rounding
  // double -> half directly, since float has at least 2*11+2 bits (Figueroa, 1995).
  switch (dtype_) {
  case DType::F32: store<float>(p, flat, static_cast<float>(v)); return;
  case DType::F64: store<double>(p, flat, v); return;
  case DType::F16: store<std::uint16_t>(p, flat, float_to_f16(static_cast<float>(v))); return;
  case DType::BF16: store<std::uint16_t>(p, flat, float_to_bf16(static_cast<float>(v))); return;
  case DType::I32:
    store<std::int32_t>(p, flat, static_cast<std::int32_t>(to_integer(v, dtype_)));
    return;
  case DType::I64: store<std::int64_t>(p, flat, to_integer(v, dtype_)); return;
  }
  internal_error("Tensor::set: bad dtype");
}

double Tensor::at(std::initializer_list<std::int64_t> idx) const {
  return at(std::vector<std::int64_t>(idx));
}

double Tensor::at(const std::vector<std::int64_t> &idx) const {
  if (idx.size() != shape_.size())
    user_error("tensor " + type_str() + ": indexed with " + std::to_string(idx.size()) +
               " indices " + shape_str(idx) + "; it has " + std::to_string(rank()) + " dims");
  std::int64_t flat = 0;
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] < 0 || idx[i] >= shape_[i])
      user_error("tensor " + type_str() + ": index " + shape_str(idx) +
                 " is out of bounds on axis " + std::to_string(i));
    flat = flat * shape_[i] + idx[i];
  }
  return get(flat);
}

Tensor Tensor::to(DType dtype) const {
  if (empty())
    user_error("tensor: conversion of an empty tensor to " + std::string(dtype_name(dtype)));
  Tensor t(dtype, shape_);
  if (dtype == dtype_) {
    std::memcpy(t.data(), data(), nbytes());
    return t;
  }
  for (std::int64_t i = 0; i < numel(); ++i)
    t.set(i, get(i));
  return t;
}

std::vector<double> Tensor::values() const {
  std::vector<double> v(static_cast<std::size_t>(numel()));
  for (std::int64_t i = 0; i < numel(); ++i)
    v[i] = get(i);
  return v;
}

Tensor Tensor::clone() const {
  if (empty())
    return Tensor();
  return to(dtype_);
}

// ---- printing ---------------------------------------------------------------------------

std::string Tensor::type_str() const { return std::string(dtype_name(dtype_)) + shape_str(shape_); }

std::string Tensor::str(int precision) const {
  if (empty())
    return "<empty tensor>";
  // Like NumPy: past 1000 elements, long axes show their first and last 3 entries.
  constexpr std::int64_t kEdge = 3, kThreshold = 1000;
  bool elide = numel() > kThreshold;
  Shape st = strides();
  std::ostringstream os;
  auto element = [&](std::int64_t flat) {
    double v = get(flat);
    char buf[64];
    if (is_int(dtype_))
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    else
      std::snprintf(buf, sizeof buf, "%.*f", precision, v);
    os << buf;
  };
  // Axis `ax` of the sub-tensor starting at `base`; nested rows are indented under the
  // opening brackets, and rows of rank >= 2 sub-tensors are separated by blank lines.
  auto rec = [&](auto &self, int ax, std::int64_t base) -> void {
    if (ax == rank()) {
      element(base);
      return;
    }
    os << '[';
    std::int64_t n = shape_[ax];
    for (std::int64_t i = 0; i < n; ++i) {
      if (elide && n > 2 * kEdge && i == kEdge) {
        os << "...";
        i = n - kEdge - 1;
        if (ax + 1 < rank())
          os << ",\n" << std::string(ax + 1, ' ');
        else
          os << ", ";
        continue;
      }
      self(self, ax + 1, base + i * st[ax]);
      if (i + 1 < n) {
        if (ax + 1 < rank())
          os << ',' << std::string(rank() - ax - 1, '\n') << std::string(ax + 1, ' ');
        else
          os << ", ";
      }
    }
    os << ']';
  };
  rec(rec, 0, 0);
  return os.str();
}

// ---- comparison -------------------------------------------------------------------------

Comparison compare(const Tensor &got, const Tensor &want, double atol, double rtol) {
  Comparison c;
  if (got.empty() || want.empty() || got.shape() != want.shape()) {
    c.ok = false;
    c.message = "shapes differ: got " + (got.empty() ? "<empty>" : got.type_str()) + ", want " +
                (want.empty() ? "<empty>" : want.type_str());
    return c;
  }
  // The worst element is the one that misses its tolerance by the most; NaN or infinity
  // mismatches count as infinitely bad, and the first of those wins.
  double worst_excess = -1;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    double g = got.get(i), w = want.get(i);
    bool pass;
    double excess;
    if (std::isnan(g) || std::isnan(w)) {
      // A NaN is never close to anything, not even another NaN: a test whose reference is
      // NaN checks nothing about the kernel.
      pass = false;
      excess = std::numeric_limits<double>::infinity();
    } else if (std::isinf(g) || std::isinf(w)) {
      pass = g == w;
      excess = std::numeric_limits<double>::infinity();
    } else {
      double d = std::fabs(g - w);
      c.max_abs_err = std::max(c.max_abs_err, d);
      if (w != 0)
        c.max_rel_err = std::max(c.max_rel_err, d / std::fabs(w));
      double allowed = atol + rtol * std::fabs(w);
      pass = d <= allowed;
      excess = d - allowed;
    }
    if (pass)
      continue;
    ++c.mismatches;
    if (c.worst < 0 || excess > worst_excess) {
      c.worst = i;
      worst_excess = excess;
    }
  }
  c.ok = c.mismatches == 0;
  if (!c.ok) {
    double g = got.get(c.worst), w = want.get(c.worst);
    std::ostringstream os;
    os << c.mismatches << " of " << got.numel() << " elements differ (atol " << num(atol)
       << ", rtol " << num(rtol) << "); worst at " << shape_str(unravel_index(c.worst, got.shape()))
       << ": got " << num(g) << ", want " << num(w);
    if (std::isfinite(g) && std::isfinite(w))
      os << " (|diff| " << num(std::fabs(g - w)) << " > allowed " << num(atol + rtol * std::fabs(w))
         << ")";
    os << "; greatest |diff| " << num(c.max_abs_err) << ", greatest relative diff "
       << num(c.max_rel_err);
    c.message = os.str();
  }
  return c;
}

void assert_close(const Tensor &got, const Tensor &want, double atol, double rtol,
                  const std::string &what) {
  Comparison c = compare(got, want, atol, rtol);
  if (!c.ok)
    user_error(what + " is not close to the expected values: " + c.message);
}

std::map<std::string, std::pair<DType, Shape>> signature(const TensorMap &tensors) {
  std::map<std::string, std::pair<DType, Shape>> s;
  for (const auto &[name, t] : tensors)
    s[name] = {t.dtype(), t.shape()};
  return s;
}

} // namespace qkv
