// Trust (issue 20, README "Security"): TLS for both services with a certificate made by openssl
// here, at run time; tokens with roles from a real tokens file; --insecure; worker ids unique per
// connection. Every message a user can see is checked.

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/protocol.h"
#include "proto/transport.h"
#include "server/call_auth.h"
#include "server/tokens_file.h"
#include "server/worker_registry.h"
#include "tests/cli/cli_test_util.h"
#include "tests/server/server_test_util.h"
#include "tests/store/store_test_util.h"

namespace tessel::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr char kMatmul[] = "matmul(M=32, N=32, K=32)";

// A CA, a server certificate for 127.0.0.1 and localhost and a client certificate, both signed
// by the CA, and a second CA that signed nothing here; made once by openssl (EC keys: fast).
struct Pki {
  std::string dir;
  std::string ca, ca_key, server_cert, server_key, client_cert, client_key, other_ca;
};

bool Sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

const Pki& TestPki() {
  static const Pki* pki = [] {
    auto* p = new Pki;
    p->dir = MakeTempDir("tessel_pki_");
    const std::string d = p->dir;
    p->ca = d + "/ca.pem";
    p->ca_key = d + "/ca.key";
    p->server_cert = d + "/server.pem";
    p->server_key = d + "/server.key";
    p->client_cert = d + "/client.pem";
    p->client_key = d + "/client.key";
    p->other_ca = d + "/other_ca.pem";
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::ofstream(d + "/server.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
    EXPECT_TRUE(Sh("openssl req -x509 " + ec + " -keyout " + p->ca_key + " -out " + p->ca +
                   " -days 2 -subj /CN=tessel-test-ca"));
    EXPECT_TRUE(Sh("openssl req -x509 " + ec + " -keyout " + d + "/other_ca.key -out " +
                   p->other_ca + " -days 2 -subj /CN=another-ca"));
    for (const auto& [name, ext] : std::vector<std::pair<std::string, std::string>>{
             {"server", " -extfile " + d + "/server.ext"}, {"client", ""}}) {
      EXPECT_TRUE(Sh("openssl req " + ec + " -keyout " + d + "/" + name + ".key -out " + d + "/" +
                     name + ".csr -subj /CN=" + name));
      EXPECT_TRUE(Sh("openssl x509 -req -in " + d + "/" + name + ".csr -CA " + p->ca + " -CAkey " +
                     p->ca_key + " -CAcreateserial -days 2 -out " + d + "/" + name + ".pem" + ext));
    }
    return p;
  }();
  return *pki;
}

// A stub of service Tessel (or Worker) over TLS (or not) that sends `token`.
struct Caller {
  proto::TransportOptions transport;
  std::shared_ptr<grpc::Channel> channel;

  Caller(const std::string& address, proto::TransportOptions t) : transport(std::move(t)) {
    auto creds = proto::MakeChannelCredentials(transport);
    EXPECT_TRUE(creds.ok()) << creds.status();
    channel = grpc::CreateChannel(address, *creds);
  }
  void Prepare(grpc::ClientContext* ctx) const {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    proto::AttachToken(transport, ctx);
  }
  grpc::Status Submit(const proto::SubmitJobRequest& r, int64_t* job = nullptr) const {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    proto::SubmitJobResponse resp;
    grpc::Status s = proto::Tessel::NewStub(channel)->SubmitJob(&ctx, r, &resp);
    if (job != nullptr) *job = resp.job_id();
    return s;
  }
  grpc::Status Get(int64_t job, proto::JobInfo* info) const {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    proto::GetJobRequest r;
    r.set_job_id(job);
    return proto::Tessel::NewStub(channel)->GetJob(&ctx, r, info);
  }
  grpc::Status Cancel(int64_t job, proto::JobInfo* info) const {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    proto::CancelJobRequest r;
    r.set_job_id(job);
    return proto::Tessel::NewStub(channel)->CancelJob(&ctx, r, info);
  }
  grpc::Status List(proto::ListJobsResponse* out) const {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    return proto::Tessel::NewStub(channel)->ListJobs(&ctx, proto::ListJobsRequest(), out);
  }
  grpc::Status Workers(proto::ListWorkersResponse* out) const {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    return proto::Tessel::NewStub(channel)->ListWorkers(&ctx, proto::ListWorkersRequest(), out);
  }
  grpc::Status Watch(int64_t job) const {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    proto::WatchJobRequest r;
    r.set_job_id(job);
    auto reader = proto::Tessel::NewStub(channel)->WatchJob(&ctx, r);
    proto::JobInfo info;
    while (reader->Read(&info)) {
      if (info.state() != proto::JOB_STATE_QUEUED && info.state() != proto::JOB_STATE_RUNNING) {
        ctx.TryCancel();
      }
    }
    return reader->Finish();
  }
  // Opens a worker stream as worker `id` and registers; the server's first answer (Registered)
  // in `first`, and the stream's status when it ended instead.
  grpc::Status Register(
      const std::string& id, proto::ServerMessage* first, grpc::ClientContext* ctx,
      std::unique_ptr<grpc::ClientReaderWriter<proto::WorkerMessage, proto::ServerMessage>>* keep)
      const {
    proto::AttachToken(transport, ctx);
    auto stub = proto::Worker::NewStub(channel);
    auto stream = stub->Connect(ctx);
    proto::WorkerMessage hello;
    proto::Register* reg = hello.mutable_register_();
    reg->set_protocol_version(proto::kWorkerProtocolVersion);
    reg->set_worker_id(id);
    reg->set_host("test");
    proto::Device* d = reg->add_devices();
    d->set_kind(proto::TARGET_KIND_HOST);
    d->set_name("Test CPU");
    d->set_arch("x86_64");
    if (stream->Write(hello) && stream->Read(first)) {
      *keep = std::move(stream);
      return grpc::Status::OK;
    }
    return stream->Finish();
  }
};

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("tessel_security_");
    ASSERT_FALSE(dir_.empty());
    db_ = dir_ + "/log.db";
    tokens_ = dir_ + "/tokens";
    for (const auto& [role, name] :
         std::vector<std::pair<server::Role, std::string>>{{server::Role::kClient, "alice"},
                                                           {server::Role::kClient, "bob"},
                                                           {server::Role::kWorker, "w1"},
                                                           {server::Role::kAdmin, "root"}}) {
      auto t = server::CreateToken(tokens_, role, name);
      ASSERT_TRUE(t.ok()) << t.status();
      token_[name] = t->token;
    }
  }

  server::ServerOptions SecureOptions() {
    const Pki& pki = TestPki();
    server::ServerOptions o = TestServerOptions(db_);
    o.listen = "127.0.0.1:0";
    o.tls.cert = pki.server_cert;
    o.tls.key = pki.server_key;
    o.tokens_path = tokens_;
    return o;
  }
  void Start(server::ServerOptions o) {
    auto s = server::StartServer(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  // A TLS caller sending the token of `name` ("" for none).
  Caller As(const std::string& name) const {
    proto::TransportOptions t;
    t.tls_ca = TestPki().ca;
    if (!name.empty()) t.token = token_.at(name);
    return Caller(server_->address(), t);
  }
  absl::Status StartError(const server::ServerOptions& o) {
    auto s = server::StartServer(o);
    return s.status();
  }

  std::string dir_, db_, tokens_;
  std::map<std::string, std::string> token_;
  std::unique_ptr<server::Server> server_;
};

TEST_F(SecurityTest, AnUnauthenticatedSubmitIsRefusedSayingToPassAToken) {
  Start(SecureOptions());
  grpc::Status s = As("").Submit(HostJob({kMatmul}, 2, 2));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(),
            "submitting a job needs a client or admin token, and this call carried none: pass "
            "--token TOKEN or set TESSEL_TOKEN (an admin makes one with `tessel token create "
            "--role client --tokens FILE`)");
  EXPECT_EQ(RawQuery(db_, "SELECT count(*) FROM jobs"), "0");
}

