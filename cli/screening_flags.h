#pragma once

// The screening flags of `tessel serve` and `tessel tune` (server::ScreeningOptions, issue 21):
// --screen-ms, --screen-audit, --screen-min-repeats.
//
// Threads: callable from any thread.

#include <optional>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "measure/timing.h"
#include "server/screen_margin.h"

namespace tessel::cli {

// Unset until given.
struct ScreeningFlags {
  std::optional<double> screen_ms;
  std::optional<double> audit;
  std::optional<int> min_repeats;
};

void AddScreeningFlags(CLI::App* cmd, ScreeningFlags* flags);

// The options the flags ask for with the full measurement `full`. Errors (InvalidArgument,
// server::CheckScreeningOptions) for flags that were given and do not make sense; a default
// screening budget that is not below full.min_total_ms turns screening off instead (the full
// measurement is as short already).
absl::StatusOr<server::ScreeningOptions> ScreeningFromFlags(const ScreeningFlags& flags,
                                                            const measure::TimingOptions& full);

}  // namespace tessel::cli
