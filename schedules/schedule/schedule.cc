#include "schedules/schedule/schedule.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/ir/structural.h"
#include "schedules/ir/substitute.h"
#include "schedules/lower/bound.h"
#include "schedules/util/check.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

absl::Status Invalid(const std::string& prim, const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat(prim, ": ", msg));
}
absl::Status Precondition(const std::string& prim, const std::string& msg) {
  return absl::FailedPreconditionError(absl::StrCat(prim, ": ", msg));
}

// Replaces loads of one buffer by loads of another (same indices).
class BufferReplacer : public ExprMutator {
 public:
  BufferReplacer(const Buffer* from, BufferPtr to) : from_(from), to_(std::move(to)) {}

 protected:
  Expr VisitLoad(const LoadNode& n, const Expr& self) override {
    Expr e = ExprMutator::VisitLoad(n, self);
    const auto* l = As<LoadNode>(e);
    if (l->buffer.get() == from_) return MakeLoad(to_, l->indices);
    return e;
  }

 private:
  const Buffer* from_;
  BufferPtr to_;
};

// Replaces loads of `buffer` by the producer's body with its axes bound to the load's indices.
class Inliner : public ExprMutator {
 public:
  Inliner(const Buffer* buffer, const std::vector<VarPtr>& axes, Expr body)
      : buffer_(buffer), axes_(axes), body_(std::move(body)) {}

 protected:
  Expr VisitLoad(const LoadNode& n, const Expr& self) override {
    Expr e = ExprMutator::VisitLoad(n, self);
    const auto* l = As<LoadNode>(e);
    if (l->buffer.get() != buffer_) return e;
    std::unordered_map<const VarNode*, Expr> map;
    for (size_t i = 0; i < axes_.size(); ++i) map[axes_[i].get()] = l->indices[i];
    return Substitute(body_, map);
  }

 private:
  const Buffer* buffer_;
  const std::vector<VarPtr>& axes_;
  Expr body_;
};

bool Reads(const Stage& s, const Buffer* b) { return !CollectLoads(s.body, b).empty(); }

// Rewrites loads of `from` into loads of `to` whose axis `axis` is split by `strides`/`factors`
// (split_buffer_axis): index e becomes e / strides[0], (e / strides[1]) % factors[1], ...,
// e % factors.back().
class AxisSplitter : public ExprMutator {
 public:
  AxisSplitter(const Buffer* from, BufferPtr to, int axis, const std::vector<int64_t>& factors,
               const std::vector<int64_t>& strides)
      : from_(from), to_(std::move(to)), axis_(axis), factors_(factors), strides_(strides) {}

  std::vector<Expr> Split(const std::vector<Expr>& idx) const {
    std::vector<Expr> out(idx.begin(), idx.begin() + axis_);
    const Expr& e = idx[axis_];
    for (size_t i = 0; i < factors_.size(); ++i) {
      Expr q = strides_[i] == 1 ? e : e / MakeInt(strides_[i], e->dtype);
      if (i > 0) q = q % MakeInt(factors_[i], e->dtype);
      out.push_back(std::move(q));
    }
    out.insert(out.end(), idx.begin() + axis_ + 1, idx.end());
    return out;
  }

 protected:
  Expr VisitLoad(const LoadNode& n, const Expr& self) override {
    Expr e = ExprMutator::VisitLoad(n, self);
    const auto* l = As<LoadNode>(e);
    if (l->buffer.get() != from_) return e;
    return MakeLoad(to_, Split(l->indices));
  }

 private:
  const Buffer* from_;
  BufferPtr to_;
  int axis_;
  const std::vector<int64_t>& factors_;
  const std::vector<int64_t>& strides_;
};

}  // namespace

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
    const Stage* by = FindStage(s->computed_by);
    const char* how =
        by != nullptr && by->centered_sum == s->name ? "fuse_centered_sum" : "fuse_online_max";
    return Precondition(
        prim, absl::StrCat("stage ", s->name, " is computed by stage ", s->computed_by, " (", how,
                           "); schedule that stage "
                           "instead"));
  }
  return s;
}

