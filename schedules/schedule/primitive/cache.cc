// Cache stages: cache_read copies a tensor into shared or local memory for some of its readers;
// cache_write moves a stage's computation into a shared or local stage that it then copies out;
// reindex copies what one reader reads of a tensor into a buffer indexed by the reader's own
// variables.

#include <algorithm>
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

constexpr char kCacheRead[] = "cache_read";
constexpr char kCacheWrite[] = "cache_write";
constexpr char kReIndex[] = "reindex";

}  // namespace

// The buffer a copy of `tensor` reads (a stage's or an input's) and where the copy's stage may go
// at the earliest: after the stage that computes it.
absl::StatusOr<Schedule::CopySource> Schedule::CopySourceOf(const std::string& tensor,
                                                            const char* prim,
                                                            const char* verb) const {
  CopySource out;
  if (int i = StageIndex(tensor); i >= 0) {
    if (stages_[i].inlined()) {
      return Precondition(
          prim, absl::StrCat("stage ", tensor, " was inlined; it has no buffer to ", verb));
    }
    out.buffer = stages_[i].buffer;
    out.insert_at = i + 1;
    // A stage computed in another's pass is there when that stage has run.
    if (int by = StageIndex(stages_[i].computed_by); by > i) out.insert_at = by + 1;
  } else {
    for (const BufferPtr& b : inputs_) {
      if (b->name == tensor) out.buffer = b;
    }
  }
  if (!out.buffer) {
    return Invalid(prim, absl::StrCat("no tensor named '", tensor, "' to ", verb));
  }
  return out;
}

