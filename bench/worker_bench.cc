// tessel_bench_worker: drives a REAL `tessel worker` process through the worker protocol (the
// server side is bench/worker_driver.h) and reports what issue 4 asks of the worker daemon.
//
//   --mode=throughput   N distinct matmul candidates sampled from the design space (SpaceGenerator,
//                       distinct traces), compiled (cold cache), verified and timed by one worker;
//                       candidates/s from the first send to the last result (bar: >= 20/s).
//   --mode=fidelity     the same kernels (template matmul, template softmax) measured in B
//                       separate batches: each batch's median, the coefficient of variation of the
//                       medians (bar: < 2% for kernels >= 20 us), CUPTI kernel vs CUDA-event times.
//   --mode=robustness   G good candidates with F planted faults mixed in (illegal address, trap,
//                       infinite loop, wrong answer, too much shared memory, compile error; on
//                       the host: segfault, trap, infinite loop, wrong answer, compile error):
//                       every fault's status, every good one ok, the daemon never restarted.
//
// Flags (--name=value): --mode, --target=cuda|host, --arch=sm_90, --binary=PATH (else
// $TESSEL_BINARY, else this build's cli/tessel), --dir=DIR (work folder; default a fresh temp
// folder, so the compile cache starts cold), --n=512 --size=1024 (throughput), --batch=64,
// --batches=10 --specs="spec;spec" (fidelity), --good=1000 --faulty=100 --rsize=256
// (robustness), --timeout-s (per candidate), --compile-threads=N, --min-total-ms,
// --verify-on=gpu|host (CUDA: verify on the GPU, the default, or on the host as before; sets
// TESSEL_VERIFY_ON_HOST for the worker). Throughput also prints where verification went (the
// worker's TESSEL_VERIFY_PROFILE lines, summed).
// Exit status: 0 when the mode's bar is met, 1 when not, 2 when nothing could be measured.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/worker_driver.h"
#include "measure/measurement.h"
#include "proto/convert.h"
#include "schedules/space/candidate.h"
#include "schedules/space/space_generator.h"
#include "schedules/target/target.h"
#include "schedules/templates/templates.h"
#include "schedules/workload/builtins.h"

namespace tessel::bench {
namespace {

struct Flags {
  std::string mode = "throughput";
  std::string target = "cuda";
  std::string arch = "sm_90";
  std::string binary;
  std::string dir;
  int n = 512;
  int size = 1024;
  int batch = 64;
  int batches = 10;
  std::string specs;
  int good = 1000;
  int faulty = 100;
  int rsize = 256;
  double timeout_s = 0;  // 0: the mode's default
  int compile_threads = 0;
  double min_total_ms = -1;       // <0: the mode's default
  std::string verify_on = "gpu";  // CUDA: where the worker verifies (TESSEL_VERIFY_ON_HOST)
};

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) {
      std::fprintf(stderr,
                   "tessel_bench_worker: '%s' is not --name=value (see the top of "
                   "bench/worker_bench.cc for the flags)\n",
                   arg.c_str());
      return false;
    }
    const std::string name = arg.substr(2, eq - 2), value = arg.substr(eq + 1);
    bool ok = true;
    if (name == "mode")
      f->mode = value;
    else if (name == "target")
      f->target = value;
    else if (name == "arch")
      f->arch = value;
    else if (name == "binary")
      f->binary = value;
    else if (name == "dir")
      f->dir = value;
    else if (name == "specs")
      f->specs = value;
    else if (name == "n")
      ok = absl::SimpleAtoi(value, &f->n);
    else if (name == "size")
      ok = absl::SimpleAtoi(value, &f->size);
    else if (name == "batch")
      ok = absl::SimpleAtoi(value, &f->batch);
    else if (name == "batches")
      ok = absl::SimpleAtoi(value, &f->batches);
    else if (name == "good")
      ok = absl::SimpleAtoi(value, &f->good);
    else if (name == "faulty")
      ok = absl::SimpleAtoi(value, &f->faulty);
    else if (name == "rsize")
      ok = absl::SimpleAtoi(value, &f->rsize);
    else if (name == "timeout-s")
      ok = absl::SimpleAtod(value, &f->timeout_s);
    else if (name == "compile-threads")
      ok = absl::SimpleAtoi(value, &f->compile_threads);
    else if (name == "min-total-ms")
      ok = absl::SimpleAtod(value, &f->min_total_ms);
    else if (name == "verify-on")
      f->verify_on = value;
    else {
      std::fprintf(stderr,
                   "tessel_bench_worker: unknown flag --%s (see the top of "
                   "bench/worker_bench.cc for the flags)\n",
                   name.c_str());
      return false;
    }
    if (!ok) {
      std::fprintf(stderr, "tessel_bench_worker: --%s=%s is not a number\n", name.c_str(),
                   value.c_str());
      return false;
    }
  }
  if (f->verify_on != "gpu" && f->verify_on != "host") {
    std::fprintf(stderr, "tessel_bench_worker: unknown --verify-on=%s; use gpu or host\n",
                 f->verify_on.c_str());
    return false;
  }
  if (f->mode != "throughput" && f->mode != "fidelity" && f->mode != "robustness") {
    std::fprintf(stderr,
                 "tessel_bench_worker: unknown --mode=%s; use throughput, fidelity or "
                 "robustness\n",
                 f->mode.c_str());
    return false;
  }
  if (f->target != "cuda" && f->target != "host") {
    std::fprintf(stderr, "tessel_bench_worker: unknown --target=%s; use cuda or host\n",
                 f->target.c_str());
    return false;
  }
  if (f->batch < 1) f->batch = 1;
  return true;
}

