// tessel_bench_search: sample efficiency of the search strategies, in replay mode against a
// tuning log (search/replay.h): no GPU needed, and the same numbers on every machine for a log.
//
// Usage: tessel_bench_search --db=FILE --workload=SPEC [--target=host|cuda] [--arch=sm_90]
//                            [--strategies=evolutionary,annealing,random] [--seeds=5]
//                            [--trials=N] [--batch=64] [--fraction=0.95] [--model=xgboost]
//                            [--transfer]
//
// The log's records of (workload, target) are the design space; its fastest ok record is the
// goal (for a log recorded by N random trials, "the best of N random trials"). For each
// strategy and seed it replays up to --trials trials (default: the pool's size) and reports the
// trials needed to come within --fraction of the goal's throughput (latency <= goal/fraction),
// then the median over seeds, the ratio of each strategy's median to random search's, and the
// strategy's own time per trial (generation, model training and prediction; the answers from the
// log cost nothing). A run that never reaches the goal counts as its trial budget + 1.
//
// --transfer: the guided strategies start from a model trained on the log's records of the
// target's OTHER workloads of the same family (costmodel::WorkloadFamily; what a live job starts
// from on a target with history, leaving the replayed workload's own records out);
// --transfer=all: of every other workload, whatever its family; without it they start cold (random
// scores until the model has seen warmup_examples results).
//
// The bar: the guided search reaches 95% of the best in <= 1/3 of the trials random
// search needs (median over 5 seeds).

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "costmodel/training_set.h"
#include "measure/timing.h"
#include "schedules/target/target.h"
#include "schedules/workload/builtins.h"
#include "schedules/workload/key.h"
#include "search/replay.h"
#include "server/log_readers.h"
#include "store/tuning_log.h"

