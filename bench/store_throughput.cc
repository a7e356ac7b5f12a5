// tessel_bench_store: how fast the tuning log (store/) takes records and answers the queries a
// server and `tessel best` make, on the build host's disk.
//
// Usage: tessel_bench_store [--records=N] [--runs=R] [--batch=B] [--dir=DIR]
// Writes N records (default 100,000) into a fresh log under DIR (default: a temp folder), once
// with one AddRecord per record (one transaction each) and once with AddRecords batches of B
// (default 64); each record has a real trace of matmul(M=1024, N=1024, K=1024) on sm_90 drawn
// from the design space (about 2 KB of JSON) and 10 repeats. Prints records/s for each (median
// of R runs, default 3), then TopK(32) and Best latencies (median and 90th percentile of 2,000
// queries) on the last log.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "schedules/space/space_generator.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "store/tuning_log.h"

namespace {

using Clock = std::chrono::steady_clock;
using tessel::store::Record;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

constexpr int kWorkloads = 16;

// Record i: one of the sampled traces, spread over kWorkloads workload keys; 1 in 10 failed.
Record MakeRecord(int64_t i, const std::vector<std::string>& traces,
                  const std::vector<std::string>& keys) {
  Record r;
  r.workload_key = keys[i % kWorkloads];
  r.target_key = "cuda -arch=sm_90";
  r.candidate_id = static_cast<uint64_t>(i);
  r.trace_json = traces[i % traces.size()];
  tessel::measure::Measurement& m = r.measurement;
  if (i % 10 == 9) {
    m.status = tessel::measure::MeasureStatus::kCompileError;
    m.error = "nvrtc: error: too many resources requested for launch";
  } else {
    const double base = 0.5 + static_cast<double>((i * 7919) % 10007) / 1000.0;
    std::vector<double> repeats;
    for (int k = 0; k < 10; ++k) repeats.push_back(base * (1.0 + 0.001 * ((k * 37) % 11)));
    m.timings = tessel::measure::MakeTimings(std::move(repeats));
    std::vector<double> sorted = m.timings.repeats_ms;
    std::sort(sorted.begin(), sorted.end());
    m.timings.median_ms = sorted[5];
  }
  m.compile_ms = 180.0 + i % 50;
  m.verify_ms = 2.5;
  m.kernels =
      tessel::measure::KernelsOfPeak({static_cast<int>(64 + i % 128), 16384 + 1024 * (i % 32), 0});
  m.worker_id = "gpu-node-3/worker-" + std::to_string(i % 8);
  m.device_name = "NVIDIA H100 80GB HBM3";
  m.device = static_cast<int>(i % 8);
  return r;
}

int Main(int argc, char** argv) {
  int64_t n = 100000;
  int runs = 3;
  int batch = 64;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--records" && absl::SimpleAtoi(value, &n) && n > 0) continue;
    if (key == "--runs" && absl::SimpleAtoi(value, &runs) && runs > 0) continue;
    if (key == "--batch" && absl::SimpleAtoi(value, &batch) && batch > 0) continue;
    if (key == "--dir" && !value.empty()) {
      dir = value;
      continue;
    }
    std::fprintf(stderr,
                 "tessel_bench_store: unknown or bad argument '%s'; use --records=N --runs=R "
                 "--batch=B --dir=DIR\n",
                 arg.c_str());
    return 1;
  }
  if (dir.empty()) {
    dir = (std::filesystem::temp_directory_path() / "tessel_bench_store").string();
  }
  std::filesystem::create_directories(dir);

