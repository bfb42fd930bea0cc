#pragma once
// A read-only SQLite database and its prepared statements, for the Nsight Systems export reader.
// RAII over libsqlite3's handles; every failure is a fathom::Error that names the file, what was
// being done, and SQLite's own message (not a database, malformed or truncated, locked).
//
// One rule for what a read may spend (NsightReadBudget): only real tables are read (a view or a
// virtual table computes rows the file does not hold), every value is cut at value_bytes
// (SQLITE_LIMIT_LENGTH), a progress handler ends a read past its time, steps past the row budget
// are refused, and temporary files (sorts that spill) are counted by a VFS of this handle's own
// and refused past temp_bytes, so the temp folder cannot fill.
#include <fathom/trace_files.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

struct sqlite3;
struct sqlite3_stmt;

namespace fathom::detail {

class SqliteDb {
 public:
  // Opens read-only; never creates the file. Throws fathom::Error when it cannot be opened or
  // is not a SQLite database.
  // spent: what earlier reads of the same analysis took of the budget; this read gets the rest,
  // and a budget already spent is refused before the file is opened.
  explicit SqliteDb(const std::string& path, const NsightReadBudget& budget = {},
                    const NsightBudgetSpent& spent = {});
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // True for a table; false when there is none. A view or virtual table of that name is refused
  // (fathom::Error): its rows are computed, not stored, and could be endless.
  bool has_table(std::string_view table) const;
  // The table's column names (empty when there is no such table).
  std::unordered_set<std::string> columns(std::string_view table) const;
  const std::string& path() const noexcept { return path_; }
  sqlite3* handle() const noexcept { return db_; }
  // "cannot read PATH (doing): SQLite's message"; thrown by the reader and statements.
  [[noreturn]] void fail(std::string_view doing) const;
  // Counts one row against the budget; throws fathom::Error past it.
  void count_row() const;
  // The budget spent so far: the earlier reads' and this one's.
  NsightBudgetSpent spent() const noexcept;

  struct TempVfs;  // sqlite_db.cpp

 private:
  void close() noexcept;

  std::string path_;
  NsightReadBudget budget_;
  sqlite3* db_ = nullptr;
  std::unique_ptr<TempVfs> vfs_;
  mutable std::int64_t rows_ = 0;
  std::int64_t earlier_milliseconds_ = 0;
  std::chrono::steady_clock::time_point opened_, deadline_;
  bool out_of_time_ = false;
  static int on_progress(void* self) noexcept;  // SQLite's progress handler
  [[noreturn]] void out_of_time(std::string_view doing) const;
};

// One prepared query, stepped row by row: memory stays one row, whatever the table's size.
class SqliteQuery {
 public:
  SqliteQuery(const SqliteDb& db, const std::string& sql);
  ~SqliteQuery();
  SqliteQuery(const SqliteQuery&) = delete;
  SqliteQuery& operator=(const SqliteQuery&) = delete;

  bool step();  // the next row; false after the last. Throws fathom::Error on a read failure.
  bool null(int col) const noexcept;
  std::int64_t integer(int col) const noexcept;  // 0 for NULL
  std::optional<std::int64_t> optional_integer(int col) const noexcept;
  std::string_view text(int col) const noexcept;  // "" for NULL

 private:
  const SqliteDb& db_;
  std::string sql_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace fathom::detail
