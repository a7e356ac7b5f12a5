#include "schedules/rules/schedule_rule.h"

namespace tessel::schedules {

std::vector<std::unique_ptr<ScheduleRule>> DefaultRules(const Target& target) {
  std::vector<std::unique_ptr<ScheduleRule>> r;
  r.push_back(MakeAutoInline());
  r.push_back(MakeMultiLevelTilingTensorCore(target));
  r.push_back(MakeSkinnyContraction(target));
  r.push_back(MakeMultiLevelTiling(target));
  r.push_back(MakeCrossThreadReduction(target));
  r.push_back(MakeAutoBind(target));
  r.push_back(MakeUnroll(target));
  return r;
}

}  // namespace tessel::schedules
