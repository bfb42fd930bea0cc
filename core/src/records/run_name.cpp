#include "records/run_name.h"

#include <fathom/error.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "records/terminal_text.h"

namespace fathom::detail {
namespace {

constexpr const char* kAccepted =
    "a run name is a file name: 1 to 191 bytes, not '.' or '..', without '/' or control "
    "characters";

std::string lock_path(const std::string& folder, const std::string& name) {
  return fmt::format("{}/.{}.lock", folder, name);
}

long pid_in(int fd) noexcept {
  char text[32] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  return n > 0 ? std::strtol(text, nullptr, 10) : 0;
}

}  // namespace

void check_run_name(std::string_view name, std::string_view source) {
  std::string why;
  if (name.empty())
    why = "it is empty";
  else if (name == "." || name == "..")
    why = "it names a folder";
  else if (name.find('/') != std::string_view::npos)
    why = "it holds a '/'";
  else if (name.size() > kMaxRunNameBytes)
    why = fmt::format("it is {} bytes long", name.size());
  for (char c : name)
    if (why.empty() && (static_cast<unsigned char>(c) < 0x20 || c == 0x7F))
      why = "it holds a control character";
  if (why.empty()) return;
  // The name itself may be long or hold control characters: its start, escaped.
  throw Error(fmt::format("{}='{}' is not a valid run name ({}); {}", source, echoed_value(name),
                          why, kAccepted));
}

RunNameLock::RunNameLock(const std::string& folder, const std::string& base) noexcept
    : folder_(folder), name_(base) {
  try {
    for (int n = 1; n <= 100; ++n) {
      const std::string name = n == 1 ? base : fmt::format("{}-{}", base, n);
      const Claim c = try_lock(name);
      if (c == Claim::Taken) continue;
      // Unavailable: no lock can be made here (a read-only folder); the run goes on unlocked.
      if (c == Claim::Locked) name_ = name;
      return;
    }
  } catch (...) {
    // Out of memory formatting a name: unlocked, as before locks existed.
  }
}

RunNameLock::Claim RunNameLock::try_lock(const std::string& name) {
  const std::string path = lock_path(folder_, name);
  for (int attempt = 0; attempt < 4; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
      // A link or another user's file at the lock's name: that name is not ours to use.
      return errno == EACCES || errno == ELOOP || errno == EPERM ? Claim::Taken
                                                                 : Claim::Unavailable;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (holder_ == 0 && name == name_) holder_ = pid_in(fd);
      ::close(fd);
      return Claim::Taken;
    }
    // The holder before us may have removed the file between our open and our lock: then the
    // lock is on a name nobody sees, and we try again.
    struct stat held, named;
    if (::fstat(fd, &held) != 0 || ::lstat(path.c_str(), &named) != 0 ||
        held.st_ino != named.st_ino || held.st_dev != named.st_dev) {
      ::close(fd);
      continue;
    }
    // The pid is for people reading the folder (and the message of a run that finds it taken).
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
    fd_ = fd;
    path_ = path;
    return Claim::Locked;
  }
  return Claim::Taken;
}

RunNameLock::~RunNameLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace fathom::detail
