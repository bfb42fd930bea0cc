#include "formats/nsight/sqlite_db.h"

#include <fathom/error.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "base/file_system.h"

#ifdef FATHOM_HAVE_SQLITE
#include <sqlite3.h>
#endif

namespace fathom::detail {

#ifdef FATHOM_HAVE_SQLITE

// SQLite's temporary files (sorts that spill, transient tables) go through this VFS: it is the
// default one with each temporary file's writes counted, and a write that would take them all
// past the budget fails as a full disk would. The database file itself is passed through.
struct SqliteDb::TempVfs {
  sqlite3_vfs vfs;  // first: SQLite hands back this address
  sqlite3_vfs* root = nullptr;
  std::string name;
  std::int64_t limit = 0;
  std::int64_t used = 0;  // the temporary files' sizes, together
  bool exceeded = false;
};

namespace {

constexpr int kTempFlags = SQLITE_OPEN_TEMP_DB | SQLITE_OPEN_TRANSIENT_DB |
                           SQLITE_OPEN_TEMP_JOURNAL | SQLITE_OPEN_SUBJOURNAL;

struct ShimFile {
  sqlite3_file base;
  sqlite3_file* real;  // the root VFS's file, right after this struct
  SqliteDb::TempVfs* owner;
  std::int64_t size;  // counted only for temporary files
  bool temp;
};

sqlite3_file* real(sqlite3_file* f) { return reinterpret_cast<ShimFile*>(f)->real; }

int shim_close(sqlite3_file* f) {
  auto* s = reinterpret_cast<ShimFile*>(f);
  if (s->temp) s->owner->used -= s->size;
  return s->real->pMethods ? s->real->pMethods->xClose(s->real) : SQLITE_OK;
}
int shim_read(sqlite3_file* f, void* p, int n, sqlite3_int64 at) {
  return real(f)->pMethods->xRead(real(f), p, n, at);
}
int shim_write(sqlite3_file* f, const void* p, int n, sqlite3_int64 at) {
  auto* s = reinterpret_cast<ShimFile*>(f);
  if (s->temp) {
    const std::int64_t grown = std::max<std::int64_t>(0, at + n - s->size);
    if (s->owner->used + grown > s->owner->limit) {
      s->owner->exceeded = true;
      return SQLITE_FULL;
    }
    s->owner->used += grown;
    s->size += grown;
  }
  return s->real->pMethods->xWrite(s->real, p, n, at);
}
int shim_truncate(sqlite3_file* f, sqlite3_int64 size) {
  auto* s = reinterpret_cast<ShimFile*>(f);
  if (s->temp && size < s->size) {
    s->owner->used -= s->size - size;
    s->size = size;
  }
  return s->real->pMethods->xTruncate(s->real, size);
}
int shim_sync(sqlite3_file* f, int flags) { return real(f)->pMethods->xSync(real(f), flags); }
int shim_file_size(sqlite3_file* f, sqlite3_int64* out) {
  return real(f)->pMethods->xFileSize(real(f), out);
}
int shim_lock(sqlite3_file* f, int l) { return real(f)->pMethods->xLock(real(f), l); }
int shim_unlock(sqlite3_file* f, int l) { return real(f)->pMethods->xUnlock(real(f), l); }
int shim_check_reserved(sqlite3_file* f, int* out) {
  return real(f)->pMethods->xCheckReservedLock(real(f), out);
}
int shim_file_control(sqlite3_file* f, int op, void* arg) {
  return real(f)->pMethods->xFileControl(real(f), op, arg);
}
int shim_sector_size(sqlite3_file* f) { return real(f)->pMethods->xSectorSize(real(f)); }
int shim_device(sqlite3_file* f) { return real(f)->pMethods->xDeviceCharacteristics(real(f)); }
int shim_shm_map(sqlite3_file* f, int page, int size, int extend, void volatile** out) {
  return real(f)->pMethods->xShmMap(real(f), page, size, extend, out);
}
int shim_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  return real(f)->pMethods->xShmLock(real(f), offset, n, flags);
}
void shim_shm_barrier(sqlite3_file* f) { real(f)->pMethods->xShmBarrier(real(f)); }
int shim_shm_unmap(sqlite3_file* f, int del) { return real(f)->pMethods->xShmUnmap(real(f), del); }
int shim_fetch(sqlite3_file* f, sqlite3_int64 at, int n, void** out) {
  return real(f)->pMethods->xFetch(real(f), at, n, out);
}
int shim_unfetch(sqlite3_file* f, sqlite3_int64 at, void* p) {
  return real(f)->pMethods->xUnfetch(real(f), at, p);
}

// Version 1 has no shared memory or memory mapping: those calls must not reach a file without.
constexpr sqlite3_io_methods kShimV1{1,
                                     shim_close,
                                     shim_read,
                                     shim_write,
                                     shim_truncate,
                                     shim_sync,
                                     shim_file_size,
                                     shim_lock,
                                     shim_unlock,
                                     shim_check_reserved,
                                     shim_file_control,
                                     shim_sector_size,
                                     shim_device,
                                     nullptr,
                                     nullptr,
                                     nullptr,
                                     nullptr,
                                     nullptr,
                                     nullptr};
constexpr sqlite3_io_methods kShimV3{3,
                                     shim_close,
                                     shim_read,
                                     shim_write,
                                     shim_truncate,
                                     shim_sync,
                                     shim_file_size,
                                     shim_lock,
                                     shim_unlock,
                                     shim_check_reserved,
                                     shim_file_control,
                                     shim_sector_size,
                                     shim_device,
                                     shim_shm_map,
                                     shim_shm_lock,
                                     shim_shm_barrier,
                                     shim_shm_unmap,
                                     shim_fetch,
                                     shim_unfetch};

int shim_open(sqlite3_vfs* v, const char* name, sqlite3_file* f, int flags, int* out_flags) {
  auto* self = reinterpret_cast<SqliteDb::TempVfs*>(v);
  auto* s = reinterpret_cast<ShimFile*>(f);
  s->real = reinterpret_cast<sqlite3_file*>(s + 1);
  s->owner = self;
  s->size = 0;
  s->temp = (flags & kTempFlags) != 0;
  s->real->pMethods = nullptr;
  const int rc = self->root->xOpen(self->root, name, s->real, flags, out_flags);
  const sqlite3_io_methods* m = s->real->pMethods;
  s->base.pMethods = !m ? nullptr : m->iVersion >= 3 ? &kShimV3 : &kShimV1;
  return rc;
}

std::string budget_hint() {
  return "a real export holds rows, not views; if this one is real, read it in parts "
         "(`nsys export` with --ts-normalize or a shorter report), or raise NsightReadBudget";
}

}  // namespace