TEST_F(SecurityTest, AnUnknownOrMalformedTokenIsRefused) {
  Start(SecureOptions());
  proto::TransportOptions t;
  t.tls_ca = TestPki().ca;
  t.token = "tsl_not-a-real-one";
  grpc::Status s = Caller(server_->address(), t).Submit(HostJob({kMatmul}, 2, 2));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(),
            "submitting a job: this server does not know the token given (mistyped, revoked, or "
            "made for another tokens file): pass a client or admin token with --token TOKEN or "
            "set TESSEL_TOKEN (an admin makes one with `tessel token create --role client "
            "--tokens FILE`)");
  // Metadata that is not `Bearer TOKEN`.
  auto creds = proto::MakeChannelCredentials(t);
  ASSERT_TRUE(creds.ok());
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Basic dXNlcg==");
  proto::SubmitJobResponse resp;
  s = proto::Tessel::NewStub(grpc::CreateChannel(server_->address(), *creds))
          ->SubmitJob(&ctx, HostJob({kMatmul}, 2, 2), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(),
            "the authorization metadata must be `Bearer TOKEN`: pass the token with --token "
            "TOKEN or set TESSEL_TOKEN");
}

TEST_F(SecurityTest, AWorkerTokenCannotSubmitAndOnlyAnAdminListsWorkers) {
  Start(SecureOptions());
  grpc::Status s = As("w1").Submit(HostJob({kMatmul}, 2, 2));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(),
            "submitting a job needs a client or admin token, and token 'w1' is a worker token: "
            "pass a client or admin token with --token or TESSEL_TOKEN");
  proto::ListWorkersResponse workers;
  s = As("alice").Workers(&workers);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(),
            "listing the workers needs an admin token, and token 'alice' is a client token: pass "
            "an admin token with --token or TESSEL_TOKEN");
  EXPECT_TRUE(As("root").Workers(&workers).ok());
}