absl::StatusOr<Stage*> Schedule::MutableStage(BlockRV b, const char* prim) {
  return HandleStage(b.id, 'b', prim);
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

void Schedule::ReplaceBuffer(const BufferPtr& from, const BufferPtr& to) {
  BufferReplacer r(from.get(), to);
  for (Stage& s : stages_) {
    if (s.buffer.get() == from.get()) s.buffer = to;
    s.body = r.Visit(s.body);
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

// ---------------------------------------------------------------------------------------------
// Lookup.

absl::StatusOr<BlockRV> Schedule::GetBlock(const std::string& stage_name) {
  const Stage* s = FindStage(stage_name);
  if (!s) {
    std::vector<std::string> names;
    for (const Stage& st : stages_) {
      if (!st.inlined()) names.push_back(st.name);
    }
    return Invalid("get_stage", absl::StrCat("no stage named '", stage_name,
                                             "'; the stages are: ", absl::StrJoin(names, ", ")));
  }
  BlockRV b{static_cast<int>(rvs_.size())};
  Instruction inst{"get_stage", {}, {{"name", stage_name}}, {NewRV('b', {0, stage_name})}, {}};
  Record(std::move(inst));
  return b;
}

absl::StatusOr<std::vector<LoopRV>> Schedule::GetLoops(BlockRV block) {
  auto s = MutableStage(block, "get_loops");
  if (!s.ok()) return s.status();
  Instruction inst{"get_loops", {RVName(block.id)}, {}, {}, {}};
  std::vector<LoopRV> out;
  for (int iter : (*s)->leaves) {
    out.push_back(LoopRV{static_cast<int>(rvs_.size())});
    inst.outputs.push_back(NewLoopRV(**s, iter));
  }
  Record(std::move(inst));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Sampling.

namespace {

// Portable uniform integer in [0, n): std::mt19937_64 output is standardized, distributions are
// not, so sampling does its own reduction.
int64_t UniformInt(std::mt19937_64& rng, int64_t n) { return static_cast<int64_t>(rng() % n); }

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i * i <= n; ++i) {
    if (n % i == 0) {
      d.push_back(i);
      if (i != n / i) d.push_back(n / i);
    }
  }
  std::sort(d.begin(), d.end());
  return d;
}

}  // namespace

absl::StatusOr<std::vector<IntRV>> Schedule::SamplePerfectTile(
    LoopRV loop, int n, int64_t max_innermost, std::optional<std::vector<int64_t>> decision) {
  const char* prim = "sample_perfect_tile";
  auto l = MutableLoop(loop, prim);
  if (!l.ok()) return l.status();
  const auto [s, iter] = *l;
  const int64_t extent = s->iters[iter].extent;
  if (n < 1) return Invalid(prim, absl::StrCat("n must be at least 1, got ", n));
  if (max_innermost < 1) {
    return Invalid(prim, absl::StrCat("max_innermost must be at least 1, got ", max_innermost));
  }
  std::vector<int64_t> factors;
  if (decision) {
    factors = *decision;
    int64_t prod = 1;
    for (int64_t f : factors) prod *= f;
    if (static_cast<int>(factors.size()) != n || prod != extent ||
        std::any_of(factors.begin(), factors.end(), [](int64_t f) { return f < 1; })) {
      return Invalid(prim, absl::StrCat("decision [", absl::StrJoin(factors, ", "), "] is not ", n,
                                        " positive factors of ", LoopDesc(*s, iter), " (extent ",
                                        extent, ")"));
    }
    if (factors.back() > max_innermost) {
      return Invalid(prim, absl::StrCat("decision's innermost factor ", factors.back(),
                                        " exceeds max_innermost ", max_innermost));
    }
  } else {
    if (n == 1 && extent > max_innermost) {
      // The only tile of one factor is the extent itself (a decision would be rejected too).
      return Invalid(prim, absl::StrCat("n is 1, so the only factor is the extent ", extent, " of ",
                                        LoopDesc(*s, iter), ", which exceeds max_innermost ",
                                        max_innermost, "; use n >= 2 or raise max_innermost"));
    }
    // Innermost first: a divisor of the extent within max_innermost, then the others uniformly
    // among the divisors of what is left; the outermost takes the rest.
    factors.assign(n, 1);
    int64_t rest = extent;
    for (int i = n - 1; i >= 1; --i) {
      std::vector<int64_t> d = Divisors(rest);
      if (i == n - 1) {
        d.erase(std::remove_if(d.begin(), d.end(), [&](int64_t x) { return x > max_innermost; }),
                d.end());
      }
      factors[i] = d[UniformInt(rng_, static_cast<int64_t>(d.size()))];
      rest /= factors[i];
    }
    factors[0] = rest;
  }
  Instruction inst{
      prim, {RVName(loop.id)}, {{"n", n}, {"max_innermost", max_innermost}}, {}, factors};
  std::vector<IntRV> out;
  for (int64_t f : factors) {
    out.push_back(IntRV{static_cast<int>(rvs_.size())});
    RVEntry e;
    e.value = f;
    inst.outputs.push_back(NewRV('v', e));
  }
  Record(std::move(inst));
  return out;
}

absl::StatusOr<IntRV> Schedule::SampleCategorical(std::vector<int64_t> candidates,
                                                  std::vector<double> probs,
                                                  std::optional<int64_t> decision) {
  const char* prim = "sample_categorical";
  if (candidates.empty() || candidates.size() != probs.size()) {
    return Invalid(
        prim, absl::StrCat("needs as many probabilities as candidates (got ", candidates.size(),
                           " candidates and ", probs.size(), " probabilities)"));
  }
  double total = 0;
  for (double p : probs) {
    if (!(p >= 0)) return Invalid(prim, "probabilities must be non-negative");
    total += p;
  }
  if (total <= 0) return Invalid(prim, "probabilities must not all be zero");
  int64_t index = 0;
  if (decision) {
    if (*decision < 0 || *decision >= static_cast<int64_t>(candidates.size())) {
      return Invalid(
          prim, absl::StrCat("decision ", *decision, " is not an index below ", candidates.size()));
    }
    index = *decision;
  } else {
    // 53 random bits to a double in [0, total).
    const double u = static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0) * total;
    double acc = 0;
    index = static_cast<int64_t>(candidates.size()) - 1;
    for (size_t i = 0; i < probs.size(); ++i) {
      acc += probs[i];
      if (u < acc) {
        index = static_cast<int64_t>(i);
        break;
      }
    }
  }
  IntRV out{static_cast<int>(rvs_.size())};
  RVEntry e;
  e.value = candidates[index];
  Instruction inst{
      prim, {}, {{"candidates", candidates}, {"probs", probs}}, {NewRV('v', e)}, index};
  Record(std::move(inst));
  return out;
}

absl::StatusOr<LoopRV> Schedule::SampleComputeLocation(BlockRV block,
                                                       std::optional<int64_t> decision) {
  const char* prim = "sample_compute_location";
  auto s = MutableStage(block, prim);
  if (!s.ok()) return s.status();
  std::vector<int> consumers = Consumers((*s)->buffer.get());
  // Candidates: root; inline where compute_inline accepts it (injective, not an output, read by
  // some stage, nothing attached to its loops); and, where compute_at accepts them, every loop of
  // the single consumer (not for an output, nor for a consumer attached inside the stage).
  std::vector<int64_t> choices = {-2};
  const bool can_inline =
      !(*s)->reduce && !(*s)->is_output && !consumers.empty() && AttachedTo((*s)->name) == nullptr;
  if (can_inline) choices.push_back(-1);
  const Stage* consumer = consumers.size() == 1 ? &stages_[consumers[0]] : nullptr;
  if (consumer && ((*s)->is_output || IsAttachedWithin(*consumer, (*s)->name))) {
    consumer = nullptr;
  }
  if (consumer) {
    for (size_t i = 0; i < consumer->leaves.size(); ++i) choices.push_back(static_cast<int64_t>(i));
  }
  int64_t pick;
  if (decision) {
    if (std::find(choices.begin(), choices.end(), *decision) == choices.end()) {
      return Invalid(
          prim, absl::StrCat("decision ", *decision, " is not a location of stage ", (*s)->name));
    }
    pick = *decision;
  } else {
    pick = choices[UniformInt(rng_, static_cast<int64_t>(choices.size()))];
  }
  LoopRV out;
  std::string out_name;
  if (pick == -2) {
    out.id = kRootLoop;
    out_name = "root";
  } else if (pick == -1) {
    out.id = kInlineLoop;
    out_name = "inline";
  } else {
    out.id = static_cast<int>(rvs_.size());
    out_name = NewLoopRV(*consumer, consumer->leaves[pick]);
  }
  Record(Instruction{prim, {RVName(block.id)}, {}, {out_name}, pick});
  return out;
}

absl::StatusOr<LoopRV> Schedule::SampleComputeLocation(BlockRV block,
                                                       const std::vector<LoopRV>& candidates,
                                                       std::optional<int64_t> decision) {
  const char* prim = "sample_compute_location";
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  if (candidates.empty()) {
    return Invalid(prim, absl::StrCat("needs at least one candidate loop for stage ", s->name));
  }
  // Every candidate must be a loop compute_at accepts now: its checks, then region inference with
  // the stage attached there (the attachment is restored).
  std::vector<std::pair<std::string, int>> where;  // the candidates' stages and iters
  for (size_t i = 0; i < candidates.size(); ++i) {
    auto l = MutableLoop(candidates[i], prim);
    if (!l.ok()) return l.status();
    const auto [t, iter] = *l;
    absl::Status ok = CheckComputeAt(s, t, "compute_at");
    if (ok.ok()) {
      const AttachPoint saved = s->attach;
      s->attach = AttachPoint{AttachPoint::Kind::kAt, t->name, iter, false};
      auto region = InferRootExtents(stages_, StageIndex(s->name));
      s->attach = saved;
      if (!region.ok()) ok = Precondition("compute_at", std::string(region.status().message()));
    }
    if (!ok.ok()) {
      return absl::Status(
          ok.code(),
          absl::StrCat("sample_compute_location: candidate ", i, " (", LoopDesc(*t, iter),
                       ") is not a location of stage ", s->name, ": ", ok.message()));
    }
    where.emplace_back(t->name, iter);
  }
  const int64_t n = static_cast<int64_t>(candidates.size());
  int64_t pick = 0;
  if (decision) {
    if (*decision < 0 || *decision >= n) {
      return Invalid(prim, absl::StrCat("decision ", *decision, " is not an index below ", n,
                                        " (the candidate loops of stage ", s->name, ")"));
    }
    pick = *decision;
  } else {
    pick = UniformInt(rng_, n);
  }
  LoopRV out{static_cast<int>(rvs_.size())};
  Instruction inst{prim, {RVName(block.id)}, {}, {}, pick};
  for (LoopRV c : candidates) inst.inputs.push_back(RVName(c.id));
  inst.outputs.push_back(NewLoopRV(stages_[StageIndex(where[pick].first)], where[pick].second));
  Record(std::move(inst));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Loop transformations.

absl::StatusOr<std::vector<LoopRV>> Schedule::Split(LoopRV loop,
                                                    const std::vector<Factor>& factors) {
  const char* prim = "split";
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
  nlohmann::json lit = nlohmann::json::array();
  for (const Factor& fa : factors) {
    if (fa.rv.id >= 0) {
      inst.inputs.push_back(RVName(fa.rv.id));
      lit.push_back(nullptr);
    } else {
      lit.push_back(fa.value);
    }
  }
  inst.attrs["factors"] = lit;
  std::vector<LoopRV> result;
  for (int o : outs) {
    result.push_back(LoopRV{static_cast<int>(rvs_.size())});
    inst.outputs.push_back(NewLoopRV(*s, o));
  }
  Record(std::move(inst));
  return result;
}

absl::StatusOr<LoopRV> Schedule::Fuse(const std::vector<LoopRV>& loops) {
  const char* prim = "fuse";
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
  const char* prim = "reorder";
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

absl::Status Schedule::Bind(LoopRV loop, const std::string& thread) {
  const char* prim = "bind";
  auto l = MutableLoop(loop, prim);
  if (!l.ok()) return l.status();
  auto [s, iter] = *l;
  ThreadTag tag;
  if (!ParseThreadTag(thread, &tag)) {
    return Invalid(prim, absl::StrCat("unknown thread axis '", thread,
                                      "'; use blockIdx.x|y|z, threadIdx.x|y|z, vthread or "
                                      "cluster.x"));
  }
  IterVar& iv = s->iters[iter];
  if (iv.thread != ThreadTag::kNone || iv.kind != ForKind::kSerial) {
    return Precondition(
        prim, absl::StrCat(LoopDesc(*s, iter), " is already ",
                           iv.thread != ThreadTag::kNone ? std::string(ThreadTagName(iv.thread))
                                                         : std::string(ForKindName(iv.kind))));
  }
  if (tag != ThreadTag::kVThread) {
    for (int other : s->leaves) {
      if (s->iters[other].thread == tag) {
        return Precondition(prim,
                            absl::StrCat(thread, " is already bound to ", LoopDesc(*s, other)));
      }
    }
  }
  if (iv.reduce && IsBlockTag(tag)) {
    return Invalid(prim, absl::StrCat("cannot bind reduction ", LoopDesc(*s, iter), " to ", thread,
                                      ": blocks cannot combine partial results; "
                                      "rfactor the reduction first"));
  }
  if (iv.reduce && tag == ThreadTag::kVThread) {
    return Invalid(prim, absl::StrCat("cannot bind reduction ", LoopDesc(*s, iter), " to vthread"));
  }
  if (iv.reduce) {
    for (int other : s->leaves) {
      if (other != iter && s->iters[other].reduce && IsThreadTag(s->iters[other].thread)) {
        return Precondition(
            prim, absl::StrCat("stage ", s->name, " already has a cross-thread reduction over ",
                               LoopDesc(*s, other)));
      }
    }
  }
  iv.kind = ForKind::kThreadBinding;
  iv.thread = tag;
  Record(Instruction{prim, {RVName(loop.id)}, {{"thread", thread}}, {}, {}});
  return absl::OkStatus();
}

namespace {

absl::Status MarkLoop(Stage* s, int iter, ForKind kind, const char* prim, const std::string& desc) {
  IterVar& iv = s->iters[iter];
  if (iv.thread != ThreadTag::kNone || iv.kind != ForKind::kSerial) {
    return Precondition(
        prim, absl::StrCat(desc, " is already ",
                           iv.thread != ThreadTag::kNone ? std::string(ThreadTagName(iv.thread))
                                                         : std::string(ForKindName(iv.kind))));
  }
  // A vectorized reduction loop reads its operands as vectors and accumulates the lanes in
  // order (codegen), so only parallel is refused.
  if (iv.reduce && kind == ForKind::kParallel) {
    return Invalid(prim, absl::StrCat("cannot make reduction ", desc, " ", ForKindName(kind),
                                      ": its iterations depend on each other"));
  }
  iv.kind = kind;
  return absl::OkStatus();
}

}  // namespace

absl::Status Schedule::MarkLoopKind(LoopRV loop, ForKind kind, const char* prim) {
  auto l = MutableLoop(loop, prim);
  if (!l.ok()) return l.status();
  auto [s, iter] = *l;
  TESSEL_RETURN_IF_ERROR(MarkLoop(s, iter, kind, prim, LoopDesc(*s, iter)));
  Record(Instruction{prim, {RVName(loop.id)}, {}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::Parallel(LoopRV loop) {
  return MarkLoopKind(loop, ForKind::kParallel, "parallel");
}
absl::Status Schedule::Vectorize(LoopRV loop) {
  return MarkLoopKind(loop, ForKind::kVectorized, "vectorize");
}
absl::Status Schedule::Unroll(LoopRV loop) {
  return MarkLoopKind(loop, ForKind::kUnrolled, "unroll");
}

// ---------------------------------------------------------------------------------------------
// Stage transformations.

absl::StatusOr<BlockRV> Schedule::CacheRead(std::string tensor, const std::string& scope,
                                            const std::vector<BlockRV>& readers) {
  const char* prim = "cache_read";
  MemScope ms;
  if (!ParseMemScope(scope, &ms) || ms == MemScope::kGlobal) {
    return Invalid(prim, absl::StrCat("unknown cache scope '", scope, "'; use shared or local"));
  }
  BufferPtr src;
  int insert_at = 0;
  if (int i = StageIndex(tensor); i >= 0) {
    if (stages_[i].inlined()) {
      return Precondition(prim, absl::StrCat("stage ", tensor,
                                             " was inlined; it has no buffer "
                                             "to cache"));
    }
    src = stages_[i].buffer;
    insert_at = i + 1;
    // A stage computed in another's pass is there when that stage has run.
    if (int by = StageIndex(stages_[i].computed_by); by > i) insert_at = by + 1;
  } else {
    for (const BufferPtr& b : inputs_) {
      if (b->name == tensor) src = b;
    }
  }
  if (!src) {
    return Invalid(prim, absl::StrCat("no tensor named '", tensor, "' to cache"));
  }
  if (readers.empty()) return Invalid(prim, "needs at least one reader stage");
  std::vector<int> reader_idx;
  for (BlockRV r : readers) {
    auto st = MutableStage(r, prim);
    if (!st.ok()) return st.status();
    if (!Reads(**st, src.get())) {
      return Precondition(prim, absl::StrCat("stage ", (*st)->name, " does not read ", tensor));
    }
    if ((*st)->online_max == tensor || (*st)->centered_sum == tensor) {
      return Precondition(
          prim, absl::StrCat("stage ", (*st)->name, " computes ", tensor, " in the same pass (",
                             (*st)->online_max == tensor ? "fuse_online_max" : "fuse_centered_sum",
                             "); it holds ", tensor, " in a register already"));
    }
    reader_idx.push_back(StageIndex((*st)->name));
  }
  Stage c;
  c.name = UniqueStageName(absl::StrCat(tensor, "_", scope));
  c.buffer = MakeBuffer(c.name, src->dtype, src->shape, ms);
  std::vector<Expr> idx;
  for (size_t d = 0; d < src->shape.size(); ++d) {
    c.axes.push_back(MakeVar(absl::StrCat("ax", d)));
    c.iters.push_back(IterVar{c.axes.back(), src->shape[d]});
    c.leaves.push_back(static_cast<int>(d));
    idx.push_back(c.axes.back());
  }
  c.body = MakeLoad(src, idx);
  c.origin = "cache_read";
  BufferReplacer rep(src.get(), c.buffer);
  for (int i : reader_idx) stages_[i].body = rep.Visit(stages_[i].body);
  // Readers keep their indices; insert the copy stage before its first reader.
  int first_reader = *std::min_element(reader_idx.begin(), reader_idx.end());
  insert_at = std::min(std::max(insert_at, 0), first_reader);
  stages_.insert(stages_.begin() + insert_at, std::move(c));
  const std::string& name = stages_[insert_at].name;
  Instruction inst{prim, {}, {{"tensor", tensor}, {"scope", scope}}, {}, {}};
  for (BlockRV r : readers) inst.inputs.push_back(RVName(r.id));
  BlockRV out{static_cast<int>(rvs_.size())};
  inst.outputs.push_back(NewRV('b', {0, name}));
  Record(std::move(inst));
  return out;
}

absl::StatusOr<BlockRV> Schedule::CacheWrite(BlockRV block, const std::string& scope) {
  const char* prim = "cache_write";
  MemScope ms;
  if (!ParseMemScope(scope, &ms) || ms == MemScope::kGlobal) {
    return Invalid(prim, absl::StrCat("unknown cache scope '", scope, "'; use shared or local"));
  }
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  if (!s->relations.empty() || s->attach.kind != AttachPoint::Kind::kRoot) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " has transformed loops or is attached; cache_write "
                                           "must come before its loops are transformed"));
  }
  if (!s->online_max.empty()) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " computes ", s->online_max,
                                           " in the same pass (fuse_online_max); cache_write "
                                           "it before fusing"));
  }
  if (!s->centered_sum.empty()) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " computes ", s->centered_sum,
                                           " in the same reduction (fuse_centered_sum); "
                                           "cache_write it before fusing"));
  }
  // cache_write resets the stage's loops: a binding, loop kind, annotation or decomposed
  // initialization would be dropped silently while the trace still holds it.
  for (int leaf : s->leaves) {
    const IterVar& iv = s->iters[leaf];
    if (iv.thread != ThreadTag::kNone || iv.kind != ForKind::kSerial || !iv.annotations.empty()) {
      const std::string what = iv.thread != ThreadTag::kNone
                                   ? absl::StrCat("bound to ", ThreadTagName(iv.thread))
                               : iv.kind != ForKind::kSerial ? std::string(ForKindName(iv.kind))
                                                             : std::string("annotated");
      return Precondition(prim, absl::StrCat(LoopDesc(*s, leaf), " is already ", what,
                                             "; cache_write must come before its loops are "
                                             "transformed"));
    }
  }
  if (s->init_at >= 0) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " has a decomposed reduction; cache_write must come "
                                           "before its loops are transformed"));
  }
  Stage c;
  c.name = UniqueStageName(absl::StrCat(s->name, "_", scope));
  c.buffer = MakeBuffer(c.name, s->buffer->dtype, s->buffer->shape, ms);
  // The cache stage takes over the computation with fresh variables.
  std::unordered_map<const VarNode*, Expr> map;
  for (const VarPtr& a : s->axes) {
    c.axes.push_back(MakeVar(a->name));
    map[a.get()] = c.axes.back();
  }
  for (const VarPtr& a : s->reduce_axes) {
    c.reduce_axes.push_back(MakeVar(a->name));
    map[a.get()] = c.reduce_axes.back();
  }
  c.reduce = s->reduce;
  c.body = Substitute(s->body, map);
  for (int i = 0; i < s->num_root(); ++i) {
    IterVar iv = s->iters[i];
    iv.var = i < static_cast<int>(c.axes.size()) ? c.axes[i] : c.reduce_axes[i - c.axes.size()];
    iv.kind = ForKind::kSerial;
    iv.thread = ThreadTag::kNone;
    c.iters.push_back(iv);
    c.leaves.push_back(i);
  }
  c.annotations = s->annotations;
  c.origin = "cache_write";
  // The stage becomes a copy of the cache.
  std::vector<Expr> idx(s->axes.begin(), s->axes.end());
  s->body = MakeLoad(c.buffer, idx);
  s->reduce.reset();
  s->reduce_axes.clear();
  std::vector<int64_t> extents(s->buffer->shape.begin(), s->buffer->shape.end());
  ResetLoops(s, extents);
  const int at = StageIndex(s->name);
  stages_.insert(stages_.begin() + at, std::move(c));
  const std::string name = stages_[at].name;
  BlockRV out{static_cast<int>(rvs_.size())};
  Record(Instruction{prim, {RVName(block.id)}, {{"scope", scope}}, {NewRV('b', {0, name})}, {}});
  return out;
}

