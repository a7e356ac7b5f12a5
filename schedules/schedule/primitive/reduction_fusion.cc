// fuse_reductions: several reductions over one domain computed as one tuple reduction
// (Stage::combiner, schedules/ir/combiner.h), in one pass over their input. The combiner comes
// from what the reductions compute: online softmax, Welford, or independent reductions side by
// side (Schedule::FuseReductions).

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/ir/structural.h"
#include "schedules/ir/substitute.h"
#include "schedules/schedule/instruction_table.h"
#include "schedules/schedule/primitive/common.h"
#include "schedules/schedule/primitive/register.h"
#include "schedules/schedule/schedule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

constexpr char kFuseReductions[] = "fuse_reductions";
// Instructions of older traces: fuse_online_max replays as fuse_reductions; the centred
// partials that fuse_reductions with rfactor replaced do not replay.
constexpr char kFuseOnlineMax[] = "fuse_online_max";
constexpr char kCenterPartials[] = "center_partials";
constexpr char kFuseCenteredSum[] = "fuse_centered_sum";

// The reductions as one tuple reduction: the combiner, the value of each reduction point for each
// component, and each reduction's value from the components (in the order given).
struct TupleForm {
  CombinerPtr combiner;
  std::vector<Expr> values;
  std::vector<Expr> outputs;
};

// The member reductions, their bodies over the first one's variables.
struct Members {
  std::vector<const Stage*> stages;
  std::vector<Expr> bodies;
  std::vector<Expr> axes;  // the first one's spatial axes, as load indices
};

// Whether `l` reads member `m` at the reduction's own indices.
bool LoadsAtAxes(const LoadNode* l, const Stage& m, const Members& ms) {
  if (l == nullptr || l->buffer.get() != m.buffer.get()) return false;
  if (l->indices.size() != ms.axes.size()) return false;
  for (size_t d = 0; d < ms.axes.size(); ++d) {
    if (l->indices[d].get() != ms.axes[d].get()) return false;
  }
  return true;
}

// max m of e and sum of exp(e - m): (m, s) with an element (e, 1).
std::optional<TupleForm> MatchOnlineSoftmax(const Members& ms) {
  if (ms.stages.size() != 2) return std::nullopt;
  for (int mx = 0; mx < 2; ++mx) {
    const int sm = 1 - mx;
    const Stage& m = *ms.stages[mx];
    const Stage& s = *ms.stages[sm];
    if (m.reduce != ReduceOp::kMax || s.reduce != ReduceOp::kSum || !IsFloat(s.buffer->dtype) ||
        m.buffer->dtype != s.buffer->dtype) {
      continue;
    }
    const auto* call = As<CallNode>(ms.bodies[sm]);
    if (!call || call->name != "exp" || call->args.size() != 1) continue;
    const auto* diff = As<BinaryNode>(call->args[0]);
    if (!diff || diff->op != BinaryOp::kSub || !LoadsAtAxes(As<LoadNode>(diff->b), m, ms) ||
        !Identical(diff->a, ms.bodies[mx])) {
      continue;
    }
    const DType t = s.buffer->dtype;
    TupleForm f;
    f.combiner = OnlineSoftmaxCombiner(t);
    f.values = {ms.bodies[mx], MakeFloat(1, t)};
    f.outputs.resize(2);
    f.outputs[mx] = f.combiner->lhs[0];
    f.outputs[sm] = f.combiner->lhs[1];
    return f;
  }
  return std::nullopt;
}

// sum S of e and sum of (e - S / N)^2, N the reduction's extent: (n, mean, m2) with an element
// (1, e, 0); S = n * mean.
std::optional<TupleForm> MatchVariance(const Members& ms, int64_t extent) {
  if (ms.stages.size() != 2) return std::nullopt;
  for (int su = 0; su < 2; ++su) {
    const int sq = 1 - su;
    const Stage& s = *ms.stages[su];
    const Stage& q = *ms.stages[sq];
    if (s.reduce != ReduceOp::kSum || q.reduce != ReduceOp::kSum || !IsFloat(s.buffer->dtype) ||
        s.buffer->dtype != q.buffer->dtype) {
      continue;
    }
    const auto* mul = As<BinaryNode>(ms.bodies[sq]);
    const auto* dev = mul ? As<BinaryNode>(mul->a) : nullptr;
    if (!mul || mul->op != BinaryOp::kMul || !dev || dev->op != BinaryOp::kSub ||
        !Identical(mul->a, mul->b) || !Identical(dev->a, ms.bodies[su])) {
      continue;
    }
    const auto* mean = As<BinaryNode>(dev->b);
    const auto* n = mean ? As<FloatImmNode>(mean->b) : nullptr;
    if (!mean || mean->op != BinaryOp::kDiv || !n || n->value != static_cast<double>(extent) ||
        !LoadsAtAxes(As<LoadNode>(mean->a), s, ms)) {
      continue;
    }
    const DType t = s.buffer->dtype;
    TupleForm f;
    f.combiner = WelfordCombiner(t);
    f.values = {MakeFloat(1, t), ms.bodies[su], MakeFloat(0, t)};
    f.outputs.resize(2);
    f.outputs[su] = f.combiner->lhs[0] * f.combiner->lhs[1];
    f.outputs[sq] = f.combiner->lhs[2];
    return f;
  }
  return std::nullopt;
}

