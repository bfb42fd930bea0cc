#include "records/atomic_file.h"

#include <dirent.h>
#include <fathom/error.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <string_view>

#include "records/file_system.h"
#include "records/terminal_text.h"
#include "records/warning_sink.h"

namespace fathom {
namespace {

constexpr std::string_view kTempMarker = ".tmp.";
constexpr std::string_view kProbePrefix = ".fathom-probe.";

std::string system_reason(int err) { return std::strerror(err); }

// 64 random bits: a name nobody can plant ahead of time. getrandom() rarely fails; the clock and a
// counter still make the name unique within this process, and O_EXCL makes any clash an EEXIST.
std::string random_suffix() {
  std::uint64_t bits = 0;
  if (::getrandom(&bits, sizeof bits, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bits)) {
    static std::atomic<std::uint64_t> counter{0};
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    bits = static_cast<std::uint64_t>(ts.tv_nsec) * 0x9E3779B97F4A7C15ULL + (counter++);
  }
  return fmt::format("{:016x}", bits);
}

void write_all(int fd, const std::string& content, const std::string& tmp) {
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(fmt::format("cannot write {}: {}", tmp, system_reason(err)));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

std::string folder_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Makes the rename itself durable: without it a crash can bring back the old directory entry.
void sync_folder(const std::string& folder) noexcept {
  int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// The pid in a name fathom gives its temporaries: `<x>.tmp.<pid>[.<random>]` or
// `.fathom-probe.<pid>[.<random>]`; 0 for any other name.
long owner_pid(std::string_view name) {
  std::string_view rest;
  if (name.substr(0, kProbePrefix.size()) == kProbePrefix) {
    rest = name.substr(kProbePrefix.size());
  } else {
    const auto at = name.rfind(kTempMarker);
    if (at == std::string_view::npos || at == 0) return 0;
    rest = name.substr(at + kTempMarker.size());
    // `<x>.tmp.<pid>.<random>`: the marker before the pid, not one inside <x>.
    if (const auto dot = rest.find('.'); dot != std::string_view::npos) {
      if (rest.find('.', dot + 1) != std::string_view::npos) return 0;
    }
  }
  const auto dot = rest.find('.');
  const std::string_view pid = rest.substr(0, dot);
  if (dot != std::string_view::npos) {
    const std::string_view random = rest.substr(dot + 1);
    if (random.size() != 16 ||
        random.find_first_not_of("0123456789abcdef") != std::string_view::npos)
      return 0;
  }
  if (!all_digits(pid) || pid.size() > 9) return 0;
  return std::stol(std::string(pid));
}

}  // namespace

namespace detail {

int create_new_file(const std::string& prefix, std::string& name) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    name = fmt::format("{}{}.{}", prefix, ::getpid(), random_suffix());
    // O_EXCL refuses any existing name, a link (even a dangling one) included; O_NOFOLLOW says
    // so in the flags too.
    int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

void sync_folder_of(const std::string& path) noexcept {
  try {
    sync_folder(folder_of(path));
  } catch (...) {
    swallowed("records/atomic_file.cpp: syncing a folder");
  }
}

}  // namespace detail

void write_file_atomically(const std::string& path, const std::string& content) {
  // The temporary lives in the same folder so that rename() never crosses file systems.
  std::string tmp;
  int fd = detail::create_new_file(path + std::string(kTempMarker), tmp);
  if (fd < 0) {
    throw Error(
        fmt::format("cannot create {}: {}; make the report folder writable or choose "
                    "another with Options::report_dir or FATHOM_REPORT_DIR",
                    tmp, system_reason(errno)));
  }
  write_all(fd, content, tmp);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot flush {}: {}", tmp, system_reason(err)));
  }
  // rename() replaces whatever entry path is (a planted link included) and never follows it.
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot rename {} to {}: {}", tmp, path, system_reason(err)));
  }
  sync_folder(folder_of(path));
}

void ensure_writable_folder(const std::string& folder) {
  if (folder.empty()) throw Error("the report folder is empty; give Options::report_dir a path");
  if (std::string why = fs::make_directories(folder); !why.empty()) {
    throw Error(
        fmt::format("cannot create report folder '{}': {}; choose a writable folder with "
                    "Options::report_dir or FATHOM_REPORT_DIR",
                    detail::printed_path(folder), why));
  }
  std::string probe;
  int fd = detail::create_new_file(fmt::format("{}/{}", folder, kProbePrefix), probe);
  if (fd < 0) {
    throw Error(
        fmt::format("report folder '{}' is not writable: {}; choose a writable folder "
                    "with Options::report_dir or FATHOM_REPORT_DIR",
                    detail::printed_path(folder), system_reason(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

int remove_stale_temporaries(const std::string& folder) noexcept {
  DIR* dir = ::opendir(folder.c_str());
  if (!dir) return 0;
  const int dfd = ::dirfd(dir);
  int removed = 0;
  while (const dirent* e = ::readdir(dir)) {
    const long pid = owner_pid(e->d_name);
    if (pid <= 0 || pid == ::getpid()) continue;
    // Alive (or not ours to ask about): its writer may still be at work.
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    struct stat st;
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
    if (::unlinkat(dfd, e->d_name, 0) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

}  // namespace fathom