const Stage* Schedule::AttachedTo(const std::string& name) const {
  for (const Stage& o : stages_) {
    if (o.attach.kind == AttachPoint::Kind::kAt && o.attach.stage == name) return &o;
  }
  return nullptr;
}

absl::Status Schedule::AttachAt(Stage* s, AttachPoint at, BlockRV block, LoopRV loop,
                                const char* prim) {
  const AttachPoint saved = s->attach;
  s->attach = std::move(at);
  auto region = InferRootExtents(stages_, StageIndex(s->name));
  if (!region.ok()) {
    s->attach = saved;
    return Precondition(prim, std::string(region.status().message()));
  }
  ResetLoops(s, *region);
  SyncFused(*s);
  Record(Instruction{prim, {RVName(block.id), RVName(loop.id)}, {}, {}, {}});
  return absl::OkStatus();
}

void Schedule::SyncFused(const Stage& s) {
  for (const std::string& fused : s.FusedStages()) {
    const int m = StageIndex(fused);
    TESSEL_CHECK(m >= 0) << "stage " << fused << " fused into " << s.name << " is gone";
    stages_[m].attach = s.attach;
  }
}

absl::Status Schedule::CheckComputeAt(const Stage* s, const Stage* t, const char* prim) const {
  if (s == t) return Invalid(prim, absl::StrCat("cannot attach stage ", s->name, " to itself"));
  if (s->is_output) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is an output; attach its producers to it instead, "
                                           "or use reverse_compute_at"));
  }
  if (IsAttachedWithin(*t, s->name)) {
    return Precondition(prim, absl::StrCat("stage ", t->name, " is attached inside stage ", s->name,
                                           "; attaching back would make a cycle"));
  }
  // A stage in global memory that the target reads at its own indices is computed whole over the
  // target's kernel (one point per iteration of the target's loops), so readers in later kernels
  // see all of it.
  const bool whole = s->buffer->scope == MemScope::kGlobal &&
                     s->buffer->shape == t->buffer->shape && ReadsAtIdentity(*t, s->buffer.get());
  const int target_root = KernelRootIndex(stages_, StageIndex(t->name));
  for (int c : Consumers(s->buffer.get())) {
    const Stage& cs = stages_[c];
    if (cs.name == t->name || IsAttachedWithin(cs, t->name)) continue;
    if (whole && KernelRootIndex(stages_, c) > target_root) continue;
    return Precondition(prim,
                        absl::StrCat("stage ", s->name, " is also read by stage ", cs.name,
                                     ", which is not inside stage ", t->name,
                                     "; cache_read it for each reader or attach that reader too"));
  }
  if (Consumers(s->buffer.get()).empty()) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " has no consumer"));
  }
  return absl::OkStatus();
}

