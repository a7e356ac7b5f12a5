#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/listen_address.h"

namespace tessel::server {
namespace {

constexpr char kBearer[] = "Bearer ";

// The caller of `req`, or the HTTP status and message to answer with.
struct Caller {
  Principal principal;
  int status = 200;
  std::string error;
};

Caller Authenticate(const httplib::Request& req, TokenStore* tokens, const std::string& what) {
  Caller c;
  if (tokens == nullptr) return c;  // no tokens: every caller is an admin
  const std::string how =
      "send the header `Authorization: Bearer TOKEN` with a client or admin token (an admin "
      "makes one with `tessel token create --role client --tokens FILE`)";
  if (!req.has_header("Authorization")) {
    c.status = 401;
    c.error = absl::StrCat("reading ", what,
                           " needs a client or admin token, and this request "
                           "carried none: ",
                           how, "\n");
    return c;
  }
  const std::string value = req.get_header_value("Authorization");
  if (!absl::StartsWith(value, kBearer) || value.size() == sizeof(kBearer) - 1) {
    c.status = 401;
    c.error = absl::StrCat("the Authorization header must be `Bearer TOKEN`: ", how, "\n");
    return c;
  }
  std::optional<Principal> p = tokens->Find(value.substr(sizeof(kBearer) - 1));
  if (!p.has_value()) {
    c.status = 401;
    c.error = absl::StrCat("reading ", what,
                           ": this server does not know the token given (mistyped, revoked, or "
                           "made for another tokens file): ",
                           how, "\n");
    return c;
  }
  if (p->role == Role::kWorker) {
    c.status = 403;
    c.error = absl::StrCat("reading ", what, " needs a client or admin token, and token '", p->name,
                           "' is a worker token\n");
    return c;
  }
  c.principal = *p;
  return c;
}

class HttpServerImpl final : public HttpServer {
 public:
  HttpServerImpl(const HttpOptions& options, TokenStore* tokens, HttpPages* pages)
      : options_(options), tokens_(tokens), pages_(pages) {}
  ~HttpServerImpl() override { Shutdown(); }

  absl::Status Start();
  std::string address() const override { return address_; }
  int port() const override { return port_; }
  void Shutdown() override;

 private:
  void Route();

  const HttpOptions options_;
  TokenStore* const tokens_;
  HttpPages* const pages_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::string address_;
  int port_ = 0;
  std::atomic<bool> running_{false};
};

absl::Status HttpServerImpl::Start() {
  if (absl::Status s = CheckListenAddress(options_.listen, options_.flag); !s.ok()) {
    if (absl::StartsWith(s.message(), options_.flag)) return s;
    return absl::Status(s.code(), absl::StrCat(options_.flag, ": ", s.message()));
  }
  if (!IsLoopbackListen(options_.listen) && !options_.insecure &&
      (!options_.tls.enabled() || tokens_ == nullptr)) {
    return absl::FailedPreconditionError(absl::StrCat(
        options_.flag, " ", options_.listen, " reaches beyond this machine without ",
        options_.tls.enabled() ? "tokens" : (tokens_ == nullptr ? "TLS and tokens" : "TLS"),
        ": anyone who can reach the port could read every job, workload and worker (and the "
        "tokens would cross the network in the clear without TLS). Pass ",
        options_.tls_flags, " and ", options_.tokens_flag,
        " (README, Security), serve HTTP on 127.0.0.1, or pass ", options_.insecure_flag,
        " on a network you trust"));
  }
  if (options_.tls.enabled()) {
    auto ssl = std::make_unique<httplib::SSLServer>(
        options_.tls.cert.c_str(), options_.tls.key.c_str(),
        options_.tls.require_client_cert ? options_.tls.ca.c_str() : nullptr);
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          options_.flag, " ", options_.listen, ": cannot serve HTTPS with the certificate ",
          options_.tls.cert, " and the key ", options_.tls.key,
          ": check that they are a PEM certificate and its key"));
    }
    http_ = std::move(ssl);
  } else {
    http_ = std::make_unique<httplib::Server>();
  }
  // One server per port, as for gRPC: no SO_REUSEPORT (httplib's default sets it).
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  Route();
  const size_t colon = options_.listen.rfind(':');
  std::string host = options_.listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const int wanted = std::stoi(options_.listen.substr(colon + 1));
  if (wanted == 0) {
    port_ = http_->bind_to_any_port(host);
  } else if (http_->bind_to_port(host, wanted)) {
    port_ = wanted;
  }
  if (port_ <= 0) {
    port_ = 0;
    return absl::UnavailableError(
        absl::StrCat(options_.flag, ": cannot listen on ", options_.listen,
                     ": the address is in use or not of this machine; pass another ", options_.flag,
                     " HOST:PORT"));
  }
  address_ = absl::StrCat(options_.listen.substr(0, colon), ":", port_);
  running_ = true;
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  return absl::OkStatus();
}

void HttpServerImpl::Route() {
  http_->Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    Caller c = Authenticate(req, tokens_, "the metrics");
    if (c.status != 200) {
      res.status = c.status;
      if (c.status == 401) res.set_header("WWW-Authenticate", "Bearer");
      res.set_content(c.error, "text/plain; charset=utf-8");
      return;
    }
    res.set_content(pages_->Metrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
  auto dashboard = [this](const httplib::Request& req, httplib::Response& res) {
    Caller c = Authenticate(req, tokens_, "the dashboard");
    if (c.status != 200) {
      res.status = c.status;
      if (c.status == 401) res.set_header("WWW-Authenticate", "Bearer");
      res.set_content(c.error, "text/plain; charset=utf-8");
      return;
    }
    absl::StatusOr<std::string> page = pages_->Dashboard(c.principal);
    if (!page.ok()) {
      res.status = 500;
      res.set_content(absl::StrCat("cannot draw the dashboard: ", page.status().message(), "\n"),
                      "text/plain; charset=utf-8");
      return;
    }
    res.set_content(*page, "text/html; charset=utf-8");
  };
  http_->Get("/", dashboard);
  http_->Get("/index.html", dashboard);
}

void HttpServerImpl::Shutdown() {
  if (!running_.exchange(false)) return;
  // httplib's stop() does nothing before the listening loop has started.
  for (int i = 0; i < 5000 && !http_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> StartHttpServer(const HttpOptions& options,
                                                            TokenStore* tokens, HttpPages* pages) {
  auto server = std::make_unique<HttpServerImpl>(options, tokens, pages);
  if (absl::Status s = server->Start(); !s.ok()) return s;
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace tessel::server
