// Loop transformations: split, fuse and reorder the leaf loops of one stage.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/schedule/instruction_table.h"
#include "schedules/schedule/primitive/common.h"
#include "schedules/schedule/primitive/register.h"
#include "schedules/schedule/schedule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

constexpr char kSplit[] = "split";
constexpr char kFuse[] = "fuse";
constexpr char kReorder[] = "reorder";

}  // namespace

absl::StatusOr<std::vector<LoopRV>> Schedule::Split(LoopRV loop,
                                                    const std::vector<Factor>& factors) {
  const char* prim = kSplit;
  auto l = MutableLoop(loop, prim);
  if (!l.ok()) return l.status();
  auto [s, iter] = *l;
  const int64_t extent = s->iters[iter].extent;
  if (factors.size() < 2) {
    return Invalid(prim, absl::StrCat("needs at least two factors to split ", LoopDesc(*s, iter)));
  }
  std::vector<int64_t> f;
  int inferred = -1;
  for (size_t i = 0; i < factors.size(); ++i) {
    int64_t v = factors[i].rv.id >= 0 ? Value(factors[i].rv) : factors[i].value;
    if (v == -1 && factors[i].rv.id < 0) {
      if (inferred >= 0) {
        return Invalid(prim, absl::StrCat("at most one factor may be -1 (inferred) when splitting ",
                                          LoopDesc(*s, iter)));
      }
      inferred = static_cast<int>(i);
      v = 1;
    } else if (v <= 0) {
      return Invalid(
          prim, absl::StrCat("factor ", v, " is not positive; cannot split ", LoopDesc(*s, iter)));
    }
    f.push_back(v);
  }
  int64_t prod = 1;
  for (int64_t v : f) prod *= v;
  if (inferred >= 0) {
    f[inferred] = (extent + prod - 1) / prod;
    prod *= f[inferred];
  }
  if (prod < extent) {
    return Invalid(prim, absl::StrCat("factors [", absl::StrJoin(f, ", "), "] multiply to ", prod,
                                      ", less than the extent ", extent, " of ", LoopDesc(*s, iter),
                                      "; use -1 for one factor to infer it"));
  }
  if (s->iters[iter].thread != ThreadTag::kNone || s->iters[iter].kind != ForKind::kSerial) {
    return Precondition(
        prim, absl::StrCat(LoopDesc(*s, iter), " is already ", ForKindName(s->iters[iter].kind),
                           "; split before binding or annotating it"));
  }
  // A chain of binary splits: iter -> (o0, rest0), rest0 -> (o1, rest1), ...
  const std::string base = s->iters[iter].var->name;
  const bool reduce = s->iters[iter].reduce;
  std::vector<int> outs;
  int cur = iter;
  int64_t inner_prod = prod / f[0];
  for (size_t i = 0; i + 1 < f.size(); ++i) {
    IterRelation r;
    r.kind = IterRelation::Kind::kSplit;
    r.parent = cur;
    r.factor = inner_prod;
    r.outer_min = f[i];
    IterVar outer{MakeVar(NewVarName(*s, absl::StrCat(base, "_", i))), 0, reduce};
    s->iters.push_back(outer);
    r.outer = static_cast<int>(s->iters.size()) - 1;
    IterVar inner{MakeVar(i + 2 == f.size() ? NewVarName(*s, absl::StrCat(base, "_", i + 1))
                                            : NewVarName(*s, absl::StrCat(base, "_r", i))),
                  0, reduce};
    s->iters.push_back(inner);
    r.inner = static_cast<int>(s->iters.size()) - 1;
    s->relations.push_back(r);
    outs.push_back(r.outer);
    cur = r.inner;
    if (i + 2 < f.size()) inner_prod /= f[i + 1];
  }
  outs.push_back(cur);
  // Each outer loop keeps its requested factor (it may exceed ceil(extent / rest): extra
  // iterations are guarded like a tail), here and whenever extents are propagated again.
  s->PropagateExtents();
  // Replace the leaf by the new loops.
  const int pos = s->LeafPosition(iter);
  s->leaves.erase(s->leaves.begin() + pos);
  s->leaves.insert(s->leaves.begin() + pos, outs.begin(), outs.end());

  Instruction inst{prim, {RVName(loop.id)}, {}, {}, {}};
  RecordFactors(factors, &inst);
  std::vector<LoopRV> result;
  for (int o : outs) {
    result.push_back(LoopRV{static_cast<int>(rvs_.size())});
    inst.outputs.push_back(NewLoopRV(*s, o));
  }
  Record(std::move(inst));
  return result;
}

