#pragma once
// A run name becomes file names in the report folder (`<name>.json`, `.html`, `.job.json`, their
// temporaries and lock). Every entry point (FATHOM_RUN_NAME, Options::run_name, Python's
// run_name=) is checked alike at session start, and a name another live run holds in the same
// folder is not shared: the second run takes the next free `<name>-N`.
#include <cstdint>
#include <string>
#include <string_view>

namespace fathom::detail {

// The longest run name: a file name holds 255 bytes, and fathom adds up to 64 (".rank<N>",
// ".job.json", ".tmp.<host>.<pid>.<random>", "-<random>" when 100 runs hold the name).
inline constexpr std::size_t kMaxRunNameBytes = 255 - 64;

// Throws fathom::Error naming where the name came from and the names accepted: not empty, not
// "." or "..", no '/', no control characters, at most kMaxRunNameBytes bytes.
void check_run_name(std::string_view name, std::string_view source);

// Where the random suffixes of run names come from: getrandom(2), or a test's stand-in (one that
// repeats itself reaches what a working source never does: every random name taken).
using RandomBits = std::uint32_t (*)() noexcept;
std::uint32_t system_random_bits() noexcept;

// Holds `<folder>/.<base>.lock` (an flock, released by the kernel when the process dies) for as
// long as it lives, so that a second live run with the same name finds it taken.
class RunNameLock {
 public:
  // Claims base, or base-2, base-3, ... base-100 when live runs hold them, then base-<8 random
  // hex digits>; should those be held too, a name with the clock in it, and a warning: never a
  // live run's name. Never throws: a folder where no lock can be made is left unlocked (held()
  // false), as before there were locks. A lock file is written (its pid) only when it is a plain
  // file of this user with no other name: a hard link planted at the name makes it taken.
  RunNameLock(const std::string& folder, const std::string& base,
              RandomBits random_bits = system_random_bits) noexcept;
  ~RunNameLock();  // removes the lock file
  RunNameLock(const RunNameLock&) = delete;
  RunNameLock& operator=(const RunNameLock&) = delete;

  bool held() const noexcept { return fd_ >= 0; }
  const std::string& name() const noexcept { return name_; }  // base, or base-N
  // The pid written in the lock of base by the run that holds it (0 if unknown), when name() is
  // not base.
  long holder_of_base() const noexcept { return holder_; }

  // After the report folder (or the lock alone) was removed while the run went on (`rm -rf`),
  // the flock holds a file nobody can open, and a second run could take the name. Made again
  // here, in the folder made again, when the name is still free: Remade. Held: nothing was lost;
  // Taken: another live run locked the name meanwhile (its pid in holder_of_name()); Unavailable:
  // this run never held a lock, or none can be made now. Never throws.
  enum class Reclaim { Held, Remade, Taken, Unavailable };
  Reclaim reclaim() noexcept;
  long holder_of_name() const noexcept { return name_holder_; }

 private:
  enum class Claim { Locked, Taken, Unavailable };
  Claim try_lock(const std::string& name);

  std::string folder_;
  std::string name_;
  std::string path_;
  int fd_ = -1;
  long holder_ = 0;
  long name_holder_ = 0;
};

}  // namespace fathom::detail
