// Unroll: each kernel's stage (and each stage attached in it) annotated with a sampled
// auto_unroll_max_step: lowering unrolls the innermost serial loops whose trip counts multiply
// to at most that.

#include "schedules/rules/rule_util.h"
#include "schedules/rules/schedule_rule.h"

namespace tessel::schedules {
namespace {

class Unroll final : public ScheduleRule {
 public:
  explicit Unroll(const Target& t) : cuda_(t.is_cuda()) {}
  std::string name() const override { return "unroll"; }
  absl::StatusOr<std::vector<Schedule>> Apply(const Schedule& sch,
                                              const std::string& stage) const override {
    const Stage* st = sch.FindStage(stage);
    if (!st || st->inlined() || !st->computed_by.empty() ||
        st->annotations.count("auto_unroll_max_step")) {
      return std::vector<Schedule>{};
    }
    Schedule s = sch;
    auto b = s.GetBlock(stage);
    if (!b.ok()) return b.status();
    const std::vector<int64_t> steps =
        cuda_ ? std::vector<int64_t>{0, 16, 64, 512} : std::vector<int64_t>{0, 8, 32, 128};
    auto v = rules::SampleUniform(&s, steps, steps.back());
    if (!v.ok()) return v.status();
    if (absl::Status a = s.Annotate(*b, "auto_unroll_max_step", *v); !a.ok()) return a;
    return std::vector<Schedule>{std::move(s)};
  }

 private:
  bool cuda_;
};

}  // namespace

std::unique_ptr<ScheduleRule> MakeUnroll(const Target& target) {
  return std::make_unique<Unroll>(target);
}

}  // namespace tessel::schedules
