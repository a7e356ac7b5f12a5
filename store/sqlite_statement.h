#pragma once

// A thin layer over SQLite's C API: prepared statements that bind left to right and reset
// themselves when done, a per-connection cache of them, and SQLite result codes turned into
// absl::Status.
//
// Threads: none of this is thread-safe; the owner of the connection serializes its use.

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessel::store {

// An absl::Status for SQLite result code `rc` on `db`: "<what>: <sqlite message>". Constraint
// violations are AlreadyExists (unique) or FailedPrecondition (foreign key, check), a busy or
// locked database Unavailable, a full disk ResourceExhausted, a corrupt file DataLoss (naming the
// file and how to recover it instead of `what`).
absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what);

// A prepared statement in use. Parameters are bound left to right (Bind(...).Bind(...)); the
// statement is reset and its bindings cleared when this object is destroyed, so the prepared
// statement can be reused.
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_), next_(o.next_) {
    o.stmt_ = nullptr;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement& operator=(Statement&&) = delete;
  ~Statement();

  Statement& Bind(int64_t v);
  Statement& Bind(int v) { return Bind(static_cast<int64_t>(v)); }
  Statement& Bind(double v);
  Statement& Bind(absl::string_view text);
  Statement& Bind(const std::string& text) { return Bind(absl::string_view(text)); }
  Statement& Bind(const char* text) { return Bind(absl::string_view(text)); }
  Statement& BindBlob(absl::string_view bytes);
  Statement& BindNull();
  // NULL for 0 (an id that is "none"), the id otherwise.
  Statement& BindId(int64_t id) { return id == 0 ? BindNull() : Bind(id); }

  // Steps once: true when a row is ready, false when done.
  absl::StatusOr<bool> Step();
  // Steps to the end; an error when the statement fails.
  absl::Status Run();

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const;
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

  // The result code of the last failed step (SQLITE_OK when none failed).
  int last_error() const { return last_error_; }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  int next_ = 1;
  int last_error_ = SQLITE_OK;
};

// The prepared statements of one connection, each prepared on first use and kept until the cache
// is destroyed (which must happen before the connection is closed).
class StatementCache {
 public:
  explicit StatementCache(sqlite3* db) : db_(db) {}
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;
  ~StatementCache();

  absl::StatusOr<Statement> Get(absl::string_view sql);
  // Finalizes every statement (before the connection closes).
  void Clear();

 private:
  sqlite3* db_;
  absl::flat_hash_map<std::string, sqlite3_stmt*> stmts_;
};

// Runs one or more SQL statements that return no rows.
absl::Status Exec(sqlite3* db, const std::string& sql);

}  // namespace tessel::store
