#pragma once
// Files fathom creates in folders it does not own (a shared report folder): every name it opens
// there is new (O_CREAT|O_EXCL|O_NOFOLLOW under a random suffix), so a link planted at a
// predictable name can neither be written through nor truncate its target.
#include <string>
#include <string_view>

namespace fathom {

// Text written out a piece at a time (the report writers stream into one: the whole run's report
// is never one string in memory).
class TextSink {
 public:
  virtual ~TextSink() = default;
  virtual void write(std::string_view text) = 0;
};

// A TextSink into a string (the writers' tests, and format_*_report).
class StringSink final : public TextSink {
 public:
  explicit StringSink(std::string& out) : out_(out) {}
  void write(std::string_view text) override { out_ += text; }

 private:
  std::string& out_;
};

// write_file_atomically a piece at a time: the text goes through a 64 KiB buffer into the new
// temporary, and commit() syncs it and renames it over path. Destroyed without commit() (an
// exception while writing), the temporary is removed and path is as it was. write() and commit()
// throw fathom::Error naming the file and the system's reason.
class AtomicFileWriter final : public TextSink {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter() override;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::string_view text) override;
  void commit();

 private:
  void drain();  // the buffer into the temporary
  void discard() noexcept;

  std::string path_, tmp_, buffer_;
  int fd_ = -1;
};

// Writes content to path so that readers see the old file or the new one, never a torn one:
// a new temporary file in the same folder (`<path>.tmp.<host_tag>.<pid>.<random>`), flushed to
// disk, then renamed over path. rename() replaces a link at path itself, never what it points to.
// Throws fathom::Error naming the path and the system's reason on failure.
void write_file_atomically(const std::string& path, const std::string& content);

// Creates folder (and parents) and proves it writable by creating and removing a new probe file.
// Throws fathom::Error naming the folder and the fix.
void ensure_writable_folder(const std::string& folder);

// Removes the temporary and probe files that fathom processes no longer alive left in folder (a
// kill during the write): only regular files of this user named exactly as fathom names them, by
// a process of this host, boot and pid namespace (host_tag()) that is provably dead. Another
// host's or container's temporaries in a shared folder, and files that merely look alike, stay.
// Returns how many it removed; never throws.
int remove_stale_temporaries(const std::string& folder) noexcept;

namespace detail {
// 8 hex digits naming this host, its boot and this process's pid namespace (a hash): where the
// pid in a temporary's name can be tested.
const std::string& host_tag();
// Opens a new file named `<prefix><host_tag>.<pid>.<random>` for reading and writing
// (O_EXCL|O_NOFOLLOW, mode 0644 less the umask); sets name to the name it made. Returns the
// descriptor, or -1 with errno set.
int create_new_file(const std::string& prefix, std::string& name);
// The folder that holds path ("." for a bare name).
std::string folder_of(const std::string& path);
// fsyncs the folder that holds path, so that a rename into it survives a crash; best effort.
void sync_folder_of(const std::string& path) noexcept;
}  // namespace detail

}  // namespace fathom