TEST_F(SecurityTest, AClientTokenCannotOpenTheWorkerStream) {
  Start(SecureOptions());
  grpc::ClientContext ctx;
  proto::ServerMessage first;
  std::unique_ptr<grpc::ClientReaderWriter<proto::WorkerMessage, proto::ServerMessage>> stream;
  grpc::Status s = As("alice").Register("sneaky", &first, &ctx, &stream);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(),
            "the worker stream needs a worker or admin token, and token 'alice' is a client "
            "token: pass a worker or admin token with --token or TESSEL_TOKEN");
  // The real worker gives up at once (retrying would not help), saying why.
  TesselProcess worker({"worker", "--server", server_->address(), "--target", "host", "--tls-ca",
                        TestPki().ca, "--token", token_.at("alice"), "--cache", dir_ + "/cache"},
                       dir_ + "/worker.log");
  ASSERT_EQ(worker.Wait(absl::Seconds(20)), 1) << worker.Log();
  EXPECT_THAT(worker.Log(),
              HasSubstr("tessel worker: the server at " + server_->address() +
                        " refused this worker: the worker stream needs a worker or admin token, "
                        "and token 'alice' is a client token"));
  // And without a token, UNAUTHENTICATED.
  grpc::ClientContext ctx2;
  s = As("").Register("anonymous", &first, &ctx2, &stream);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("the worker stream needs a worker or admin token, and "
                                           "this call carried none: pass --token TOKEN or set "
                                           "TESSEL_TOKEN (an admin makes one with `tessel token "
                                           "create --role worker --tokens FILE`)"));
}

