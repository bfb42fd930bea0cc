#include "base/atomic_file.h"

#include <dirent.h>
#include <fathom/error.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <string_view>
#include <utility>

#include "base/file_system.h"
#include "base/terminal_text.h"
#include "base/warning_sink.h"

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

constexpr std::size_t kWriteBuffer = 64 * 1024;

void write_all(int fd, std::string_view content, const std::string& tmp) {
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("cannot write {}: {}", tmp, system_reason(errno)));
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

// Makes the rename itself durable: without it a crash can bring back the old directory entry.
void sync_folder(const std::string& folder) noexcept {
  int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

bool all_of(std::string_view s, std::string_view chars) {
  return !s.empty() && s.find_first_not_of(chars) == std::string_view::npos;
}

// The last `.`-separated field of name, cut off it with its dot; "" when there is no dot.
std::string_view cut_last_field(std::string_view& name) {
  const auto dot = name.rfind('.');
  if (dot == std::string_view::npos) return {};
  const std::string_view field = name.substr(dot + 1);
  name = name.substr(0, dot);
  return field;
}

std::uint64_t fnv1a(std::string_view text, std::uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

std::string first_line_of(const char* path) {
  char text[128] = {};
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  std::string s(text, n > 0 ? static_cast<std::size_t>(n) : 0);
  return s.substr(0, s.find('\n'));
}

// A name for the pid namespace this process lives in on this boot of this host: the pid in a
// temporary's name means something only to a process with the same one (a shared report folder
// on NFS is seen by other hosts and other containers, whose pids are not ours to test). 8 hex
// digits of a hash of the host name, the kernel's boot id and the pid namespace's inode.
std::string compute_host_tag() {
  char host[256] = {};
  (void)::gethostname(host, sizeof host - 1);
  char ns[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  std::uint64_t h = fnv1a(host);
  h = fnv1a("\n" + first_line_of("/proc/sys/kernel/random/boot_id"), h);
  h = fnv1a(std::string_view("\n"), h);
  if (n > 0) h = fnv1a(std::string_view(ns, static_cast<std::size_t>(n)), h);
  return fmt::format("{:08x}", static_cast<std::uint32_t>(h ^ (h >> 32)));
}

// The pid in a name this process's host and pid namespace gave a temporary, exactly
// `<report>.tmp.<tag>.<pid>.<random>` (the report a .json, .jsonl or .html) or
// `.fathom-probe.<tag>.<pid>.<random>`; 0 for any other name (another host's, an older fathom's,
// a user's file that merely looks alike): those are never fathom's to remove.
long owner_pid(std::string_view name) {
  const std::string_view random = cut_last_field(name);
  const std::string_view pid = cut_last_field(name);
  const std::string_view tag = cut_last_field(name);
  if (random.size() != 16 || !all_of(random, "0123456789abcdef")) return 0;
  if (pid.size() > 9 || !all_of(pid, "0123456789")) return 0;
  if (tag != detail::host_tag()) return 0;
  // What is left: `.fathom-probe` or `<report>.tmp` (the markers without their last dot).
  const std::string_view probe = kProbePrefix.substr(0, kProbePrefix.size() - 1);
  const std::string_view tmp = kTempMarker.substr(0, kTempMarker.size() - 1);
  if (name != probe) {
    if (!name.ends_with(tmp)) return 0;
    const std::string_view report = name.substr(0, name.size() - tmp.size());
    if (!report.ends_with(".json") && !report.ends_with(".jsonl") && !report.ends_with(".html"))
      return 0;
  }
  return std::stol(std::string(pid));
}

}  // namespace

namespace detail {

std::string folder_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

const std::string& host_tag() {
  static const std::string tag = compute_host_tag();
  return tag;
}

int create_new_file(const std::string& prefix, std::string& name) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    name = fmt::format("{}{}.{}.{}", prefix, host_tag(), ::getpid(), random_suffix());
    // O_EXCL refuses any existing name, a link (even a dangling one) included; O_NOFOLLOW says
    // so in the flags too.
    // Read and write: a journal whose name was removed is read back through it (rm -rf of the
    // report folder mid-run).
    int fd = ::open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

void sync_folder_of(const std::string& path) noexcept {
  try {
    sync_folder(folder_of(path));
  } catch (...) {
    swallowed("base/atomic_file.cpp: syncing a folder");
  }
}

}  // namespace detail

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  // The temporary lives in the same folder so that rename() never crosses file systems.
  fd_ = detail::create_new_file(path_ + std::string(kTempMarker), tmp_);
  if (fd_ < 0) {
    throw Error(
        fmt::format("cannot create {}: {}; make the report folder writable or choose "
                    "another with Options::report_dir or FATHOM_REPORT_DIR",
                    tmp_, system_reason(errno)));
  }
  buffer_.reserve(kWriteBuffer);
}

AtomicFileWriter::~AtomicFileWriter() { discard(); }

void AtomicFileWriter::discard() noexcept {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
}

void AtomicFileWriter::drain() {
  try {
    write_all(fd_, buffer_, tmp_);
  } catch (...) {
    discard();
    throw;
  }
  buffer_.clear();
}

void AtomicFileWriter::write(std::string_view text) {
  if (fd_ < 0) throw Error(fmt::format("{} is closed: write after commit or a failure", tmp_));
  if (buffer_.size() + text.size() > kWriteBuffer) {
    drain();
    // A piece larger than the buffer goes straight through: no copy of it is made.
    if (text.size() > kWriteBuffer) {
      try {
        write_all(fd_, text, tmp_);
      } catch (...) {
        discard();
        throw;
      }
      return;
    }
  }
  buffer_ += text;
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw Error(fmt::format("{} is closed: commit twice or after a failure", tmp_));
  drain();
  const int fd = std::exchange(fd_, -1);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    throw Error(fmt::format("cannot flush {}: {}", tmp_, system_reason(err)));
  }
  // rename() replaces whatever entry path is (a planted link included) and never follows it.
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    throw Error(fmt::format("cannot rename {} to {}: {}", tmp_, path_, system_reason(err)));
  }
  sync_folder(detail::folder_of(path_));
}

void write_file_atomically(const std::string& path, const std::string& content) {
  AtomicFileWriter out(path);
  out.write(content);
  out.commit();
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
