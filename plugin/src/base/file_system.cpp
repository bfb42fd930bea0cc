#include "base/file_system.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace fathom::fs {

bool exists(const std::string& path) noexcept {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) noexcept {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string make_directories(const std::string& path) {
  if (path.empty()) return "empty path";
  std::string partial;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty() || is_directory(partial)) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      return std::string(std::strerror(errno)) + " (at " + partial + ")";
    }
    if (!is_directory(partial)) return "not a directory: " + partial;
  }
  return "";
}

namespace {
int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);
  return 0;
}
}  // namespace

void remove_tree(const std::string& path) noexcept {
  if (!exists(path)) return;
  ::nftw(path.c_str(), &remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

std::string temp_directory() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

int open_regular_file(const std::string& path, std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    why = "cannot open " + path + ": " + std::strerror(errno);
    return -1;
  }
  // A device (/dev/zero), a pipe or a folder has no end, or none worth waiting for.
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    why = "cannot read " + path + ": it is not a regular file (a device, a pipe or a folder)";
    return -1;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

}  // namespace fathom::fs
