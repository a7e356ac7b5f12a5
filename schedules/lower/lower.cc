#include "schedules/lower/lower.h"

#include <algorithm>

namespace tessel::schedules {

absl::StatusOr<Program> Lower(const Schedule& schedule, const Target& target,
                              const AfterPassFn& after_pass) {
  LoweringState state(schedule, target, /*wide_accumulation=*/false);
  return RunLoweringPasses(&state, after_pass);
}

absl::StatusOr<Schedule> ReferenceSchedule(const Workload& workload, const Target& target) {
  auto sch = Schedule::Create(workload);
  if (!sch.ok()) return sch.status();
  if (!target.is_cuda()) return sch;
  std::vector<std::string> names;
  for (const Stage& s : sch->stages()) names.push_back(s.name);
  for (const std::string& name : names) {
    auto b = sch->GetBlock(name);
    if (!b.ok()) return b.status();
    auto loops = sch->GetLoops(*b);
    if (!loops.ok()) return loops.status();
    std::vector<LoopRV> spatial;
    for (LoopRV l : *loops) {
      if (!sch->LoopStage(l).iters[sch->LoopIter(l)].reduce) spatial.push_back(l);
    }
    if (spatial.empty()) continue;
    LoopRV fused = spatial[0];
    if (spatial.size() > 1) {
      auto f = sch->Fuse(spatial);
      if (!f.ok()) return f.status();
      fused = *f;
    }
    const int64_t threads = std::min<int64_t>(256, sch->LoopExtent(fused));
    auto parts = sch->Split(fused, {-1, threads});
    if (!parts.ok()) return parts.status();
    if (auto st = sch->Bind((*parts)[0], "blockIdx.x"); !st.ok()) return st;
    if (auto st = sch->Bind((*parts)[1], "threadIdx.x"); !st.ok()) return st;
  }
  return sch;
}

absl::StatusOr<Program> LowerReference(const Workload& workload, const Target& target,
                                       const AfterPassFn& after_pass) {
  auto sch = ReferenceSchedule(workload, target);
  if (!sch.ok()) return sch.status();
  LoweringState state(*sch, target, /*wide_accumulation=*/true);
  return RunLoweringPasses(&state, after_pass);
}

}  // namespace tessel::schedules
