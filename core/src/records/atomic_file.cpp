#include "records/atomic_file.h"

#include <fathom/error.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "records/file_system.h"

namespace fathom {
namespace {

std::string system_reason(int err) { return std::strerror(err); }

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

}  // namespace

void write_file_atomically(const std::string& path, const std::string& content) {
  // The temporary lives in the same folder so that rename() never crosses file systems.
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot rename {} to {}: {}", tmp, path, system_reason(err)));
  }
}

void ensure_writable_folder(const std::string& folder) {
  if (folder.empty()) throw Error("the report folder is empty; give Options::report_dir a path");
  if (std::string why = fs::make_directories(folder); !why.empty()) {
    throw Error(
        fmt::format("cannot create report folder '{}': {}; choose a writable folder with "
                    "Options::report_dir or FATHOM_REPORT_DIR",
                    folder, why));
  }
  std::string probe = fmt::format("{}/.fathom-probe.{}", folder, ::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error(
        fmt::format("report folder '{}' is not writable: {}; choose a writable folder "
                    "with Options::report_dir or FATHOM_REPORT_DIR",
                    folder, system_reason(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace fathom
