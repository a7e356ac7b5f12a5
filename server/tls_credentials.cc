#include "server/tls_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "absl/strings/str_cat.h"
#include "proto/transport.h"

namespace tessel::server {
namespace {

// The first certificate of a PEM text, or null.
X509* ParseCertificate(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ERR_clear_error();  // a failure leaves nothing on this thread's queue for gRPC to trip on
  return cert;
}

EVP_PKEY* ParseKey(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ERR_clear_error();
  return key;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options) {
  if (!options.enabled()) {
    if (options.require_client_cert) {
      return absl::InvalidArgumentError(
          "--require-client-cert needs TLS: pass --tls-cert FILE, --tls-key FILE and --tls-ca "
          "FILE too");
    }
    return grpc::InsecureServerCredentials();
  }
  if (options.cert.empty() || options.key.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both --tls-cert FILE (the server's certificate) and --tls-key FILE (its "
        "private key)");
  }
  if (options.require_client_cert && options.ca.empty()) {
    return absl::InvalidArgumentError(
        "--require-client-cert needs --tls-ca FILE: the CA certificate that signs the clients' "
        "certificates");
  }
  absl::StatusOr<std::string> cert = proto::ReadPemFile("--tls-cert", options.cert);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = proto::ReadPemFile("--tls-key", options.key);
  if (!key.ok()) return key.status();
  X509* x509 = ParseCertificate(*cert);
  if (x509 == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-cert ", options.cert,
        " holds no PEM certificate (-----BEGIN CERTIFICATE-----); pass the certificate, not the "
        "key or a request"));
  }
  EVP_PKEY* pkey = ParseKey(*key);
  if (pkey == nullptr) {
    X509_free(x509);
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key ", options.key,
        " holds no unencrypted PEM private key (-----BEGIN PRIVATE KEY-----); pass the key the "
        "certificate was made with (openssl req ... -nodes writes one without a passphrase)"));
  }
  const bool match = X509_check_private_key(x509, pkey) == 1;
  ERR_clear_error();
  X509_free(x509);
  EVP_PKEY_free(pkey);
  if (!match) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-key ", options.key,
                                                   " is not the private key of the certificate in "
                                                   "--tls-cert ",
                                                   options.cert, "; pass the pair made together"));
  }
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!options.ca.empty()) {
    absl::StatusOr<std::string> ca = proto::ReadPemFile("--tls-ca", options.ca);
    if (!ca.ok()) return ca.status();
    X509* ca_cert = ParseCertificate(*ca);
    if (ca_cert == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls-ca ", options.ca, " holds no PEM certificate; pass the CA's"));
    }
    X509_free(ca_cert);
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request =
        options.require_client_cert ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                    : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace tessel::server
