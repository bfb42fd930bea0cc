#include "collect/process_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstring>

namespace fathom {
namespace {

// Reads "Name:   1234 kB" from /proc/self/status.
std::optional<std::int64_t> status_kib(const char* key) noexcept {
  std::FILE* f = std::fopen("/proc/self/status", "re");
  if (!f) return std::nullopt;
  char line[256];
  std::optional<std::int64_t> out;
  const std::size_t key_len = std::strlen(key);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, key_len) == 0 && line[key_len] == ':') {
      long long kib = 0;
      if (std::sscanf(line + key_len + 1, "%lld", &kib) == 1) out = kib * 1024;
      break;
    }
  }
  std::fclose(f);
  return out;
}

}  // namespace

std::optional<std::int64_t> current_rss_bytes() noexcept {
  // Read at phase ends on CPU runs (sampled: resident_sampler.h), so the file stays open: a pread
  // at offset 0 makes the kernel regenerate the line, and costs about a microsecond where
  // open+read+close costs several. The second field is the resident set in pages.
  static const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  static const long page = ::sysconf(_SC_PAGESIZE);
  if (fd < 0) return std::nullopt;
  char buf[128];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  if (n <= 0) return std::nullopt;
  // "size resident shared ...": the second number, without sscanf's locale and format machinery.
  const char* p = buf;
  const char* const last = buf + n;
  std::int64_t size = 0, resident = 0;
  auto r = std::from_chars(p, last, size);
  if (r.ec != std::errc() || r.ptr == last || *r.ptr != ' ') return std::nullopt;
  r = std::from_chars(r.ptr + 1, last, resident);
  if (r.ec != std::errc()) return std::nullopt;
  return resident * static_cast<std::int64_t>(page);
}

std::optional<std::int64_t> peak_rss_bytes() noexcept { return status_kib("VmHWM"); }

bool reset_peak_rss() noexcept {
  // Writing "5" to clear_refs resets VmHWM to the current RSS (Linux 4.0 and later).
  int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok;
}

}  // namespace fathom
