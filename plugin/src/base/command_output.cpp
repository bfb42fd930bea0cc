#include "base/command_output.h"

#include <fathom/error.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>

#include "base/atomic_file.h"

namespace fathom {
namespace {

// The descriptor a path names by itself: the process's own standard streams, which a rename
// would replace (/dev/stdout is a link in /dev) rather than write to.
std::optional<int> descriptor_named(std::string_view path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (std::string_view dir : {"/dev/fd/", "/proc/self/fd/"}) {
    if (!path.starts_with(dir)) continue;
    const std::string_view digits = path.substr(dir.size());
    int fd = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), fd);
    if (ec == std::errc() && end == digits.data() + digits.size() && fd >= 0) return fd;
  }
  return std::nullopt;
}

bool written_in_place(mode_t mode) { return S_ISCHR(mode) || S_ISBLK(mode) || S_ISFIFO(mode); }

std::string_view kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

void refuse_inputs(const struct stat& out, const std::string& path, std::string_view option,
                   const std::vector<std::string>& inputs) {
  for (const std::string& input : inputs) {
    struct stat in;
    if (::stat(input.c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
      throw Error(
          fmt::format("{} {} is the input {}: writing it would replace what fathom "
                      "reads; choose another file",
                      option, path, input));
  }
}

void write_all_to(int fd, const std::string& content, const std::string& path) {
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // A descriptor another program made non-blocking (a shared terminal or pipe).
      pollfd w{fd, POLLOUT, 0};
      (void)::poll(&w, 1, -1);
      continue;
    }
    if (n < 0) throw Error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

void check_command_output(const std::string& path, std::string_view option,
                          const std::vector<std::string>& inputs) {
  struct stat st;
  if (const auto fd = descriptor_named(path)) {
    if (::fstat(*fd, &st) != 0)
      throw Error(fmt::format("{} {}: descriptor {} is not open: {}", option, path, *fd,
                              std::strerror(errno)));
  } else if (::stat(path.c_str(), &st) != 0) {
    return;  // a new file (or a folder fathom cannot reach: write_file_atomically names why)
  }
  if (!S_ISREG(st.st_mode) && !written_in_place(st.st_mode))
    throw Error(fmt::format("{} {} is {}, not a file fathom can write; give a file name", option,
                            path, kind_of(st.st_mode)));
  refuse_inputs(st, path, option, inputs);
}

void write_command_output(const std::string& path, std::string_view option,
                          const std::string& content, const std::vector<std::string>& inputs) {
  check_command_output(path, option, inputs);
  if (const auto fd = descriptor_named(path)) {
    // What the command printed before comes first.
    std::cout.flush();
    std::fflush(stdout);
    write_all_to(*fd, content, path);
    return;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !written_in_place(st.st_mode)) {
    write_file_atomically(path, content);
    return;
  }
  // Neither created nor truncated: a device or FIFO is written as it is.
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  // Replaced by a regular file since the stat: writing it in place would leave its old tail.
  if (::fstat(fd, &st) != 0 || !written_in_place(st.st_mode)) {
    ::close(fd);
    throw Error(
        fmt::format("{} {} changed while fathom wrote it; run the command again", option, path));
  }
  try {
    write_all_to(fd, content, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

}  // namespace fathom