std::string Binary(const Flags& f) {
  if (!f.binary.empty()) return f.binary;
  if (const char* b = std::getenv("TESSEL_BINARY"); b != nullptr && b[0] != '\0') return b;
  return std::string(TESSEL_BINARY_DIR) + "/cli/tessel";
}

schedules::Target MakeTarget(const Flags& f) {
  return f.target == "host" ? schedules::HostTarget() : schedules::CudaTarget(f.arch);
}

std::string StatusName(proto::MeasureStatus s) {
  std::string n = proto::MeasureStatus_Name(s);
  return n.rfind("MEASURE_STATUS_", 0) == 0 ? absl::AsciiStrToLower(n.substr(15)) : n;
}

absl::StatusOr<schedules::GeneratedSource> Reference(const schedules::Workload& w,
                                                     const schedules::Target& t) {
  absl::StatusOr<schedules::Candidate> c = schedules::BuildCandidate(w, t, std::nullopt);
  if (!c.ok()) return c.status();
  return c->source;
}

absl::StatusOr<schedules::GeneratedSource> Template(const schedules::Workload& w,
                                                    const schedules::Target& t) {
  absl::StatusOr<schedules::Schedule> s = schedules::HandwrittenSchedule(w, t);
  if (!s.ok()) return s.status();
  absl::StatusOr<schedules::Candidate> c = schedules::BuildCandidate(*s, t);
  if (!c.ok()) return c.status();
  return c->source;
}

proto::MeasureBatch MakeBatch(uint64_t batch_id, uint64_t first_id,
                              const std::vector<schedules::GeneratedSource>& candidates,
                              const schedules::GeneratedSource& reference,
                              const proto::MeasureOptions& options) {
  proto::MeasureBatch b;
  b.set_batch_id(batch_id);
  for (size_t i = 0; i < candidates.size(); ++i) {
    proto::Candidate* c = b.add_candidates();
    c->set_id(first_id + i);
    proto::ToProto(candidates[i], c->mutable_source());
  }
  proto::ToProto(reference, b.mutable_reference());
  *b.mutable_options() = options;
  return b;
}

proto::MeasureOptions Options(int warmup, int min_repeats, int max_repeats, double min_total_ms,
                              double timeout_s) {
  proto::MeasureOptions o;
  proto::TimingOptions* t = o.mutable_timing();
  t->set_warmup_runs(warmup);
  t->set_min_repeats(min_repeats);
  t->set_max_repeats(max_repeats);
  t->set_min_total_ms(min_total_ms);
  t->set_flush_cache(true);
  o.set_verify_seed(7);
  o.set_timeout_s(timeout_s);
  return o;
}