absl::Status Schedule::ComputeAt(BlockRV block, LoopRV loop) {
  const char* prim = "compute_at";
  if (loop.id == kRootLoop || loop.id == kInlineLoop) {
    // Markers from sample_compute_location.
    auto st = MutableStage(block, prim);
    if (!st.ok()) return st.status();
    if (loop.id == kInlineLoop) return ComputeInline(block);
    Stage* s = *st;
    if (s->attach.kind == AttachPoint::Kind::kAt) {
      s->attach = AttachPoint{};
      std::vector<int64_t> ext(s->buffer->shape.begin(), s->buffer->shape.end());
      for (const IterVar& iv : s->iters) {
        if (iv.reduce && static_cast<int>(ext.size()) < s->num_root()) ext.push_back(iv.extent);
      }
      ResetLoops(s, ext);
      SyncFused(*s);
    }
    Record(Instruction{prim, {RVName(block.id), "root"}, {}, {}, {}});
    return absl::OkStatus();
  }
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  auto l = MutableLoop(loop, prim);
  if (!l.ok()) return l.status();
  Stage* s = *st;
  auto [t, iter] = *l;
  TESSEL_RETURN_IF_ERROR(CheckComputeAt(s, t, prim));
  return AttachAt(s, AttachPoint{AttachPoint::Kind::kAt, t->name, iter, false}, block, loop, prim);
}

absl::Status Schedule::ReverseComputeAt(BlockRV block, LoopRV loop) {
  const char* prim = "reverse_compute_at";
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  auto l = MutableLoop(loop, prim);
  if (!l.ok()) return l.status();
  Stage* s = *st;
  auto [t, iter] = *l;
  if (s == t) return Invalid(prim, absl::StrCat("cannot attach stage ", s->name, " to itself"));
  if (s->reduce) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is a reduction; only injective consumers can be "
                                           "attached after their producer"));
  }
  if (!ReadsAtIdentity(*s, t->buffer.get())) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " must read ", t->name,
                                           " at its own indices (an elementwise consumer)"));
  }
  if (t->buffer->scope != MemScope::kGlobal && Consumers(t->buffer.get()).size() > 1) {
    return Precondition(prim,
                        absl::StrCat("stage ", t->name, " is in ", MemScopeName(t->buffer->scope),
                                     " memory and has other consumers than ", s->name));
  }
  if (IsAttachedWithin(*t, s->name)) {
    return Precondition(prim, absl::StrCat("stage ", t->name, " is attached inside stage ", s->name,
                                           "; attaching back would make a cycle"));
  }
  return AttachAt(s, AttachPoint{AttachPoint::Kind::kAt, t->name, iter, true}, block, loop, prim);
}

