// AutoBind: every root stage no other rule scheduled. CUDA: injective stages fused, split over
// blocks x sampled threads x sampled vector width; reductions one output per thread (sampled
// threads per block). Host: the outer spatial loop parallel, the inner spatial loop vectorized
// when it is the stage's last loop.

#include "schedules/rules/rule_util.h"
#include "schedules/rules/schedule_rule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {
namespace {

class AutoBind final : public ScheduleRule {
 public:
  explicit AutoBind(const Target& t) : target_(t) {}
  std::string name() const override { return "auto_bind"; }

  absl::StatusOr<std::vector<Schedule>> Apply(const Schedule& sch,
                                              const std::string& stage) const override {
    const Stage* st = sch.FindStage(stage);
    if (!st || st->inlined() || !st->computed_by.empty() || rules::IsScheduled(*st)) {
      return std::vector<Schedule>{};
    }
    Schedule s = sch;
    TESSEL_ASSIGN_OR_RETURN(BlockRV b, s.GetBlock(stage));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> loops, s.GetLoops(b));
    std::vector<LoopRV> spatial;
    for (LoopRV l : loops) {
      if (!rules::IsReduceLoop(s, l)) spatial.push_back(l);
    }
    if (spatial.empty()) return std::vector<Schedule>{};
    if (!target_.is_cuda()) {
      TESSEL_RETURN_IF_ERROR(s.Parallel(spatial[0]));
      if (spatial.size() > 1 && !rules::IsReduceLoop(s, loops.back())) {
        TESSEL_RETURN_IF_ERROR(s.Vectorize(loops.back()));
      }
      return std::vector<Schedule>{std::move(s)};
    }
    // Spatial loops come first in a fresh stage (reduction loops last), so they fuse.
    TESSEL_ASSIGN_OR_RETURN(LoopRV fused, rules::FuseAll(&s, spatial));
    const int64_t extent = s.LoopExtent(fused);
    if (st->reduces()) {
      TESSEL_RETURN_IF_ERROR(rules::BindOnePerThread(&s, fused, ""));
    } else if (const std::string producer = rules::FusableReduction(sch, *st); !producer.empty()) {
      // An epilogue over one reduction (conv2d + bias + relu): one output per thread, the
      // reduction computed in a register at that thread.
      TESSEL_RETURN_IF_ERROR(rules::BindOnePerThread(&s, fused, producer));
    } else {
      TESSEL_ASSIGN_OR_RETURN(IntRV threads,
                              rules::SampleUniform(&s, rules::PowersOfTwo(32, 1024), extent));
      TESSEL_ASSIGN_OR_RETURN(IntRV vec, rules::SampleUniform(&s, {1, 2, 4}, extent));
      TESSEL_ASSIGN_OR_RETURN(auto p, s.Split(fused, {-1, threads, vec}));
      TESSEL_RETURN_IF_ERROR(s.Bind(p[0], "blockIdx.x"));
      TESSEL_RETURN_IF_ERROR(s.Bind(p[1], "threadIdx.x"));
      TESSEL_RETURN_IF_ERROR(s.Vectorize(p[2]));
    }
    return std::vector<Schedule>{std::move(s)};
  }

 private:
  Target target_;
};

}  // namespace

std::unique_ptr<ScheduleRule> MakeAutoBind(const Target& target) {
  return std::make_unique<AutoBind>(target);
}

}  // namespace tessel::schedules
