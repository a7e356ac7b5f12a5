#include "store/sqlite_statement.h"

#include "absl/strings/str_cat.h"

namespace tessel::store {

absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what) {
  const std::string msg = absl::StrCat(what, ": ", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_CONSTRAINT:
      if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
        return absl::AlreadyExistsError(msg);
      }
      return absl::FailedPreconditionError(msg);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(msg);
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(msg);
    case SQLITE_CORRUPT: {
      // No SQL in the message: the user can do nothing with it, and something with this.
      const char* file = db != nullptr ? sqlite3_db_filename(db, "main") : nullptr;
      const std::string name = file != nullptr && *file != '\0' ? file : "LOG";
      return absl::DataLossError(absl::StrCat(
          "the tuning log ", name, " is damaged (", sqlite3_errstr(rc),
          "): recover what it holds with `sqlite3 ", name,
          " .recover | sqlite3 recovered.db` and use recovered.db, or restore a backup written "
          "by tessel export"));
    }
    case SQLITE_NOTADB:
      return absl::DataLossError(msg);
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
      return absl::PermissionDeniedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

Statement::~Statement() {
  if (stmt_ != nullptr) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
}

Statement& Statement::Bind(int64_t v) {
  sqlite3_bind_int64(stmt_, next_++, v);
  return *this;
}

Statement& Statement::Bind(double v) {
  sqlite3_bind_double(stmt_, next_++, v);
  return *this;
}

Statement& Statement::Bind(absl::string_view text) {
  // A null data pointer would bind NULL; an empty string is still text.
  sqlite3_bind_text64(stmt_, next_++, text.data() ? text.data() : "", text.size(), SQLITE_TRANSIENT,
                      SQLITE_UTF8);
  return *this;
}

Statement& Statement::BindBlob(absl::string_view bytes) {
  sqlite3_bind_blob64(stmt_, next_++, bytes.data() ? bytes.data() : "", bytes.size(),
                      SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::BindNull() {
  sqlite3_bind_null(stmt_, next_++);
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  last_error_ = sqlite3_extended_errcode(db_);
  return SqliteError(db_, last_error_, sqlite3_sql(stmt_));
}

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

std::string Statement::Text(int col) const {
  const void* p = sqlite3_column_blob(stmt_, col);
  const int n = sqlite3_column_bytes(stmt_, col);
  return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), n);
}

StatementCache::~StatementCache() { Clear(); }

void StatementCache::Clear() {
  for (auto& [sql, stmt] : stmts_) sqlite3_finalize(stmt);
  stmts_.clear();
}

absl::StatusOr<Statement> StatementCache::Get(absl::string_view sql) {
  auto it = stmts_.find(sql);
  if (it == stmts_.end()) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                      SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db_, rc, absl::StrCat("preparing ", sql));
    it = stmts_.emplace(std::string(sql), stmt).first;
  }
  return Statement(db_, it->second);
}

absl::Status Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return absl::OkStatus();
  std::string msg = err ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  absl::Status s = SqliteError(nullptr, sqlite3_extended_errcode(db), sql);
  return absl::Status(s.code(), absl::StrCat(sql.substr(0, 60), ": ", msg));
}

}  // namespace tessel::store