// The running worker and its server.
struct Session {
  std::unique_ptr<WorkerDriver> driver;
  std::unique_ptr<WorkerProcess> worker;
};

absl::StatusOr<Session> StartSession(const Flags& f, const std::string& dir) {
  if (f.verify_on == "host") {
    setenv("TESSEL_VERIFY_ON_HOST", "1", 1);  // the worker's measuring children inherit it
  } else {
    unsetenv("TESSEL_VERIFY_ON_HOST");
  }
  Session s;
  absl::StatusOr<std::unique_ptr<WorkerDriver>> d = WorkerDriver::Start();
  if (!d.ok()) return d.status();
  s.driver = std::move(*d);
  std::vector<std::string> args = {"worker",       "--server",      s.driver->address(),
                                   "--target",     f.target,        "--cache",
                                   dir + "/cache", "--heartbeat-s", "1"};
  if (f.target == "cuda") args.insert(args.end(), {"--devices", "0"});
  if (f.compile_threads > 0) {
    args.insert(args.end(), {"--compile-threads", std::to_string(f.compile_threads)});
  }
  const std::string binary = Binary(f);
  if (access(binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("the tessel binary '", binary,
                                            "' is not an executable: pass --binary=PATH or set "
                                            "TESSEL_BINARY"));
  }
  s.worker = std::make_unique<WorkerProcess>(binary, args, dir + "/worker.log");
  if (s.worker->pid() <= 0) {
    return absl::InternalError(absl::StrCat("could not start '", binary, "'"));
  }
  absl::StatusOr<proto::Register> reg = s.driver->WaitForRegistration(absl::Seconds(60));
  if (!reg.ok()) {
    return absl::Status(reg.status().code(), absl::StrCat(reg.status().message(),
                                                          "\n--- worker "
                                                          "log:\n",
                                                          s.worker->LogTail()));
  }
  for (const proto::Device& dev : reg->devices()) {
    std::printf("worker %s registered: %s (%s), toolkit %s\n", reg->worker_id().c_str(),
                dev.name().c_str(), dev.arch().c_str(), dev.toolkit_version().c_str());
  }
  return s;
}

std::string WorkDir(const Flags& f) {
  if (!f.dir.empty()) return f.dir;
  char tmpl[] = "/tmp/tessel_bench_worker_XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d != nullptr ? d : "/tmp";
}

// Waits for `n` results in all, printing progress every 10 s; returns what arrived by `timeout`.
std::vector<proto::MeasureResult> WaitWithProgress(WorkerDriver* driver, size_t n,
                                                   absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    std::vector<proto::MeasureResult> r = driver->WaitForResults(n, absl::Seconds(10));
    if (r.size() >= n || absl::Now() >= deadline) return r;
    std::printf("  ... %zu of %zu results\n", r.size(), n);
  }
}