TEST_F(SecurityTest, AClientSeesAndCancelsOnlyItsOwnJobsAndAnAdminAnyJob) {
  Start(SecureOptions());
  int64_t job = 0;
  ASSERT_TRUE(As("alice").Submit(HostJob({kMatmul}, 2, 2), &job).ok());
  proto::JobInfo info;
  ASSERT_TRUE(As("alice").Get(job, &info).ok());
  EXPECT_EQ(info.submitted_by(), "alice");
  const std::string refused = absl::StrCat(
      " ", job,
      " is refused: that job was submitted by token 'alice', and client token 'bob' reads and "
      "cancels only its own jobs; pass that job's token or an admin token with --token");
  grpc::Status s = As("bob").Cancel(job, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(), "cancelling job" + refused);
  s = As("bob").Get(job, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(), "reading job" + refused);
  s = As("bob").Watch(job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(), "watching job" + refused);
  proto::ListJobsResponse list;
  ASSERT_TRUE(As("bob").List(&list).ok());
  EXPECT_EQ(list.jobs_size(), 0);
  ASSERT_TRUE(As("alice").List(&list).ok());
  EXPECT_EQ(list.jobs_size(), 1);
  ASSERT_TRUE(As("alice").Get(job, &info).ok());
  EXPECT_EQ(info.state(), proto::JOB_STATE_QUEUED);  // bob's cancel changed nothing
  // The admin sees and cancels anyone's job; the log says who submitted it.
  ASSERT_TRUE(As("root").Cancel(job, &info).ok());
  EXPECT_EQ(info.state(), proto::JOB_STATE_CANCELLED);
  EXPECT_EQ(RawQuery(db_, "SELECT submitted_by FROM jobs"), "alice");
}

TEST_F(SecurityTest, AWorkerWithAWorkerTokenMeasuresAClientsJobOverTls) {
  Start(SecureOptions());
  unsetenv("TESSEL_TOKEN");
  // A worker without a token is refused and stops.
  TesselProcess worker(
      {"worker", "--server", server_->address(), "--target", "host", "--worker-id", "w", "--tls-ca",
       TestPki().ca, "--cache", dir_ + "/cache", "--heartbeat-s", "0.2"},
      dir_ + "/worker.log");
  int64_t job = 0;
  ASSERT_TRUE(As("alice").Submit(HostJob({kMatmul}, 2, 2), &job).ok());
  ASSERT_EQ(worker.Wait(absl::Seconds(20)), 1) << worker.Log();
  EXPECT_THAT(worker.Log(), HasSubstr("this call carried none: pass --token TOKEN or set "
                                      "TESSEL_TOKEN"));
  // One with the worker token (from $TESSEL_TOKEN: the environment is copied at the spawn).
  setenv("TESSEL_TOKEN", token_.at("w1").c_str(), 1);
  TesselProcess real(
      {"worker", "--server", server_->address(), "--target", "host", "--worker-id", "w", "--tls-ca",
       TestPki().ca, "--cache", dir_ + "/cache", "--heartbeat-s", "0.2"},
      dir_ + "/real.log");
  unsetenv("TESSEL_TOKEN");
  const Caller alice = As("alice");
  ASSERT_TRUE(WaitUntil(
      [&] {
        proto::JobInfo info;
        return alice.Get(job, &info).ok() && info.state() == proto::JOB_STATE_DONE;
      },
      absl::Seconds(60)))
      << real.Log();
  std::vector<store::Record> records = RecordsOfJob(db_, job);
  ASSERT_EQ(records.size(), 2u);
  for (const store::Record& r : records) EXPECT_EQ(r.measurement.worker_id, "w");
}

