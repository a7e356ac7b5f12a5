#pragma once

// The HTTP side of a server (`tessel serve --http ADDR`, cpp-httplib): GET /metrics (Prometheus
// text format) and GET / (the dashboard, HTML). What is served comes from an HttpPages the owner
// implements; this file only listens, authenticates and routes.
//
// Authentication is the gRPC API's (README, Security): with a tokens file every request needs
// `Authorization: Bearer TOKEN` of a client or admin token (401 without one or with an unknown
// one, 403 for a worker token); the page is given the caller, so that a client sees only its own
// jobs as it does through gRPC. With the server's TLS certificate the HTTP server speaks HTTPS.
// Listening beyond loopback without TLS and tokens needs `insecure`, as for --listen.
//
// Threads: the pages are called from the HTTP server's threads, several at once; address, port
// and Shutdown may be called from any thread.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/tls_credentials.h"
#include "server/token_store.h"
#include "server/tokens_file.h"

namespace tessel::server {

// What the HTTP server serves. Threads: any, several at once.
class HttpPages {
 public:
  virtual ~HttpPages() = default;
  // The Prometheus exposition text.
  virtual std::string Metrics() = 0;
  // The dashboard as `caller` may see it (an admin everything, a client its own jobs).
  virtual absl::StatusOr<std::string> Dashboard(const Principal& caller) = 0;
};

struct HttpOptions {
  std::string listen;           // HOST:PORT; port 0 picks a free port
  std::string flag = "--http";  // how the address was given, for messages
  TlsOptions tls;               // HTTPS with this certificate and key when enabled
  bool insecure = false;        // allow beyond loopback without TLS and tokens
  // How the owner's flags for TLS, tokens and insecure are spelled, for the messages.
  std::string tls_flags = "--tls-cert FILE --tls-key FILE";
  std::string tokens_flag = "--tokens FILE";
  std::string insecure_flag = "--insecure";
};

class HttpServer {
 public:
  virtual ~HttpServer() = default;
  virtual std::string address() const = 0;  // HOST:PORT (the chosen port for port 0)
  virtual int port() const = 0;
  // Stops listening and waits for the requests in progress. Idempotent.
  virtual void Shutdown() = 0;
};

// Checks the address (CheckListenAddress, with options.flag in its messages), refuses one
// beyond loopback without TLS and tokens unless options.insecure, binds and starts serving on
// its own threads. `tokens` (may be null: every caller is an admin) and `pages` are not owned
// and must outlive the server.
absl::StatusOr<std::unique_ptr<HttpServer>> StartHttpServer(const HttpOptions& options,
                                                            TokenStore* tokens, HttpPages* pages);

}  // namespace tessel::server
