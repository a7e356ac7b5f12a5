#include "schedules/schedule/stage.h"

#include <algorithm>

namespace tessel::schedules {

int Stage::LeafPosition(int iter) const {
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (leaves[i] == iter) return static_cast<int>(i);
  }
  return -1;
}

void Stage::PropagateExtents() {
  for (const IterRelation& r : relations) {
    if (r.kind == IterRelation::Kind::kSplit) {
      const int64_t parent = iters[r.parent].extent;
      iters[r.inner].extent = std::min(r.factor, parent);
      const int64_t outer = (parent + r.factor - 1) / r.factor;
      iters[r.outer].extent = outer;
    } else {
      iters[r.fused].extent = iters[r.outer].extent * iters[r.inner].extent;
    }
  }
}

std::vector<Expr> Stage::IterValues() const {
  std::vector<Expr> v(iters.size());
  for (int leaf : leaves) v[leaf] = iters[leaf].var;
  for (auto it = relations.rbegin(); it != relations.rend(); ++it) {
    const IterRelation& r = *it;
    if (r.kind == IterRelation::Kind::kSplit) {
      v[r.parent] = v[r.outer] * r.factor + v[r.inner];
    } else {
      const int64_t inner_extent = iters[r.inner].extent;
      v[r.outer] = v[r.fused] / inner_extent;
      v[r.inner] = v[r.fused] % inner_extent;
    }
  }
  return v;
}

}  // namespace tessel::schedules
