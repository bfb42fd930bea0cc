#include "records/report_journal_file.h"

#include <fathom/error.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "records/atomic_file.h"

namespace fathom::detail {
namespace {

std::string html_path_of(const std::string& json_path) {
  const bool dot_json =
      json_path.size() > 5 && json_path.compare(json_path.size() - 5, 5, ".json") == 0;
  return (dot_json ? json_path.substr(0, json_path.size() - 5) : json_path) + ".html";
}

// Returns 0, or the errno of the write that failed.
int write_all(int fd, const std::string& text) noexcept {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

ReportJournalFile::ReportJournalFile(std::string json_path)
    : json_path_(std::move(json_path)),
      journal_path_(json_path_ + "l"),
      html_path_(html_path_of(json_path_)) {}

ReportJournalFile::~ReportJournalFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ReportJournalFile::append(const std::string& header, const std::string& line) {
  if (fd_ < 0) {
    std::string tmp;
    const int fd = create_new_file(journal_path_ + ".tmp.", tmp);
    if (fd < 0)
      throw Error(fmt::format(
          "cannot create {}: {}; make the report folder writable or choose another with "
          "Options::report_dir or FATHOM_REPORT_DIR",
          tmp, std::strerror(errno)));
    const std::string first = header + line;
    int err = write_all(fd, first);
    if (!err && ::fdatasync(fd) != 0) err = errno;
    if (!err && ::rename(tmp.c_str(), journal_path_.c_str()) != 0) err = errno;
    if (err) {
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(fmt::format("cannot write {}: {}", journal_path_, std::strerror(err)));
    }
    sync_folder_of(journal_path_);
    fd_ = fd;
    size_ = static_cast<long long>(first.size());
    // This run's report is the journal now; a document of the same name is an earlier run's.
    ::unlink(json_path_.c_str());
    ::unlink(html_path_.c_str());
    return;
  }
  int err = write_all(fd_, line);
  // fdatasync, not fsync: the size is what the line changes, and fdatasync syncs that too.
  if (!err && ::fdatasync(fd_) != 0) err = errno;
  if (err) {
    // Cut a partial line off, so the next append starts a line of its own.
    if (::ftruncate(fd_, size_) != 0 || ::lseek(fd_, size_, SEEK_SET) < 0) {
      ::close(fd_);
      fd_ = -1;  // the next append makes a new journal (with the header) rather than a torn one
    }
    throw Error(fmt::format("cannot append to {}: {}", journal_path_, std::strerror(err)));
  }
  size_ += static_cast<long long>(line.size());
}

void ReportJournalFile::finish(const std::string& json, const std::string& html) {
  write_file_atomically(json_path_, json);
  // The document has every epoch now: the journal would only say it twice.
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  ::unlink(journal_path_.c_str());
  write_file_atomically(html_path_, html);
}

}  // namespace fathom::detail