absl::Status Schedule::ComputeInline(BlockRV block) {
  const char* prim = "compute_inline";
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  if (s->reduce) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is a reduction; only injective stages can be "
                                           "inlined"));
  }
  if (s->is_output) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is an output of the workload; "
                                           "outputs must be stored"));
  }
  if (const Stage* o = AttachedTo(s->name)) {
    return Precondition(prim, absl::StrCat("stage ", o->name, " is attached to a loop of ", s->name,
                                           "; move it before inlining ", s->name));
  }
  std::vector<int> consumers = Consumers(s->buffer.get());
  if (consumers.empty()) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " has no consumer to inline into"));
  }
  Inliner inl(s->buffer.get(), s->axes, s->body);
  for (int c : consumers) stages_[c].body = inl.Visit(stages_[c].body);
  s->attach = AttachPoint{AttachPoint::Kind::kInline, "", -1, false};
  Record(Instruction{prim, {RVName(block.id)}, {}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::ReverseComputeInline(BlockRV block) {
  const char* prim = "reverse_compute_inline";
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  if (s->reduce) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is a reduction; only injective consumers can be "
                                           "inlined into their producer"));
  }
  // The producer: the one computed (non-input) stage that s reads at identity indices.
  Stage* p = nullptr;
  for (Stage& cand : stages_) {
    if (&cand == s || cand.inlined()) continue;
    if (Reads(*s, cand.buffer.get())) {
      if (p) {
        return Precondition(
            prim, absl::StrCat("stage ", s->name, " reads two computed stages (", p->name, " and ",
                               cand.name, "); it can be inlined into one producer only"));
      }
      p = &cand;
    }
  }
  if (!p) {
    return Precondition(
        prim, absl::StrCat("stage ", s->name, " reads no computed stage to be inlined into"));
  }
  if (p->reduce) {
    return Precondition(prim, absl::StrCat("producer ", p->name, " of stage ", s->name,
                                           " is a reduction; cache_write it first and inline into "
                                           "the write-back stage"));
  }
  if (!ReadsAtIdentity(*s, p->buffer.get()) || s->axes.size() != p->axes.size() ||
      s->buffer->shape != p->buffer->shape) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " must read ", p->name,
                                           " at its own indices, with the same shape"));
  }
  if (Consumers(p->buffer.get()).size() != 1) {
    return Precondition(prim,
                        absl::StrCat("producer ", p->name, " has other consumers than ", s->name));
  }
  if (const Stage* o = AttachedTo(s->name)) {
    return Precondition(prim, absl::StrCat("stage ", o->name, " is attached to a loop of ", s->name,
                                           "; move it before inlining ", s->name));
  }
  if (p->is_output) {
    return Precondition(prim, absl::StrCat("producer ", p->name, " is an output"));
  }
  // The merged stage stores s's values. Where s lives in global memory (an output always does),
  // a producer in shared/local memory would take s's values there with it.
  if (s->buffer->scope == MemScope::kGlobal && p->buffer->scope != MemScope::kGlobal) {
    return Precondition(
        prim, absl::StrCat("producer ", p->name, " is in ", MemScopeName(p->buffer->scope),
                           " memory; ", s->is_output ? "the output " : "stage ", s->name,
                           " must stay in global memory (set_scope ", p->name,
                           " global first, or do not inline ", s->name, ")"));
  }
  // p now computes s: s's body with s's axes renamed to p's and p's value substituted.
  std::unordered_map<const VarNode*, Expr> rename;
  for (size_t i = 0; i < s->axes.size(); ++i) rename[s->axes[i].get()] = p->axes[i];
  Expr body = Substitute(s->body, rename);
  Inliner inl(p->buffer.get(), p->axes, p->body);
  p->body = inl.Visit(body);
  BufferPtr old = p->buffer;
  p->buffer =
      MakeBuffer(s->buffer->name, s->buffer->dtype, s->buffer->shape, old->scope, old->strides);
  p->is_output = s->is_output;
  BufferPtr out_buffer = s->buffer;
  s->attach = AttachPoint{AttachPoint::Kind::kInline, "", -1, false};
  // Keep the workload's buffer object for outputs so that later stages and lowering agree.
  if (old->scope == out_buffer->scope) p->buffer = out_buffer;
  ReplaceBuffer(out_buffer, p->buffer);
  Record(Instruction{prim, {RVName(block.id)}, {}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::SetScope(BlockRV block, const std::string& scope) {
  const char* prim = "set_scope";
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  MemScope ms;
  if (!ParseMemScope(scope, &ms)) {
    return Invalid(prim, absl::StrCat("unknown scope '", scope, "'; use global, shared or local"));
  }
  if (s->is_output && ms != MemScope::kGlobal) {
    return Precondition(
        prim, absl::StrCat("stage ", s->name, " is an output and must stay in global memory"));
  }
  BufferPtr nb =
      MakeBuffer(s->buffer->name, s->buffer->dtype, s->buffer->shape, ms, s->buffer->strides);
  ReplaceBuffer(s->buffer, nb);
  Record(Instruction{prim, {RVName(block.id)}, {{"scope", scope}}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::StorageAlign(BlockRV block, int axis, int64_t factor, int64_t offset) {
  const char* prim = "storage_align";
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  const int rank = static_cast<int>(s->buffer->shape.size());
  if (axis < 0 || axis >= rank - 1) {
    return Invalid(prim, absl::StrCat("axis ", axis, " of stage ", s->name, " (rank ", rank,
                                      ") must be an outer axis in [0, ", rank - 1,
                                      "): the innermost stride is always 1"));
  }
  if (factor <= 0 || offset < 0 || offset >= factor) {
    return Invalid(prim, absl::StrCat("needs factor > 0 and 0 <= offset < factor, got factor ",
                                      factor, " offset ", offset));
  }
  if (s->buffer->scope == MemScope::kGlobal) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is in global memory; storage_align pads buffers the "
                                           "kernel allocates (shared, local)"));
  }
  s->aligns.push_back(schedules::StorageAlign{axis, factor, offset});
  Record(Instruction{
      prim, {RVName(block.id)}, {{"axis", axis}, {"factor", factor}, {"offset", offset}}, {}, {}});
  return absl::OkStatus();
}

absl::Status Schedule::SplitBufferAxis(BlockRV block, int axis,
                                       const std::vector<Factor>& factor_args) {
  const char* prim = "split_buffer_axis";
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  const int rank = static_cast<int>(s->buffer->shape.size());
  if (axis < 0 || axis >= rank) {
    return Invalid(prim, absl::StrCat("axis ", axis, " of stage ", s->name, " (rank ", rank,
                                      ") must be in [0, ", rank, ")"));
  }
  const int64_t dim = s->buffer->shape[axis];
  std::vector<int64_t> factors;
  for (const Factor& f : factor_args) factors.push_back(f.rv.id >= 0 ? Value(f.rv) : f.value);
  if (factors.size() < 2) {
    return Invalid(prim, absl::StrCat("needs at least two factors to split axis ", axis,
                                      " of stage ", s->name, ", got ", factors.size()));
  }
  std::vector<int64_t> fs = factors;
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < fs.size(); ++i) {
    if (fs[i] == -1 && inferred < 0) {
      inferred = static_cast<int>(i);
    } else if (fs[i] <= 0) {
      return Invalid(prim, absl::StrCat("factors [", absl::StrJoin(factors, ", "),
                                        "] must be positive; at most one may be -1 (inferred)"));
    } else {
      known *= fs[i];
    }
  }
  if (inferred >= 0) fs[inferred] = dim % known == 0 ? dim / known : 0;
  const int64_t product =
      std::accumulate(fs.begin(), fs.end(), int64_t{1}, std::multiplies<int64_t>());
  if (product != dim) {
    return Invalid(
        prim, absl::StrCat("factors [", absl::StrJoin(factors, ", "),
                           "] do not multiply to the extent ", dim, " of axis ", axis, " of stage ",
                           s->name, "; give factors whose product is ", dim));
  }
  if (s->is_output) {
    return Precondition(
        prim, absl::StrCat("stage ", s->name, " is an output; its layout is the workload's"));
  }
  if (!s->online_max.empty() || !s->centered_sum.empty() || !s->computed_by.empty()) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is part of a fused pair (fuse_online_max or "
                                           "fuse_centered_sum); split its axis before fusing"));
  }
  bool fresh = s->relations.empty() && s->attach.kind == AttachPoint::Kind::kRoot &&
               s->init_at < 0 && static_cast<int>(s->leaves.size()) == s->num_root();
  for (int i = 0; fresh && i < s->num_root(); ++i) {
    const IterVar& iv = s->iters[i];
    fresh = s->leaves[i] == i && iv.kind == ForKind::kSerial && iv.thread == ThreadTag::kNone;
  }
  for (const Stage& o : stages_) {
    if (o.attach.kind == AttachPoint::Kind::kAt && o.attach.stage == s->name) fresh = false;
  }
  if (!fresh) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " has transformed or attached loops; "
                                           "split_buffer_axis must come before its loops are "
                                           "transformed and before compute_at"));
  }
  if (!s->aligns.empty()) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is padded with storage_align; split its axis "
                                           "before storage_align"));
  }
  std::vector<int64_t> strides(fs.size(), 1);
  for (int i = static_cast<int>(fs.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * fs[i + 1];

  // The new axes replace the old one in the body: old = sum of new_i * stride_i.
  const VarPtr old = s->axes[axis];
  std::vector<VarPtr> parts;
  Expr value;
  for (size_t i = 0; i < fs.size(); ++i) {
    parts.push_back(MakeVar(absl::StrCat(old->name, "_", i), old->dtype));
    Expr term = strides[i] == 1 ? Expr(parts.back()) : parts.back() * strides[i];
    value = value ? value + term : term;
  }
  s->body = Substitute(s->body, {{old.get(), value}});
  std::vector<int64_t> shape = s->buffer->shape;
  shape.erase(shape.begin() + axis);
  shape.insert(shape.begin() + axis, fs.begin(), fs.end());
  BufferPtr nb = MakeBuffer(s->buffer->name, s->buffer->dtype, shape, s->buffer->scope);
  std::vector<IterVar> iters;
  for (int i = 0; i < s->num_root(); ++i) {
    if (i != axis) {
      iters.push_back(s->iters[i]);
      continue;
    }
    for (size_t p = 0; p < fs.size(); ++p) iters.push_back(IterVar{parts[p], fs[p]});
  }
  s->axes.erase(s->axes.begin() + axis);
  s->axes.insert(s->axes.begin() + axis, parts.begin(), parts.end());
  s->iters = std::move(iters);
  s->leaves.resize(s->iters.size());
  std::iota(s->leaves.begin(), s->leaves.end(), 0);
  ++s->loop_generation;

  AxisSplitter split(s->buffer.get(), nb, axis, fs, strides);
  for (Stage& o : stages_) o.body = split.Visit(o.body);
  s->buffer = nb;
  // Like split: literal factors as given (-1 stays inferred), sampled ones as null inputs.
  Instruction inst{prim, {RVName(block.id)}, {{"axis", axis}}, {}, {}};
  nlohmann::json lit = nlohmann::json::array();
  for (const Factor& f : factor_args) {
    if (f.rv.id >= 0) {
      inst.inputs.push_back(RVName(f.rv.id));
      lit.push_back(nullptr);
    } else {
      lit.push_back(f.value);
    }
  }
  inst.attrs["factors"] = lit;
  Record(std::move(inst));
  return absl::OkStatus();
}

absl::Status Schedule::Annotate(LoopRV loop, const std::string& key, Factor value) {
  auto l = MutableLoop(loop, "annotate");
  if (!l.ok()) return l.status();
  auto [s, iter] = *l;
  if (key.empty()) return Invalid("annotate", "the annotation key is empty");
  s->iters[iter].annotations.emplace_back(key, value.rv.id >= 0 ? Value(value.rv) : value.value);
  RecordAnnotate("annotate_loop", RVName(loop.id), key, value);
  return absl::OkStatus();
}

absl::Status Schedule::Annotate(BlockRV block, const std::string& key, Factor value) {
  auto st = MutableStage(block, "annotate");
  if (!st.ok()) return st.status();
  if (key.empty()) return Invalid("annotate", "the annotation key is empty");
  (*st)->annotations[key] = value.rv.id >= 0 ? Value(value.rv) : value.value;
  RecordAnnotate("annotate_stage", RVName(block.id), key, value);
  return absl::OkStatus();
}

void Schedule::RecordAnnotate(const char* kind, const std::string& target, const std::string& key,
                              Factor value) {
  // A sampled value is an input (its attribute is null), as in split.
  if (value.rv.id >= 0) {
    Record(Instruction{
        kind, {target, RVName(value.rv.id)}, {{"key", key}, {"value", nullptr}}, {}, {}});
  } else {
    Record(Instruction{kind, {target}, {{"key", key}, {"value", value.value}}, {}, {}});
  }
}

absl::Status Schedule::DecomposeReduction(BlockRV block, LoopRV loop) {
  const char* prim = "decompose_reduction";
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  auto l = MutableLoop(loop, prim);
  if (!l.ok()) return l.status();
  Stage* s = *st;
  auto [t, iter] = *l;
  if (t != s) {
    return Invalid(prim, absl::StrCat(LoopDesc(*t, iter), " is not a loop of stage ", s->name));
  }
  if (!s->reduce) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " is not a reduction"));
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

