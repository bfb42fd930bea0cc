#pragma once
// The fuzzer's bytes as a file: the readers take paths (they see through gzip, check the file is
// regular, limit its size), so each input is written to one memfd and read back through
// /proc/self/fd, which costs no disk and goes through the same open() as a real file.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace fathom::fuzz {

inline const std::string& as_file(const std::uint8_t* data, std::size_t size) {
  static const int fd = ::memfd_create("fathom-fuzz", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
    std::abort();  // the harness, not the reader, failed
  return path;
}

}  // namespace fathom::fuzz