absl::StatusOr<LoopRV> Schedule::Fuse(const std::vector<LoopRV>& loops) {
  const char* prim = kFuse;
  if (loops.size() < 2) return Invalid(prim, "needs at least two loops");
  Stage* s = nullptr;
  std::vector<int> iters;
  for (LoopRV l : loops) {
    auto r = MutableLoop(l, prim);
    if (!r.ok()) return r.status();
    if (s && r->first != s) {
      return Invalid(prim, absl::StrCat("loops of different stages (", s->name, " and ",
                                        r->first->name, ") cannot be fused"));
    }
    s = r->first;
    iters.push_back(r->second);
  }
  const int first = s->LeafPosition(iters[0]);
  for (size_t i = 0; i < iters.size(); ++i) {
    if (s->LeafPosition(iters[i]) != first + static_cast<int>(i)) {
      return Invalid(
          prim, absl::StrCat("loops must be adjacent and outermost first; ", LoopDesc(*s, iters[i]),
                             " is not right inside ", LoopDesc(*s, iters[i ? i - 1 : 0])));
    }
    const IterVar& iv = s->iters[iters[i]];
    if (iv.reduce != s->iters[iters[0]].reduce) {
      return Invalid(prim, absl::StrCat("cannot fuse reduction and spatial loops (",
                                        LoopDesc(*s, iters[0]), ", ", LoopDesc(*s, iters[i]), ")"));
    }
    if (iv.thread != ThreadTag::kNone || iv.kind != ForKind::kSerial) {
      return Precondition(prim, absl::StrCat(LoopDesc(*s, iters[i]), " is already ",
                                             ForKindName(iv.kind), "; fuse before binding"));
    }
  }
  // Fuse pairwise from the outside in.
  std::string name = s->iters[iters[0]].var->name;
  int cur = iters[0];
  for (size_t i = 1; i < iters.size(); ++i) {
    name = absl::StrCat(name, "_", s->iters[iters[i]].var->name);
    IterRelation r;
    r.kind = IterRelation::Kind::kFuse;
    r.outer = cur;
    r.inner = iters[i];
    IterVar fused{MakeVar(NewVarName(*s, i + 1 == iters.size() ? name + "_f" : name + "_p")), 0,
                  s->iters[cur].reduce};
    s->iters.push_back(fused);
    r.fused = static_cast<int>(s->iters.size()) - 1;
    s->relations.push_back(r);
    cur = r.fused;
  }
  s->PropagateExtents();
  s->leaves.erase(s->leaves.begin() + first, s->leaves.begin() + first + iters.size());
  s->leaves.insert(s->leaves.begin() + first, cur);
  Instruction inst{prim, {}, {}, {}, {}};
  for (LoopRV l : loops) inst.inputs.push_back(RVName(l.id));
  LoopRV out{static_cast<int>(rvs_.size())};
  inst.outputs.push_back(NewLoopRV(*s, cur));
  Record(std::move(inst));
  return out;
}

absl::Status Schedule::Reorder(const std::vector<LoopRV>& loops) {
  const char* prim = kReorder;
  if (loops.empty()) return Invalid(prim, "needs at least one loop");
  Stage* s = nullptr;
  std::vector<int> iters, positions;
  for (LoopRV l : loops) {
    auto r = MutableLoop(l, prim);
    if (!r.ok()) return r.status();
    if (s && r->first != s) {
      return Invalid(prim, absl::StrCat("loops of different stages (", s->name, " and ",
                                        r->first->name, ") cannot be reordered together"));
    }
    s = r->first;
    if (std::find(iters.begin(), iters.end(), r->second) != iters.end()) {
      return Invalid(prim, absl::StrCat(LoopDesc(*s, r->second), " appears twice"));
    }
    iters.push_back(r->second);
    positions.push_back(s->LeafPosition(r->second));
  }
  std::sort(positions.begin(), positions.end());
  for (size_t i = 0; i < iters.size(); ++i) s->leaves[positions[i]] = iters[i];
  Instruction inst{prim, {}, {}, {}, {}};
  for (LoopRV l : loops) inst.inputs.push_back(RVName(l.id));
  Record(std::move(inst));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Instruction table entries.

namespace {

absl::Status ApplySplit(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(LoopRV loop, in.Loop(0));
  TESSEL_ASSIGN_OR_RETURN(std::vector<Factor> factors, in.AttrFactors("factors", 1));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> r, in.schedule().Split(loop, factors));
  return in.BindOutputs(r);
}

absl::Status ApplyFuse(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> loops, in.LoopsFrom(0));
  TESSEL_ASSIGN_OR_RETURN(LoopRV r, in.schedule().Fuse(loops));
  return in.BindOutput(r);
}

absl::Status ApplyReorder(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> loops, in.LoopsFrom(0));
  return in.schedule().Reorder(loops);
}

}  // namespace

void RegisterLoopTransformationInstructions(InstructionTable* table) {
  table->Register(kSplit, ApplySplit);
  table->Register(kFuse, ApplyFuse);
  table->Register(kReorder, ApplyReorder);
}

}  // namespace tessel::schedules