absl::Status Schedule::FuseOnlineMax(BlockRV block) {
  const char* prim = "fuse_online_max";
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
  const char* prim = "fuse_centered_sum";
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
  const char* prim = "center_partials";
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

absl::StatusOr<BlockRV> Schedule::RFactor(LoopRV loop) {
  const char* prim = "rfactor";
  auto l = MutableLoop(loop, prim);
  if (!l.ok()) return l.status();
  auto [s, iter] = *l;
  if (!s->reduce || !s->iters[iter].reduce) {
    return Invalid(prim, absl::StrCat(LoopDesc(*s, iter), " is not a reduction loop"));
  }
  if (s->attach.kind != AttachPoint::Kind::kRoot) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " is attached; rfactor it first"));
  }
  if (!s->online_max.empty()) {
    return Precondition(prim, absl::StrCat("stage ", s->name, " computes ", s->online_max,
                                           " in the same pass (fuse_online_max); rfactor it "
                                           "before fusing"));
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
  const ReduceOp op = *s->reduce;

  // New stage: rf[axes..., f] = reduce over (other, remaining reduce roots) of body.
  Stage rf;
  rf.name = UniqueStageName(absl::StrCat(s->name, "_rf"));
  std::vector<int64_t> shape = s->buffer->shape;
  shape.push_back(f_extent);
  rf.buffer = MakeBuffer(rf.name, s->buffer->dtype, shape, MemScope::kGlobal);
  std::unordered_map<const VarNode*, Expr> map;
  for (const VarPtr& a : s->axes) {
    rf.axes.push_back(MakeVar(a->name));
    map[a.get()] = rf.axes.back();
  }
  VarPtr fv = MakeVar(s->iters[iter].var->name);
  rf.axes.push_back(fv);
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
    body = MakeSelect(k < root_extent, body, ReduceIdentity(op, body->dtype));
  }
  rf.body = body;
  rf.reduce = op;
  for (size_t d = 0; d < rf.axes.size(); ++d) rf.iters.push_back(IterVar{rf.axes[d], shape[d]});
  for (size_t r = 0; r < rf.reduce_axes.size(); ++r) {
    IterVar iv{rf.reduce_axes[r], rext[r]};
    iv.reduce = true;
    rf.iters.push_back(iv);
  }
  rf.leaves.resize(rf.iters.size());
  std::iota(rf.leaves.begin(), rf.leaves.end(), 0);
  rf.origin = "rfactor";
  rf.annotations = s->annotations;

  // The stage reduces the partials: s[axes] = reduce over f of rf[axes, f].
  VarPtr sv = MakeVar(s->iters[iter].var->name);
  std::vector<Expr> idx(s->axes.begin(), s->axes.end());
  idx.push_back(sv);
  s->body = MakeLoad(rf.buffer, idx);
  s->reduce_axes = {sv};
  std::vector<int64_t> ext(s->buffer->shape.begin(), s->buffer->shape.end());
  ext.push_back(f_extent);
  s->iters.resize(s->axes.size());
  IterVar riv{sv, f_extent};
  riv.reduce = true;
  s->iters.push_back(riv);
  ResetLoops(s, ext);
  const int at = StageIndex(s->name);
  const std::string sname = s->name;
  stages_.insert(stages_.begin() + at, std::move(rf));
  const std::string name = stages_[at].name;
  BlockRV out{static_cast<int>(rvs_.size())};
  Record(Instruction{prim, {RVName(loop.id)}, {}, {NewRV('b', {0, name})}, {}});
  (void)sname;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Replay.

