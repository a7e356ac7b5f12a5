// MultiLevelTiling: contractions with data reuse.
//
// CUDA (spatial levels block / thread / register, reduction levels shared-memory step / inner):
//   out[.., m, n] loops -> m: [-1, ty, tm], n: [-1, tx, tn], ordered mb nb | my nx | mt nt,
//   blocks and threads bound, the register tile unrolled; the accumulator (cache_write local)
//   computed at the thread loop with its reduction split [-1, bk] ahead of the tile loops; every
//   input cached in shared memory at the k step (fused, spread over ty x tx threads at a sampled
//   vector width) and in registers at the inner k loop.
// Host: i/j/k tiles, the outer tiles parallel, the inner j tile vectorized.
// Decisions (sample_categorical): ty, tx, tm, tn, bk, the fetch width; host: the three tiles.

#include <algorithm>

#include "schedules/ir/substitute.h"
#include "schedules/rules/rule_util.h"
#include "schedules/rules/schedule_rule.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {
namespace {

// A sum over a product of loads whose indices are loop variables (matmul-like: each operand
// reused along the axes it does not use); at least two spatial axes.
bool IsContraction(const Stage& st) {
  if (st.reduce != ReduceOp::kSum || st.axes.size() < 2 || st.reduce_axes.empty()) return false;
  const std::vector<const LoadNode*> loads = CollectLoads(st.body);
  if (loads.size() < 2) return false;
  for (const LoadNode* l : loads) {
    for (const Expr& i : l->indices) {
      if (!As<VarNode>(i)) return false;
    }
  }
  return true;
}

std::string OutputOf(const Schedule& s) {
  for (const Stage& st : s.stages()) {
    if (st.is_output && !st.inlined()) return st.name;
  }
  return "";
}

class MultiLevelTiling final : public ScheduleRule {
 public:
  explicit MultiLevelTiling(const Target& t) : target_(t) {}
  std::string name() const override { return "multi_level_tiling"; }

  absl::StatusOr<std::vector<Schedule>> Apply(const Schedule& sch,
                                              const std::string& stage) const override {
    const Stage* st = sch.FindStage(stage);
    if (!st || st->inlined() || !IsContraction(*st) || rules::IsScheduled(*st)) {
      return std::vector<Schedule>{};
    }
    Schedule s = sch;
    if (target_.is_cuda()) {
      TESSEL_RETURN_IF_ERROR(Cuda(&s, stage));
    } else {
      TESSEL_RETURN_IF_ERROR(Host(&s, stage));
    }
    return std::vector<Schedule>{std::move(s)};
  }