// Reductions that do not read each other: their ops side by side.
TupleForm Componentwise(const Members& ms) {
  std::vector<std::pair<ReduceOp, DType>> ops;
  for (size_t i = 0; i < ms.stages.size(); ++i) {
    ops.push_back({*ms.stages[i]->reduce, ms.bodies[i]->dtype});
  }
  TupleForm f;
  f.combiner = ComponentwiseCombiner(ops);
  f.values = ms.bodies;
  for (size_t i = 0; i < ms.stages.size(); ++i) f.outputs.push_back(f.combiner->lhs[i]);
  return f;
}

}  // namespace

absl::Status Schedule::FuseReductions(const std::vector<BlockRV>& blocks) {
  const char* prim = kFuseReductions;
  if (blocks.size() < 2) return Invalid(prim, "needs at least two reduction stages");
  std::vector<Stage*> ss;
  for (BlockRV b : blocks) {
    TESSEL_ASSIGN_OR_RETURN(Stage * s, MutableStage(b, prim));
    for (const Stage* o : ss) {
      if (o == s) return Invalid(prim, absl::StrCat("stage ", s->name, " is given twice"));
    }
    ss.push_back(s);
  }
  const Stage& lead = *ss[0];
  Members ms;
  ms.axes.assign(lead.axes.begin(), lead.axes.end());
  int64_t extent = 1;
  for (size_t r = 0; r < lead.reduce_axes.size(); ++r)
    extent *= lead.iters[lead.axes.size() + r].extent;
  for (size_t i = 0; i < ss.size(); ++i) {
    const Stage& s = *ss[i];
    if (!s.reduce) {
      return Precondition(prim,
                          absl::StrCat("stage ", s.name, " is not a plain reduction",
                                       s.combiner ? " (it is a tuple reduction already)" : ""));
    }
    if (s.buffer->shape != lead.buffer->shape || s.reduce_axes.size() != lead.reduce_axes.size()) {
      return Precondition(prim, absl::StrCat("stages ", lead.name, " and ", s.name,
                                             " do not have the same shape and reduction axes"));
    }
    std::unordered_map<const VarNode*, Expr> map;
    for (size_t d = 0; d < s.axes.size(); ++d) map[s.axes[d].get()] = lead.axes[d];
    for (size_t r = 0; r < s.reduce_axes.size(); ++r) {
      const size_t id = s.axes.size() + r;
      if (s.iters[id].extent != lead.iters[id].extent) {
        return Precondition(prim, absl::StrCat("stages ", lead.name, " and ", s.name,
                                               " reduce over different extents"));
      }
      map[s.reduce_axes[r].get()] = lead.reduce_axes[r];
    }
    if (i > 0 && (s.attach.kind != AttachPoint::Kind::kRoot || !s.relations.empty())) {
      return Precondition(prim, absl::StrCat("stage ", s.name,
                                             " is scheduled already; fuse it before scheduling "
                                             "it (only the first stage may be scheduled)"));
    }
    if (const Stage* o = AttachedTo(s.name); i > 0 && o != nullptr) {
      return Precondition(prim, absl::StrCat("stage ", o->name, " is attached to a loop of ",
                                             s.name, "; move it first"));
    }
    ms.stages.push_back(&s);
    ms.bodies.push_back(Substitute(s.body, map));
  }
  // Which stages the members read, directly or through other computed stages.
  std::unordered_map<const Buffer*, bool> reads_member;
  std::function<bool(const Buffer*)> depends = [&](const Buffer* b) {
    for (const Stage* m : ms.stages) {
      if (m->buffer.get() == b) return true;
    }
    auto it = reads_member.find(b);
    if (it != reads_member.end()) return it->second;
    const Stage* p = FindStage(b->name);
    bool r = false;
    if (p != nullptr) {
      for (const LoadNode* l : CollectLoads(p->body)) r = r || depends(l->buffer.get());
    }
    return reads_member[b] = r;
  };
  bool dependent = false;
  for (const Expr& body : ms.bodies) {
    for (const LoadNode* l : CollectLoads(body)) dependent = dependent || depends(l->buffer.get());
  }
  std::optional<TupleForm> form;
  if (dependent) {
    form = MatchOnlineSoftmax(ms);
    if (!form) form = MatchVariance(ms, extent);
    if (!form) {
      std::vector<std::string> names;
      for (const Stage* s : ms.stages) names.push_back(s->name);
      return Precondition(
          prim, absl::StrCat("stages ", absl::StrJoin(names, ", "),
                             " read each other and are neither a max m of e with a sum of "
                             "exp(e - m) (online softmax) nor a sum S of e with a sum of "
                             "(e - S / N)^2 (a variance); inline what lies between them first"));
    }
  } else {
    form = Componentwise(ms);
  }
  // The tuple is computed where the first member was: nothing it reads may come later.
  int first = static_cast<int>(stages_.size());
  for (const Stage* s : ms.stages) first = std::min(first, StageIndex(s->name));
  for (const Expr& v : form->values) {
    for (const LoadNode* l : CollectLoads(v)) {
      if (StageIndex(l->buffer->name) > first) {
        return Precondition(prim, absl::StrCat("stage ", l->buffer->name, " that the reductions ",
                                               "read is computed after stage ", stages_[first].name,
                                               "; compute it before the first of them"));
      }
    }
  }
  // A scheduled first stage: the others' readers must see them where it is attached.
  if (lead.attach.kind == AttachPoint::Kind::kAt) {
    for (size_t i = 1; i < ms.stages.size(); ++i) {
      for (int c : Consumers(ms.stages[i]->buffer.get())) {
        const Stage& cs = stages_[c];
        if (&cs == &lead || cs.name == lead.attach.stage ||
            IsAttachedWithin(cs, lead.attach.stage)) {
          continue;
        }
        return Precondition(
            prim, absl::StrCat("stage ", cs.name, " reads ", ms.stages[i]->name, " outside stage ",
                               lead.attach.stage, ", where ", lead.name, " is computed"));
      }
    }
  }
  Stage* leader = ss[0];
  leader->body = MakeTuple(form->values);
  leader->reduce.reset();
  leader->combiner = form->combiner;
  leader->outputs.clear();
  for (size_t i = 0; i < ss.size(); ++i) leader->outputs.push_back({ss[i]->name, form->outputs[i]});
  // Stage order: the members, leader first, where the first of them was.
  std::vector<std::string> names;
  for (const Stage* s : ss) names.push_back(s->name);
  std::vector<Stage> moved;
  for (const std::string& n : names) {
    const int i = StageIndex(n);
    moved.push_back(std::move(stages_[i]));
    stages_.erase(stages_.begin() + i);
  }
  stages_.insert(stages_.begin() + first, std::make_move_iterator(moved.begin()),
                 std::make_move_iterator(moved.end()));
  MirrorMembers(stages_[first]);
  std::vector<std::string> inputs;
  for (BlockRV b : blocks) inputs.push_back(RVName(b.id));
  Record(Instruction{prim, inputs, {}, {}, {}});
  return absl::OkStatus();
}

