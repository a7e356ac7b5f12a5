#include "schedules/lower/lowering_state.h"

#include <algorithm>
#include <cctype>

namespace tessel::schedules {

bool LoweringState::IsKernelRoot(int si) const {
  const Stage& s = stages[si];
  return !s.inlined() && s.computed_by.empty() && s.attach.kind == AttachPoint::Kind::kRoot;
}

std::vector<int> LoweringState::KernelStages(int root) const {
  std::vector<int> out;
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& s = stages[i];
    if (s.inlined() || !s.computed_by.empty()) continue;
    if (KernelRootIndex(stages, static_cast<int>(i)) == root) out.push_back(static_cast<int>(i));
  }
  return out;
}

bool LoweringState::WritesAcrossBlocks(int si) const {
  const Stage& s = stages[si];
  if (s.attach.kind != AttachPoint::Kind::kAt || s.buffer->scope != MemScope::kGlobal) {
    return false;
  }
  return std::any_of(s.leaves.begin(), s.leaves.end(),
                     [&](int leaf) { return IsBlockTag(s.iters[leaf].thread); });
}

int64_t BlockDim(const LaunchConfig& launch, ThreadTag t) {
  switch (t) {
    case ThreadTag::kThreadX:
      return launch.block[0];
    case ThreadTag::kThreadY:
      return launch.block[1];
    case ThreadTag::kThreadZ:
      return launch.block[2];
    case ThreadTag::kClusterX:
      return launch.cluster;
    default:
      return 1;
  }
}

std::string SanitizeName(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return out;
}

}  // namespace tessel::schedules