namespace {

// Typed reads of trace JSON values. nlohmann::json's get<T>() throws on a type mismatch, and a
// trace may come from a corrupt database row, so every value is checked first.
bool IsIntArray(const nlohmann::json& j) {
  return j.is_array() && std::all_of(j.begin(), j.end(),
                                     [](const nlohmann::json& x) { return x.is_number_integer(); });
}

bool IsNumberArray(const nlohmann::json& j) {
  return j.is_array() &&
         std::all_of(j.begin(), j.end(), [](const nlohmann::json& x) { return x.is_number(); });
}

}  // namespace

absl::StatusOr<Schedule> Replay(const Workload& workload, const Trace& trace, uint64_t seed) {
  auto created = Schedule::Create(workload, seed);
  if (!created.ok()) return created.status();
  Schedule sch = std::move(*created);
  std::map<std::string, int> rv;  // trace name -> id in this schedule
  // Applies one instruction. Its errors carry no position; the loop below adds
  // "replaying instruction N (kind): " to every one of them.
  auto apply = [&](const Instruction& inst) -> absl::Status {
    auto fail = [](const std::string& msg) { return absl::InvalidArgumentError(msg); };
    auto input = [&](size_t i, char kind, int* id) -> absl::Status {
      if (i >= inst.inputs.size()) return fail(absl::StrCat("missing input ", i));
      const std::string& name = inst.inputs[i];
      if (kind == 'l' && (name == "root" || name == "inline")) {
        *id = name == "root" ? Schedule::kRootLoop : Schedule::kInlineLoop;
        return absl::OkStatus();
      }
      auto it = rv.find(name);
      if (it == rv.end()) return fail(absl::StrCat("input ", name, " is not defined before"));
      if (name.empty() || name[0] != kind) {
        return fail(absl::StrCat("input ", name, " has the wrong kind (expected a ",
                                 kind == 'b'   ? "stage"
                                 : kind == 'l' ? "loop"
                                               : "value",
                                 ")"));
      }
      *id = it->second;
      return absl::OkStatus();
    };
    auto bind_outputs = [&](const std::vector<int>& ids) -> absl::Status {
      if (ids.size() != inst.outputs.size()) {
        return fail(absl::StrCat("produced ", ids.size(), " results but the trace names ",
                                 inst.outputs.size()));
      }
      for (size_t i = 0; i < ids.size(); ++i) rv[inst.outputs[i]] = ids[i];
      return absl::OkStatus();
    };
    const nlohmann::json& a = inst.attrs;
    if (!a.is_null() && !a.is_object()) return fail("\"attrs\" must be an object");
    auto attr_int = [&](const char* key) -> absl::StatusOr<int64_t> {
      if (!a.contains(key) || !a[key].is_number_integer()) {
        return fail(absl::StrCat("attribute \"", key, "\" must be an integer"));
      }
      return a[key].get<int64_t>();
    };
    auto attr_str = [&](const char* key) -> absl::StatusOr<std::string> {
      if (!a.contains(key) || !a[key].is_string()) {
        return fail(absl::StrCat("attribute \"", key, "\" must be a string"));
      }
      return a[key].get<std::string>();
    };
    // A scalar decision: absent (null: sample) or an integer.
    auto int_decision = [&](std::optional<int64_t>* out) -> absl::Status {
      if (inst.decision.is_null()) return absl::OkStatus();
      if (!inst.decision.is_number_integer()) return fail("\"decision\" must be an integer");
      *out = inst.decision.get<int64_t>();
      return absl::OkStatus();
    };
    auto loop_ids = [](const std::vector<LoopRV>& v) {
      std::vector<int> ids;
      for (LoopRV x : v) ids.push_back(x.id);
      return ids;
    };
    const std::string& k = inst.kind;
    int b = -1, l = -1;
    if (k == "get_stage") {
      TESSEL_ASSIGN_OR_RETURN(std::string name, attr_str("name"));
      TESSEL_ASSIGN_OR_RETURN(BlockRV r, sch.GetBlock(name));
      return bind_outputs({r.id});
    }
    if (k == "get_loops") {
      TESSEL_RETURN_IF_ERROR(input(0, 'b', &b));
      TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> r, sch.GetLoops(BlockRV{b}));
      return bind_outputs(loop_ids(r));
    }
    if (k == "sample_perfect_tile") {
      TESSEL_RETURN_IF_ERROR(input(0, 'l', &l));
      TESSEL_ASSIGN_OR_RETURN(int64_t nn, attr_int("n"));
      TESSEL_ASSIGN_OR_RETURN(int64_t mi, attr_int("max_innermost"));
      if (nn < std::numeric_limits<int>::min() || nn > std::numeric_limits<int>::max()) {
        return fail(absl::StrCat("attribute \"n\" (", nn, ") is out of range"));
      }
      std::optional<std::vector<int64_t>> dec;
      if (!inst.decision.is_null()) {
        if (!IsIntArray(inst.decision)) return fail("\"decision\" must be an array of integers");
        dec = inst.decision.get<std::vector<int64_t>>();
      }
      TESSEL_ASSIGN_OR_RETURN(std::vector<IntRV> r,
                              sch.SamplePerfectTile(LoopRV{l}, static_cast<int>(nn), mi, dec));
      std::vector<int> ids;
      for (IntRV x : r) ids.push_back(x.id);
      return bind_outputs(ids);
    }
    if (k == "sample_categorical") {
      if (!a.contains("candidates") || !a.contains("probs")) {
        return fail("needs \"candidates\" and \"probs\"");
      }
      if (!IsIntArray(a["candidates"])) {
        return fail("attribute \"candidates\" must be an array of integers");
      }
      if (!IsNumberArray(a["probs"]))
        return fail("attribute \"probs\" must be an array of numbers");
      std::optional<int64_t> dec;
      TESSEL_RETURN_IF_ERROR(int_decision(&dec));
      TESSEL_ASSIGN_OR_RETURN(IntRV r,
                              sch.SampleCategorical(a["candidates"].get<std::vector<int64_t>>(),
                                                    a["probs"].get<std::vector<double>>(), dec));
      return bind_outputs({r.id});
    }
    if (k == "sample_compute_location") {
      TESSEL_RETURN_IF_ERROR(input(0, 'b', &b));
      std::optional<int64_t> dec;
      TESSEL_RETURN_IF_ERROR(int_decision(&dec));
      if (inst.inputs.size() > 1) {
        // The explicit form: the candidate loops follow the stage.
        std::vector<LoopRV> cands;
        for (size_t i = 1; i < inst.inputs.size(); ++i) {
          TESSEL_RETURN_IF_ERROR(input(i, 'l', &l));
          cands.push_back(LoopRV{l});
        }
        TESSEL_ASSIGN_OR_RETURN(LoopRV r, sch.SampleComputeLocation(BlockRV{b}, cands, dec));
        return bind_outputs({r.id});
      }
      TESSEL_ASSIGN_OR_RETURN(LoopRV r, sch.SampleComputeLocation(BlockRV{b}, dec));
      if (r.id < 0) {
        if (inst.outputs.size() != 1) return fail("needs one output");
        rv[inst.outputs[0]] = r.id;
        return absl::OkStatus();
      }
      return bind_outputs({r.id});
    }
    if (k == "split") {
      TESSEL_RETURN_IF_ERROR(input(0, 'l', &l));
      if (!a.contains("factors") || !a["factors"].is_array()) {
        return fail("attribute \"factors\" must be an array");
      }
      std::vector<Factor> fs;
      size_t next = 1;
      for (const auto& f : a["factors"]) {
        if (f.is_null()) {
          int v = -1;
          TESSEL_RETURN_IF_ERROR(input(next++, 'v', &v));
          fs.emplace_back(IntRV{v});
        } else if (f.is_number_integer()) {
          fs.emplace_back(f.get<int64_t>());
        } else {
          return fail("factors must be integers or null");
        }
      }
      TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> r, sch.Split(LoopRV{l}, fs));
      return bind_outputs(loop_ids(r));
    }
    if (k == "fuse" || k == "reorder") {
      std::vector<LoopRV> loops;
      for (size_t i = 0; i < inst.inputs.size(); ++i) {
        TESSEL_RETURN_IF_ERROR(input(i, 'l', &l));
        loops.push_back(LoopRV{l});
      }
      if (k == "reorder") return sch.Reorder(loops);
      TESSEL_ASSIGN_OR_RETURN(LoopRV r, sch.Fuse(loops));
      return bind_outputs({r.id});
    }
    if (k == "bind" || k == "parallel" || k == "vectorize" || k == "unroll") {
      TESSEL_RETURN_IF_ERROR(input(0, 'l', &l));
      if (k == "bind") {
        TESSEL_ASSIGN_OR_RETURN(std::string t, attr_str("thread"));
        return sch.Bind(LoopRV{l}, t);
      }
      if (k == "parallel") return sch.Parallel(LoopRV{l});
      if (k == "vectorize") return sch.Vectorize(LoopRV{l});
      return sch.Unroll(LoopRV{l});
    }
    if (k == "cache_read") {
      TESSEL_ASSIGN_OR_RETURN(std::string tensor, attr_str("tensor"));
      TESSEL_ASSIGN_OR_RETURN(std::string scope, attr_str("scope"));
      std::vector<BlockRV> readers;
      for (size_t i = 0; i < inst.inputs.size(); ++i) {
        TESSEL_RETURN_IF_ERROR(input(i, 'b', &b));
        readers.push_back(BlockRV{b});
      }
      TESSEL_ASSIGN_OR_RETURN(BlockRV r, sch.CacheRead(tensor, scope, readers));
      return bind_outputs({r.id});
    }
    if (k == "cache_write" || k == "set_scope") {
      TESSEL_RETURN_IF_ERROR(input(0, 'b', &b));
      TESSEL_ASSIGN_OR_RETURN(std::string scope, attr_str("scope"));
      if (k == "set_scope") return sch.SetScope(BlockRV{b}, scope);
      TESSEL_ASSIGN_OR_RETURN(BlockRV r, sch.CacheWrite(BlockRV{b}, scope));
      return bind_outputs({r.id});
    }
    if (k == "compute_at" || k == "reverse_compute_at" || k == "decompose_reduction") {
      TESSEL_RETURN_IF_ERROR(input(0, 'b', &b));
      TESSEL_RETURN_IF_ERROR(input(1, 'l', &l));
      if (k == "compute_at") return sch.ComputeAt(BlockRV{b}, LoopRV{l});
      if (k == "reverse_compute_at") return sch.ReverseComputeAt(BlockRV{b}, LoopRV{l});
      return sch.DecomposeReduction(BlockRV{b}, LoopRV{l});
    }
    if (k == "center_partials") {
      int b2 = -1;
      TESSEL_RETURN_IF_ERROR(input(0, 'b', &b));
      TESSEL_RETURN_IF_ERROR(input(1, 'b', &b2));
      return sch.CenterPartials(BlockRV{b}, BlockRV{b2});
    }
    if (k == "fuse_online_max" || k == "fuse_centered_sum") {
      TESSEL_RETURN_IF_ERROR(input(0, 'b', &b));
      return k == "fuse_online_max" ? sch.FuseOnlineMax(BlockRV{b})
                                    : sch.FuseCenteredSum(BlockRV{b});
    }
    if (k == "compute_inline" || k == "reverse_compute_inline") {
      TESSEL_RETURN_IF_ERROR(input(0, 'b', &b));
      return k == "compute_inline" ? sch.ComputeInline(BlockRV{b})
                                   : sch.ReverseComputeInline(BlockRV{b});
    }
    if (k == "storage_align") {
      TESSEL_RETURN_IF_ERROR(input(0, 'b', &b));
      TESSEL_ASSIGN_OR_RETURN(int64_t axis, attr_int("axis"));
      TESSEL_ASSIGN_OR_RETURN(int64_t factor, attr_int("factor"));
      TESSEL_ASSIGN_OR_RETURN(int64_t offset, attr_int("offset"));
      if (axis < std::numeric_limits<int>::min() || axis > std::numeric_limits<int>::max()) {
        return fail(absl::StrCat("attribute \"axis\" (", axis, ") is out of range"));
      }
      return sch.StorageAlign(BlockRV{b}, static_cast<int>(axis), factor, offset);
    }
    if (k == "split_buffer_axis") {
      TESSEL_RETURN_IF_ERROR(input(0, 'b', &b));
      TESSEL_ASSIGN_OR_RETURN(int64_t axis, attr_int("axis"));
      if (axis < std::numeric_limits<int>::min() || axis > std::numeric_limits<int>::max()) {
        return fail(absl::StrCat("attribute \"axis\" (", axis, ") is out of range"));
      }
      if (!a.contains("factors") || !a["factors"].is_array()) {
        return fail("attribute \"factors\" must be an array");
      }
      std::vector<Factor> fs;
      size_t next = 1;
      for (const auto& f : a["factors"]) {
        if (f.is_null()) {
          int v = -1;
          TESSEL_RETURN_IF_ERROR(input(next++, 'v', &v));
          fs.emplace_back(IntRV{v});
        } else if (f.is_number_integer()) {
          fs.emplace_back(f.get<int64_t>());
        } else {
          return fail("factors must be integers or null");
        }
      }
      return sch.SplitBufferAxis(BlockRV{b}, static_cast<int>(axis), fs);
    }
    if (k == "annotate_loop" || k == "annotate_stage") {
      TESSEL_ASSIGN_OR_RETURN(std::string key, attr_str("key"));
      Factor value = 0;
      if (a.contains("value") && a["value"].is_null()) {
        int v = -1;
        TESSEL_RETURN_IF_ERROR(input(1, 'v', &v));
        value = IntRV{v};
      } else {
        TESSEL_ASSIGN_OR_RETURN(int64_t literal, attr_int("value"));
        value = literal;
      }
      if (k == "annotate_loop") {
        TESSEL_RETURN_IF_ERROR(input(0, 'l', &l));
        return sch.Annotate(LoopRV{l}, key, value);
      }
      TESSEL_RETURN_IF_ERROR(input(0, 'b', &b));
      return sch.Annotate(BlockRV{b}, key, value);
    }
    if (k == "rfactor") {
      TESSEL_RETURN_IF_ERROR(input(0, 'l', &l));
      TESSEL_ASSIGN_OR_RETURN(BlockRV r, sch.RFactor(LoopRV{l}));
      return bind_outputs({r.id});
    }
    return fail("unknown instruction kind");
  };
  int n = 0;
  for (const Instruction& inst : trace.insts) {
    absl::Status st;
    try {
      st = apply(inst);
    } catch (const nlohmann::json::exception& e) {
      // Backstop: every JSON value is type-checked above; a miss must not crash the caller.
      st = absl::InvalidArgumentError(absl::StrCat("malformed attribute or decision: ", e.what()));
    }
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat("replaying instruction ", n, " (", inst.kind,
                                                  "): ", st.message()));
    }
    ++n;
  }
  return sch;
}

}  // namespace tessel::schedules
