#include "cli/screening_flags.h"

#include "absl/strings/str_cat.h"

namespace tessel::cli {

void AddScreeningFlags(CLI::App* cmd, ScreeningFlags* flags) {
  const server::ScreeningOptions defaults;
  cmd->add_option("--screen-ms", flags->screen_ms,
                  absl::StrCat("Screening: every candidate is first timed for this many ms, and in "
                               "full only when within its task's measured noise margin of the "
                               "best confirmed latency (0: time every candidate in full; "
                               "default ",
                               defaults.screen_ms, ")"));
  cmd->add_option("--screen-audit", flags->audit,
                  absl::StrCat("Screening: the fraction of candidates timed in full whatever "
                               "their screen says, an unbiased sample of its noise (default ",
                               defaults.audit, ")"));
  cmd->add_option(
      "--screen-min-repeats", flags->min_repeats,
      absl::StrCat("Screening: timed repeats at least (default ", defaults.min_repeats, ")"));
}

absl::StatusOr<server::ScreeningOptions> ScreeningFromFlags(const ScreeningFlags& flags,
                                                            const measure::TimingOptions& full) {
  server::ScreeningOptions o;
  if (flags.screen_ms) o.screen_ms = *flags.screen_ms;
  if (flags.audit) o.audit = *flags.audit;
  if (flags.min_repeats) o.min_repeats = *flags.min_repeats;
  if (!flags.screen_ms && o.enabled() && o.screen_ms >= full.min_total_ms) o.screen_ms = 0;
  if (absl::Status s = server::CheckScreeningOptions(o, full); !s.ok()) return s;
  return o;
}

}  // namespace tessel::cli
