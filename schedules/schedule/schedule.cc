#include "schedules/schedule/schedule.h"

#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "schedules/schedule/primitive/common.h"
#include "schedules/util/check.h"

namespace tessel::schedules {

// ---------------------------------------------------------------------------------------------
// Creation and bookkeeping.

absl::StatusOr<Schedule> Schedule::Create(const Workload& workload, uint64_t seed) {
  if (absl::Status s = ValidateWorkload(workload); !s.ok()) return s;
  Schedule sch;
  sch.workload_ = std::make_shared<Workload>(workload);
  sch.rng_.seed(seed);
  for (const TensorDef& t : sch.workload_->tensors) {
    if (t.is_input) {
      sch.inputs_.push_back(t.buffer);
      continue;
    }
    Stage s;
    s.name = t.name;
    s.buffer = t.buffer;
    s.axes = t.axes;
    s.reduce_axes = t.reduce_axes;
    s.reduce = t.reduce;
    s.body = t.body;
    for (size_t d = 0; d < t.axes.size(); ++d) {
      s.iters.push_back(IterVar{t.axes[d], t.buffer->shape[d]});
    }
    for (size_t r = 0; r < t.reduce_axes.size(); ++r) {
      IterVar iv{t.reduce_axes[r], t.reduce_extents[r]};
      iv.reduce = true;
      s.iters.push_back(iv);
    }
    s.leaves.resize(s.iters.size());
    std::iota(s.leaves.begin(), s.leaves.end(), 0);
    s.is_output = sch.workload_->IsOutput(t.name);
    s.origin = "compute";
    sch.stages_.push_back(std::move(s));
  }
  return sch;
}

const Stage* Schedule::FindStage(const std::string& name) const {
  int i = StageIndex(name);
  return i < 0 ? nullptr : &stages_[i];
}

int Schedule::StageIndex(const std::string& name) const {
  for (size_t i = 0; i < stages_.size(); ++i) {
    if (stages_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

const Stage& Schedule::GetStage(BlockRV b) const {
  TESSEL_CHECK(b.id >= 0 && b.id < static_cast<int>(rvs_.size()) && rvs_[b.id].kind == 'b')
      << "not a stage random variable: " << b.id;
  const Stage* s = FindStage(rvs_[b.id].stage);
  TESSEL_CHECK(s) << "stage " << rvs_[b.id].stage << " vanished";
  return *s;
}

const Stage& Schedule::LoopStage(LoopRV l) const {
  TESSEL_CHECK(l.id >= 0 && l.id < static_cast<int>(rvs_.size()) && rvs_[l.id].kind == 'l')
      << "not a loop random variable: " << l.id;
  const Stage* s = FindStage(rvs_[l.id].stage);
  TESSEL_CHECK(s) << "stage " << rvs_[l.id].stage << " vanished";
  return *s;
}

int Schedule::LoopIter(LoopRV l) const {
  const Stage& s = LoopStage(l);
  const RVEntry& e = rvs_[l.id];
  TESSEL_CHECK(e.generation == s.loop_generation && e.iter >= 0 &&
               e.iter < static_cast<int>(s.iters.size()))
      << "stale loop random variable " << rv_names_[l.id] << " (loop " << e.loop_var << " of stage "
      << s.name << "): the stage's loops were reset since it was made";
  return e.iter;
}

int64_t Schedule::LoopExtent(LoopRV l) const { return LoopStage(l).iters[LoopIter(l)].extent; }

std::string Schedule::LoopName(LoopRV l) const {
  const Stage& s = LoopStage(l);
  return absl::StrCat(s.name, ".", s.iters[LoopIter(l)].var->name);
}

int64_t Schedule::Value(IntRV v) const {
  TESSEL_CHECK(v.id >= 0 && v.id < static_cast<int>(rvs_.size()) && rvs_[v.id].kind == 'v')
      << "not an integer random variable: " << v.id;
  return rvs_[v.id].value;
}

std::string Schedule::NewLoopRV(const Stage& s, int iter) {
  RVEntry e;
  e.stage = s.name;
  e.iter = iter;
  e.generation = s.loop_generation;
  e.loop_var = s.iters[iter].var->name;
  return NewRV('l', std::move(e));
}

std::string Schedule::NewRV(char kind, RVEntry entry) {
  entry.kind = kind;
  std::string name = absl::StrCat(std::string(1, kind), rvs_.size());
  rvs_.push_back(std::move(entry));
  rv_names_.push_back(name);
  return name;
}

absl::StatusOr<Stage*> Schedule::HandleStage(int id, char kind, const char* prim) {
  if (id < 0 || id >= static_cast<int>(rvs_.size()) || rvs_[id].kind != kind) {
    return Invalid(prim, absl::StrCat("the ", kind == 'b' ? "stage" : "loop",
                                      " handle does not belong to this schedule"));
  }
  int i = StageIndex(rvs_[id].stage);
  if (i < 0) return Invalid(prim, absl::StrCat("stage ", rvs_[id].stage, " no longer exists"));
  Stage* s = &stages_[i];
  if (s->inlined()) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " was inlined and has no loops"));
  }
  if (!s->computed_by.empty()) {
    return Precondition(prim,
                        absl::StrCat("stage ", s->name, " is computed by stage ", s->computed_by,
                                     " (fuse_reductions); schedule that stage instead"));
  }
  return s;
}

absl::StatusOr<Stage*> Schedule::MutableStage(BlockRV b, const char* prim) {
  return HandleStage(b.id, 'b', prim);
}

absl::StatusOr<Schedule::StageAndLoop> Schedule::MutableStageAndLoop(BlockRV b, LoopRV l,
                                                                     const char* prim) {
  auto st = MutableStage(b, prim);
  if (!st.ok()) return st.status();
  auto loop = MutableLoop(l, prim);
  if (!loop.ok()) return loop.status();
  return StageAndLoop{*st, loop->first, loop->second};
}

absl::StatusOr<std::pair<Stage*, int>> Schedule::MutableLoop(LoopRV l, const char* prim) {
  auto found = HandleStage(l.id, 'l', prim);
  if (!found.ok()) return found.status();
  Stage* s = *found;
  const int iter = rvs_[l.id].iter;
  if (rvs_[l.id].generation != s->loop_generation) {
    // Iter ids restart after a reset; the handle's id may now name another loop.
    return Precondition(prim, absl::StrCat("loop ", rvs_[l.id].loop_var, " of stage ", s->name,
                                           " is no longer a loop (the stage's loops were reset "
                                           "by compute_at, reverse_compute_at, cache_write or "
                                           "rfactor; get its loops again)"));
  }
  if (s->LeafPosition(iter) < 0) {
    return Precondition(prim, absl::StrCat(LoopDesc(*s, iter),
                                           " is no longer a loop (it was split, fused or its "
                                           "stage's loops were reset by compute_at)"));
  }
  return std::make_pair(s, iter);
}

void Schedule::RecordFactors(const std::vector<Factor>& factors, Instruction* inst) const {
  nlohmann::json lit = nlohmann::json::array();
  for (const Factor& f : factors) {
    if (f.rv.id >= 0) {
      inst->inputs.push_back(RVName(f.rv.id));
      lit.push_back(nullptr);
    } else {
      lit.push_back(f.value);
    }
  }
  inst->attrs["factors"] = lit;
}

std::string Schedule::LoopDesc(const Stage& s, int iter) const {
  return absl::StrCat("loop ", s.iters[iter].var->name, " of stage ", s.name);
}

std::string Schedule::UniqueStageName(const std::string& base) const {
  std::string name = base;
  for (int i = 1; StageIndex(name) >= 0 || workload_->Find(name) != nullptr; ++i) {
    name = absl::StrCat(base, "_", i);
  }
  return name;
}

std::string Schedule::NewVarName(const Stage& s, const std::string& base) const {
  std::set<std::string> used;
  for (const IterVar& iv : s.iters) used.insert(iv.var->name);
  std::string name = base;
  for (int i = 1; used.count(name); ++i) name = absl::StrCat(base, "_", i);
  return name;
}

std::vector<int> Schedule::Consumers(const Buffer* buffer) const {
  std::vector<int> out;
  for (size_t i = 0; i < stages_.size(); ++i) {
    if (!stages_[i].inlined() && Reads(stages_[i], buffer)) out.push_back(static_cast<int>(i));
  }
  return out;
}

void Schedule::ReplaceBuffer(
    const BufferPtr& from, const BufferPtr& to,
    const std::function<std::vector<Expr>(const std::vector<Expr>&)>& reindex) {
  BufferReplacer r(from.get(), to, reindex);
  const BufferPtr keep = from;  // `from` may be a stage's buffer, replaced below
  for (Stage& s : stages_) {
    if (s.buffer.get() == keep.get()) s.buffer = to;
    s.body = r.Visit(s.body);
    for (Stage::TupleOutput& t : s.outputs) t.value = r.Visit(t.value);
  }
}

void Schedule::ResetLoops(Stage* s, const std::vector<int64_t>& root_extents) {
  // Derived iters are dropped and their ids reused: loop handles of the old loops become stale
  // (MutableLoop, LoopIter), and stages attached to a dropped loop lose their attach loop (bound
  // inference then reports them) rather than landing on whichever new loop reuses the id.
  ++s->loop_generation;
  for (Stage& o : stages_) {
    if (&o != s && o.attach.kind == AttachPoint::Kind::kAt && o.attach.stage == s->name &&
        o.attach.iter >= s->num_root()) {
      o.attach.iter = -1;
    }
  }
  s->iters.resize(s->num_root());
  for (int i = 0; i < s->num_root(); ++i) {
    IterVar& iv = s->iters[i];
    iv.extent = root_extents[i];
    iv.kind = ForKind::kSerial;
    iv.thread = ThreadTag::kNone;
    iv.annotations.clear();
  }
  s->relations.clear();
  s->leaves.resize(s->iters.size());
  std::iota(s->leaves.begin(), s->leaves.end(), 0);
  s->init_at = -1;
}

bool Schedule::IsAttachedWithin(const Stage& s, const std::string& ancestor) const {
  const Stage* cur = &s;
  for (int depth = 0; depth < 1000; ++depth) {
    if (cur->attach.kind != AttachPoint::Kind::kAt) return false;
    if (cur->attach.stage == ancestor) return true;
    cur = FindStage(cur->attach.stage);
    if (!cur) return false;
  }
  return false;
}

const Stage* Schedule::AttachedTo(const std::string& name) const {
  for (const Stage& o : stages_) {
    if (o.attach.kind == AttachPoint::Kind::kAt && o.attach.stage == name) return &o;
  }
  return nullptr;
}

void Schedule::SyncFused(const Stage& s) {
  for (const std::string& fused : s.FusedStages()) {
    const int m = StageIndex(fused);
    TESSEL_CHECK(m >= 0) << "stage " << fused << " fused into " << s.name << " is gone";
    stages_[m].attach = s.attach;
  }
}

}  // namespace tessel::schedules
