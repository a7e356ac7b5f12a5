// Reductions: decompose_reduction (the initialization in its own loop nest) and rfactor (partial
// results over one split of a reduction axis, in a stage of their own).

#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/ir/substitute.h"
#include "schedules/schedule/instruction_table.h"
#include "schedules/schedule/primitive/common.h"
#include "schedules/schedule/primitive/register.h"
#include "schedules/schedule/schedule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

constexpr char kDecomposeReduction[] = "decompose_reduction";
constexpr char kRFactor[] = "rfactor";

}  // namespace

absl::Status Schedule::DecomposeReduction(BlockRV block, LoopRV loop) {
  const char* prim = kDecomposeReduction;
  TESSEL_ASSIGN_OR_RETURN(StageAndLoop sl, MutableStageAndLoop(block, loop, prim));
  auto [s, t, iter] = sl;
  if (t != s) {
    return Invalid(prim, absl::StrCat(LoopDesc(*t, iter), " is not a loop of stage ", s->name));
  }
  if (!s->reduces()) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " is not a reduction"));
  }
  if (s->combiner) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is a tuple reduction, whose components stay in "
                                           "registers around its reduction loops; keep its "
                                           "spatial loops outside them"));
  }
  const int pos = s->LeafPosition(iter);
  for (int p = 0; p < pos; ++p) {
    if (s->iters[s->leaves[p]].reduce) {
      return Precondition(prim, absl::StrCat("reduction ", LoopDesc(*s, s->leaves[p]),
                                             " is outside ", LoopDesc(*s, iter),
                                             "; the initialization must come before every "
                                             "reduction loop"));
    }
  }
  s->init_at = iter;
  Record(Instruction{prim, {RVName(block.id), RVName(loop.id)}, {}, {}, {}});
  return absl::OkStatus();
}
absl::StatusOr<BlockRV> Schedule::RFactor(LoopRV loop, int factor_axis) {
  const char* prim = kRFactor;
  auto l = MutableLoop(loop, prim);
  if (!l.ok()) return l.status();
  auto [s, iter] = *l;
  if (!s->reduces() || !s->iters[iter].reduce) {
    return Invalid(prim, absl::StrCat(LoopDesc(*s, iter), " is not a reduction loop"));
  }
  const int naxes = static_cast<int>(s->axes.size());
  if (factor_axis < -1 || factor_axis > naxes) {
    return Invalid(prim,
                   absl::StrCat("factor_axis ", factor_axis, " is out of range for stage ", s->name,
                                " of ", naxes, " axes (0 to ", naxes, ", or -1 for the last)"));
  }
  const int fpos = factor_axis < 0 ? naxes : factor_axis;
  if (s->attach.kind != AttachPoint::Kind::kRoot) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " is attached; rfactor it first"));
  }
  // Supported form: the loop is one side of a single split of a reduction root, both sides
  // leaves; other relations may exist on spatial iters only.
  const IterRelation* split = nullptr;
  for (const IterRelation& r : s->relations) {
    if (r.kind == IterRelation::Kind::kSplit && (r.outer == iter || r.inner == iter)) split = &r;
  }
  if (!split || split->parent >= s->num_root() || s->LeafPosition(split->outer) < 0 ||
      s->LeafPosition(split->inner) < 0) {
    return Precondition(prim, absl::StrCat(LoopDesc(*s, iter),
                                           " must come from one split of a reduction axis "
                                           "(split it in two, then rfactor one side)"));
  }
  for (const IterRelation& r : s->relations) {
    if (&r == split) continue;
    const int touched = r.kind == IterRelation::Kind::kSplit ? r.parent : r.outer;
    if (s->iters[touched].reduce) {
      return Precondition(prim, absl::StrCat("stage ", s->name,
                                             " has other transformed reduction loops; rfactor "
                                             "supports one split of one reduction axis"));
    }
  }
  const int root = split->parent;
  const int other = split->outer == iter ? split->inner : split->outer;
  const int64_t root_extent = s->iters[root].extent;
  const int64_t factor = split->factor;
  const int64_t f_extent = s->iters[iter].extent;
  const int64_t o_extent = s->iters[other].extent;

  // New stage: rf[axes..., f] = reduce over (other, remaining reduce roots) of body.
  Stage rf;
  rf.name = UniqueStageName(absl::StrCat(s->name, "_rf"));
  std::vector<int64_t> shape = s->buffer->shape;
  shape.insert(shape.begin() + fpos, f_extent);
  // A tuple reduction's partials: one stage a component (the first leads, the others follow it),
  // but for the components every chunk has alike (UniformComponents: the count of a chunk that
  // divides the axis), which the stage reading the partials takes as constants.
  const CombinerPtr& comb = s->combiner;
  std::vector<Expr> uniform(comb ? comb->size() : 0);
  if (comb && f_extent * o_extent == root_extent) {
    int64_t chunk = o_extent;
    for (size_t r = 0; r < s->reduce_axes.size(); ++r) {
      const int id = static_cast<int>(s->axes.size() + r);
      if (id != root) chunk *= s->iters[id].extent;
    }
    uniform = FoldUniform(*comb, TupleValues(s->body), chunk);
    if (std::all_of(uniform.begin(), uniform.end(), [](const Expr& e) { return e != nullptr; })) {
      uniform.assign(comb->size(), nullptr);  // all constant: keep the stages
    }
  }
  std::vector<size_t> stored;  // the components with a stage of partials
  for (size_t c = 0; comb && c < comb->size(); ++c) {
    if (!uniform[c]) stored.push_back(c);
  }
  rf.buffer = MakeBuffer(rf.name, comb ? comb->type(stored[0]) : s->buffer->dtype, shape,
                         MemScope::kGlobal);
  std::vector<Stage> components;
  std::vector<BufferPtr> partial_buffers(comb ? comb->size() : 0);
  if (comb) {
    rf.outputs.push_back({rf.name, comb->lhs[stored[0]]});
    partial_buffers[stored[0]] = rf.buffer;
  }
  for (size_t i = 1; i < stored.size(); ++i) {
    const size_t c = stored[i];
    Stage m;
    m.name = UniqueStageName(absl::StrCat(rf.name, "_", comb->lhs[c]->name));
    m.buffer = MakeBuffer(m.name, comb->type(c), shape, MemScope::kGlobal);
    m.origin = kRFactor;
    rf.outputs.push_back({m.name, comb->lhs[c]});
    partial_buffers[c] = m.buffer;
    components.push_back(std::move(m));
  }
  std::unordered_map<const VarNode*, Expr> map;
  for (const VarPtr& a : s->axes) {
    rf.axes.push_back(MakeVar(a->name));
    map[a.get()] = rf.axes.back();
  }
  VarPtr fv = MakeVar(s->iters[iter].var->name);
  rf.axes.insert(rf.axes.begin() + fpos, fv);
  VarPtr ov = MakeVar(s->iters[other].var->name);
  rf.reduce_axes.push_back(ov);
  std::vector<int64_t> rext = {o_extent};
  for (size_t r = 0; r < s->reduce_axes.size(); ++r) {
    const int id = static_cast<int>(s->axes.size() + r);
    if (id == root) continue;
    rf.reduce_axes.push_back(MakeVar(s->reduce_axes[r]->name));
    map[s->reduce_axes[r].get()] = rf.reduce_axes.back();
    rext.push_back(s->iters[id].extent);
  }
  Expr outer = split->outer == iter ? Expr(fv) : Expr(ov);
  Expr inner = split->outer == iter ? Expr(ov) : Expr(fv);
  Expr k = outer * factor + inner;
  map[s->iters[root].var.get()] = k;
  Expr body = Substitute(s->body, map);
  if (f_extent * o_extent != root_extent) {
    // The chunks overhang the axis: the points beyond it contribute the identity.
    auto guard = [&](const Expr& v, const Expr& identity) {
      return MakeSelect(k < root_extent, v, identity);
    };
    if (s->combiner) {
      std::vector<Expr> values;
      for (size_t c = 0; c < s->combiner->size(); ++c) {
        values.push_back(guard(TupleValues(body)[c], s->combiner->identity[c]));
      }
      body = MakeTuple(values);
    } else {
      body = guard(body, ReduceIdentity(*s->reduce, body->dtype));
    }
  }
  rf.body = body;
  rf.reduce = s->reduce;
  rf.combiner = s->combiner;
  for (size_t d = 0; d < rf.axes.size(); ++d) rf.iters.push_back(IterVar{rf.axes[d], shape[d]});
  for (size_t r = 0; r < rf.reduce_axes.size(); ++r) {
    IterVar iv{rf.reduce_axes[r], rext[r]};
    iv.reduce = true;
    rf.iters.push_back(iv);
  }
  rf.leaves.resize(rf.iters.size());
  std::iota(rf.leaves.begin(), rf.leaves.end(), 0);
  rf.origin = kRFactor;
  rf.annotations = s->annotations;

  // The stage reduces the partials: s[axes] = reduce over f of rf[axes, f].
  VarPtr sv = MakeVar(s->iters[iter].var->name);
  std::vector<Expr> idx(s->axes.begin(), s->axes.end());
  idx.insert(idx.begin() + fpos, sv);
  if (comb) {
    std::vector<Expr> partials;
    for (size_t c = 0; c < comb->size(); ++c) {
      partials.push_back(uniform[c] ? uniform[c] : MakeLoad(partial_buffers[c], idx));
    }
    s->body = MakeTuple(partials);
  } else {
    s->body = MakeLoad(rf.buffer, idx);
  }
  s->reduce_axes = {sv};
  std::vector<int64_t> ext(s->buffer->shape.begin(), s->buffer->shape.end());
  ext.push_back(f_extent);
  s->iters.resize(s->axes.size());
  IterVar riv{sv, f_extent};
  riv.reduce = true;
  s->iters.push_back(riv);
  ResetLoops(s, ext);
  MirrorMembers(*s);
  const int at = StageIndex(s->name);
  stages_.insert(stages_.begin() + at, std::move(rf));
  stages_.insert(stages_.begin() + at + 1, std::make_move_iterator(components.begin()),
                 std::make_move_iterator(components.end()));
  MirrorMembers(stages_[at]);
  const std::string name = stages_[at].name;
  BlockRV out{static_cast<int>(rvs_.size())};
  Instruction inst{prim, {RVName(loop.id)}, {}, {NewRV('b', {0, name})}, {}};
  if (factor_axis >= 0) inst.attrs["factor_axis"] = factor_axis;  // absent: the last
  Record(std::move(inst));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Instruction table entries.

namespace {

absl::Status ApplyRFactor(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(LoopRV loop, in.Loop(0));
  int factor_axis = -1;
  if (in.attrs().is_object() && in.attrs().contains("factor_axis")) {
    TESSEL_ASSIGN_OR_RETURN(factor_axis, in.AttrInt32("factor_axis"));
  }
  TESSEL_ASSIGN_OR_RETURN(BlockRV r, in.schedule().RFactor(loop, factor_axis));
  return in.BindOutput(r);
}

}  // namespace

void RegisterReductionInstructions(InstructionTable* table) {
  table->Register(kDecomposeReduction, ApplyBlockLoopPrimitive<&Schedule::DecomposeReduction>);
  table->Register(kRFactor, ApplyRFactor);
}

}  // namespace tessel::schedules