  // Real traces: valid samples of a matmul's design space on sm_90.
  auto workload = tessel::schedules::ParseWorkloadSpec("matmul(M=1024, N=1024, K=1024)");
  auto target = tessel::schedules::MakeTarget("cuda", "sm_90");
  if (!workload.ok() || !target.ok()) return 1;
  auto space = tessel::schedules::SpaceGenerator::Create(*workload, *target);
  if (!space.ok()) {
    std::fprintf(stderr, "tessel_bench_store: %s\n", std::string(space.status().message()).c_str());
    return 1;
  }
  std::vector<std::string> traces;
  for (uint64_t seed = 1; traces.size() < 64 && seed < 4096; ++seed) {
    auto c = space->Sample(seed);
    if (c.ok() && c->trace) traces.push_back(c->trace->ToJson().dump());
  }
  if (traces.empty()) return 1;
  size_t bytes = 0;
  for (const auto& t : traces) bytes += t.size();
  std::vector<std::string> keys;
  for (int w = 0; w < kWorkloads; ++w) {
    keys.push_back(tessel::schedules::WorkloadKey(*workload).substr(0, 14) + (w < 10 ? "0" : "") +
                   std::to_string(w));
  }
  std::printf(
      "tessel_bench_store: %lld records, %zu distinct traces of %zu bytes on average, 10 "
      "repeats each, %d runs, log in %s\n",
      static_cast<long long>(n), traces.size(), bytes / traces.size(), runs, dir.c_str());

  const std::string path = dir + "/bench.db";
  auto fresh_log = [&]() {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
    auto log = tessel::store::OpenTuningLog(path);
    if (!log.ok()) {
      std::fprintf(stderr, "tessel_bench_store: %s\n", std::string(log.status().message()).c_str());
      std::exit(1);
    }
    return std::move(*log);
  };

  std::vector<double> single_rates, batch_rates;
  std::unique_ptr<tessel::store::TuningLog> last;
  for (int run = 0; run < runs; ++run) {
    {
      auto log = fresh_log();
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < n; ++i) {
        Record r = MakeRecord(i, traces, keys);
        auto id = log->AddRecord(&r);
        if (!id.ok()) {
          std::fprintf(stderr, "AddRecord: %s\n", std::string(id.status().message()).c_str());
          return 1;
        }
      }
      single_rates.push_back(n / Seconds(t0, Clock::now()));
    }
    auto log = fresh_log();
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < n; i += batch) {
      std::vector<Record> rs;
      for (int64_t j = i; j < std::min(n, i + batch); ++j)
        rs.push_back(MakeRecord(j, traces, keys));
      absl::Status s = log->AddRecords(&rs);
      if (!s.ok()) {
        std::fprintf(stderr, "AddRecords: %s\n", std::string(s.message()).c_str());
        return 1;
      }
    }
    batch_rates.push_back(n / Seconds(t0, Clock::now()));
    last = std::move(log);
  }

  std::printf("\n%-36s %14s %14s %14s\n", "write", "records/s", "min", "max");
  auto row = [](const char* name, const std::vector<double>& v) {
    std::printf("%-36s %14.0f %14.0f %14.0f\n", name, Median(v),
                *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
  };
  row("AddRecord (one transaction each)", single_rates);
  const std::string batch_name = "AddRecords (batches of " + std::to_string(batch) + ")";
  row(batch_name.c_str(), batch_rates);

  // Queries on the last log: each workload has n / kWorkloads records.
  constexpr int kQueries = 2000;
  std::vector<double> topk_us, best_us;
  for (int q = 0; q < kQueries; ++q) {
    const std::string& key = keys[q % kWorkloads];
    auto t0 = Clock::now();
    auto top = last->TopK(key, "cuda -arch=sm_90", 32);
    auto t1 = Clock::now();
    auto best = last->Best(key, "cuda -arch=sm_90");
    auto t2 = Clock::now();
    if (!top.ok() || !best.ok() || top->empty() || !best->has_value()) return 1;
    topk_us.push_back(Seconds(t0, t1) * 1e6);
    best_us.push_back(Seconds(t1, t2) * 1e6);
  }
  std::printf("\n%-36s %14s %14s\n", "query", "median us", "p90 us");
  std::printf("%-36s %14.1f %14.1f\n", "TopK(workload, target, 32)", Median(topk_us),
              Percentile(topk_us, 0.9));
  std::printf("%-36s %14.1f %14.1f\n", "Best(workload, target)", Median(best_us),
              Percentile(best_us, 0.9));
  std::printf("(%lld records per workload, %d workloads; file %.1f MB)\n",
              static_cast<long long>(n / kWorkloads), kWorkloads,
              std::filesystem::file_size(path) / 1e6);
  last.reset();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