TEST_F(SecurityTest, WorkerIdsAreUniquePerConnection) {
  Start(SecureOptions());
  grpc::ClientContext c1, c2;
  proto::ServerMessage first, second;
  std::unique_ptr<grpc::ClientReaderWriter<proto::WorkerMessage, proto::ServerMessage>> s1, s2;
  ASSERT_TRUE(As("w1").Register("twin", &first, &c1, &s1).ok());
  ASSERT_TRUE(As("root").Register("twin", &second, &c2, &s2).ok());
  ASSERT_TRUE(first.has_registered());
  ASSERT_TRUE(second.has_registered());
  EXPECT_EQ(first.registered().worker_id(), "twin");
  EXPECT_EQ(second.registered().worker_id(), "twin#2");
  proto::ListWorkersResponse workers;
  ASSERT_TRUE(As("root").Workers(&workers).ok());
  std::vector<std::string> ids;
  for (const auto& w : workers.workers()) ids.push_back(w.worker_id());
  EXPECT_THAT(ids, ::testing::UnorderedElementsAre("twin", "twin#2"));
  c1.TryCancel();
  c2.TryCancel();
}

TEST(WorkerRegistry, AnIdAlreadyConnectedGetsANumber) {
  server::WorkerRegistry registry;
  std::string id;
  server::WorkerEntry e;
  e.worker_id = "gpu";
  const uint64_t a = registry.Add(e, nullptr, &id);
  EXPECT_EQ(id, "gpu");
  registry.Add(e, nullptr, &id);
  EXPECT_EQ(id, "gpu#2");
  registry.Add(e, nullptr, &id);
  EXPECT_EQ(id, "gpu#3");
  registry.Remove(a);
  registry.Add(e, nullptr, &id);
  EXPECT_EQ(id, "gpu");  // free again once its holder left
}

TEST_F(SecurityTest, TheTokensFileIsReadAgainWhenItChanges) {
  Start(SecureOptions());
  auto carol = server::CreateToken(tokens_, server::Role::kClient, "carol");
  ASSERT_TRUE(carol.ok());
  proto::TransportOptions t;
  t.tls_ca = TestPki().ca;
  t.token = carol->token;
  EXPECT_TRUE(Caller(server_->address(), t).Submit(HostJob({kMatmul}, 2, 2)).ok());
  // Revoked: the line deleted.
  std::ifstream in(tokens_);
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.find(" carol") == std::string::npos) kept += line + "\n";
  }
  in.close();
  std::ofstream(tokens_, std::ios::trunc) << kept;
  grpc::Status s = Caller(server_->address(), t).Submit(HostJob({kMatmul}, 2, 2));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // A file that became malformed keeps the tokens read last.
  std::ofstream(tokens_, std::ios::app) << "garbage\n";
  EXPECT_TRUE(As("alice").Submit(HostJob({kMatmul}, 2, 2)).ok());
}