int SqliteDb::on_progress(void* p) noexcept {
  auto* self = static_cast<SqliteDb*>(p);
  if (std::chrono::steady_clock::now() < self->deadline_) return 0;
  self->out_of_time_ = true;
  return 1;  // SQLite stops the statement with SQLITE_INTERRUPT
}

SqliteDb::SqliteDb(const std::string& path, const NsightReadBudget& budget,
                   const NsightBudgetSpent& spent)
    : path_(path),
      budget_(budget),
      rows_(spent.rows),
      earlier_milliseconds_(spent.milliseconds),
      opened_(std::chrono::steady_clock::now()) {
  if (spent.milliseconds >= budget.milliseconds) out_of_time("opening it again");
  if (spent.rows > budget.rows) {
    rows_ = budget.rows;
    count_row();
  }
  // SQLite's own open of a FIFO waits for a writer, forever: a regular file only.
  {
    std::string why;
    if (const int fd = fs::open_regular_file(path, why); fd >= 0)
      ::close(fd);
    else
      throw Error(why);
  }
  sqlite3_vfs* root = sqlite3_vfs_find(nullptr);
  if (!root) throw Error(fmt::format("cannot open {}: SQLite has no default file system", path));
  vfs_ = std::make_unique<TempVfs>();
  vfs_->vfs = *root;
  vfs_->root = root;
  vfs_->name = fmt::format("fathom-budget-{}", static_cast<const void*>(vfs_.get()));
  vfs_->vfs.zName = vfs_->name.c_str();
  vfs_->vfs.szOsFile = static_cast<int>(sizeof(ShimFile)) + root->szOsFile;
  vfs_->vfs.xOpen = shim_open;
  vfs_->vfs.pNext = nullptr;
  vfs_->limit = std::max<std::int64_t>(0, budget.temp_bytes);
  sqlite3_vfs_register(&vfs_->vfs, 0);
  // Read-only and without a mutex of its own: one reader on one thread. A missing file is an
  // error, never a new empty database.
  const int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
                                 vfs_->name.c_str());
  if (rc != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    close();
    throw Error(fmt::format("cannot open {}: {}", path, msg));
  }
  // A writer holding the file (nsys still exporting) gets a moment, then a clear error.
  sqlite3_busy_timeout(db_, 1000);
  // No value longer than the budget is ever built (a zeroblob of gigabytes), and the schema is
  // not trusted: a generated column or view may call no function with side effects.
  sqlite3_limit(db_, SQLITE_LIMIT_LENGTH, std::max<std::int32_t>(1024, budget.value_bytes));
  sqlite3_db_config(db_, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_db_config(db_, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  deadline_ = opened_ + std::chrono::milliseconds(
                            std::max<std::int64_t>(0, budget.milliseconds - earlier_milliseconds_));
  sqlite3_progress_handler(db_, 4096, &SqliteDb::on_progress, this);
  // Sorting a table of millions of rows spills to temporary files instead of growing memory.
  sqlite3_exec(db_, "PRAGMA temp_store=FILE; PRAGMA cache_size=-8192;", nullptr, nullptr, nullptr);
  // The first read tells a database from any other file ("file is not a database"). A constructor
  // that throws runs no destructor: the handle is closed here.
  try {
    SqliteQuery probe(*this, "SELECT count(*) FROM sqlite_master");
    probe.step();
  } catch (...) {
    close();
    throw;
  }
}

void SqliteDb::close() noexcept {
  sqlite3_close(db_);
  db_ = nullptr;
  if (vfs_) sqlite3_vfs_unregister(&vfs_->vfs);
  vfs_.reset();
}

SqliteDb::~SqliteDb() { close(); }

void SqliteDb::count_row() const {
  if (++rows_ <= budget_.rows) return;
  throw Error(
      fmt::format("cannot read {}: it holds more than {} rows, the budget for one export; {}",
                  path_, budget_.rows, budget_hint()));
}

NsightBudgetSpent SqliteDb::spent() const noexcept {
  const auto here = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - opened_);
  return {rows_, earlier_milliseconds_ + here.count()};
}

