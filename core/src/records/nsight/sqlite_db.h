#pragma once
// A read-only SQLite database and its prepared statements, for the Nsight Systems export reader.
// RAII over libsqlite3's handles; every failure is a fathom::Error that names the file, what was
// being done, and SQLite's own message (not a database, malformed or truncated, locked).
#include <cstdint>
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
  explicit SqliteDb(const std::string& path);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  bool has_table(std::string_view table) const;
  // The table's column names (empty when there is no such table).
  std::unordered_set<std::string> columns(std::string_view table) const;
  const std::string& path() const noexcept { return path_; }
  sqlite3* handle() const noexcept { return db_; }
  // "cannot read PATH (doing): SQLite's message"; thrown by the reader and statements.
  [[noreturn]] void fail(std::string_view doing) const;

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
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