absl::StatusOr<BlockRV> Schedule::CacheRead(std::string tensor, const std::string& scope,
                                            const std::vector<BlockRV>& readers) {
  const char* prim = kCacheRead;
  MemScope ms;
  if (!ParseMemScope(scope, &ms) || ms == MemScope::kGlobal) {
    return Invalid(
        prim, absl::StrCat("unknown cache scope '", scope, "'; use shared, local or fragment"));
  }
  TESSEL_ASSIGN_OR_RETURN(CopySource source, CopySourceOf(tensor, prim, "cache"));
  const BufferPtr& src = source.buffer;
  int insert_at = source.insert_at;
  if (readers.empty()) return Invalid(prim, "needs at least one reader stage");
  std::vector<int> reader_idx;
  for (BlockRV r : readers) {
    auto st = MutableStage(r, prim);
    if (!st.ok()) return st.status();
    if (!Reads(**st, src.get())) {
      return Precondition(prim, absl::StrCat("stage ", (*st)->name, " does not read ", tensor));
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
  c.origin = kCacheRead;
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
  const char* prim = kCacheWrite;
  MemScope ms;
  if (!ParseMemScope(scope, &ms) || ms == MemScope::kGlobal) {
    return Invalid(
        prim, absl::StrCat("unknown cache scope '", scope, "'; use shared, local or fragment"));
  }
  auto st = MutableStage(block, prim);
  if (!st.ok()) return st.status();
  Stage* s = *st;
  if (!s->relations.empty() || s->attach.kind != AttachPoint::Kind::kRoot) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " has transformed loops or is attached; cache_write "
                                           "must come before its loops are transformed"));
  }
  if (s->combiner) {
    return Precondition(prim, absl::StrCat("stage ", s->name,
                                           " is a tuple reduction (fuse_reductions); cache_write "
                                           "it before fusing"));
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
  c.origin = kCacheWrite;
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

absl::StatusOr<BlockRV> Schedule::ReIndex(BlockRV reader, std::string tensor,
                                          const std::string& scope) {
  const char* prim = kReIndex;
  MemScope ms;
  if (!ParseMemScope(scope, &ms)) {
    return Invalid(
        prim, absl::StrCat("unknown scope '", scope, "'; use global, shared, local or fragment"));
  }
  auto st = MutableStage(reader, prim);
  if (!st.ok()) return st.status();
  const Stage& r = **st;
  if (r.combiner) {
    return Precondition(prim, absl::StrCat("stage ", r.name,
                                           " is a tuple reduction (fuse_reductions); reindex its "
                                           "reads before fusing"));
  }
  TESSEL_ASSIGN_OR_RETURN(CopySource source, CopySourceOf(tensor, prim, "reindex"));
  const BufferPtr& src = source.buffer;
  int insert_at = source.insert_at;
  const std::vector<const LoadNode*> loads = CollectLoads(r.body, src.get());
  if (loads.empty()) {
    return Precondition(prim, absl::StrCat("stage ", r.name, " does not read ", tensor));
  }
  for (const LoadNode* l : loads) {
    bool same = l->indices.size() == loads[0]->indices.size();
    for (size_t d = 0; same && d < l->indices.size(); ++d) {
      same = StructuralEqual(l->indices[d], loads[0]->indices[d]);
    }
    if (!same) {
      return Precondition(prim, absl::StrCat("stage ", r.name, " reads ", tensor,
                                             " at different indices; reindex needs one access"));
    }
  }
  // The reader's root variables the access uses, by the first dimension each appears in (ties in
  // the reader's order): the copy's layout follows the tensor's.
  const int na = static_cast<int>(r.axes.size());
  std::vector<std::pair<size_t, int>> used;  // (first dimension, root index)
  for (int i = 0; i < r.num_root(); ++i) {
    const VarNode* v = i < na ? r.axes[i].get() : r.reduce_axes[i - na].get();
    for (size_t d = 0; d < loads[0]->indices.size(); ++d) {
      if (UsesVar(loads[0]->indices[d], v)) {
        used.emplace_back(d, i);
        break;
      }
    }
  }
  std::stable_sort(used.begin(), used.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  Stage c;
  c.name = UniqueStageName(absl::StrCat(tensor, "_", scope));
  std::vector<int64_t> shape;
  std::unordered_map<const VarNode*, Expr> map;
  std::vector<Expr> reader_idx;
  for (const auto& [dim, i] : used) {
    const VarPtr& v = i < na ? r.axes[i] : r.reduce_axes[i - na];
    // A reader attached somewhere has region-sized spatial iters; its domain is its buffer.
    const int64_t extent = i < na ? r.buffer->shape[i] : r.iters[i].extent;
    c.axes.push_back(MakeVar(absl::StrCat("ax", c.axes.size()), v->dtype));
    c.iters.push_back(IterVar{c.axes.back(), extent});
    c.leaves.push_back(static_cast<int>(c.leaves.size()));
    shape.push_back(extent);
    map[v.get()] = c.axes.back();
    reader_idx.push_back(v);
  }
  if (c.axes.empty()) {
    return Precondition(prim, absl::StrCat("stage ", r.name, " reads ", tensor,
                                           " at a constant index; there is nothing to reindex"));
  }
  std::vector<Expr> src_idx;
  for (const Expr& e : loads[0]->indices) src_idx.push_back(Substitute(e, map));
  c.buffer = MakeBuffer(c.name, src->dtype, shape, ms);
  c.body = MakeLoad(src, src_idx);
  c.origin = kReIndex;
  // The reader reads the copy at its own variables.
  class Rewriter : public ExprMutator {
   public:
    Rewriter(const Buffer* from, Expr to) : from_(from), to_(std::move(to)) {}

   protected:
    Expr VisitLoad(const LoadNode& n, const Expr& self) override {
      return n.buffer.get() == from_ ? to_ : ExprMutator::VisitLoad(n, self);
    }

   private:
    const Buffer* from_;
    Expr to_;
  } rewrite(src.get(), MakeLoad(c.buffer, reader_idx));
  const int reader_at = StageIndex(r.name);
  stages_[reader_at].body = rewrite.Visit(stages_[reader_at].body);
  insert_at = std::min(std::max(insert_at, 0), reader_at);
  stages_.insert(stages_.begin() + insert_at, std::move(c));
  const std::string& name = stages_[insert_at].name;
  BlockRV out{static_cast<int>(rvs_.size())};
  Record(Instruction{prim,
                     {RVName(reader.id)},
                     {{"tensor", tensor}, {"scope", scope}},
                     {NewRV('b', {0, name})},
                     {}});
  return out;
}

// ---------------------------------------------------------------------------------------------
// Instruction table entries.

namespace {

absl::Status ApplyCacheRead(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(std::string tensor, in.AttrString("tensor"));
  TESSEL_ASSIGN_OR_RETURN(std::string scope, in.AttrString("scope"));
  TESSEL_ASSIGN_OR_RETURN(std::vector<BlockRV> readers, in.BlocksFrom(0));
  TESSEL_ASSIGN_OR_RETURN(BlockRV r, in.schedule().CacheRead(tensor, scope, readers));
  return in.BindOutput(r);
}

absl::Status ApplyCacheWrite(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(BlockRV block, in.Block(0));
  TESSEL_ASSIGN_OR_RETURN(std::string scope, in.AttrString("scope"));
  TESSEL_ASSIGN_OR_RETURN(BlockRV r, in.schedule().CacheWrite(block, scope));
  return in.BindOutput(r);
}

absl::Status ApplyReIndex(InstructionReader& in) {
  TESSEL_ASSIGN_OR_RETURN(BlockRV reader, in.Block(0));
  TESSEL_ASSIGN_OR_RETURN(std::string tensor, in.AttrString("tensor"));
  TESSEL_ASSIGN_OR_RETURN(std::string scope, in.AttrString("scope"));
  TESSEL_ASSIGN_OR_RETURN(BlockRV r, in.schedule().ReIndex(reader, tensor, scope));
  return in.BindOutput(r);
}

}  // namespace

void RegisterCacheInstructions(InstructionTable* table) {
  table->Register(kCacheRead, ApplyCacheRead);
  table->Register(kCacheWrite, ApplyCacheWrite);
  table->Register(kReIndex, ApplyReIndex);
}

}  // namespace tessel::schedules