// Sends `batches` in order, each as soon as the worker has a credit (on its own thread).
std::thread SendAll(WorkerDriver* driver, std::vector<proto::MeasureBatch> batches) {
  return std::thread([driver, batches = std::move(batches)] {
    for (const proto::MeasureBatch& b : batches) {
      if (absl::Status s = driver->SendBatch(b, absl::Minutes(10)); !s.ok()) {
        std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
        return;
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------

// Sums the worker's TESSEL_VERIFY_PROFILE lines ("verify_profile id=... key=value ...").
void PrintVerifyProfile(const std::string& path) {
  std::FILE* in = std::fopen(path.c_str(), "r");
  if (in == nullptr) {
    std::printf("  no verification profile at %s (a worker older than the profile?)\n",
                path.c_str());
    return;
  }
  std::map<std::string, double> sum;
  int lines = 0, on_device = 0;
  char buf[1024];
  while (std::fgets(buf, sizeof(buf), in) != nullptr) {
    ++lines;
    for (absl::string_view field : absl::StrSplit(absl::StripAsciiWhitespace(buf), ' ')) {
      const size_t eq = field.find('=');
      if (eq == absl::string_view::npos) continue;
      const std::string key(field.substr(0, eq));
      double v = 0;
      if (key == "id" || !absl::SimpleAtod(field.substr(eq + 1), &v)) continue;
      if (key == "on_device") {
        on_device += v > 0;
      } else if (v >= 0) {
        sum[key] += v;
      }
    }
  }
  std::fclose(in);
  if (lines == 0) return;
  std::printf(
      "  verification profile, %d candidates (%d verified on the GPU), mean ms per "
      "candidate:\n   ",
      lines, on_device);
  for (const char* key : {"verify_ms", "fill_ms", "upload_ms", "reference_ms", "candidate_ms",
                          "download_ms", "compare_ms", "timing_fill_ms", "timing_ms"}) {
    std::printf(" %s %.2f", key, sum[key] / lines);
  }
  std::printf("\n");
}

int Throughput(const Flags& f) {
  const schedules::Target target = MakeTarget(f);
  const std::string spec = absl::StrFormat("matmul(M=%d, N=%d, K=%d)", f.size, f.size, f.size);
  absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadSpec(spec);
  if (!w.ok()) return std::fprintf(stderr, "%s\n", w.status().ToString().c_str()), 2;
  absl::StatusOr<schedules::GeneratedSource> ref = Reference(*w, target);
  absl::StatusOr<schedules::SpaceGenerator> space = schedules::SpaceGenerator::Create(*w, target);
  if (!ref.ok() || !space.ok()) {
    std::fprintf(stderr, "%s\n", (ref.ok() ? space.status() : ref.status()).ToString().c_str());
    return 2;
  }
  std::vector<schedules::GeneratedSource> cands;
  std::set<std::string> traces, codes;
  int rejected = 0;
  const absl::Time sample_start = absl::Now();
  for (uint64_t seed = 0; static_cast<int>(cands.size()) < f.n && seed < 100000 + 20ull * f.n;
       ++seed) {
    absl::StatusOr<schedules::Candidate> c = space->Sample(seed);
    if (!c.ok()) {
      ++rejected;
      continue;
    }
    if (!c->trace.has_value() || !traces.insert(c->trace->ToJsonString(0)).second) continue;
    if (!codes.insert(c->source.code).second) continue;
    cands.push_back(std::move(c->source));
  }
  std::printf("throughput: %s on %s: %zu distinct candidates sampled in %.1f s (%d rejected)\n",
              spec.c_str(), target.arch.c_str(), cands.size(),
              absl::ToDoubleSeconds(absl::Now() - sample_start), rejected);
  if (static_cast<int>(cands.size()) < f.n) {
    std::fprintf(stderr, "only %zu distinct candidates, wanted %d\n", cands.size(), f.n);
    return 2;
  }
  const std::string dir = WorkDir(f);
  const std::string profile_path = absl::StrCat(dir, "/verify_profile.txt");
  setenv("TESSEL_VERIFY_PROFILE", profile_path.c_str(), 1);  // inherited by the worker's children
  absl::StatusOr<Session> s = StartSession(f, dir);
  if (!s.ok()) return std::fprintf(stderr, "%s\n", s.status().ToString().c_str()), 2;

  const double min_total = f.min_total_ms >= 0 ? f.min_total_ms : 5;
  const proto::MeasureOptions options =
      Options(1, 3, 20, min_total, f.timeout_s > 0 ? f.timeout_s : 10);
  std::vector<proto::MeasureBatch> batches;
  for (size_t i = 0; i < cands.size(); i += static_cast<size_t>(f.batch)) {
    std::vector<schedules::GeneratedSource> part(
        cands.begin() + static_cast<long>(i),
        cands.begin() + static_cast<long>(std::min(cands.size(), i + f.batch)));
    batches.push_back(MakeBatch(batches.size() + 1, i, part, *ref, options));
  }
  const absl::Time start = absl::Now();
  std::thread sender = SendAll(s->driver.get(), std::move(batches));
  std::vector<proto::MeasureResult> results =
      WaitWithProgress(s->driver.get(), cands.size(), absl::Minutes(20));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  sender.join();

  std::map<std::string, int> statuses;
  std::map<std::string, std::string> example;
  double compile_ms = 0, timed_ms = 0, verify_ms = 0;
  int hits = 0, with_kernel_times = 0;
  for (const proto::MeasureResult& r : results) {
    const std::string st = StatusName(r.status());
    ++statuses[st];
    if (!example.count(st) && r.status() != proto::MEASURE_STATUS_OK) {
      example[st] = r.error().substr(0, 300);
    }
    compile_ms += r.compile_ms();
    verify_ms += r.verify_ms();
    hits += r.compile_cache_hit();
    for (double ms : r.repeats_ms()) timed_ms += ms;
    with_kernel_times += r.kernel_repeats_ms_size() > 0;
  }
  const double rate = static_cast<double>(results.size()) / seconds;
  std::printf("%zu of %zu results in %.2f s: %.1f candidates/s\n", results.size(), cands.size(),
              seconds, rate);
  std::printf(
      "  compile %.1f s in total (%d cache hits), verify %.1f s, timed repeats %.1f s, "
      "%d with CUPTI kernel times\n",
      compile_ms / 1000, hits, verify_ms / 1000, timed_ms / 1000, with_kernel_times);
  PrintVerifyProfile(profile_path);
  std::printf("  %-24s %6s\n", "status", "count");
  for (const auto& [st, count] : statuses) std::printf("  %-24s %6d\n", st.c_str(), count);
  for (const auto& [st, text] : example)
    std::printf("  example %s: %s\n", st.c_str(), text.c_str());
  const bool all = results.size() == cands.size();
  const bool pass = all && rate >= 20;
  std::printf(
      "%s: %.1f candidates/s (bar: >= 20/s on a 16-core GPU node; this machine has %u "
      "cores)\n",
      pass ? "PASS" : "FAIL", rate, std::thread::hardware_concurrency());
  s->worker->Stop(absl::Seconds(30));
  return pass ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

double Cv(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = Mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return m > 0 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) / m : 0;
}

int Fidelity(const Flags& f) {
  const schedules::Target target = MakeTarget(f);
  std::vector<std::string> specs =
      f.target == "host"
          ? std::vector<std::string>{"matmul(M=128, N=128, K=128)", "softmax(rows=256, cols=4096)"}
          : std::vector<std::string>{"matmul(M=1024, N=1024, K=1024)",
                                     "softmax(rows=4096, cols=4096)"};
  if (!f.specs.empty()) specs = absl::StrSplit(f.specs, ';', absl::SkipEmpty());
  const std::string dir = WorkDir(f);
  absl::StatusOr<Session> s = StartSession(f, dir);
  if (!s.ok()) return std::fprintf(stderr, "%s\n", s.status().ToString().c_str()), 2;
  const double min_total = f.min_total_ms >= 0 ? f.min_total_ms : 100;
  const proto::MeasureOptions options =
      Options(3, 20, 1000, min_total, f.timeout_s > 0 ? f.timeout_s : 60);
  bool pass = true;
  uint64_t batch_id = 0;
  std::vector<std::string> summary;
  for (const std::string& spec : specs) {
    absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadSpec(spec);
    if (!w.ok()) return std::fprintf(stderr, "%s\n", w.status().ToString().c_str()), 2;
    absl::StatusOr<schedules::GeneratedSource> ref = Reference(*w, target);
    absl::StatusOr<schedules::GeneratedSource> tpl = Template(*w, target);
    if (!ref.ok() || !tpl.ok()) {
      std::fprintf(stderr, "%s: %s\n", spec.c_str(),
                   (ref.ok() ? tpl.status() : ref.status()).ToString().c_str());
      return 2;
    }
    std::printf("\nfidelity: the template kernel of %s, %d separate batches\n", spec.c_str(),
                f.batches);
    std::printf("  %5s %8s %14s %14s %12s\n", "batch", "repeats", "event med ms", "CUPTI med ms",
                "CUPTI/event");
    std::vector<double> event_medians, kernel_medians;
    std::string note;
    for (int b = 0; b < f.batches; ++b) {
      const size_t before = s->driver->WaitForResults(0, absl::ZeroDuration()).size();
      if (absl::Status st = s->driver->SendBatch(MakeBatch(++batch_id, 1, {*tpl}, *ref, options),
                                                 absl::Minutes(5));
          !st.ok()) {
        return std::fprintf(stderr, "%s\n", std::string(st.message()).c_str()), 2;
      }
      std::vector<proto::MeasureResult> r = s->driver->WaitForResults(before + 1, absl::Minutes(5));
      if (r.size() <= before) {
        std::fprintf(stderr, "no result for batch %lu\n%s\n", static_cast<unsigned long>(batch_id),
                     s->worker->LogTail().c_str());
        return 2;
      }
      const proto::MeasureResult& m = r.back();
      if (m.status() != proto::MEASURE_STATUS_OK) {
        std::printf("  %5d %s: %s\n", b, StatusName(m.status()).c_str(), m.error().c_str());
        pass = false;
        continue;
      }
      event_medians.push_back(m.median_ms());
      if (m.kernel_repeats_ms_size() > 0) kernel_medians.push_back(m.kernel_median_ms());
      if (!m.timing_note().empty()) note = m.timing_note();
      std::printf("  %5d %8d %14.5f %14.5f %12.4f\n", b, m.repeats_ms_size(), m.median_ms(),
                  m.kernel_median_ms(),
                  m.kernel_median_ms() > 0 ? m.kernel_median_ms() / m.median_ms() : 0.0);
    }
    const double med = tessel::measure::MedianOf(event_medians);
    const double cv = Cv(event_medians);
    const double kcv = Cv(kernel_medians);
    const bool long_enough = med >= 0.020;
    const bool ok = long_enough ? cv < 0.02 : true;
    if (!ok) pass = false;
    std::printf(
        "  median of medians %.5f ms; CV of the %zu event medians %.2f%%%s; CUPTI: %zu "
        "medians, CV %.2f%%, CUPTI/event %.4f\n",
        med, event_medians.size(), 100 * cv,
        long_enough ? (cv < 0.02 ? " (< 2%: ok)" : " (>= 2%: FAIL)")
                    : " (kernel under 20 us: no bar)",
        kernel_medians.size(), 100 * kcv,
        kernel_medians.empty() ? 0.0 : tessel::measure::MedianOf(kernel_medians) / med);
    if (!note.empty()) std::printf("  timing note: %s\n", note.c_str());
    summary.push_back(absl::StrFormat(
        "%-34s median %.5f ms  CV %.2f%%  CUPTI/event %.4f", spec, med, 100 * cv,
        kernel_medians.empty() ? 0.0 : tessel::measure::MedianOf(kernel_medians) / med));
  }
  std::printf("\n");
  for (const std::string& line : summary) std::printf("%s\n", line.c_str());
  std::printf(
      "%s: coefficient of variation of %d batch medians (bar: < 2%% for kernels >= 20 "
      "us)\n",
      pass ? "PASS" : "FAIL", f.batches);
  s->worker->Stop(absl::Seconds(30));
  return pass ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------

enum class Fault { kNone, kIllegalAddress, kTrap, kHang, kWrongAnswer, kTooMuchShared, kCompile };

const char* FaultName(Fault k) {
  switch (k) {
    case Fault::kNone:
      return "good";
    case Fault::kIllegalAddress:
      return "illegal address / segfault";
    case Fault::kTrap:
      return "trap";
    case Fault::kHang:
      return "infinite loop";
    case Fault::kWrongAnswer:
      return "wrong answer";
    case Fault::kTooMuchShared:
      return "too much shared memory";
    case Fault::kCompile:
      return "compile error";
  }
  return "?";
}

proto::MeasureStatus Expected(Fault k) {
  switch (k) {
    case Fault::kNone:
      return proto::MEASURE_STATUS_OK;
    case Fault::kIllegalAddress:
    case Fault::kTrap:
      return proto::MEASURE_STATUS_RUNTIME_ERROR;
    case Fault::kHang:
      return proto::MEASURE_STATUS_TIMEOUT;
    case Fault::kWrongAnswer:
      return proto::MEASURE_STATUS_VERIFY_FAILED;
    case Fault::kTooMuchShared:
      return proto::MEASURE_STATUS_DEVICE_LIMIT_EXCEEDED;
    case Fault::kCompile:
      return proto::MEASURE_STATUS_COMPILE_ERROR;
  }
  return proto::MEASURE_STATUS_UNSPECIFIED;
}

// `source` (a reference lowering of matmul: buffers A, B, C) with `fault` planted, and a comment
// that makes its text (and compile-cache key) unique per `tag`.
schedules::GeneratedSource Plant(schedules::GeneratedSource source, Fault fault, int tag) {
  const bool cuda = source.target == schedules::TargetKind::kCuda;
  std::string statement, epilogue;
  switch (fault) {
    case Fault::kNone:
      break;
    case Fault::kIllegalAddress:
      statement = cuda ? "if (threadIdx.x == 0) *reinterpret_cast<volatile int*>(0x8) = 1;"
                       : "*reinterpret_cast<volatile int*>(0x8) = 1;";
      break;
    case Fault::kTrap:
      statement = cuda ? "if (threadIdx.x == 0) __trap();" : "__builtin_trap();";
      break;
    case Fault::kHang:
      // A volatile read the compiler cannot prove constant: the inputs are never NaN.
      statement = cuda ? "while (*reinterpret_cast<volatile const float*>(A) == "
                         "*reinterpret_cast<volatile const float*>(A)) {}"
                       : "for (volatile int spin = 0;; spin = spin + 1) {}";
      break;
    case Fault::kWrongAnswer:
      if (cuda) {
        source.code = absl::StrReplaceAll(source.code, {{"C_acc[0] = 0.0;", "C_acc[0] = 1.0;"}});
      } else {
        epilogue = "static_cast<float*>(buffers[2])[0] += 1.0f;";  // C, the output
      }
      break;
    case Fault::kTooMuchShared:
      source.kernels[0].launch.dynamic_shared_bytes = 1 << 20;  // over every GPU's limit
      break;
    case Fault::kCompile:
      source.code += "\nthis is not a program at all;\n";
      break;
  }
  if (!statement.empty() || !epilogue.empty()) {
    if (cuda) {
      const size_t body = source.code.find(") {\n", source.code.find("__global__"));
      if (body != std::string::npos) source.code.insert(body + 4, "  " + statement + "\n");
    } else {
      const std::string entry = source.kernels[0].entry;
      const std::string decl = absl::StrCat("extern \"C\" void ", entry, "(void* const* buffers)");
      source.code = absl::StrReplaceAll(
          source.code, {{decl, "static void tessel_planted_body(void* const* buffers)"}});
      absl::StrAppend(&source.code, "\n", decl, " {\n  ", statement,
                      "\n  tessel_planted_body(buffers);\n  ", epilogue, "\n}\n");
    }
  }
  absl::StrAppend(&source.code, "\n// candidate ", tag, "\n");
  return source;
}

int Robustness(const Flags& f) {
  const bool cuda = f.target == "cuda";
  const schedules::Target target = MakeTarget(f);
  const std::string spec = absl::StrFormat("matmul(M=%d, N=%d, K=%d)", f.rsize, f.rsize, f.rsize);
  absl::StatusOr<schedules::Workload> w = schedules::ParseWorkloadSpec(spec);
  if (!w.ok()) return std::fprintf(stderr, "%s\n", w.status().ToString().c_str()), 2;
  absl::StatusOr<schedules::GeneratedSource> ref = Reference(*w, target);
  absl::StatusOr<schedules::GeneratedSource> tpl = Template(*w, target);
  if (!ref.ok() || !tpl.ok()) {
    std::fprintf(stderr, "%s\n", (ref.ok() ? tpl.status() : ref.status()).ToString().c_str());
    return 2;
  }
  std::vector<Fault> kinds = {Fault::kIllegalAddress, Fault::kTrap, Fault::kHang,
                              Fault::kWrongAnswer, Fault::kCompile};
  if (cuda) kinds.insert(kinds.begin() + 4, Fault::kTooMuchShared);
  std::vector<Fault> plan(static_cast<size_t>(f.good), Fault::kNone);
  for (int i = 0; i < f.faulty; ++i) plan.push_back(kinds[static_cast<size_t>(i) % kinds.size()]);
  std::mt19937_64 rng(2024);
  std::shuffle(plan.begin(), plan.end(), rng);
  std::vector<schedules::GeneratedSource> cands;
  for (size_t i = 0; i < plan.size(); ++i) {
    // Good ones alternate between the reference and the template; faults go into the reference.
    const schedules::GeneratedSource& base = plan[i] == Fault::kNone && i % 2 == 1 ? *tpl : *ref;
    cands.push_back(Plant(base, plan[i], static_cast<int>(i)));
  }
  std::printf("robustness: %s on %s: %d good and %d faulty candidates, mixed (seed 2024)\n",
              spec.c_str(), target.arch.c_str(), f.good, f.faulty);
  const std::string dir = WorkDir(f);
  absl::StatusOr<Session> s = StartSession(f, dir);
  if (!s.ok()) return std::fprintf(stderr, "%s\n", s.status().ToString().c_str()), 2;
  const pid_t pid = s->worker->pid();
  const proto::MeasureOptions options = Options(1, 3, 10, f.min_total_ms >= 0 ? f.min_total_ms : 1,
                                                f.timeout_s > 0 ? f.timeout_s : 3);
  std::vector<proto::MeasureBatch> batches;
  for (size_t i = 0; i < cands.size(); i += static_cast<size_t>(f.batch)) {
    std::vector<schedules::GeneratedSource> part(
        cands.begin() + static_cast<long>(i),
        cands.begin() + static_cast<long>(std::min(cands.size(), i + f.batch)));
    batches.push_back(MakeBatch(batches.size() + 1, i, part, *ref, options));
  }
  const absl::Time start = absl::Now();
  std::thread sender = SendAll(s->driver.get(), std::move(batches));
  std::vector<proto::MeasureResult> results =
      WaitWithProgress(s->driver.get(), cands.size(), absl::Minutes(30));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  sender.join();

  struct Row {
    int count = 0, right = 0;
    std::map<std::string, int> got;
    std::string wrong_example;
  };
  std::map<Fault, Row> rows;
  std::set<uint64_t> seen;
  for (const proto::MeasureResult& r : results) {
    if (r.candidate_id() >= plan.size() || !seen.insert(r.candidate_id()).second) continue;
    const Fault k = plan[r.candidate_id()];
    Row& row = rows[k];
    ++row.count;
    ++row.got[StatusName(r.status())];
    if (r.status() == Expected(k)) {
      ++row.right;
    } else if (row.wrong_example.empty()) {
      row.wrong_example = absl::StrCat("candidate ", r.candidate_id(), ": ", StatusName(r.status()),
                                       ": ", r.error().substr(0, 300));
    }
  }
  const bool alive = s->worker->Running();
  const int registrations = s->driver->registrations();
  std::printf("%zu of %zu results in %.1f s\n", seen.size(), cands.size(), seconds);
  std::printf("  %-28s %6s %-24s %6s  got\n", "planted", "count", "expected", "right");
  bool pass = seen.size() == cands.size();
  for (const auto& [k, row] : rows) {
    std::string got;
    for (const auto& [st, n] : row.got) absl::StrAppend(&got, got.empty() ? "" : ", ", st, " ", n);
    std::printf("  %-28s %6d %-24s %6d  %s\n", FaultName(k), row.count,
                StatusName(Expected(k)).c_str(), row.right, got.c_str());
    if (!row.wrong_example.empty()) std::printf("    e.g. %s\n", row.wrong_example.c_str());
    if (row.right != row.count) pass = false;
  }
  std::printf("  worker daemon pid %d still running: %s; registrations: %d\n",
              static_cast<int>(pid), alive ? "yes" : "NO", registrations);
  pass = pass && alive && registrations == 1;
  std::printf(
      "%s: every fault got its status, every good candidate was measured ok, the daemon "
      "was never restarted\n",
      pass ? "PASS" : "FAIL");
  if (!pass) std::printf("--- worker log (tail):\n%s\n", s->worker->LogTail(3000).c_str());
  s->worker->Stop(absl::Seconds(30));
  return pass ? 0 : 1;
}

}  // namespace
}  // namespace tessel::bench

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows up in a log as it happens
  tessel::bench::Flags flags;
  if (!tessel::bench::ParseFlags(argc, argv, &flags)) return 2;
  if (flags.mode == "throughput") return tessel::bench::Throughput(flags);
  if (flags.mode == "fidelity") return tessel::bench::Fidelity(flags);
  return tessel::bench::Robustness(flags);
}
