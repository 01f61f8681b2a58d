// Tensors: dense, row-major, 64-byte aligned buffers with a dtype and a shape. What users
// pass to kernels and the interpreter, and what they get back.
//
// Copying a Tensor shares its buffer (like torch.Tensor or a NumPy view): writes through
// one copy are seen by the other. clone() makes an independent copy.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <qkv/dsl/dtype.hpp>
#include <qkv/dsl/graph.hpp>

namespace qkv {

/// The most bytes one tensor may take: the environment variable QKV_MEMORY_LIMIT (bytes,
/// or a number with a K, M, G or T suffix, powers of 1024), else the memory the system
/// has available now (MemAvailable of /proc/meminfo; all physical memory where that is
/// unknown). A tensor over the limit is a qkv::Error before anything is allocated, not a
/// std::bad_alloc or the kernel's out-of-memory killer; a malformed QKV_MEMORY_LIMIT is a
/// qkv::Error too.
std::size_t memory_limit();

class Tensor {
public:
  Tensor() = default;
  /// Zero-filled. A shape whose bytes overflow, or exceed memory_limit(), is a qkv::Error
  /// naming the tensor's type and size.
  Tensor(DType dtype, Shape shape);
  /// Storage for a result that is about to be overwritten whole (a compiled kernel's
  /// outputs): the contents are unspecified, and the memory is first touched by whoever
  /// writes it (the kernel's threads), not zero-filled here by one thread.
  static Tensor uninitialized(DType dtype, Shape shape);

  static Tensor from_f32(Shape shape, const std::vector<float> &values);
  static Tensor from_f64(Shape shape, const std::vector<double> &values);
  static Tensor from_i32(Shape shape, const std::vector<std::int32_t> &values);
  static Tensor from_i64(Shape shape, const std::vector<std::int64_t> &values);
  /// Any dtype, from doubles (rounded to the dtype).
  static Tensor from_values(DType dtype, Shape shape, const std::vector<double> &values);
  /// Uniform in [lo, hi) from a fixed-seed generator (integers: lo..hi-1).
  static Tensor random(DType dtype, Shape shape, std::uint64_t seed, double lo = -1.0,
                       double hi = 1.0);

  bool empty() const { return !storage_; }
  DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  std::int64_t numel() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  /// Row-major strides, in elements.
  Shape strides() const;

  /// Non-const access counts as a write (see writes()); const access does not.
  void *data() {
    if (stamp_)
      stamp_->writes.fetch_add(1, std::memory_order_relaxed);
    return storage_.get();
  }
  const void *data() const { return storage_.get(); }

  /// The identity of this tensor's buffer, shared by its copies and never reused by
  /// another buffer in this process (0 for an empty tensor).
  std::uint64_t storage_id() const { return stamp_ ? stamp_->id : 0; }
  /// How many times the buffer has been accessed for writing, through any copy: every
  /// non-const data(), data_as<T>() or set() counts one. A kernel that keeps a packed copy
  /// of a weight (Kernel::run) repacks it when this has changed. A pointer obtained from
  /// data() and written after a later run is not seen: get it again to write.
  std::uint64_t writes() const {
    return stamp_ ? stamp_->writes.load(std::memory_order_relaxed) : 0;
  }
  /// Expires when the last copy of this tensor's buffer is gone.
  std::weak_ptr<const void> lifetime() const { return stamp_; }
  /// Typed pointer; throws qkv::Error if T does not match the dtype (f16 and bf16 are
  /// accessed as std::uint16_t bit patterns).
  template <class T> T *data_as() {
    check_access(accepts<T>(dtype_), sizeof(T));
    return static_cast<T *>(data());
  }
  template <class T> const T *data_as() const {
    check_access(accepts<T>(dtype_), sizeof(T));
    return static_cast<const T *>(data());
  }

  /// Element `flat` (row-major index) as a double, whatever the dtype.
  double get(std::int64_t flat) const;
  void set(std::int64_t flat, double v);
  /// Element at a multi-index, bounds-checked.
  double at(std::initializer_list<std::int64_t> idx) const;
  double at(const std::vector<std::int64_t> &idx) const;

  /// A copy converted to another dtype (floats round to nearest even).
  Tensor to(DType dtype) const;
  /// All values as doubles, row-major.
  std::vector<double> values() const;
  /// A deep copy.
  Tensor clone() const;

  /// Multi-line text: the values as nested rows, `precision` digits after the point.
  std::string str(int precision = 4) const;
  /// "f32[4, 6]"
  std::string type_str() const;

private:
  template <class T> static constexpr bool accepts(DType d) {
    if constexpr (std::is_same_v<T, float>)
      return d == DType::F32;
    else if constexpr (std::is_same_v<T, double>)
      return d == DType::F64;
    else if constexpr (std::is_same_v<T, std::int32_t>)
      return d == DType::I32;
    else if constexpr (std::is_same_v<T, std::int64_t>)
      return d == DType::I64;
    else if constexpr (std::is_same_v<T, std::uint16_t>)
      return is_half(d);
    else
      return false;
  }
  /// Throws qkv::Error naming the dtype when `ok` is false (or the tensor is empty).
  void check_access(bool ok, std::size_t elem_size) const;

  /// The buffer's identity and write count, shared by the tensor's copies.
  struct Stamp {
    explicit Stamp(std::uint64_t id) : id(id) {}
    const std::uint64_t id;
    std::atomic<std::uint64_t> writes{0};
  };
  static std::shared_ptr<Stamp> new_stamp();

  DType dtype_ = DType::F32;
  Shape shape_;
  std::shared_ptr<std::byte[]> storage_;
  std::shared_ptr<Stamp> stamp_;
};

using TensorMap = std::map<std::string, Tensor>;

/// Loads a NumPy .npy file (v1/v2/v3 header, little-endian f4/f8/f2/i4/i8, C order).
/// Throws qkv::Error naming the file on anything else.
Tensor load_npy(const std::string &path);
/// Saves as .npy (bf16 is saved as float32: NumPy has no bfloat16).
void save_npy(const std::string &path, const Tensor &t);

/// Result of comparing two tensors elementwise.
struct Comparison {
  double max_abs_err = 0;
  double max_rel_err = 0;  // the largest |got-want| / |want| over all elements (|want| > 0)
  std::int64_t worst = -1; // flat index of the element that fails worst (or -1)
  std::int64_t mismatches = 0;
  bool ok = true;
  std::string message; // empty when ok; else names the worst element and both values
};
/// Elements pass when |got - want| <= atol + rtol * |want|; NaN never passes (not even
/// against NaN); infinities must match exactly. Shapes must be equal.
Comparison compare(const Tensor &got, const Tensor &want, double atol, double rtol);
/// Throws qkv::Error with compare()'s message when the tensors are not close.
void assert_close(const Tensor &got, const Tensor &want, double atol = 1e-5, double rtol = 1e-4,
                  const std::string &what = "tensor");

/// The multi-index of row-major element `flat` in a tensor of `shape`.
Shape unravel_index(std::int64_t flat, const Shape &shape);

/// The dtypes and shapes of a set of tensors, for qkv::bind_dims.
std::map<std::string, std::pair<DType, Shape>> signature(const TensorMap &tensors);

// ---- half-precision conversions (round to nearest even) --------------------------------
std::uint16_t float_to_f16(float f);
float f16_to_float(std::uint16_t h);
std::uint16_t float_to_bf16(float f);
float bf16_to_float(std::uint16_t h);

} // namespace qkv
