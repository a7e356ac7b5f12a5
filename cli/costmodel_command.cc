#include "cli/costmodel_command.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/exit_code.h"
#include "costmodel/evaluation.h"
#include "costmodel/training_set.h"
#include "schedules/target/target.h"
#include "server/log_readers.h"
#include "store/tuning_log.h"

namespace tessel::cli {
namespace {

// The workload as a user recognizes it: its one-line spec or its family name, shortened.
std::string Label(store::TuningLog* log, const std::string& key) {
  absl::StatusOr<std::optional<store::WorkloadRow>> w = log->GetWorkload(key);
  std::string label = key;
  if (w.ok() && w->has_value()) {
    const store::WorkloadRow& row = **w;
    label = row.spec.find('\n') == std::string::npos && !row.spec.empty() ? row.spec : row.name;
  }
  if (label.size() > 56) label = label.substr(0, 53) + "...";
  return label;
}

}  // namespace

void AddCostModelCommand(CLI::App& app) {
  CLI::App* cm = app.add_subcommand("costmodel", "Evaluate cost models on a tuning log");
  cm->require_subcommand(1);
  auto opts = std::make_shared<CostModelEvalOptions>();
  CLI::App* eval = cm->add_subcommand(
      "eval",
      "Per workload: train a cost model on some measured records, rank the others, and score it");
  eval->add_option("--db", opts->db, "Tuning log (SQLite file) to read; opened read-only")
      ->required();
  eval->add_option("--target,-t", opts->target, "host or cuda")->capture_default_str();
  eval->add_option("--arch", opts->arch, "CUDA architecture: " + schedules::KnownCudaArchsText())
      ->capture_default_str();
  eval->add_option("--train,-n", opts->train, "Records trained on, per workload")
      ->capture_default_str();
  eval->add_option("--seed", opts->seed, "Seed of the split and the model")->capture_default_str();
  eval->add_option("--model", opts->model, "Cost model kind: xgboost or random")
      ->capture_default_str();
  eval->callback([opts]() { SetExitCode(RunCostModelEval(*opts)); });
}

int RunCostModelEval(const CostModelEvalOptions& o) {
  auto fail = [](const absl::Status& s) {
    std::cerr << "tessel costmodel eval: " << s.message() << "\n";
    return 1;
  };
  auto target = schedules::MakeTarget(o.target, o.arch);
  if (!target.ok()) return fail(target.status());
  costmodel::EvalOptions eval;
  eval.train = o.train;
  eval.seed = o.seed;
  eval.model = o.model;
  // Flag errors (model kind, train count) before reading anything.
  if (absl::Status s = costmodel::EvaluatePerWorkload({}, eval).status(); !s.ok()) return fail(s);

  store::TuningLogOptions log_options;
  log_options.read_only = true;
  auto log = store::OpenTuningLog(o.db, log_options);
  if (!log.ok()) return fail(log.status());
  auto set = server::TrainingSetOfLog(log->get(), *target, /*max_records=*/INT64_MAX);
  if (!set.ok()) return fail(set.status());
  const costmodel::TrainingSetStats& st = set->stats;
  if (st.records == 0) {
    return fail(absl::NotFoundError(absl::StrCat(
        "no records for ", target->ToString(), " in ", o.db, "; record some with tessel tune --db ",
        o.db, " --target ", o.target, " --workload SPEC --trials ", o.train + 100,
        " (or pick the target the log holds with "
        "--target)")));
  }
  auto results = costmodel::EvaluatePerWorkload(set->examples, eval);
  if (!results.ok()) return fail(results.status());

  int64_t evaluated = 0, hits = 0, most_ok = 0;
  double acc_sum = 0;
  std::cout << absl::StrFormat("cost model %s on %s in %s: %d records, %d rebuilt", o.model,
                               target->ToString(), o.db, st.records, st.examples);
  if (st.skipped_workload + st.skipped_trace > 0) {
    std::cout << absl::StrFormat(
        " (%d skipped: %d of workloads that no longer parse, %d of "
        "traces that no longer build)",
        st.skipped_workload + st.skipped_trace, st.skipped_workload, st.skipped_trace);
  }
  std::cout << absl::StrFormat("; features %.1f ms\n\n", st.features_ms);
  std::cout << absl::StrFormat("%-56s %8s %6s %6s %8s %9s %12s %9s\n", "workload", "records", "ok",
                               "train", "held-out", "pairwise", "top-8/best", "train ms");
  for (const costmodel::WorkloadEval& e : *results) {
    most_ok = std::max(most_ok, e.ok);
    const std::string label = Label(log->get(), e.workload_key);
    if (!e.evaluated) {
      std::cout << absl::StrFormat("%-56s %8d %6d   (skipped: needs more than %d ok records)\n",
                                   label, e.examples, e.ok, o.train + eval.min_heldout);
      continue;
    }
    ++evaluated;
    acc_sum += e.pairwise_accuracy;
    hits += e.top_hit ? 1 : 0;
    const std::string top = std::isnan(e.top_ratio) ? std::string("n/a")
                            : std::isinf(e.top_ratio)
                                ? std::string("none ok")
                                : absl::StrFormat("%.3f%s", e.top_ratio, e.top_hit ? "" : " *");
    std::cout << absl::StrFormat("%-56s %8d %6d %6d %8d %9.3f %12s %9.1f\n", label, e.examples,
                                 e.ok, e.train, e.heldout, e.pairwise_accuracy, top, e.train_ms);
  }
  if (evaluated == 0) {
    return fail(absl::FailedPreconditionError(
        absl::StrCat("no workload of ", target->ToString(), " in ", o.db, " has more than ",
                     o.train + eval.min_heldout, " ok records (the most any has: ", most_ok,
                     "); lower --train or tune longer with tessel tune --db ", o.db)));
  }
  std::cout << absl::StrFormat(
      "\n%d workload%s evaluated: mean pairwise accuracy %.3f; top-8 of up to 512 within 10%% of "
      "the best on %d (* marks a miss)\n",
      evaluated, evaluated == 1 ? "" : "s", acc_sum / static_cast<double>(evaluated), hits);
  return 0;
}

}  // namespace tessel::cli