void Schedule::MirrorMembers(const Stage& leader) {
  for (const std::string& name : leader.FusedStages()) {
    Stage& m = stages_[StageIndex(name)];
    std::unordered_map<const VarNode*, Expr> map;
    m.axes.clear();
    m.reduce_axes.clear();
    m.iters.clear();
    for (int r = 0; r < leader.num_root(); ++r) {
      const IterVar& iv = leader.iters[r];
      VarPtr v = MakeVar(iv.var->name, iv.var->dtype);
      map[iv.var.get()] = v;
      (iv.reduce ? m.reduce_axes : m.axes).push_back(v);
      IterVar copy{v, iv.extent};
      copy.reduce = iv.reduce;
      m.iters.push_back(copy);
    }
    m.relations.clear();
    m.leaves.clear();
    for (int r = 0; r < leader.num_root(); ++r) m.leaves.push_back(r);
    ++m.loop_generation;
    m.body = Substitute(leader.body, map);
    m.reduce.reset();
    m.combiner = leader.combiner;
    m.outputs.clear();
    m.computed_by = leader.name;
    m.attach = leader.attach;
  }
}

// ---------------------------------------------------------------------------------------------
// Instruction table entries.

namespace {

absl::Status ApplyFuseReductions(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(std::vector<BlockRV> blocks, in.BlocksFrom(0));
  return in.schedule().FuseReductions(blocks);
}

// fuse_online_max(sum): the sum leads, the max stage its exponent subtracts follows.
absl::Status ApplyFuseOnlineMax(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(BlockRV sum, in.Block(0));
  Schedule& s = in.schedule();
  const auto* call = As<CallNode>(s.GetStage(sum).body);
  const auto* diff = call && call->args.size() == 1 ? As<BinaryNode>(call->args[0]) : nullptr;
  const auto* max = diff ? As<LoadNode>(diff->b) : nullptr;
  if (max == nullptr) {
    return InstructionReader::Error(
        "its stage is no sum of exp(e - m); replay it on the schedule it was recorded on");
  }
  TESSEL_ASSIGN_OR_RETURN(BlockRV m, s.GetBlock(max->buffer->name));
  return s.FuseReductions({sum, m});
}

absl::Status ReplacedByFuseReductions(InstructionReader&) {
  return InstructionReader::Error(
      "the centred partials were replaced by fuse_reductions (a Welford tuple reduction, then "
      "rfactor); this trace comes from an older Tessel: tune the workload again");
}

}  // namespace

void RegisterReductionFusionInstructions(InstructionTable* table) {
  table->Register(kFuseReductions, ApplyFuseReductions);
  table->RegisterRetired(kFuseOnlineMax, ApplyFuseOnlineMax);
  table->RegisterRetired(kCenterPartials, ReplacedByFuseReductions);
  table->RegisterRetired(kFuseCenteredSum, ReplacedByFuseReductions);
}

}  // namespace tessel::schedules
