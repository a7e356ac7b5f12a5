// Fuzz target: JSON lines import (store/tuning_log.h ImportJsonl with replay, what `tessel import`
// does with a file from elsewhere) into a SQLite log in a scratch folder. Input: the JSONL text.
// A failed import adds nothing; a good one adds its workloads and records (kept for later inputs,
// which then meet them as duplicates).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "store/tuning_log.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tessel::store::TuningLog* log = [] {
    tessel::store::TuningLogOptions options;
    options.on_bad_row = [](const std::string&) {};
    absl::StatusOr<std::unique_ptr<tessel::store::TuningLog>> opened =
        tessel::store::OpenTuningLog(tessel::fuzz::ScratchDir() + "/import.db", options);
    tessel::fuzz::Require(opened.ok(),
                          "cannot open the scratch log: " + std::string(opened.status().message()));
    return opened->release();
  }();
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  tessel::store::JsonlImportOptions options;
  options.replay = true;
  absl::StatusOr<tessel::store::ImportStats> stats = log->ImportJsonl(in, options);
  if (!stats.ok()) {
    tessel::fuzz::Require(!stats.status().message().empty(), "an import error without a message");
  }
  return 0;
}