void SqliteDb::out_of_time(std::string_view doing) const {
  throw Error(
      fmt::format("cannot read {} ({}): it took longer than {} s, the budget for one "
                  "export; {}",
                  path_, doing, budget_.milliseconds / 1000.0, budget_hint()));
}

void SqliteDb::fail(std::string_view doing) const {
  if (out_of_time_) out_of_time(doing);
  if (vfs_ && vfs_->exceeded)
    throw Error(
        fmt::format("cannot read {} ({}): sorting it needs more than {} MiB of temporary "
                    "files, the budget for one export; {}",
                    path_, doing, budget_.temp_bytes >> 20, budget_hint()));
  const int code = sqlite3_errcode(db_);
  std::string hint;
  if (code == SQLITE_NOTADB)
    hint = " (not a SQLite database: give an Nsight Systems export, `nsys export --type sqlite`)";
  else if (code == SQLITE_CORRUPT)
    hint = " (the file is damaged or truncated: export it again)";
  else if (code == SQLITE_TOOBIG)
    hint = fmt::format(" (a value longer than {} MiB, the longest fathom reads: {})",
                       budget_.value_bytes >> 20, budget_hint());
  else if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
    hint = " (another process holds the file: wait for it to finish, or copy the file)";
  throw Error(fmt::format("cannot read {} ({}): {}{}", path_, doing, sqlite3_errmsg(db_), hint));
}

bool SqliteDb::has_table(std::string_view table) const {
  SqliteQuery q(*this, fmt::format("SELECT type, sql FROM sqlite_master WHERE name = '{}' AND "
                                   "type IN ('table', 'view')",
                                   table));
  if (!q.step()) return false;
  const bool view = q.text(0) == "view";
  std::string sql(q.text(1).substr(0, 32));
  for (char& c : sql) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (view || sql.find("VIRTUAL") != std::string::npos)
    throw Error(fmt::format(
        "{} is not an Nsight Systems export fathom reads: {} is a {}, not a table (its rows are "
        "computed on reading, and may never end); give the file `nsys export --type sqlite` "
        "writes",
        path_, table, view ? "view" : "virtual table"));
  return true;
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
  if (rc == SQLITE_ROW) {
    db_.count_row();
    return true;
  }
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

struct SqliteDb::TempVfs {};
int SqliteDb::on_progress(void*) noexcept { return 0; }
void SqliteDb::close() noexcept {}
void SqliteDb::count_row() const {}
NsightBudgetSpent SqliteDb::spent() const noexcept { return {}; }
void SqliteDb::out_of_time(std::string_view doing) const { fail(doing); }

SqliteDb::SqliteDb(const std::string& path, const NsightReadBudget& budget,
                   const NsightBudgetSpent&)
    : path_(path), budget_(budget) {
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