namespace {

bool Flag(const std::string& arg, const std::string& name, std::string* value) {
  const std::string prefix = "--" + name + "=";
  if (arg.rfind(prefix, 0) != 0) return false;
  *value = arg.substr(prefix.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string db, spec, target_kind = "host", arch, strategies = "evolutionary,annealing,random";
  std::string model = "xgboost";
  int64_t seeds = 5, trials = 0, batch = 64;
  std::string transfer;  // "", "family" or "all"
  double fraction = 0.95;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string v;
    if (a == "--transfer" || a == "--transfer=all") {
      transfer = a == "--transfer" ? "family" : "all";
      continue;
    }
    if (Flag(a, "db", &db) || Flag(a, "workload", &spec) || Flag(a, "target", &target_kind) ||
        Flag(a, "arch", &arch) || Flag(a, "strategies", &strategies) || Flag(a, "model", &model)) {
      continue;
    }
    if (Flag(a, "seeds", &v) && absl::SimpleAtoi(v, &seeds) && seeds > 0) continue;
    if (Flag(a, "trials", &v) && absl::SimpleAtoi(v, &trials) && trials >= 0) continue;
    if (Flag(a, "batch", &v) && absl::SimpleAtoi(v, &batch) && batch > 0) continue;
    if (Flag(a, "fraction", &v) && absl::SimpleAtod(v, &fraction) && fraction > 0 &&
        fraction <= 1) {
      continue;
    }
    std::fprintf(stderr, "tessel_bench_search: bad argument '%s' (see the header of %s)\n",
                 a.c_str(), __FILE__);
    return 2;
  }
  if (db.empty() || spec.empty()) {
    std::fprintf(stderr, "tessel_bench_search: give --db=FILE and --workload=SPEC\n");
    return 2;
  }
  auto workload = tessel::schedules::ParseWorkloadText(spec);
  if (!workload.ok()) {
    std::fprintf(stderr, "tessel_bench_search: %s\n", workload.status().ToString().c_str());
    return 2;
  }
  auto target = tessel::schedules::MakeTarget(target_kind, arch);
  if (!target.ok()) {
    std::fprintf(stderr, "tessel_bench_search: %s\n", target.status().ToString().c_str());
    return 2;
  }
  tessel::store::TuningLogOptions ro;
  ro.read_only = true;
  auto log = tessel::store::OpenTuningLog(db, ro);
  if (!log.ok()) {
    std::fprintf(stderr, "tessel_bench_search: %s\n", log.status().ToString().c_str());
    return 2;
  }
  auto space = tessel::server::ReplaySpaceOfLog(log->get(),
                                                tessel::schedules::WorkloadKey(*workload), *target);
  if (!space.ok()) {
    std::fprintf(stderr, "tessel_bench_search: %s\n", space.status().ToString().c_str());
    return 2;
  }
  std::vector<tessel::costmodel::Example> others;
  if (!transfer.empty()) {
    auto set = tessel::server::TrainingSetOfLog(
        log->get(), *target, 20000,
        transfer == "family" ? tessel::costmodel::WorkloadFamily(workload->name) : "");
    if (!set.ok()) {
      std::fprintf(stderr, "tessel_bench_search: %s\n", set.status().ToString().c_str());
      return 2;
    }
    const std::string key = tessel::schedules::WorkloadKey(*workload);
    for (auto& e : set->examples) {
      if (e.workload_key != key) others.push_back(std::move(e));
    }
    std::printf(
        "transfer: the guided strategies start from a model trained on %zu records of "
        "the target's other workloads (%s)\n",
        others.size(), transfer == "family" ? "same family" : "every family");
  }
  const int64_t pool = static_cast<int64_t>(space->pool->trace_jsons.size());
  const int64_t budget = trials > 0 ? std::min(trials, pool) : pool;
  std::printf(
      "replay of %s on %s: %lld recorded candidates (%lld ok), best %.5f ms; goal: "
      "within %.0f%% of it (<= %.5f ms); %lld trials per run, batch %lld, %lld seeds\n",
      workload->spec.c_str(), target->ToString().c_str(), static_cast<long long>(pool),
      static_cast<long long>(space->ok), space->best_ms, 100 * fraction, space->best_ms / fraction,
      static_cast<long long>(budget), static_cast<long long>(batch), static_cast<long long>(seeds));
  std::printf("%-14s %-44s %10s %12s %14s\n", "strategy", "trials to goal per seed", "median",
              "vs random", "search ms/trial");
  double random_median = 0;
  struct Row {
    std::string name;
    std::vector<double> reach;
    double median = 0;
    double ms_per_trial = 0;
  };
  std::vector<Row> rows;
  for (const std::string& name : std::vector<std::string>(absl::StrSplit(strategies, ','))) {
    Row row{name, {}, 0, 0};
    double search_s = 0;
    int64_t trials_run = 0;
    for (int64_t s = 0; s < seeds; ++s) {
      tessel::search::ReplayOptions o;
      o.strategy = name;
      o.seed = 1000 + static_cast<uint64_t>(s);
      o.trials = budget;
      o.batch_size = static_cast<int>(batch);
      o.stop_at_ms = space->best_ms / fraction;  // the goal: nothing after it is counted
      if (name != "random") {
        tessel::costmodel::CostModelOptions mo;
        mo.seed = o.seed;
        auto m = tessel::costmodel::MakeCostModel(model, mo);
        if (!m.ok()) {
          std::fprintf(stderr, "tessel_bench_search: %s\n", m.status().ToString().c_str());
          return 2;
        }
        if (!others.empty()) {
          if (auto st = (*m)->Update(others); !st.ok()) {
            std::fprintf(stderr, "tessel_bench_search: %s\n", st.ToString().c_str());
            return 2;
          }
        }
        o.cost_model = std::move(*m);
      }
      auto t = tessel::search::RunReplay(*space, o);
      if (!t.ok()) {
        std::fprintf(stderr, "tessel_bench_search: %s: %s\n", name.c_str(),
                     t.status().ToString().c_str());
        return 1;
      }
      const int64_t reach = tessel::search::TrialsToReach(*t, space->best_ms, fraction);
      row.reach.push_back(static_cast<double>(reach > 0 ? reach : budget + 1));
      search_s += t->search_s;
      trials_run += t->trials;
    }
    row.median = tessel::measure::MedianOf(row.reach);
    row.ms_per_trial = trials_run > 0 ? 1000 * search_s / static_cast<double>(trials_run) : 0;
    if (name == "random") random_median = row.median;
    rows.push_back(std::move(row));
  }
  for (const Row& r : rows) {
    std::string per;
    for (double x : r.reach) per += std::to_string(static_cast<int64_t>(x)) + " ";
    char ratio[32] = "-";
    if (random_median > 0) std::snprintf(ratio, sizeof ratio, "%.3f", r.median / random_median);
    std::printf("%-14s %-44s %10.1f %12s %14.2f\n", r.name.c_str(), per.c_str(), r.median, ratio,
                r.ms_per_trial);
  }
  return 0;
}
