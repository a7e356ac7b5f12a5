// Fused reductions of two workloads: fuse_online_max (softmax's max and rescaled sum in one
// pass), center_partials and fuse_centered_sum (layernorm's chunk sums and centred squares, Chan
// et al.). One tuple reduction with a user-visible combiner is to replace all three.

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/ir/structural.h"
#include "schedules/ir/substitute.h"
#include "schedules/schedule/instruction_table.h"
#include "schedules/schedule/primitive/common.h"
#include "schedules/schedule/primitive/register.h"
#include "schedules/schedule/schedule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

constexpr char kFuseOnlineMax[] = "fuse_online_max";
constexpr char kCenterPartials[] = "center_partials";
constexpr char kFuseCenteredSum[] = "fuse_centered_sum";

}  // namespace

absl::Status Schedule::FuseOnlineMax(BlockRV block) {
  const char* prim = kFuseOnlineMax;
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  const std::string form = absl::StrCat(
      "; it must be a sum over k of exp(e(k) - m[axes]) where m is the max over k of e(k)");
  if (s->reduce != ReduceOp::kSum || !IsFloat(s->buffer->dtype)) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " is not a float sum", form));
  }
  if (!s->online_max.empty()) {
    return Precondition(prim,
                        absl::StrCat("stage ", s->name, " already computes stage ", s->online_max));
  }
  if (s->origin == "rfactor") {
    return Precondition(prim, absl::StrCat("stage ", s->name, " holds rfactor partials", form));
  }
  std::optional<ExpOfDifference> term = MatchExpOfDifference(s->body);
  const int mi = term ? StageIndex(term->max->buffer->name) : -1;
  if (mi < 0) {
    return Precondition(prim, absl::StrCat("the body of stage ", s->name,
                                           " is not exp(e - m[...]) of a computed m", form));
  }
  Stage* m = &stages_[mi];
  if (m->inlined() || m->reduce != ReduceOp::kMax || m->buffer.get() != term->max->buffer.get()) {
    return Precondition(prim, absl::StrCat("stage ", m->name, " read by stage ", s->name,
                                           " is not a max reduction", form));
  }
  if (!ReadsAtIdentity(*s, m->buffer.get()) || m->axes.size() != s->axes.size() ||
      m->buffer->shape != s->buffer->shape || m->reduce_axes.size() != s->reduce_axes.size()) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " must read ", m->name,
                                           " at its own indices, over the same reduction", form));
  }
  std::unordered_map<const VarNode*, Expr> map;
  for (size_t d = 0; d < m->axes.size(); ++d) map[m->axes[d].get()] = s->axes[d];
  for (size_t r = 0; r < m->reduce_axes.size(); ++r) {
    const int mr = static_cast<int>(m->axes.size() + r);
    const int sr = static_cast<int>(s->axes.size() + r);
    if (m->iters[mr].extent != s->iters[sr].extent) {
      return Precondition(prim, absl::StrCat("stages ", m->name, " and ", s->name,
                                             " reduce over different extents"));
    }
    map[m->reduce_axes[r].get()] = s->reduce_axes[r];
  }
  if (!Identical(Substitute(m->body, map), term->e)) {
    return Precondition(prim, absl::StrCat("stage ", m->name, " is not the max of the exponent ",
                                           "that stage ", s->name, " uses", form));
  }
  // Every other reader of m must run after s: it reads s too.
  for (int c : Consumers(m->buffer.get())) {
    const Stage& cs = stages_[c];
    if (&cs != s && !Reads(cs, s->buffer.get())) {
      return Precondition(prim, absl::StrCat("stage ", cs.name, " reads ", m->name, " but not ",
                                             s->name, ", so it could run before the fused pass"));
    }
  }
  TESSEL_RETURN_IF_ERROR(CheckFusable(*s, *m, prim));
  m->computed_by = s->name;
  s->online_max = m->name;
  SyncFused(*s);
  Record(Instruction{prim, {RVName(block.id)}, {}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::CheckFusable(const Stage& s, const Stage& m, const char* prim) const {
  // s's attachment must be a place where m is visible to all of m's other readers.
  for (int c : Consumers(m.buffer.get())) {
    const Stage& cs = stages_[c];
    if (&cs == &s) continue;
    if (s.attach.kind == AttachPoint::Kind::kAt && cs.name != s.attach.stage &&
        !IsAttachedWithin(cs, s.attach.stage)) {
      return Precondition(prim,
                          absl::StrCat("stage ", cs.name, " reads ", m.name, " outside stage ",
                                       s.attach.stage, ", where ", s.name, " is computed"));
    }
  }
  if (const Stage* o = AttachedTo(m.name)) {
    return Precondition(prim, absl::StrCat("stage ", o->name, " is attached to a loop of ", m.name,
                                           "; move it first"));
  }
  return absl::OkStatus();
}

absl::Status Schedule::FuseCenteredSum(BlockRV sq_block) {
  const char* prim = kFuseCenteredSum;
  auto qs = MutableStage(sq_block, prim);
  if (!qs.ok()) return qs.status();
  Stage* q = *qs;
  if (q->centered_on.empty()) {
    return Precondition(prim, absl::StrCat("stage ", q->name,
                                           " is not centred on the sums of its chunks; apply "
                                           "center_partials to it and its sum stage first"));
  }
  if (!q->centered_sum.empty()) {
    return Precondition(
        prim, absl::StrCat("stage ", q->name, " already computes stage ", q->centered_sum));
  }
  const int pi = StageIndex(q->centered_on);
  if (pi < 0 || stages_[pi].inlined() || !stages_[pi].computed_by.empty()) {
    return Precondition(prim, absl::StrCat("stage ", q->centered_on, " that stage ", q->name,
                                           " is centred on can no longer be scheduled"));
  }
  Stage* p = &stages_[pi];
  // q still squares deviations from p's chunk mean, read at q's own indices.
  const std::optional<CenteredSquare> sq = MatchCenteredSquare(q->body);
  if (!sq || CollectLoads(sq->m, p->buffer.get()).empty() ||
      !ReadsAtIdentity(*q, p->buffer.get())) {
    return Precondition(
        prim, absl::StrCat("stage ", q->name, " no longer squares deviations from ", p->name,
                           "'s chunk mean at its own indices; fuse "
                           "before caching ",
                           p->name, " for it"));
  }
  // p's other readers (the stage that sums it over chunks) run after q: later in stage order.
  const int qi = StageIndex(q->name);
  for (int c : Consumers(p->buffer.get())) {
    if (c != qi && c < qi) {
      return Precondition(
          prim, absl::StrCat("stage ", stages_[c].name, " reads ", p->name, " before stage ",
                             q->name, " runs, so it could not see the fused pass"));
    }
  }
  TESSEL_RETURN_IF_ERROR(CheckFusable(*q, *p, prim));
  p->computed_by = q->name;
  q->centered_sum = p->name;
  SyncFused(*q);
  Record(Instruction{prim, {RVName(sq_block.id)}, {}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::CenterPartials(BlockRV sq_block, BlockRV sum_block) {
  const char* prim = kCenterPartials;
  auto qs = MutableStage(sq_block, prim);
  if (!qs.ok()) return qs.status();
  auto ps = MutableStage(sum_block, prim);
  if (!ps.ok()) return ps.status();
  Stage* q = *qs;
  Stage* p = *ps;
  const std::string form =
      "; it applies to rfactor partials q[.., c] = sum over k of (e - M)^2 and p[.., c] = sum "
      "over k of e of the same chunks, where M is the sum of p over c divided by a constant";
  if (q->origin != "rfactor" || p->origin != "rfactor" || q->reduce != ReduceOp::kSum ||
      p->reduce != ReduceOp::kSum || q == p) {
    return Precondition(prim, absl::StrCat("stages ", q->name, " and ", p->name,
                                           " are not two rfactor partial sums", form));
  }
  if (q->buffer->shape != p->buffer->shape || q->reduce_axes.size() != 1 ||
      p->reduce_axes.size() != 1 ||
      q->iters[q->axes.size()].extent != p->iters[p->axes.size()].extent) {
    return Precondition(prim, absl::StrCat("stages ", q->name, " and ", p->name,
                                           " do not have the same chunks", form));
  }
  // q: [select(cond,] (e - M) * (e - M) [, 0)].
  const std::optional<CenteredSquare> square_of = MatchCenteredSquare(q->body);
  if (!square_of) {
    return Precondition(prim, absl::StrCat("the body of stage ", q->name,
                                           " is not a square (e - M) * (e - M)", form));
  }
  const Expr e = square_of->e, m = square_of->m, cond = square_of->cond;
  const VarPtr c = q->axes.back();
  if (UsesVar(m, c.get()) || UsesVar(m, q->reduce_axes[0].get())) {
    return Precondition(
        prim, absl::StrCat("the value stage ", q->name, " subtracts varies within a row", form));
  }
  // p sums e over the same chunks.
  std::unordered_map<const VarNode*, Expr> to_q;
  for (size_t d = 0; d < p->axes.size(); ++d) to_q[p->axes[d].get()] = q->axes[d];
  to_q[p->reduce_axes[0].get()] = q->reduce_axes[0];
  Expr pb = Substitute(p->body, to_q);
  if (const auto* sel = As<SelectNode>(pb)) {
    if (!cond || !Identical(sel->cond, cond)) pb = nullptr;
    if (pb) pb = sel->true_value;
  } else if (cond) {
    pb = nullptr;
  }
  if (!pb || !Identical(pb, e)) {
    return Precondition(prim, absl::StrCat("stage ", p->name, " does not sum the value that ",
                                           q->name, " squares", form));
  }
  // M = F[..] / N, F the stage that sums p over c.
  const auto* div = As<BinaryNode>(m);
  const auto* total = div ? As<FloatImmNode>(div->b) : nullptr;
  const auto* mean_load = div ? As<LoadNode>(div->a) : nullptr;
  const Stage* f = mean_load ? FindStage(mean_load->buffer->name) : nullptr;
  bool f_ok = f && f->reduce == ReduceOp::kSum && f->reduce_axes.size() == 1;
  if (f_ok) {
    const auto* fl = As<LoadNode>(f->body);
    f_ok = fl && fl->buffer.get() == p->buffer.get();
  }
  if (!div || div->op != BinaryOp::kDiv || !total || !f_ok) {
    return Precondition(
        prim, absl::StrCat("the value stage ", q->name, " subtracts is not the sum of ", p->name,
                           " over its chunks divided by a constant", form));
  }
  // G: the stage that sums q over c.
  int g = -1;
  for (int i : Consumers(q->buffer.get())) {
    const auto* gl = As<LoadNode>(stages_[i].body);
    if (stages_[i].reduce == ReduceOp::kSum && gl && gl->buffer.get() == q->buffer.get() &&
        stages_[i].reduce_axes.size() == 1) {
      g = i;
    }
  }
  if (g < 0 || Consumers(q->buffer.get()).size() != 1) {
    return Precondition(prim, absl::StrCat("stage ", q->name,
                                           " must be read only by the stage that sums it over "
                                           "its chunks"));
  }
  // Rewrite: q[.., c] = sum over k of (e - p[.., c] / n(c))^2 and
  //          G[..] = sum over c of q[.., c] + n(c) * (p[.., c] / n(c) - M)^2,
  // n(c) the number of elements of chunk c (Chan et al.'s pairwise variance: exact).
  const DType t = e->dtype;
  const int64_t chunk = q->iters[q->axes.size()].extent;
  const int64_t count = static_cast<int64_t>(total->value);
  auto n_of = [&](const Expr& cv) {
    if (!cond) return MakeFloat(static_cast<double>(chunk), t);
    return MakeCast(t, MakeMin(MakeInt(chunk), MakeInt(count) - cv * chunk));
  };
  std::vector<Expr> q_idx(q->axes.begin(), q->axes.end());
  Expr dev = e - MakeLoad(p->buffer, q_idx) / n_of(c);
  Expr square = dev * dev;
  q->body = cond ? MakeSelect(cond, square, MakeFloat(0, t)) : square;
  q->centered_on = p->name;
  Stage& gs = stages_[g];
  std::vector<Expr> g_idx(gs.axes.begin(), gs.axes.end());
  g_idx.push_back(gs.reduce_axes[0]);
  std::unordered_map<const VarNode*, Expr> to_g;
  for (size_t d = 0; d + 1 < q->axes.size(); ++d) to_g[q->axes[d].get()] = gs.axes[d];
  const Expr cg = gs.reduce_axes[0];
  Expr shift = MakeLoad(p->buffer, g_idx) / n_of(cg) - Substitute(m, to_g);
  gs.body = MakeLoad(q->buffer, g_idx) + n_of(cg) * (shift * shift);
  // q no longer waits for the row sums: it moves right after p (stages stay in dependence
  // order, and kernels run in stage order).
  const int qi = StageIndex(q->name), pi = StageIndex(p->name);
  if (qi > pi + 1) {
    Stage moved = std::move(stages_[qi]);
    stages_.erase(stages_.begin() + qi);
    stages_.insert(stages_.begin() + pi + 1, std::move(moved));
  }
  Record(Instruction{prim, {RVName(sq_block.id), RVName(sum_block.id)}, {}, {}, {}});
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Instruction table entries.

namespace {

absl::Status ApplyCenterPartials(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(BlockRV sq_block, in.Block(0));
  TESSEL_ASSIGN_OR_RETURN(BlockRV sum_block, in.Block(1));
  return in.schedule().CenterPartials(sq_block, sum_block);
}

}  // namespace

void RegisterReductionFusionInstructions(InstructionTable* table) {
  table->Register(kFuseOnlineMax, ApplyBlockPrimitive<&Schedule::FuseOnlineMax>);
  table->Register(kCenterPartials, ApplyCenterPartials);
  table->Register(kFuseCenteredSum, ApplyBlockPrimitive<&Schedule::FuseCenteredSum>);
}

}  // namespace tessel::schedules
