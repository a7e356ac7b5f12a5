#pragma once

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel costmodel eval --db FILE [--target host|cuda] [--arch sm_90] [--train N] [--seed S]
//  [--model xgboost|random]`: how well a cost model ranks the measured candidates of each
// workload of a target in a tuning log (costmodel/evaluation.h). For every workload with more than
// N + 32 ok records, a model trained on N random records of that workload predicts the others;
// one table row per workload (records, train, held-out, pairwise accuracy, top-8 of 512).
struct CostModelEvalOptions {
  std::string db;
  std::string target = "host";
  std::string arch = "sm_90";
  int64_t train = 256;
  uint64_t seed = 0;
  std::string model = "xgboost";
};

void AddCostModelCommand(CLI::App& app);
int RunCostModelEval(const CostModelEvalOptions& options);

}  // namespace tessel::cli
