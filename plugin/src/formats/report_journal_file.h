#pragma once
// The files of a session's report on disk: the journal `<run>.jsonl` it appends one line to per
// ended epoch while it runs, and the document `<run>.json` with its page `<run>.html` written once
// at its end (docs/report-schema.md, "report journal"). Blocking file I/O and fsync: a session
// calls these on its report writer's thread (background_writer.h), never on the training thread.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "base/atomic_file.h"
#include "base/run_name.h"

namespace fathom::detail {

class ReportJournalFile {
 public:
  // json_path: `<run>.json`; the journal is `<run>.jsonl` beside it, the page `<run>.html`.
  // lock: the run's name lock (run_name.h), made again with the folder when it was removed;
  // null for none. It must outlive this.
  explicit ReportJournalFile(std::string json_path, RunNameLock* lock = nullptr);
  ~ReportJournalFile();  // closes the journal; leaves it on disk unless finish() removed it
  ReportJournalFile(const ReportJournalFile&) = delete;
  ReportJournalFile& operator=(const ReportJournalFile&) = delete;

  // Appends one epoch's line and syncs it to disk. The first call creates the journal with header
  // as its first line, as a new file renamed into place (never written through a planted link),
  // and removes a `<run>.json` and `<run>.html` an earlier run of the same name left, so that no
  // reader takes them for this run's (removed before the journal appears: a kill between the two
  // never leaves this run's journal beside the last run's document). A journal whose name was
  // removed since (rm -rf of the report folder) is noticed here, warned about, and written again
  // with every line so far, its folder made again. Throws fathom::Error naming the file; a failed
  // append leaves the journal as it was (the partial line is cut off).
  // sync false: the line is written but not yet synced (another append follows at once, and its
  // fdatasync covers both: a disk slow to sync keeps up with short epochs).
  void append(const std::string& header, const std::string& line, bool sync = true);
  // Writes the whole run as `<run>.json` and `<run>.html` (each atomically, the folder made again
  // if it was removed), then removes the journal: the document holds everything it held. Throws
  // fathom::Error naming the file.
  void finish(const std::string& json, const std::string& html);
  // The same, each document written a piece at a time into its file (AtomicFileWriter) by the
  // callers' writers, which may read the journal meanwhile (for_each_epoch_line): the journal is
  // removed only after both are in place.
  void finish(const std::function<void(TextSink&)>& write_json,
              const std::function<void(TextSink&)>& write_html);

  // Calls each with the journal's first count epoch lines (the header skipped), each without its
  // newline, reading the file a block at a time: the journal is never in memory whole. Throws
  // fathom::Error naming the journal when it holds fewer.
  void for_each_epoch_line(std::size_t count,
                           const std::function<void(std::string_view)>& each) const;
  // The epoch lines in the journal held (its lines but the header).
  std::size_t epoch_lines() const noexcept { return epoch_lines_; }

  const std::string& journal_path() const noexcept { return journal_path_; }

 private:
  // Writes text as a new journal renamed into place (after removing an earlier run's document),
  // and appends to it from then on.
  void create(const std::string& text);
  bool name_lost() const noexcept;  // the journal's name no longer leads to fd_
  // The folder was made again: so is the run's name lock, or a warning says who took the name.
  void reclaim_name() noexcept;
  std::string read_back() const;  // the complete lines written to fd_

  std::string json_path_, journal_path_, html_path_;
  RunNameLock* lock_ = nullptr;
  int fd_ = -1;
  long long size_ = 0;  // bytes of complete lines in the journal
  std::size_t epoch_lines_ = 0;
};

}  // namespace fathom::detail
