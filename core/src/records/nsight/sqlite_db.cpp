#include "records/nsight/sqlite_db.h"

#include <fathom/error.h>
#include <fmt/format.h>
#include <unistd.h>

#include "records/file_system.h"

#ifdef FATHOM_HAVE_SQLITE
#include <sqlite3.h>
#endif

namespace fathom::detail {

#ifdef FATHOM_HAVE_SQLITE

SqliteDb::SqliteDb(const std::string& path) : path_(path) {
  // SQLite's own open of a FIFO waits for a writer, forever: a regular file only.
  std::string why;
  if (const int fd = fs::open_regular_file(path, why); fd >= 0)
    ::close(fd);
  else
    throw Error(why);
  // Read-only and without a mutex of its own: one reader on one thread. A missing file is an
  // error, never a new empty database.
  const int rc =
      sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error(fmt::format("cannot open {}: {}", path, msg));
  }
  // A writer holding the file (nsys still exporting) gets a moment, then a clear error.
  sqlite3_busy_timeout(db_, 1000);
  // Sorting a table of millions of rows spills to temporary files instead of growing memory.
  sqlite3_exec(db_, "PRAGMA temp_store=FILE; PRAGMA cache_size=-8192;", nullptr, nullptr, nullptr);
  // The first read tells a database from any other file ("file is not a database"). A constructor
  // that throws runs no destructor: the handle is closed here.
  try {
    SqliteQuery probe(*this, "SELECT count(*) FROM sqlite_master");
    probe.step();
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

SqliteDb::~SqliteDb() { sqlite3_close(db_); }

void SqliteDb::fail(std::string_view doing) const {
  const int code = sqlite3_errcode(db_);
  std::string hint;
  if (code == SQLITE_NOTADB)
    hint = " (not a SQLite database: give an Nsight Systems export, `nsys export --type sqlite`)";
  else if (code == SQLITE_CORRUPT)
    hint = " (the file is damaged or truncated: export it again)";
  else if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
    hint = " (another process holds the file: wait for it to finish, or copy the file)";
  throw Error(fmt::format("cannot read {} ({}): {}{}", path_, doing, sqlite3_errmsg(db_), hint));
}

bool SqliteDb::has_table(std::string_view table) const {
  SqliteQuery q(*this, fmt::format("SELECT count(*) FROM sqlite_master WHERE type IN "
                                   "('table','view') AND name = '{}'",
                                   table));
  return q.step() && q.integer(0) > 0;
}

std::unordered_set<std::string> SqliteDb::columns(std::string_view table) const {
  std::unordered_set<std::string> out;
  SqliteQuery q(*this, fmt::format("PRAGMA table_info('{}')", table));
  while (q.step()) out.emplace(q.text(1));
  return out;
}

SqliteQuery::SqliteQuery(const SqliteDb& db, const std::string& sql) : db_(db), sql_(sql) {
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK)
    db.fail(fmt::format("preparing \"{}\"", sql));
}

SqliteQuery::~SqliteQuery() { sqlite3_finalize(stmt_); }

bool SqliteQuery::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_.fail(fmt::format("running \"{}\"", sql_));
}

bool SqliteQuery::null(int col) const noexcept {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}

std::int64_t SqliteQuery::integer(int col) const noexcept {
  return sqlite3_column_int64(stmt_, col);
}

std::optional<std::int64_t> SqliteQuery::optional_integer(int col) const noexcept {
  if (null(col)) return std::nullopt;
  return integer(col);
}

std::string_view SqliteQuery::text(int col) const noexcept {
  const auto* p = sqlite3_column_text(stmt_, col);
  if (!p) return {};
  return {reinterpret_cast<const char*>(p),
          static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))};
}

#else  // built without libsqlite3: every export is refused with the way to read it

SqliteDb::SqliteDb(const std::string& path) : path_(path) {
  throw Error(fmt::format(
      "cannot read {}: this fathom was built without libsqlite3, so it cannot read Nsight "
      "Systems exports (install libsqlite3-dev and rebuild fathom)",
      path));
}
SqliteDb::~SqliteDb() = default;
void SqliteDb::fail(std::string_view doing) const {
  throw Error(fmt::format("cannot read {} ({}): built without libsqlite3", path_, doing));
}
bool SqliteDb::has_table(std::string_view) const { return false; }
std::unordered_set<std::string> SqliteDb::columns(std::string_view) const { return {}; }
SqliteQuery::SqliteQuery(const SqliteDb& db, const std::string& sql) : db_(db), sql_(sql) {
  db.fail("preparing a query");
}
SqliteQuery::~SqliteQuery() = default;
bool SqliteQuery::step() { return false; }
bool SqliteQuery::null(int) const noexcept { return true; }
std::int64_t SqliteQuery::integer(int) const noexcept { return 0; }
std::optional<std::int64_t> SqliteQuery::optional_integer(int) const noexcept {
  return std::nullopt;
}
std::string_view SqliteQuery::text(int) const noexcept { return {}; }

#endif

}  // namespace fathom::detail
