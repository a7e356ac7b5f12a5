#include "schedules/schedule/stage.h"

#include <algorithm>

#include "schedules/ir/structural.h"
#include "schedules/ir/substitute.h"

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
      // The inner loop keeps its factor even when the parent shrank below it (a compute_at
      // region smaller than the tile): thread extents stay what the schedule asked for, and the
      // guards cover the difference.
      iters[r.inner].extent = r.factor;
      const int64_t outer = (parent + r.factor - 1) / r.factor;
      iters[r.outer].extent = std::max(outer, r.outer_min);
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

bool ReadsAtIdentity(const Stage& s, const Buffer* b) {
  const std::vector<const LoadNode*> loads = CollectLoads(s.body, b);
  if (loads.empty()) return false;
  for (const LoadNode* l : loads) {
    if (l->indices.size() != s.axes.size()) return false;
    for (size_t i = 0; i < s.axes.size(); ++i) {
      if (l->indices[i].get() != s.axes[i].get()) return false;
    }
  }
  return true;
}

Expr MakeTuple(std::vector<Expr> values) {
  const DType t = values[0]->dtype;
  return MakeCall("tuple", std::move(values), t);
}

const std::vector<Expr>& TupleValues(const Expr& body) {
  static const std::vector<Expr>* const kNone = new std::vector<Expr>();
  const auto* call = As<CallNode>(body);
  return call != nullptr && call->name == "tuple" ? call->args : *kNone;
}

}  // namespace tessel::schedules
