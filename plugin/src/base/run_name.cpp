#include "base/run_name.h"

#include <fathom/error.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <ctime>

#include "base/terminal_text.h"
#include "base/warning_sink.h"

namespace fathom::detail {
namespace {

constexpr const char* kAccepted =
    "a run name is a file name: 1 to 191 bytes, not '.' or '..', without '/' or control "
    "characters";

std::string lock_path(const std::string& folder, const std::string& name) {
  return fmt::format("{}/.{}.lock", folder, name);
}

constexpr int kRandomNameAttempts = 8;
// Names past the random ones, each with the clock in it: no planted file matches 64 of them.
constexpr std::uint64_t kFallbackAttempts = 64;

// 32 bits that differ from call to call even when the random source repeats itself: its bits,
// the clock, the pid and a count, through splitmix64's finalizer.
std::uint32_t mixed_bits(std::uint32_t random, std::uint64_t count) noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  std::uint64_t x = (std::uint64_t{random} << 32) ^
                    (static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
                     static_cast<std::uint64_t>(ts.tv_nsec)) ^
                    (static_cast<std::uint64_t>(::getpid()) << 40) ^
                    (count * 0x9E3779B97F4A7C15ull);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::uint32_t>(x ^ (x >> 31));
}

long pid_in(int fd) noexcept {
  char text[32] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  return n > 0 ? std::strtol(text, nullptr, 10) : 0;
}

}  // namespace

// 32 random bits: a name suffix no other run picks by counting.
std::uint32_t system_random_bits() noexcept {
  std::uint32_t bits = 0;
  if (::getrandom(&bits, sizeof bits, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bits)) {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    bits = static_cast<std::uint32_t>(ts.tv_nsec) ^ (static_cast<std::uint32_t>(::getpid()) << 12);
  }
  return bits;
}

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

RunNameLock::RunNameLock(const std::string& folder, const std::string& base,
                         RandomBits random_bits) noexcept
    : folder_(folder), name_(base) {
  try {
    // base, base-2 ... base-100, then a name nobody can hold yet: a sweep of more workers than
    // that with one FATHOM_RUN_NAME must not end with two live runs writing one report.
    for (int n = 1; n <= 100 + kRandomNameAttempts; ++n) {
      const std::string name = n == 1     ? base
                               : n <= 100 ? fmt::format("{}-{}", base, n)
                                          : fmt::format("{}-{:08x}", base, random_bits());
      const Claim c = try_lock(name);
      if (c == Claim::Taken) continue;
      // Unavailable: no lock can be made here (a read-only folder); the run goes on unlocked.
      if (c == Claim::Locked) name_ = name;
      return;
    }
    // Every name above is held, the random ones too, which a working source never gives (one
    // that repeats itself, or names planted to match it). The run fell through to base here,
    // unlocked: a live run's name. Names that mix the clock, the pid and a count into the source's
    // bits instead, the first that locks (or, where no lock can be made, that nobody holds).
    std::string name;
    Claim c = Claim::Taken;
    for (std::uint64_t k = 0; k < kFallbackAttempts && c == Claim::Taken; ++k) {
      name = fmt::format("{}-{:08x}", base, mixed_bits(random_bits(), k));
      c = try_lock(name);
    }
    name_ = name;
    warn("run name '", base, "': it, ", base, "-2 to ", base, "-100 and ", kRandomNameAttempts,
         " random names are held by other runs in ", folder,
         " (or by files that are not their "
         "locks); this run takes '",
         name, "'", c == Claim::Locked ? "" : ", without a lock (none could be made)");
  } catch (...) {
    // Out of memory formatting a name: unlocked, as before locks existed.
  }
}

RunNameLock::Claim RunNameLock::try_lock(const std::string& name) {
  const std::string path = lock_path(folder_, name);
  for (int attempt = 0; attempt < 4; ++attempt) {
    // O_NONBLOCK: a FIFO planted at the name must not hold the run at its start.
    const int fd =
        ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) {
      // A link or another user's file at the lock's name: that name is not ours to use. Refused
      // the creation of a lock that is not there (a folder this user cannot write): no lock can
      // be made here, whatever the name, and counting on to base-100 would not find one.
      const int error = errno;
      struct stat there;
      if (error == ELOOP) return Claim::Taken;
      return (error == EACCES || error == EPERM) && ::lstat(path.c_str(), &there) == 0
                 ? Claim::Taken
                 : Claim::Unavailable;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      // Held by a live run; any other error (ENOLCK: a file system without locks) is no lock
      // for any name, and left a lock file at every name tried.
      const bool held_elsewhere = errno == EWOULDBLOCK;
      if (held_elsewhere && holder_ == 0 && name == name_) holder_ = pid_in(fd);
      ::close(fd);
      return held_elsewhere ? Claim::Taken : Claim::Unavailable;
    }
    // The holder before us may have removed the file between our open and our lock: then the
    // lock is on a name nobody sees, and we try again.
    struct stat held, named;
    if (::fstat(fd, &held) != 0 || ::lstat(path.c_str(), &named) != 0 ||
        held.st_ino != named.st_ino || held.st_dev != named.st_dev) {
      ::close(fd);
      continue;
    }
    // Only a file that is this lock and nothing else is written: a hard link planted at the
    // name (another name of someone's file), another user's world-writable file or anything but
    // a plain file is not ours to empty, and the name is not ours to use.
    if (held.st_nlink != 1 || !S_ISREG(held.st_mode) || held.st_uid != ::geteuid()) {
      ::close(fd);
      return Claim::Taken;
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

RunNameLock::Reclaim RunNameLock::reclaim() noexcept {
  if (fd_ < 0) return Reclaim::Unavailable;
  struct stat held, named;
  if (::fstat(fd_, &held) != 0) return Reclaim::Unavailable;
  if (held.st_nlink > 0 && ::lstat(path_.c_str(), &named) == 0 && named.st_ino == held.st_ino &&
      named.st_dev == held.st_dev)
    return Reclaim::Held;
  const int old = fd_;
  try {
    switch (try_lock(name_)) {  // on success, fd_ is the new lock's
      case Claim::Locked:
        ::close(old);
        return Reclaim::Remade;
      case Claim::Taken: {
        const int fd = ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        name_holder_ = fd >= 0 ? pid_in(fd) : 0;
        if (fd >= 0) ::close(fd);
        return Reclaim::Taken;
      }
      case Claim::Unavailable:
        break;
    }
  } catch (...) {
    // Out of memory formatting the path: as a folder where no lock can be made.
  }
  return Reclaim::Unavailable;
}

RunNameLock::~RunNameLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace fathom::detail