 private:
  absl::Status Cuda(Schedule* s, const std::string& gemm) const {
    TESSEL_ASSIGN_OR_RETURN(BlockRV g, s->GetBlock(gemm));
    TESSEL_ASSIGN_OR_RETURN(BlockRV cc, s->CacheWrite(g, "local"));
    // The stage itself becomes the write-back copy, inlined into the epilogue when there is one;
    // the output's loops are tiled.
    const std::string out = OutputOf(*s);
    if (out != gemm) TESSEL_RETURN_IF_ERROR(s->ComputeInline(g));
    TESSEL_ASSIGN_OR_RETURN(BlockRV ob, s->GetBlock(out));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> ol, s->GetLoops(ob));
    const size_t nl = ol.size();
    LoopRV m = ol[nl - 2], n = ol[nl - 1];
    const int64_t me = s->LoopExtent(m), ne = s->LoopExtent(n);
    TESSEL_ASSIGN_OR_RETURN(IntRV ty, rules::SampleUniform(s, {4, 8, 16, 32}, me));
    TESSEL_ASSIGN_OR_RETURN(IntRV tm, rules::SampleUniform(s, {1, 2, 4, 8}, me));
    TESSEL_ASSIGN_OR_RETURN(IntRV tx, rules::SampleUniform(s, {4, 8, 16, 32}, ne));
    TESSEL_ASSIGN_OR_RETURN(IntRV tn, rules::SampleUniform(s, {1, 2, 4, 8}, ne));
    TESSEL_ASSIGN_OR_RETURN(auto ms, s->Split(m, {-1, ty, tm}));
    TESSEL_ASSIGN_OR_RETURN(auto ns, s->Split(n, {-1, tx, tn}));
    TESSEL_RETURN_IF_ERROR(s->Reorder({ms[0], ns[0], ms[1], ns[1], ms[2], ns[2]}));
    if (nl > 2) {
      std::vector<LoopRV> batch(ol.begin(), ol.end() - 2);
      LoopRV bz = batch[0];
      if (batch.size() > 1) {
        TESSEL_ASSIGN_OR_RETURN(bz, s->Fuse(batch));
      }
      TESSEL_RETURN_IF_ERROR(s->Bind(bz, "blockIdx.z"));
    }
    TESSEL_RETURN_IF_ERROR(s->Bind(ms[0], "blockIdx.y"));
    TESSEL_RETURN_IF_ERROR(s->Bind(ns[0], "blockIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Bind(ms[1], "threadIdx.y"));
    TESSEL_RETURN_IF_ERROR(s->Bind(ns[1], "threadIdx.x"));
    TESSEL_RETURN_IF_ERROR(s->Unroll(ms[2]));
    TESSEL_RETURN_IF_ERROR(s->Unroll(ns[2]));
    TESSEL_RETURN_IF_ERROR(s->ComputeAt(cc, ns[1]));

    // Accumulator: [batch...,] i, j, k...  ->  k_outer, k_inner, i, j.
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> cl, s->GetLoops(cc));
    std::vector<LoopRV> cspatial, creduce;
    for (LoopRV l : cl) (rules::IsReduceLoop(*s, l) ? creduce : cspatial).push_back(l);
    LoopRV k = creduce[0];
    if (creduce.size() > 1) {
      TESSEL_ASSIGN_OR_RETURN(k, s->Fuse(creduce));
    }
    TESSEL_ASSIGN_OR_RETURN(IntRV bk, rules::SampleUniform(s, {4, 8, 16, 32}, s->LoopExtent(k)));
    TESSEL_ASSIGN_OR_RETURN(auto ks, s->Split(k, {-1, bk}));
    std::vector<LoopRV> order = {ks[0], ks[1]};
    order.insert(order.end(), cspatial.begin(), cspatial.end());
    TESSEL_RETURN_IF_ERROR(s->Reorder(order));
    TESSEL_RETURN_IF_ERROR(s->DecomposeReduction(cc, ks[0]));
    TESSEL_RETURN_IF_ERROR(s->Unroll(ks[1]));
    for (LoopRV l : cspatial) TESSEL_RETURN_IF_ERROR(s->Unroll(l));

    // Operands through shared memory (cooperative fetch) and registers.
    TESSEL_ASSIGN_OR_RETURN(IntRV vec, rules::SampleUniform(s, {1, 2, 4}, 4));
    std::vector<std::string> operands;
    for (const LoadNode* l : CollectLoads(s->GetStage(cc).body)) {
      if (std::find(operands.begin(), operands.end(), l->buffer->name) == operands.end()) {
        operands.push_back(l->buffer->name);
      }
    }
    for (const std::string& name : operands) {
      TESSEL_ASSIGN_OR_RETURN(BlockRV sh, s->CacheRead(name, "shared", {cc}));
      TESSEL_ASSIGN_OR_RETURN(BlockRV lo, s->CacheRead(s->GetStage(sh).name, "local", {cc}));
      TESSEL_RETURN_IF_ERROR(s->ComputeAt(lo, ks[1]));  // consumers first
      TESSEL_RETURN_IF_ERROR(s->ComputeAt(sh, ks[0]));
      TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> fl, s->GetLoops(sh));
      LoopRV fused = fl[0];
      if (fl.size() > 1) {
        TESSEL_ASSIGN_OR_RETURN(fused, s->Fuse(fl));
      }
      TESSEL_ASSIGN_OR_RETURN(auto p, s->Split(fused, {-1, ty, tx, vec}));
      TESSEL_RETURN_IF_ERROR(s->Bind(p[1], "threadIdx.y"));
      TESSEL_RETURN_IF_ERROR(s->Bind(p[2], "threadIdx.x"));
      TESSEL_RETURN_IF_ERROR(s->Vectorize(p[3]));
      TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> ll, s->GetLoops(lo));
      for (LoopRV l : ll) TESSEL_RETURN_IF_ERROR(s->Unroll(l));
    }
    return absl::OkStatus();
  }

  absl::Status Host(Schedule* s, const std::string& gemm) const {
    TESSEL_ASSIGN_OR_RETURN(BlockRV g, s->GetBlock(gemm));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> loops, s->GetLoops(g));
    std::vector<LoopRV> spatial, reduce;
    for (LoopRV l : loops) (rules::IsReduceLoop(*s, l) ? reduce : spatial).push_back(l);
    const size_t ns = spatial.size();
    LoopRV i = spatial[ns - 2], j = spatial[ns - 1];
    LoopRV k = reduce[0];
    if (reduce.size() > 1) {
      TESSEL_ASSIGN_OR_RETURN(k, s->Fuse(reduce));
    }
    TESSEL_ASSIGN_OR_RETURN(IntRV ti, rules::SampleUniform(s, {4, 8, 16, 32}, s->LoopExtent(i)));
    TESSEL_ASSIGN_OR_RETURN(IntRV tj, rules::SampleUniform(s, {8, 16, 32, 64}, s->LoopExtent(j)));
    TESSEL_ASSIGN_OR_RETURN(IntRV tk, rules::SampleUniform(s, {8, 16, 32, 64}, s->LoopExtent(k)));
    TESSEL_ASSIGN_OR_RETURN(auto is, s->Split(i, {-1, ti}));
    TESSEL_ASSIGN_OR_RETURN(auto js, s->Split(j, {-1, tj}));
    TESSEL_ASSIGN_OR_RETURN(auto ks, s->Split(k, {-1, tk}));
    std::vector<LoopRV> order(spatial.begin(), spatial.end() - 2);
    for (LoopRV l : {is[0], js[0], ks[0], is[1], ks[1], js[1]}) order.push_back(l);
    TESSEL_RETURN_IF_ERROR(s->Reorder(order));
    TESSEL_RETURN_IF_ERROR(s->DecomposeReduction(g, ks[0]));
    LoopRV outer = order[0];
    if (ns > 2) {
      TESSEL_ASSIGN_OR_RETURN(outer, s->Fuse({order.begin(), order.begin() + (ns - 2) + 1}));
    }
    TESSEL_RETURN_IF_ERROR(s->Parallel(outer));
    TESSEL_RETURN_IF_ERROR(s->Vectorize(js[1]));
    return absl::OkStatus();
  }

  Target target_;
};

}  // namespace

std::unique_ptr<ScheduleRule> MakeMultiLevelTiling(const Target& target) {
  return std::make_unique<MultiLevelTiling>(target);
}

}  // namespace tessel::schedules
