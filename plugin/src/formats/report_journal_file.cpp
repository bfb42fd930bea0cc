#include "formats/report_journal_file.h"

#include <fathom/error.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "base/atomic_file.h"
#include "base/file_system.h"
#include "base/warning_sink.h"

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

ReportJournalFile::ReportJournalFile(std::string json_path, RunNameLock* lock)
    : json_path_(std::move(json_path)),
      journal_path_(json_path_ + "l"),
      html_path_(html_path_of(json_path_)),
      lock_(lock) {}

ReportJournalFile::~ReportJournalFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ReportJournalFile::create(const std::string& text) {
  std::string tmp;
  const int fd = create_new_file(journal_path_ + ".tmp.", tmp);
  if (fd < 0)
    throw Error(
        fmt::format("cannot create {}: {}; make the report folder writable or choose another with "
                    "Options::report_dir or FATHOM_REPORT_DIR",
                    tmp, std::strerror(errno)));
  int err = write_all(fd, text);
  if (!err && ::fdatasync(fd) != 0) err = errno;
  if (!err) {
    // This run's report is the journal from now on; a document of the same name is an earlier
    // run's. It goes first: a kill between the two steps leaves no report, never the journal of
    // this run beside the document of the last, which a reader takes for the run's report.
    const bool json_gone = ::unlink(json_path_.c_str()) == 0;
    const bool html_gone = ::unlink(html_path_.c_str()) == 0;
    if (json_gone || html_gone) sync_folder_of(journal_path_);
    if (::rename(tmp.c_str(), journal_path_.c_str()) != 0) err = errno;
  }
  if (err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot write {}: {}", journal_path_, std::strerror(err)));
  }
  sync_folder_of(journal_path_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  size_ = static_cast<long long>(text.size());
  const auto lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  epoch_lines_ = lines > 0 ? lines - 1 : 0;
}

bool ReportJournalFile::name_lost() const noexcept {
  struct stat held, named;
  if (::fstat(fd_, &held) != 0) return false;  // nothing to compare: go on with the descriptor
  return held.st_nlink == 0 || ::lstat(journal_path_.c_str(), &named) != 0 ||
         named.st_ino != held.st_ino || named.st_dev != held.st_dev;
}

void ReportJournalFile::reclaim_name() noexcept {
  // Without its lock, the name is free to the next run that starts here: both would write this
  // run's report. A run that took it in the meantime keeps it; this one says so.
  if (!lock_ || lock_->reclaim() != RunNameLock::Reclaim::Taken) return;
  try {
    const long pid = lock_->holder_of_name();
    warn("run name '", lock_->name(), "' was taken by another run",
         pid ? " (pid " + std::to_string(pid) + ")" : std::string(), " while ",
         folder_of(json_path_), " was gone: both write ", json_path_,
         "; give each run its own FATHOM_RUN_NAME");
  } catch (...) {
    swallowed("formats/report_journal_file.cpp: the taken name's warning");
  }
}

std::string ReportJournalFile::read_back() const {
  std::string text(static_cast<std::size_t>(size_), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::pread(fd_, text.data() + got, text.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error(fmt::format("cannot read back {} to write it again: {}", journal_path_,
                              n < 0 ? std::strerror(errno) : "it is shorter than written"));
    got += static_cast<std::size_t>(n);
  }
  return text;
}

void ReportJournalFile::append(const std::string& header, const std::string& line, bool sync) {
  if (fd_ >= 0 && name_lost()) {
    // The journal, or the whole folder, was removed while the run went on (rm -rf of the report
    // folder): every later epoch would go to a file nobody can open. Its lines are still on the
    // descriptor: they go into a new journal at the name, in a folder made again if need be.
    const std::string so_far = read_back();
    const std::string folder = folder_of(journal_path_);
    if (std::string why = fs::make_directories(folder); !why.empty())
      throw Error(
          fmt::format("{} was removed while the run went on, and its folder cannot be "
                      "made again: {}; the report is written at the session's end",
                      journal_path_, why));
    reclaim_name();  // before the journal is there again: no second run starts on it
    create(so_far + line);
    warn("the report journal ", journal_path_,
         " was removed while the run went on (its folder deleted?); it is written again, "
         "every epoch so far in it");
    return;
  }
  if (fd_ < 0) {
    create(header + line);
    return;
  }
  int err = write_all(fd_, line);
  // fdatasync, not fsync: the size is what the line changes, and fdatasync syncs that too.
  if (!err && sync && ::fdatasync(fd_) != 0) err = errno;
  if (err) {
    // Cut a partial line off, so the next append starts a line of its own.
    if (::ftruncate(fd_, size_) != 0 || ::lseek(fd_, size_, SEEK_SET) < 0) {
      ::close(fd_);
      fd_ = -1;  // the next append makes a new journal (with the header) rather than a torn one
    }
    throw Error(fmt::format("cannot append to {}: {}", journal_path_, std::strerror(err)));
  }
  size_ += static_cast<long long>(line.size());
  ++epoch_lines_;
}

void ReportJournalFile::finish(const std::string& json, const std::string& html) {
  finish([&](TextSink& out) { out.write(json); }, [&](TextSink& out) { out.write(html); });
}

void ReportJournalFile::finish(const std::function<void(TextSink&)>& write_json,
                               const std::function<void(TextSink&)>& write_html) {
  // A folder removed after the last epoch's line: the run's whole report is still in hand (in
  // memory, and on the journal's descriptor).
  if (const std::string folder = folder_of(json_path_); !fs::is_directory(folder)) {
    if (std::string why = fs::make_directories(folder); !why.empty())
      throw Error(
          fmt::format("cannot write {}: its folder was removed and cannot be made "
                      "again: {}",
                      json_path_, why));
    reclaim_name();
    warn("the report folder ", folder,
         " was removed while the run went on; it is made again for the report");
  }
  {
    AtomicFileWriter json(json_path_);
    write_json(json);
    json.commit();
  }
  {
    AtomicFileWriter html(html_path_);
    write_html(html);
    html.commit();
  }
  // The document has every epoch now: the journal would only say it twice.
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  ::unlink(journal_path_.c_str());
}

void ReportJournalFile::for_each_epoch_line(
    std::size_t count, const std::function<void(std::string_view)>& each) const {
  if (count == 0) return;
  if (fd_ < 0 || count > epoch_lines_)
    throw Error(fmt::format("{} holds {} epoch lines, not the {} asked for", journal_path_,
                            fd_ < 0 ? 0 : epoch_lines_, count));
  constexpr std::size_t kBlock = 1 << 20;
  std::string block(kBlock, '\0');
  std::string line;  // a line that runs over a block's end, carried into the next
  long long offset = 0;
  bool header = true;
  std::size_t given = 0;
  while (given < count && offset < size_) {
    const auto want = static_cast<std::size_t>(std::min<long long>(kBlock, size_ - offset));
    const ssize_t n = ::pread(fd_, block.data(), want, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error(fmt::format("cannot read back {} to write the report: {}", journal_path_,
                              n < 0 ? std::strerror(errno) : "it is shorter than written"));
    offset += n;
    std::string_view rest(block.data(), static_cast<std::size_t>(n));
    while (given < count) {
      const std::size_t end = rest.find('\n');
      if (end == std::string_view::npos) {
        line += rest;
        break;
      }
      std::string_view whole = rest.substr(0, end);
      if (!line.empty()) {
        line += whole;
        whole = line;
      }
      if (!header) {
        each(whole);
        ++given;
      }
      header = false;
      line.clear();
      rest.remove_prefix(end + 1);
    }
  }
  if (given < count)
    throw Error(
        fmt::format("{} ended after {} of its {} epoch lines", journal_path_, given, count));
}

}  // namespace fathom::detail