TEST_F(SecurityTest, ClientCertificatesAreRequiredWhenAsked) {
  const Pki& pki = TestPki();
  server::ServerOptions o = SecureOptions();
  o.tls.ca = pki.ca;
  o.tls.require_client_cert = true;
  Start(o);
  proto::TransportOptions t;
  t.tls_ca = pki.ca;
  t.token = token_.at("alice");
  grpc::Status s = Caller(server_->address(), t).Submit(HostJob({kMatmul}, 2, 2));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  t.tls_cert = pki.client_cert;
  t.tls_key = pki.client_key;
  s = Caller(server_->address(), t).Submit(HostJob({kMatmul}, 2, 2));
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(SecurityTest, APlainOrWronglyTrustingClientIsToldAboutTls) {
  Start(SecureOptions());
  unsetenv("TESSEL_TOKEN");
  const std::string token = " --token " + token_.at("alice");
  CliResult plain = RunTessel("jobs --server " + server_->address() + token);
  EXPECT_EQ(plain.status, 1);
  EXPECT_THAT(plain.output,
              HasSubstr("tessel jobs: no Tessel server answers at " + server_->address()));
  EXPECT_THAT(plain.output, HasSubstr("; if the server serves TLS, pass --tls-ca FILE"));
  CliResult wrong_ca =
      RunTessel("jobs --server " + server_->address() + token + " --tls-ca " + TestPki().other_ca);
  EXPECT_EQ(wrong_ca.status, 1);
  EXPECT_THAT(wrong_ca.output,
              HasSubstr("the TLS handshake failed: check that --tls-ca is the CA that signed the "
                        "server's certificate"));
  CliResult ok =
      RunTessel("jobs --server " + server_->address() + token + " --tls-ca " + TestPki().ca);
  EXPECT_EQ(ok.status, 0) << ok.output;
  CliResult none = RunTessel("jobs --server " + server_->address() + " --tls-ca " + TestPki().ca);
  EXPECT_EQ(none.status, 1);
  EXPECT_THAT(none.output, HasSubstr("tessel jobs: listing jobs needs a client or admin token, "
                                     "and this call carried none: pass --token TOKEN or set "
                                     "TESSEL_TOKEN"));
}

TEST_F(SecurityTest, BadTlsAndTokensFilesAreRefusedAtStartNamingThem) {
  const Pki& pki = TestPki();
  server::ServerOptions o = SecureOptions();
  o.tls.cert = dir_ + "/missing.pem";
  EXPECT_THAT(StartError(o).message(), HasSubstr("--tls-cert " + dir_ +
                                                 "/missing.pem: cannot read it (No such file or "
                                                 "directory); pass a readable PEM file"));
  o = SecureOptions();
  o.tls.cert = tokens_;
  EXPECT_EQ(StartError(o).message(),
            "--tls-cert " + tokens_ +
                " is not a PEM file (no -----BEGIN line); pass the PEM file openssl wrote");
  o = SecureOptions();
  o.tls.cert = pki.server_key;
  EXPECT_EQ(StartError(o).message(),
            "--tls-cert " + pki.server_key +
                " holds no PEM certificate (-----BEGIN CERTIFICATE-----); pass the certificate, "
                "not the key or a request");
  o = SecureOptions();
  o.tls.key = pki.server_cert;
  EXPECT_THAT(StartError(o).message(),
              HasSubstr("--tls-key " + pki.server_cert + " holds no unencrypted PEM private key"));
  o = SecureOptions();
  o.tls.key = pki.client_key;
  EXPECT_EQ(StartError(o).message(),
            "--tls-key " + pki.client_key +
                " is not the private key of the certificate in --tls-cert " + pki.server_cert +
                "; pass the pair made together");
  o = SecureOptions();
  o.tls.key.clear();
  EXPECT_EQ(StartError(o).message(),
            "TLS needs both --tls-cert FILE (the server's certificate) and --tls-key FILE (its "
            "private key)");
  o = SecureOptions();
  o.tls.require_client_cert = true;
  EXPECT_EQ(StartError(o).message(),
            "--require-client-cert needs --tls-ca FILE: the CA certificate that signs the "
            "clients' certificates");
  o = SecureOptions();
  o.tls = {};
  o.tls.require_client_cert = true;
  EXPECT_EQ(StartError(o).message(),
            "--require-client-cert needs TLS: pass --tls-cert FILE, --tls-key FILE and --tls-ca "
            "FILE too");
  o = SecureOptions();
  o.tls.ca = pki.server_key;
  EXPECT_EQ(StartError(o).message(),
            "--tls-ca " + pki.server_key + " holds no PEM certificate; pass the CA's");
  o = SecureOptions();
  o.tokens_path = dir_ + "/no_tokens";
  EXPECT_EQ(StartError(o).message(),
            "cannot read the tokens file " + dir_ +
                "/no_tokens (No such file or directory); make it with `tessel token create "
                "--role admin --tokens " +
                dir_ + "/no_tokens`");
  std::ofstream(dir_ + "/bad_tokens") << "# comment\nabc client x\n";
  o.tokens_path = dir_ + "/bad_tokens";
  EXPECT_EQ(StartError(o).message(),
            dir_ +
                "/bad_tokens line 2: the first field is not 64 lowercase hex digits; each line "
                "is `SHA256 ROLE NAME` as `tessel token create` writes it");
}

TEST_F(SecurityTest, ListeningBeyondLoopbackNeedsTlsAndTokensOrInsecure) {
  server::ServerOptions o = TestServerOptions(db_);
  o.listen = "0.0.0.0:0";
  EXPECT_EQ(StartError(o).message(),
            "--listen 0.0.0.0:0 reaches beyond this machine without TLS and tokens: anyone who "
            "can reach the port could submit and cancel jobs, pose as a worker and write results "
            "into the log. Pass --tls-cert FILE --tls-key FILE and --tokens FILE (README, "
            "Security), listen on 127.0.0.1, or pass --insecure on a network you trust");
  o.tokens_path = tokens_;
  EXPECT_THAT(StartError(o).message(),
              HasSubstr("reaches beyond this machine without TLS (tokens would cross the network "
                        "in the clear): "));
  o.tokens_path.clear();
  o.tls.cert = TestPki().server_cert;
  o.tls.key = TestPki().server_key;
  EXPECT_THAT(StartError(o).message(), HasSubstr("reaches beyond this machine without tokens: "));
  o.tokens_path = tokens_;
  EXPECT_EQ(server::InsecureListening(o), "");
  o.tls = {};
  o.tokens_path.clear();
  o.insecure = true;
  Start(o);  // allowed, and the CLI warns (below)
  server_.reset();
  // Loopback needs neither.
  server::ServerOptions local = TestServerOptions(db_);
  local.listen = "127.0.0.1:0";
  EXPECT_EQ(server::InsecureListening(local), "");
  local.listen = "[::1]:0";
  EXPECT_EQ(server::InsecureListening(local), "");
  local.listen = "localhost:0";
  EXPECT_EQ(server::InsecureListening(local), "");
}

TEST_F(SecurityTest, ServeRefusesOrWarnsOnTheCommandLine) {
  CliResult refused = RunTessel("serve --db " + db_ + " --listen 0.0.0.0:0");
  EXPECT_EQ(refused.status, 1);
  EXPECT_THAT(refused.output, HasSubstr("tessel serve: --listen 0.0.0.0:0 reaches beyond this "
                                        "machine without TLS and tokens"));
  TesselProcess serve({"serve", "--db", db_, "--listen", "0.0.0.0:0", "--insecure"},
                      dir_ + "/serve.log");
  ASSERT_TRUE(WaitUntil([&] { return serve.Log().find("warning:") != std::string::npos; },
                        absl::Seconds(20)))
      << serve.Log();
  EXPECT_THAT(serve.Log(), HasSubstr("tessel serve: warning: --insecure: listening on 0.0.0.0:"));
  EXPECT_THAT(serve.Log(), HasSubstr(", beyond this machine, without TLS and tokens: anyone who "
                                     "can reach the port can submit and cancel jobs, pose as a "
                                     "worker and write results into the log"));
}

// ---- The tokens file and tessel token create ----

TEST(TokensFile, HashesAreSha256AndTheTokenIsNeverStored) {
  EXPECT_EQ(server::HashToken("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string path = MakeTempDir("tessel_tokens_") + "/tokens";
  auto t = server::CreateToken(path, server::Role::kWorker, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->principal.name, "worker-1");
  EXPECT_THAT(t->token, ::testing::StartsWith("tsl_"));
  auto t2 = server::CreateToken(path, server::Role::kWorker, "");
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(t2->principal.name, "worker-2");
  EXPECT_NE(t->token, t2->token);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(), Not(HasSubstr(t->token)));
  EXPECT_THAT(text.str(), HasSubstr(server::HashToken(t->token) + " worker worker-1\n"));
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  auto read = server::ReadTokensFile(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->size(), 2u);
}

TEST(TokensFile, BadLinesAndNamesAreNamed) {
  const std::string h = std::string(64, 'a');
  auto err = [](const std::string& text) {
    return std::string(server::ParseTokensFile(text, "T").status().message());
  };
  const std::string tail = "; each line is `SHA256 ROLE NAME` as `tessel token create` writes it";
  EXPECT_EQ(err(h + " client\n"), "T line 1: 2 fields instead of 3" + tail);
  EXPECT_EQ(err(h + " boss x\n"),
            "T line 1: unknown role 'boss'; use client, worker or admin" + tail);
  EXPECT_EQ(err(h + " client x/y\n"),
            "T line 1: name 'x/y' is not 1-64 of the characters A-Z a-z 0-9 . _ @ -" + tail);
  EXPECT_EQ(err(h + " client x\n" + std::string(64, 'b') + " admin x\n"),
            "T line 2: name 'x' is on line 1 too; give every token its own name" + tail);
  EXPECT_EQ(err(h + " client x\n" + h + " admin y\n"),
            "T line 2: this hash is on an earlier line too; delete one of them" + tail);
  const std::string path = MakeTempDir("tessel_tokens_") + "/tokens";
  ASSERT_TRUE(server::CreateToken(path, server::Role::kClient, "alice").ok());
  EXPECT_EQ(server::CreateToken(path, server::Role::kAdmin, "alice").status().message(),
            "a token named 'alice' is in " + path +
                " already; pass another --name (or delete its line there to revoke it first)");
  EXPECT_EQ(server::CreateToken(path, server::Role::kAdmin, "a b").status().message(),
            "--name 'a b': give 1-64 of the characters A-Z a-z 0-9 . _ @ -");
  EXPECT_EQ(
      server::CreateToken("/nonexistent_dir/tokens", server::Role::kAdmin, "").status().message(),
      "cannot write the tokens file /nonexistent_dir/tokens (No such file or directory); "
      "pass a --tokens path you can write");
}

TEST(TokenCommand, CreatePrintsTheTokenOnceAndRefusesABadRole) {
  const std::string path = MakeTempDir("tessel_tokens_") + "/tokens";
  CliResult out = RunTessel("token create --role client --name alice --tokens " + path,
                            /*with_stderr=*/false);
  ASSERT_EQ(out.status, 0) << out.output;
  ASSERT_THAT(out.output, ::testing::StartsWith("tsl_"));
  const std::string token = out.output.substr(0, out.output.size() - 1);
  auto read = server::ReadTokensFile(path);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->count(server::HashToken(token)), 1u);
  EXPECT_EQ(read->at(server::HashToken(token)).name, "alice");
  CliResult said = RunTessel("token create --role admin --tokens " + path);
  EXPECT_EQ(said.status, 0);
  EXPECT_THAT(said.output, HasSubstr("tessel token create: admin token 'admin-1' added to " + path +
                                     "; it is shown once, here (only its hash is kept):"));
  CliResult bad = RunTessel("token create --role boss --tokens " + path);
  EXPECT_EQ(bad.status, 1);
  EXPECT_THAT(bad.output, HasSubstr("tessel token create: --role unknown role 'boss'; use client, "
                                    "worker or admin"));
}

TEST(Transport, ClientTlsFlagsThatDoNotGoTogetherAreNamed) {
  proto::TransportOptions t;
  t.tls_cert = "c.pem";
  EXPECT_EQ(proto::MakeChannelCredentials(t).status().message(),
            "--tls-cert and --tls-key need --tls-ca FILE: the CA certificate that signed the "
            "server's certificate");
  t.tls_ca = TestPki().ca;
  EXPECT_EQ(proto::MakeChannelCredentials(t).status().message(),
            "a client certificate needs both --tls-cert FILE and --tls-key FILE (its private "
            "key)");
  t = {};
  t.tls_ca = "/nonexistent/ca.pem";
  EXPECT_EQ(proto::MakeChannelCredentials(t).status().message(),
            "--tls-ca /nonexistent/ca.pem: cannot read it (No such file or directory); pass a "
            "readable PEM file");
  EXPECT_TRUE(proto::MakeChannelCredentials({}).ok());
}

}  // namespace
}  // namespace tessel::testing
