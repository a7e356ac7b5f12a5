// AutoInline: injective, non-output workload stages inlined into their consumers, except those a
// contraction reads (multi-level tiling places them: a convolution's padding goes into the shared
// copy of the padded input, so the fetch evaluates the bounds check and never reads outside the
// input).

#include "schedules/rules/rule_util.h"
#include "schedules/rules/schedule_rule.h"

namespace tessel::schedules {
namespace {

class AutoInline final : public ScheduleRule {
 public:
  std::string name() const override { return "auto_inline"; }
  absl::StatusOr<std::vector<Schedule>> Apply(const Schedule& sch,
                                              const std::string& stage) const override {
    const Stage* st = sch.FindStage(stage);
    if (!st || st->inlined() || st->reduces() || st->is_output || st->origin != "compute" ||
        rules::IsScheduled(*st) || rules::FeedsContraction(sch, stage)) {
      return std::vector<Schedule>{};
    }
    Schedule s = sch;
    auto b = s.GetBlock(stage);
    if (!b.ok()) return b.status();
    if (!s.ComputeInline(*b).ok()) return std::vector<Schedule>{};  // e.g. no consumer
    return std::vector<Schedule>{std::move(s)};
  }
};

}  // namespace

std::unique_ptr<ScheduleRule> MakeAutoInline() { return std::make_unique<AutoInline>(); }

}  // namespace tessel::schedules
