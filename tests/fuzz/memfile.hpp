// The fuzz targets' input as a file: the readers take paths (load_npy, SafeTensors::open
// maps the file), so each input is written to an anonymous in-memory file (memfd) and read
// back through /proc/self/fd/N. No disk, nothing left behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

namespace qkv_fuzz {

class MemFile {
public:
  MemFile(const std::uint8_t *data, std::size_t size) {
    fd_ = ::memfd_create("qkv-fuzz", MFD_CLOEXEC);
    if (fd_ < 0)
      std::abort();
    std::size_t done = 0;
    while (done < size) {
      ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0)
        std::abort();
      done += static_cast<std::size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile &) = delete;
  MemFile &operator=(const MemFile &) = delete;
  const std::string &path() const { return path_; }

private:
  int fd_ = -1;
  std::string path_;
};

} // namespace qkv_fuzz
