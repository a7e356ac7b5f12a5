// tessel_bench_space_cost: what one candidate of the design space costs to make on one core of
// the build host: sampling the decisions, replaying the sketch, lowering, checking the target's
// limits and generating the source (SpaceGenerator::Sample), per candidate.
//
// Usage: tessel_bench_space_cost [--samples=N] [--workload=SPEC] [--target=cuda|host]
// Prints the median, 10th and 90th percentile per candidate, how many were valid and how many
// distinct traces the valid ones hold (whether the space is large enough for a long search).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "schedules/space/space_generator.h"
#include "schedules/workload/builtins.h"

namespace {

int Main(int argc, char** argv) {
  int samples = 500;
  std::vector<std::string> specs = {
      "matmul(M=2048, N=2048, K=2048)", "matmul(M=1024, N=1024, K=1024)",
      "softmax(rows=4096, cols=65536)", "layernorm(rows=16, cols=4194304)"};
  std::string target_kind = "cuda";
  bool custom = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--samples" && absl::SimpleAtoi(value, &samples) && samples > 0) continue;
    if (key == "--workload") {
      if (!custom) specs.clear();
      custom = true;
      specs.push_back(value);
      continue;
    }
    if (key == "--target" && (value == "cuda" || value == "host")) {
      target_kind = value;
      continue;
    }
    std::fprintf(stderr,
                 "unknown or bad flag %s\nusage: tessel_bench_space_cost [--samples=N] "
                 "[--workload=SPEC]... [--target=cuda|host]\n",
                 arg.c_str());
    return 2;
  }
  auto target = tessel::schedules::MakeTarget(target_kind, "sm_90");
  if (!target.ok()) return 2;
  std::printf("%-48s %10s %9s %10s %10s %10s\n", "workload", "valid", "distinct", "p10_ms",
              "median_ms", "p90_ms");
  for (const std::string& spec : specs) {
    auto w = tessel::schedules::ParseWorkloadSpec(spec);
    if (!w.ok()) {
      std::fprintf(stderr, "%s\n", std::string(w.status().message()).c_str());
      return 1;
    }
    auto space = tessel::schedules::SpaceGenerator::Create(*w, *target);
    if (!space.ok()) {
      std::fprintf(stderr, "%s\n", std::string(space.status().message()).c_str());
      return 1;
    }
    std::vector<double> ms;
    int valid = 0;
    std::set<std::string> distinct;  // distinct traces among the valid samples
    for (int s = 0; s < samples; ++s) {
      const auto t0 = std::chrono::steady_clock::now();
      auto c = space->Sample(static_cast<uint64_t>(s));
      const auto t1 = std::chrono::steady_clock::now();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      if (c.ok()) {
        ++valid;
        distinct.insert(c->trace->ToJsonString());
      }
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%-48s %5d/%-5d %9zu %10.3f %10.3f %10.3f\n", spec.c_str(), valid, samples,
                distinct.size(), ms[ms.size() / 10], ms[ms.size() / 2], ms[ms.size() * 9 / 10]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
