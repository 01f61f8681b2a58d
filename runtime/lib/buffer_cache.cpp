// The buffer cache (qkv/runtime/buffer_cache.hpp): freed large buffers kept by size class
// and alignment for the next allocation of the same class.
#include <qkv/runtime/buffer_cache.hpp>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define QKV_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QKV_ASAN 1
#endif
#endif
#ifdef QKV_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace qkv {

namespace {

constexpr std::size_t kMinCached = std::size_t{64} << 10;
constexpr std::size_t kMinAlign = 64;

/// What precedes every buffer: where its allocation starts, and its class and alignment.
struct Header {
  void *raw;
  std::size_t bytes; ///< the size class: what the buffer holds
  std::size_t align;
};
static_assert(sizeof(Header) <= kMinAlign);

Header *header_of(void *p) { return static_cast<Header *>(p) - 1; }

/// Four classes per power of two (at most 25% unused), whole 16 KiB steps from 64 KiB;
/// below it the size itself (never kept).
std::size_t size_class(std::size_t n) {
  if (n < kMinCached)
    return n;
  std::size_t base = std::bit_floor(n - 1);
  std::size_t step = base / 4;
  return (n + step - 1) / step * step;
}

std::size_t limit_from_env() {
  const char *env = std::getenv("QKV_BUFFER_CACHE_MB");
  if (!env || !*env)
    return std::size_t{512} << 20;
  char *end = nullptr;
  double mb = std::strtod(env, &end);
  if (end == env || *end || !(mb >= 0))
    return std::size_t{512} << 20; // documented: a value that is not a number is ignored
  return static_cast<std::size_t>(mb * 1024 * 1024);
}

void poison(void *p, std::size_t n, bool on) {
#ifdef QKV_ASAN
  if (on)
    ASAN_POISON_MEMORY_REGION(p, n);
  else
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
  (void)p, (void)n, (void)on;
#endif
}

class Cache {
public:
  void *take(std::size_t bytes, std::size_t align) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = kept_.rbegin(); it != kept_.rend(); ++it) {
        Header *h = header_of(*it);
        if (h->bytes == bytes && h->align == align) {
          void *p = *it;
          kept_.erase(std::next(it).base());
          kept_bytes_ -= bytes;
          ++hits_;
          poison(p, bytes, false);
          return p;
        }
      }
      ++misses_;
    }
    return fresh(bytes, align);
  }

  /// Keeps `p` (its header says what it is), letting the oldest go beyond the limit.
  void keep(void *p) {
    std::size_t bytes = header_of(p)->bytes, limit;
    {
      std::lock_guard<std::mutex> lock(mu_);
      limit = limit_;
      if (bytes <= limit) {
        poison(p, bytes, true);
        kept_.push_back(p);
        kept_bytes_ += bytes;
      }
    }
    // Once kept, `p` may already be another thread's: only the sizes are read here.
    if (bytes > limit)
      release(p);
    else
      trim(limit, false);
  }

  /// Lets the oldest kept buffers go until at most `limit` bytes are kept; the limit
  /// becomes `limit` when `set`.
  void trim(std::size_t limit, bool set) {
    std::vector<void *> out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (set)
        limit_ = limit;
      std::size_t n = 0;
      while (kept_bytes_ > limit) {
        kept_bytes_ -= header_of(kept_[n])->bytes;
        out.push_back(kept_[n++]);
      }
      kept_.erase(kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(n));
    }
    for (void *q : out)
      release(q);
  }

  BufferCacheStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {hits_, misses_, kept_bytes_, kept_.size(), limit_};
  }

  static void *fresh(std::size_t bytes, std::size_t align) {
    // The header sits in the `align` bytes before the buffer.
    void *raw = ::operator new(align + std::max<std::size_t>(bytes, 1), std::align_val_t{align});
    void *p = static_cast<char *>(raw) + align;
    *header_of(p) = {raw, bytes, align};
    return p;
  }

  static void release(void *p) {
    Header *h = header_of(p);
    poison(p, h->bytes, false);
    ::operator delete(h->raw, std::align_val_t{h->align});
  }

private:
  std::mutex mu_;
  std::vector<void *> kept_; ///< oldest first
  std::size_t kept_bytes_ = 0;
  std::size_t limit_ = limit_from_env();
  std::uint64_t hits_ = 0, misses_ = 0;
};

/// Never destroyed: kernels and tensors may free buffers during static destruction.
Cache &cache() {
  static Cache *c = new Cache;
  return *c;
}

} // namespace

void *buffer_alloc(std::size_t bytes, std::size_t align) {
  align = std::max(std::bit_ceil(std::max<std::size_t>(align, 1)), kMinAlign);
  std::size_t cls = size_class(bytes);
  void *p = cls >= kMinCached ? cache().take(cls, align) : Cache::fresh(cls, align);
  poison(static_cast<char *>(p) + bytes, cls - bytes, true); // past what was asked for
  return p;
}

void buffer_free(void *p) {
  if (!p)
    return;
  if (header_of(p)->bytes >= kMinCached)
    cache().keep(p);
  else
    Cache::release(p);
}

BufferCacheStats buffer_cache_stats() { return cache().stats(); }

void buffer_cache_trim() { cache().trim(0, false); }

void set_buffer_cache_limit(std::size_t bytes) { cache().trim(bytes, true); }

} // namespace qkv

extern "C" {
void *qkv_buffer_alloc(std::uint64_t bytes) { return qkv::buffer_alloc(bytes); }
void *qkv_buffer_aligned_alloc(std::uint64_t alignment, std::uint64_t bytes) {
  return qkv::buffer_alloc(bytes, alignment);
}
void qkv_buffer_free(void *p) { qkv::buffer_free(p); }
}
