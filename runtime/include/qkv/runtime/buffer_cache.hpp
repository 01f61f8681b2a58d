// The buffer cache: where compiled kernels' scratch buffers and tensors' storage come from.
//
// A kernel call allocates its intermediate buffers (a GEMM's C before its split into
// heads, a packed B, softmax rows...) and frees them before it returns; a model calls
// the same kernels again and again with the same sizes. Buffers of 64 KiB and more come
// from the C library's mmap or the top of its heap, and freeing them gives their pages
// back to the system, so that every call paid a page fault per 4 KiB touched again (a
// Llama layer's prefill of 512 tokens spent a third of its time in them). The buffer
// cache keeps freed large buffers, by size class and alignment, and hands them out
// again: a model's calls after the first touch no fresh pages.
//
// Bounded: at most buffer_cache_limit() bytes are kept (QKV_BUFFER_CACHE_MB, default
// 512 MiB; 0 keeps nothing), the least recently freed let go first. Buffers under 64 KiB
// go straight to the C library. Thread-safe. Under AddressSanitizer a kept buffer is
// poisoned, so a use after free is still reported.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qkv {

/// `bytes` (any, 0 included) aligned to `align` (a power of two; at least 64 is given),
/// never null: std::bad_alloc when the system has no memory.
void *buffer_alloc(std::size_t bytes, std::size_t align = 64);
/// Gives back a pointer buffer_alloc returned (null is ignored).
void buffer_free(void *p);

struct BufferCacheStats {
  std::uint64_t hits = 0;   ///< allocations of 64 KiB or more served from the cache
  std::uint64_t misses = 0; ///< such allocations the cache could not serve
  std::size_t kept_bytes = 0, kept_buffers = 0;
  std::size_t limit_bytes = 0;
};
BufferCacheStats buffer_cache_stats();
/// Returns every kept buffer to the system.
void buffer_cache_trim();
/// Keeps at most `bytes` from now on (what is kept beyond it is let go now).
void set_buffer_cache_limit(std::size_t bytes);

} // namespace qkv

// The same as the functions MLIR's finalize-memref-to-llvm{use-generic-functions} calls,
// which the JIT binds to them: memref.alloc in compiled kernels takes its memory here.
extern "C" {
void *qkv_buffer_alloc(std::uint64_t bytes);
void *qkv_buffer_aligned_alloc(std::uint64_t alignment, std::uint64_t bytes);
void qkv_buffer_free(void *p);
}
