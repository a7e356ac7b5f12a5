#include "proto/transport.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tessel::proto {

std::string TokenFromEnvironment() {
  const char* env = std::getenv("TESSEL_TOKEN");
  return env == nullptr ? "" : env;
}

absl::StatusOr<std::string> ReadPemFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(flag, " ", path, ": cannot read it (",
                                            std::strerror(errno), "); pass a readable PEM file"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (!absl::StrContains(text, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path,
                     " is not a PEM file (no -----BEGIN line); pass the PEM file openssl wrote"));
  }
  return text;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TransportOptions& options) {
  if (!options.Tls()) return grpc::InsecureChannelCredentials();
  if (options.tls_ca.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key need --tls-ca FILE: the CA certificate that signed the "
        "server's certificate");
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs both --tls-cert FILE and --tls-key FILE (its private key)");
  }
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> ca = ReadPemFile("--tls-ca", options.tls_ca);
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *ca;
  if (!options.tls_cert.empty()) {
    absl::StatusOr<std::string> cert = ReadPemFile("--tls-cert", options.tls_cert);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPemFile("--tls-key", options.tls_key);
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
  return grpc::SslCredentials(ssl);
}

void AttachToken(const TransportOptions& options, grpc::ClientContext* context) {
  if (!options.token.empty()) {
    context->AddMetadata(kAuthorizationKey, absl::StrCat(kBearerPrefix, options.token));
  }
}

std::string TransportHint(const TransportOptions& options, const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return "";
  const std::string m = absl::AsciiStrToLower(status.error_message());
  if (options.Tls()) {
    if (absl::StrContains(m, "handshake") || absl::StrContains(m, "ssl") ||
        absl::StrContains(m, "tls") || absl::StrContains(m, "certificate")) {
      return "the TLS handshake failed: check that --tls-ca is the CA that signed the server's "
             "certificate, that the certificate names the host you connect to, and that the "
             "server serves TLS (and pass --tls-cert and --tls-key if it requires a client "
             "certificate)";
    }
    return "";
  }
  return "if the server serves TLS, pass --tls-ca FILE";
}

}  // namespace tessel::proto
