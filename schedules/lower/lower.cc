#include "schedules/lower/lower.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/ir/simplify.h"
#include "schedules/ir/stmt_functor.h"
#include "schedules/ir/substitute.h"
#include "schedules/lower/bound.h"
#include "schedules/lower/compact_thread_axes.h"
#include "schedules/lower/inject_vthread.h"

namespace tessel::schedules {

namespace {

std::string Sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return out;
}

// A buffer as lowered: the realized buffer and the offset of its origin in the logical tensor.
struct Realized {
  BufferPtr buffer;
  std::vector<Expr> offset;  // empty: no offset
};

// fuse_centered_sum's first pass: the squares' thread-local nest with each accumulation
// acc += [select(c,] (e - mean) * (e - mean) [, 0)] replaced by sum += [select(c,] e [, 0)], and
// count += [select(c,] 1 [, 0)] when `count` is set (a thread's count that varies).
class CenteredSumPass : public StmtMutator {
 public:
  CenteredSumPass(const Buffer* acc, BufferPtr sum, BufferPtr count)
      : acc_(acc), sum_(std::move(sum)), count_(std::move(count)) {}
  bool ok() const { return ok_; }

 protected:
  Stmt VisitStore(const StoreNode& n, const Stmt& self) override {
    if (n.buffer.get() != acc_) return self;
    const auto* add = As<BinaryNode>(n.value);
    const std::optional<CenteredSquare> sq =
        add != nullptr && add->op == BinaryOp::kAdd ? MatchCenteredSquare(add->b) : std::nullopt;
    if (!sq) {
      ok_ = false;
      return self;
    }
    const DType t = sq->e->dtype;
    auto select = [&](Expr x) { return sq->cond ? MakeSelect(sq->cond, x, MakeFloat(0, t)) : x; };
    auto add_to = [&](const BufferPtr& b, Expr x) {
      return MakeStore(b, {MakeInt(0)}, MakeLoad(b, {MakeInt(0)}) + select(std::move(x)));
    };
    return MakeSeq({add_to(sum_, sq->e), count_ ? add_to(count_, MakeFloat(1, t)) : Stmt()});
  }

 private:
  const Buffer* acc_;
  BufferPtr sum_, count_;
  bool ok_ = true;
};

// Rewrites loads of logical buffers to their realized buffers.
class AccessRewriter : public ExprMutator {
 public:
  explicit AccessRewriter(const std::unordered_map<const Buffer*, Realized>& realized)
      : realized_(realized) {}
  std::vector<Expr> Indices(const Buffer* b, const std::vector<Expr>& idx) {
    auto it = realized_.find(b);
    if (it == realized_.end() || it->second.offset.empty()) return idx;
    std::vector<Expr> out;
    for (size_t d = 0; d < idx.size(); ++d) out.push_back(idx[d] - it->second.offset[d]);
    return out;
  }
  BufferPtr Target(const BufferPtr& b) {
    auto it = realized_.find(b.get());
    return it == realized_.end() ? b : it->second.buffer;
  }

 protected:
  Expr VisitLoad(const LoadNode& n, const Expr& self) override {
    Expr e = ExprMutator::VisitLoad(n, self);
    const auto* l = As<LoadNode>(e);
    auto it = realized_.find(l->buffer.get());
    if (it == realized_.end()) return e;
    return MakeLoad(it->second.buffer, Indices(l->buffer.get(), l->indices));
  }

 private:
  const std::unordered_map<const Buffer*, Realized>& realized_;
};

class BufferCollector : public StmtMutator {
 public:
  std::set<const Buffer*> used;

 protected:
  Expr VisitExpr(const Expr& e) override {
    for (const LoadNode* l : CollectLoads(e)) used.insert(l->buffer.get());
    return e;
  }
  Stmt VisitStore(const StoreNode& n, const Stmt& self) override {
    used.insert(n.buffer.get());
    return StmtMutator::VisitStore(n, self);
  }
};

class Lowerer {
 public:
  // `wide_accumulation`: float reductions whose reduction loops are innermost accumulate in a
  // f64 register and store the rounded result (the reference lowering, the baseline
  // of the numeric comparison, is more accurate than any candidate it judges).
  Lowerer(const Schedule& sch, const Target& target, bool wide_accumulation)
      : sch_(sch), target_(target), stages_(sch.stages()), wide_(wide_accumulation) {}

  absl::StatusOr<Program> Run() {
    UniquifyNames();
    launches_.assign(stages_.size(), LaunchConfig{});
    auto bounds = InferBounds(&stages_);
    if (!bounds.ok()) return bounds.status();
    bounds_ = std::move(*bounds);
    if (absl::Status st = Check(); !st.ok()) return st;
    if (absl::Status st = RealizeBuffers(); !st.ok()) return st;
    for (const Stage& s : stages_) {
      for (int leaf : s.leaves) {
        if (IsBlockTag(s.iters[leaf].thread)) {
          block_vars_[s.iters[leaf].var.get()] = s.iters[leaf].thread;
          if (s.attach.kind == AttachPoint::Kind::kAt) {
            attached_block_vars_.insert(s.iters[leaf].var.get());
          }
        }
      }
    }
    // Loop variables range over their extents, thread indices over the kernel's block size
    // (a stage may use fewer threads than the kernel launches).
    for (size_t i = 0; i < stages_.size(); ++i) {
      const Stage& s = stages_[i];
      if (s.inlined() || !s.computed_by.empty() || s.attach.kind != AttachPoint::Kind::kRoot) {
        continue;
      }
      launches_[i] = LaunchOf(static_cast<int>(i));
      if (auto it = s.annotations.find("max_blocks_per_sm");
          it != s.annotations.end() && it->second > 0 && target_.is_cuda()) {
        // An occupancy limit: enough dynamic shared memory per block that no more than this
        // many blocks fit on an SM (fewer rows in flight, so their re-reads stay in L2).
        const int64_t per_block = target_.shared_bytes_per_sm / (it->second + 1) + 1024;
        launches_[i].dynamic_shared_bytes = std::min(per_block, target_.max_shared_bytes_optin);
      }
      launch_ = launches_[i];
      for (int si : KernelStages(static_cast<int>(i))) {
        for (int leaf : stages_[si].leaves) {
          const IterVar& iv = stages_[si].iters[leaf];
          analyzer_.Bind(iv.var, 0, IsPerThreadTag(iv.thread) ? BlockDim(iv.thread) : iv.extent);
        }
      }
    }

    Program p;
    p.name = "tessel_" + Sanitize(sch_.workload().name);
    p.target = target_.kind;
    for (const TensorDef& t : sch_.workload().tensors) {
      if (t.is_input) p.buffers.push_back({t.buffer, BufferRole::kInput});
    }
    for (const std::string& o : sch_.workload().outputs) {
      for (const Stage& s : stages_) {
        if (!s.inlined() && s.is_output && s.buffer->name == o) {
          p.buffers.push_back({s.buffer, BufferRole::kOutput});
        }
      }
    }
    for (const Stage& s : stages_) {
      if (!s.inlined() && !s.is_output && s.buffer->scope == MemScope::kGlobal) {
        p.buffers.push_back({s.buffer, BufferRole::kWorkspace});
      }
    }
    for (const ProgramBuffer& b : p.buffers) {
      if (b.buffer->NumElements() >= (int64_t{1} << 31)) p.needs_int64_indices = true;
    }
    for (size_t i = 0; i < stages_.size(); ++i) {
      const Stage& s = stages_[i];
      if (s.inlined() || !s.computed_by.empty() || s.attach.kind != AttachPoint::Kind::kRoot) {
        continue;
      }
      Kernel k;
      k.name = absl::StrCat(p.name, "_", Sanitize(s.name));
      k.launch = launches_[i];
      launch_ = launches_[i];
      auto body = BuildNest(static_cast<int>(i));
      if (!body.ok()) return body.status();
      // Virtual threads: what does not depend on the virtual thread (shared-memory fetches and
      // their barriers) runs once, the rest once per virtual thread (inject_vthread.h).
      // A local cache computed outside its readers' threadIdx loops holds one thread's share
      // (compact_thread_axes.h).
      k.body = InjectVirtualThreads(CompactThreadAxes(analyzer_.Simplify(*body)));
      if (absl::Status st = CheckBlockAxesCompacted(k.body); !st.ok()) return st;
      if (target_.is_cuda()) StreamingBuffers(static_cast<int>(i), &k);
      BufferCollector bc;
      bc.Visit(k.body);
      for (const ProgramBuffer& b : p.buffers) {
        if (bc.used.count(b.buffer.get())) k.params.push_back(b.buffer);
      }
      p.kernels.push_back(std::move(k));
    }
    return p;
  }

 private:
  // Gives every loop variable of the program a distinct name (stages nest inside each other's
  // loops, and generated code must not shadow an outer loop's variable).
  void UniquifyNames() {
    std::set<std::string> used;
    for (Stage& s : stages_) {
      if (s.inlined()) continue;
      std::unordered_map<const VarNode*, Expr> map;
      for (IterVar& iv : s.iters) {
        std::string name = iv.var->name;
        if (used.count(name)) {
          name = Sanitize(s.name) + "_" + iv.var->name;
          for (int i = 1; used.count(name); ++i) name = absl::StrCat(name, "_", i);
          VarPtr nv = MakeVar(name, iv.var->dtype);
          map[iv.var.get()] = nv;
          iv.var = nv;
        }
        used.insert(name);
      }
      if (map.empty()) continue;
      for (VarPtr& a : s.axes) {
        if (auto it = map.find(a.get()); it != map.end())
          a = std::static_pointer_cast<const VarNode>(it->second);
      }
      for (VarPtr& a : s.reduce_axes) {
        if (auto it = map.find(a.get()); it != map.end())
          a = std::static_pointer_cast<const VarNode>(it->second);
      }
      s.body = Substitute(s.body, map);
    }
  }

  absl::Status Check() {
    for (size_t si = 0; si < stages_.size(); ++si) {
      const Stage& s = stages_[si];
      if (s.inlined() || !s.computed_by.empty()) continue;
      const bool attached = s.attach.kind == AttachPoint::Kind::kAt;
      if (!attached && s.buffer->scope != MemScope::kGlobal) {
        return absl::FailedPreconditionError(absl::StrCat(
            "stage ", s.name, " is in ", MemScopeName(s.buffer->scope),
            " memory but not attached to any loop; compute_at it inside the loop that uses it"));
      }
      for (int leaf : s.leaves) {
        const IterVar& iv = s.iters[leaf];
        if (!target_.is_cuda() && iv.thread != ThreadTag::kNone &&
            iv.thread != ThreadTag::kVThread) {
          return absl::InvalidArgumentError(absl::StrCat(
              "stage ", s.name, " binds loop ", iv.var->name, " to ", ThreadTagName(iv.thread),
              ", but the host target has no thread axes; use parallel instead"));
        }
        if (target_.is_cuda() && iv.kind == ForKind::kParallel) {
          return absl::InvalidArgumentError(absl::StrCat(
              "stage ", s.name, " marks loop ", iv.var->name,
              " parallel, which is for the host target; bind it to blockIdx/threadIdx instead"));
        }
        if (attached && IsBlockTag(iv.thread)) {
          if (absl::Status st = CheckGridLoop(static_cast<int>(si), iv); !st.ok()) return st;
        }
      }
      if (s.reduce && s.init_at < 0) {
        int first_reduce = -1;
        for (size_t p = 0; p < s.leaves.size(); ++p) {
          const IterVar& iv = s.iters[s.leaves[p]];
          if (iv.reduce && first_reduce < 0) first_reduce = static_cast<int>(p);
          if (!iv.reduce && first_reduce >= 0 && iv.thread == ThreadTag::kNone) {
            return absl::FailedPreconditionError(absl::StrCat(
                "stage ", s.name, " has spatial loop ", iv.var->name, " inside reduction loop ",
                s.iters[s.leaves[first_reduce]].var->name,
                "; use decompose_reduction to place the initialization before the reduction"));
          }
        }
      }
      if (s.reduce && s.init_at >= 0) {
        const int pos = s.LeafPosition(s.init_at);
        if (pos < 0) {
          return absl::FailedPreconditionError(absl::StrCat(
              "the decompose_reduction loop of stage ", s.name, " was later transformed"));
        }
        for (int p = 0; p < pos; ++p) {
          if (s.iters[s.leaves[p]].reduce) {
            return absl::FailedPreconditionError(
                absl::StrCat("stage ", s.name, ": reduction loop ", s.iters[s.leaves[p]].var->name,
                             " is outside the loop its initialization was placed before"));
          }
        }
      }
    }
    return absl::OkStatus();
  }

  // An attached stage's loop bound to a block index splits that stage's work over the kernel's
  // blocks, each block taking its own iteration: the kernel root binds the same index with the
  // same extent (bind refuses reduction loops). A global stage's results are read by every block
  // after a grid barrier; a local one's block axis is per thread anyway and is compacted away
  // (compact_thread_axes.h).
  absl::Status CheckGridLoop(int si, const IterVar& iv) const {
    const Stage& s = stages_[si];
    const Stage& root = stages_[KernelRootIndex(stages_, si)];
    const std::string what =
        absl::StrCat("stage ", s.name, " binds loop ", iv.var->name, " (extent ", iv.extent,
                     ") to ", ThreadTagName(iv.thread), " inside stage ", root.name);
    int64_t root_extent = 0;
    bool cluster = false;
    for (int leaf : root.leaves) {
      if (root.iters[leaf].thread == iv.thread) root_extent = root.iters[leaf].extent;
    }
    for (int i : KernelStages(KernelRootIndex(stages_, si))) {
      for (int leaf : stages_[i].leaves) {
        cluster |= stages_[i].iters[leaf].thread == ThreadTag::kClusterX;
      }
    }
    if (root_extent != iv.extent) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ", whose ",
          root_extent == 0 ? absl::StrCat("loops bind no ", ThreadTagName(iv.thread))
                           : absl::StrCat(ThreadTagName(iv.thread), " has extent ", root_extent),
          "; an attached stage may bind a block index only to split its work over the kernel's "
          "blocks: bind a loop of ",
          root.name, " to it with the same extent"));
    }
    if (s.buffer->scope == MemScope::kShared) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ", but ", s.name,
          " is in shared memory, of which each block has its own: the other blocks' parts would "
          "stay unwritten; use local or global memory"));
    }
    if (cluster && s.buffer->scope == MemScope::kGlobal) {
      return absl::InvalidArgumentError(
          absl::StrCat(what,
                       ", which needs a grid barrier, and the kernel uses thread-block "
                       "clusters; the two do not combine"));
    }
    return absl::OkStatus();
  }

  // A local stage written from a loop bound to a block index holds only its own block's part:
  // every access must index that axis with a block index so that compaction drops it. One that
  // is still indexed by a block index after compaction is also read another way (an unbound
  // loop over the blocks' parts), which would read parts no thread of this block wrote.
  absl::Status CheckBlockAxesCompacted(const Stmt& body) const {
    const Buffer* bad = nullptr;
    WalkStmt(body, [&](const Stmt& s) {
      auto check = [&](const BufferPtr& b, const std::vector<Expr>& idx) {
        if (b->scope != MemScope::kLocal || bad != nullptr) return;
        for (const Expr& e : idx) {
          const auto* v = As<VarNode>(e);
          if (v != nullptr && attached_block_vars_.count(v)) bad = b.get();
        }
      };
      if (const auto* st = As<StoreNode>(s)) check(st->buffer, st->indices);
      for (const Expr& e : OwnExprs(s)) {
        for (const LoadNode* l : CollectLoads(e)) check(l->buffer, l->indices);
      }
    });
    if (bad == nullptr) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "local buffer ", bad->name,
        " is written from a loop bound to a block index, so each block holds only its own part, "
        "but it is also read at other blocks' parts; bind the readers' loop over that axis to "
        "the same block index, or keep the writer's loop serial"));
  }

  // The stream_loads / stream_stores annotations of the kernel's stages: the global buffers a
  // stage reads, or the one it writes, are accessed with evict-first cache hints.
  void StreamingBuffers(int root, Kernel* k) const {
    auto add = [](std::vector<BufferPtr>* v, const BufferPtr& b) {
      if (b->scope == MemScope::kGlobal && std::find(v->begin(), v->end(), b) == v->end()) {
        v->push_back(b);
      }
    };
    for (int i : KernelStages(root)) {
      const Stage& s = stages_[i];
      auto on = [&](const char* key) {
        auto it = s.annotations.find(key);
        return it != s.annotations.end() && it->second > 0;
      };
      if (on("stream_stores")) add(&k->stream_stores, s.buffer);
      if (on("stream_loads")) {
        for (const LoadNode* l : CollectLoads(s.body)) add(&k->stream_loads, l->buffer);
      }
    }
  }

  // Whether stage `si` is attached and writes global memory from loops bound to block indices:
  // what it writes, other blocks read, after a grid barrier.
  bool WritesAcrossBlocks(int si) const {
    const Stage& s = stages_[si];
    if (s.attach.kind != AttachPoint::Kind::kAt || s.buffer->scope != MemScope::kGlobal) {
      return false;
    }
    return std::any_of(s.leaves.begin(), s.leaves.end(),
                       [&](int leaf) { return IsBlockTag(s.iters[leaf].thread); });
  }

  // Whether `reader` reads what `writer` writes to `buffer` only at its own block: some axis of the
  // buffer is indexed at every store in `writer` and every load in `reader` by a variable bound to
  // one block index (so a block barrier orders them).
  bool SameBlockOnly(const Stmt& writer, const Stmt& reader, const Buffer* buffer) const {
    std::vector<std::vector<Expr>> accesses;
    WalkStmt(writer, [&](const Stmt& s) {
      if (const auto* st = As<StoreNode>(s); st && st->buffer.get() == buffer) {
        accesses.push_back(st->indices);
      }
    });
    if (accesses.empty()) return false;
    const size_t stores = accesses.size();
    WalkStmt(reader, [&](const Stmt& s) {
      for (const Expr& e : OwnExprs(s)) {
        for (const LoadNode* l : CollectLoads(e, buffer)) accesses.push_back(l->indices);
      }
    });
    if (accesses.size() == stores) return false;
    for (size_t d = 0; d < accesses[0].size(); ++d) {
      std::optional<ThreadTag> tag;
      bool all = true;
      for (const std::vector<Expr>& idx : accesses) {
        const auto* v = d < idx.size() ? As<VarNode>(idx[d]) : nullptr;
        auto it = v ? block_vars_.find(v) : block_vars_.end();
        if (it == block_vars_.end() || (tag && *tag != it->second)) {
          all = false;
          break;
        }
        tag = it->second;
      }
      if (all) return true;
    }
    return false;
  }

  absl::Status RealizeBuffers() {
    for (size_t i = 0; i < stages_.size(); ++i) {
      const Stage& s = stages_[i];
      if (s.inlined()) continue;
      const bool attached = s.attach.kind == AttachPoint::Kind::kAt;
      if (!attached || s.buffer->scope == MemScope::kGlobal) {
        if (!s.aligns.empty()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "stage ", s.name, " is in global memory; storage_align applies to shared/local"));
        }
        continue;
      }
      const StageBound& b = bounds_[i];
      std::vector<int64_t> shape(b.root_extent.begin(), b.root_extent.begin() + s.axes.size());
      std::vector<int64_t> strides;
      if (!s.aligns.empty()) {
        strides.assign(shape.size(), 1);
        for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
          int64_t st = strides[d + 1] * shape[d + 1];
          for (const StorageAlign& a : s.aligns) {
            if (a.axis == d) {
              int64_t rem = ((st - a.offset) % a.factor + a.factor) % a.factor;
              if (rem != 0) st += a.factor - rem;
            }
          }
          strides[d] = st;
        }
      }
      Realized r;
      r.buffer = MakeBuffer(s.buffer->name, s.buffer->dtype, shape, s.buffer->scope, strides);
      r.offset.assign(b.root_min.begin(), b.root_min.begin() + s.axes.size());
      realized_[s.buffer.get()] = r;
    }
    return absl::OkStatus();
  }

  // The stages of the kernel rooted at stage `root`: root and every stage attached inside it.
  std::vector<int> KernelStages(int root) const {
    std::vector<int> out;
    for (size_t i = 0; i < stages_.size(); ++i) {
      const Stage& s = stages_[i];
      if (s.inlined() || !s.computed_by.empty()) continue;
      if (KernelRootIndex(stages_, static_cast<int>(i)) == root) out.push_back(static_cast<int>(i));
    }
    return out;
  }

  // Launch dimensions of the kernel rooted at stage `root`.
  LaunchConfig LaunchOf(int root) const {
    LaunchConfig l;
    for (int i : KernelStages(root)) {
      const Stage& s = stages_[i];
      l.cooperative |= WritesAcrossBlocks(i);
      for (int leaf : s.leaves) {
        const IterVar& iv = s.iters[leaf];
        const int64_t e = iv.extent;
        switch (iv.thread) {
          case ThreadTag::kBlockX:
            l.grid[0] = e;
            break;
          case ThreadTag::kBlockY:
            l.grid[1] = e;
            break;
          case ThreadTag::kBlockZ:
            l.grid[2] = e;
            break;
          case ThreadTag::kThreadX:
            l.block[0] = std::max(l.block[0], e);
            break;
          case ThreadTag::kThreadY:
            l.block[1] = std::max(l.block[1], e);
            break;
          case ThreadTag::kThreadZ:
            l.block[2] = std::max(l.block[2], e);
            break;
          case ThreadTag::kClusterX:
            l.cluster = std::max(l.cluster, e);
            break;
          default:
            break;
        }
      }
    }
    l.grid[0] *= l.cluster;  // blockIdx.x-bound loops index clusters
    return l;
  }

  int64_t BlockDim(ThreadTag t) const {
    switch (t) {
      case ThreadTag::kThreadX:
        return launch_.block[0];
      case ThreadTag::kThreadY:
        return launch_.block[1];
      case ThreadTag::kThreadZ:
        return launch_.block[2];
      case ThreadTag::kClusterX:
        return launch_.cluster;
      default:
        return 1;
    }
  }

  Stmt MakeLoop(const Stage& s, int iter, Stmt body, bool unrolled) {
    const IterVar& iv = s.iters[iter];
    ForKind kind = iv.kind;
    if (kind == ForKind::kSerial && unrolled) kind = ForKind::kUnrolled;
    if (iv.thread == ThreadTag::kVThread) kind = ForKind::kThreadBinding;
    if (!body) body = MakeSeq({});
    if (iv.extent == 1 && kind != ForKind::kThreadBinding) {
      return Substitute(body, {{iv.var.get(), MakeInt(0, iv.var->dtype)}});
    }
    // A thread index ranges over the whole block, whatever this stage uses (guards cover it).
    const int64_t extent = IsPerThreadTag(iv.thread) ? BlockDim(iv.thread) : iv.extent;
    return MakeFor(iv.var, MakeInt(0), MakeInt(extent), kind, iv.thread, std::move(body),
                   iv.annotations);
  }

  // The buffers a stage's nest writes: its own, and a stage it computes in the same pass.
  std::vector<const Buffer*> WrittenBuffers(const Stage& s) const {
    std::vector<const Buffer*> out = {s.buffer.get()};
    for (const std::string& fused : s.FusedStages()) {
      out.push_back(stages_[FindStageIndex(stages_, fused)].buffer.get());
    }
    return out;
  }

  // Whether the nest at (stage, iter) runs more than once per thread (so a shared producer there
  // needs a barrier before it too).
  bool RunsRepeatedly(int si, int iter) {
    for (auto [st, it] : EnclosingLoops(stages_, si, iter)) {
      const IterVar& iv = stages_[st].iters[it];
      if (iv.thread != ThreadTag::kNone && iv.thread != ThreadTag::kVThread) continue;
      if (iv.extent > 1) return true;
    }
    return false;
  }

  absl::StatusOr<Stmt> BuildNest(int si) {
    const Stage& s = stages_[si];
    const StageBound& b = bounds_[si];
    const int naxes = static_cast<int>(s.axes.size());
    const std::vector<Expr> vals = s.IterValues();
    std::vector<Expr> g(s.num_root());
    std::unordered_map<const VarNode*, Expr> map;
    for (int r = 0; r < s.num_root(); ++r) {
      g[r] = analyzer_.Simplify(b.root_min[r] + vals[r]);
      map[r < naxes ? s.axes[r].get() : s.reduce_axes[r - naxes].get()] = g[r];
    }
    AccessRewriter rw(realized_);
    Expr value = rw.Visit(Substitute(s.body, map));
    std::vector<Expr> idx(g.begin(), g.begin() + naxes);
    BufferPtr out = rw.Target(s.buffer);
    std::vector<Expr> out_idx = rw.Indices(s.buffer.get(), idx);

    // fuse_online_max: this sum of exp(x - m) also computes m, the running maximum of x, and
    // rescales its running sum whenever the maximum grows (online softmax normalizer).
    const bool online = !s.online_max.empty();
    Expr online_x;
    BufferPtr max_out;
    std::vector<Expr> max_idx;
    if (online) {
      const Stage& m = stages_[FindStageIndex(stages_, s.online_max)];
      max_out = rw.Target(m.buffer);
      max_idx = rw.Indices(m.buffer.get(), idx);
      std::optional<ExpOfDifference> term = MatchExpOfDifference(value);
      if (!term || term->max->buffer != max_out) {
        return absl::FailedPreconditionError(
            absl::StrCat("stage ", s.name, " computes ", m.name,
                         " in the same pass (fuse_online_max), but its body is no longer exp(x - ",
                         m.name, "[...]); do not cache_read ", m.name, " for it"));
      }
      online_x = term->e;
    }
    // fuse_centered_sum: these squares of deviations from each chunk's mean also compute the
    // chunk sums, in one cross-thread reduction of (sum, squares) pairs.
    const bool centered = !s.centered_sum.empty();
    BufferPtr sum_out;
    std::vector<Expr> sum_idx;
    std::optional<CenteredSquare> centered_term;
    if (centered) {
      const Stage& ps = stages_[FindStageIndex(stages_, s.centered_sum)];
      sum_out = rw.Target(ps.buffer);
      sum_idx = rw.Indices(ps.buffer.get(), idx);
      centered_term = MatchCenteredSquare(value);
      if (!centered_term || CollectLoads(centered_term->m, sum_out.get()).empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "stage ", s.name, " computes ", ps.name,
            " in the same reduction (fuse_centered_sum), but its body no longer squares "
            "deviations from ",
            ps.name, "[...]; do not cache_read ", ps.name, " for it"));
      }
    }
    // One step of the online normalizer on (sum, max) held at the given places:
    //   d = x - max; e = exp(-|d|); sum = d > 0 ? sum * e + 1 : sum + e; max = max(max, x).
    auto online_step = [&](const BufferPtr& sb, const std::vector<Expr>& si, const BufferPtr& mb,
                           const std::vector<Expr>& mi) {
      const DType t = online_x->dtype;
      VarPtr x = MakeVar(Sanitize(s.name) + "_x", t);
      VarPtr d = MakeVar(Sanitize(s.name) + "_d", t);
      VarPtr e = MakeVar(Sanitize(s.name) + "_e", t);
      Expr sum = MakeLoad(sb, si);
      Expr mx = MakeLoad(mb, mi);
      Stmt update = MakeSeq({MakeStore(sb, si,
                                       MakeSelect(MakeFloat(0, t) < Expr(d),
                                                  sum * Expr(e) + MakeFloat(1, t), sum + Expr(e))),
                             MakeStore(mb, mi, MakeMax(mx, x))});
      return MakeLet(
          x, online_x,
          MakeLet(
              d, Expr(x) - mx,
              MakeLet(e, MakeCall("exp", {MakeMin(d, MakeUnary(UnaryOp::kNeg, d))}, t), update)));
    };

    // Guards. Every split parent must stay within its extent: a root beyond its extent is out of
    // bounds, and an inner loop beyond its parent's extent would alias the next outer iteration.
    Expr spatial_cond, reduce_cond;
    const bool attached = s.attach.kind == AttachPoint::Kind::kAt;
    for (const IterRelation& rel : s.relations) {
      if (rel.kind != IterRelation::Kind::kSplit || rel.parent < s.num_root()) continue;
      const IterVar& parent = s.iters[rel.parent];
      Expr c = vals[rel.parent] < parent.extent;
      Expr& acc = parent.reduce ? reduce_cond : spatial_cond;
      if (!analyzer_.CanProve(c)) acc = MakeAnd(acc, c);
    }
    for (int r = 0; r < s.num_root(); ++r) {
      Expr c = vals[r] < b.root_extent[r];
      Expr& acc = r < naxes ? spatial_cond : reduce_cond;
      if (!analyzer_.CanProve(c)) acc = MakeAnd(acc, c);
      if (r < naxes && attached) {
        int64_t lo = 0, hi = 0;
        const int64_t dim = s.buffer->shape[r];
        if (!analyzer_.ConstBounds(g[r], &lo, &hi) || lo < 0 || hi >= dim) {
          if (!(analyzer_.ConstBounds(g[r], &lo, &hi) && lo >= 0)) acc = MakeAnd(acc, g[r] >= 0);
          acc = MakeAnd(acc, g[r] < dim);
        }
      }
    }
    int cross = -1;    // leaf position of a thread-bound reduction loop
    int cluster = -1;  // leaf position of a cluster-bound reduction loop
    for (size_t p = 0; p < s.leaves.size(); ++p) {
      const IterVar& iv = s.iters[s.leaves[p]];
      if (iv.reduce && iv.thread == ThreadTag::kClusterX) cluster = static_cast<int>(p);
      if (IsPerThreadTag(iv.thread) && iv.extent < BlockDim(iv.thread)) {
        Expr c = Expr(iv.var) < iv.extent;
        if (iv.reduce) {
          reduce_cond = MakeAnd(reduce_cond, c);
        } else {
          spatial_cond = MakeAnd(spatial_cond, c);
        }
      }
      if (iv.reduce && IsThreadTag(iv.thread)) cross = static_cast<int>(p);
    }
    if (cross >= 0 && s.buffer->scope == MemScope::kLocal &&
        s.attach.kind != AttachPoint::Kind::kAt) {
      return absl::FailedPreconditionError(
          absl::StrCat("stage ", s.name, " is local but not attached"));
    }
    if (centered &&
        (cross < 0 || cluster >= 0 || s.iters[s.leaves[cross]].thread != ThreadTag::kThreadX ||
         !IsFloat(value->dtype))) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stage ", s.name, " computes ", s.centered_sum,
          " in the same reduction (fuse_centered_sum), which combines (sum, squares) pairs "
          "across the threads of threadIdx.x: bind a reduction loop of ",
          s.name, " to threadIdx.x (and none to the cluster)"));
    }
    if (cluster >= 0 && cross < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stage ", s.name, " reduces loop ", s.iters[s.leaves[cluster]].var->name,
          " across the cluster but no loop across threads; bind another reduction loop to "
          "threadIdx.x (the cluster combines one value per CTA)"));
    }

    // Unrolling from the stage annotation.
    std::vector<bool> unrolled(s.leaves.size(), false);
    if (auto it = s.annotations.find("auto_unroll_max_step"); it != s.annotations.end()) {
      int64_t prod = 1;
      for (int p = static_cast<int>(s.leaves.size()) - 1; p >= 0; --p) {
        const IterVar& iv = s.iters[s.leaves[p]];
        if (iv.kind != ForKind::kSerial || iv.thread != ThreadTag::kNone) break;
        prod *= iv.extent;
        if (prod > it->second) break;
        unrolled[p] = true;
      }
    }

    // Innermost statement.
    const DType vt = value->dtype;
    // The initialization of a reduction stored in place (not across threads): the output, and
    // with the online normalizer the maximum too.
    auto init_in_place = [&]() {
      return MakeSeq(
          {MakeStore(out, out_idx, ReduceIdentity(*s.reduce, vt)),
           online ? MakeStore(max_out, max_idx, ReduceIdentity(ReduceOp::kMax, max_out->dtype))
                  : Stmt()});
    };
    BufferPtr acc_buf;
    Stmt body;
    const bool wide = wide_ && s.reduce && !online && cross < 0 && s.init_at < 0 && IsFloat(vt);
    BufferPtr max_acc;  // online, cross-thread: the thread's running maximum
    // centered: the thread's sum, its element count when that varies, and the count.
    BufferPtr sum_acc, count_acc;
    Expr thread_count;
    if (wide) {
      acc_buf = MakeBuffer(Sanitize(s.name) + "_acc", DType::kFloat64, {1}, MemScope::kLocal);
      Expr acc = MakeLoad(acc_buf, {MakeInt(0)});
      body = MakeIf(MakeAnd(spatial_cond, reduce_cond),
                    MakeStore(acc_buf, {MakeInt(0)},
                              ReduceCombine(*s.reduce, acc, MakeCast(DType::kFloat64, value))));
    } else if (!s.reduce) {
      body = MakeIf(MakeAnd(spatial_cond, reduce_cond), MakeStore(out, out_idx, value));
    } else if (cross >= 0 && online) {
      acc_buf = MakeBuffer(Sanitize(s.name) + "_acc", vt, {1}, MemScope::kLocal);
      max_acc = MakeBuffer(Sanitize(s.name) + "_max", max_out->dtype, {1}, MemScope::kLocal);
      body = MakeIf(MakeAnd(spatial_cond, reduce_cond),
                    online_step(acc_buf, {MakeInt(0)}, max_acc, {MakeInt(0)}));
    } else if (cross >= 0 && centered) {
      // Each thread sums its elements first (CenteredSumPass), then squares their deviations
      // from its own mean. With no guard every thread has the same number of elements, the
      // product of its reduction loops' extents; otherwise it counts them.
      acc_buf = MakeBuffer(Sanitize(s.name) + "_acc", vt, {1}, MemScope::kLocal);
      sum_acc = MakeBuffer(Sanitize(s.name) + "_sum", vt, {1}, MemScope::kLocal);
      Expr guard = MakeAnd(spatial_cond, reduce_cond);
      if (guard || centered_term->cond) {
        count_acc = MakeBuffer(Sanitize(s.name) + "_count", vt, {1}, MemScope::kLocal);
        thread_count = MakeLoad(count_acc, {MakeInt(0)});
      } else {
        int64_t n = 1;
        for (size_t q = 0; q < s.leaves.size(); ++q) {
          const IterVar& iv = s.iters[s.leaves[q]];
          if (iv.reduce && static_cast<int>(q) != cross) n *= iv.extent;
        }
        thread_count = MakeFloat(static_cast<double>(n), vt);
      }
      Expr dev = centered_term->e - MakeLoad(sum_acc, {MakeInt(0)}) / thread_count;
      Expr square = dev * dev;
      if (centered_term->cond) square = MakeSelect(centered_term->cond, square, MakeFloat(0, vt));
      Expr acc = MakeLoad(acc_buf, {MakeInt(0)});
      body = MakeIf(guard, MakeStore(acc_buf, {MakeInt(0)}, acc + square));
    } else if (cross >= 0) {
      acc_buf = MakeBuffer(Sanitize(s.name) + "_acc", vt, {1}, MemScope::kLocal);
      Expr acc = MakeLoad(acc_buf, {MakeInt(0)});
      body = MakeIf(MakeAnd(spatial_cond, reduce_cond),
                    MakeStore(acc_buf, {MakeInt(0)}, ReduceCombine(*s.reduce, acc, value)));
    } else if (online) {
      body =
          MakeIf(MakeAnd(spatial_cond, reduce_cond), online_step(out, out_idx, max_out, max_idx));
    } else {
      Expr cur = MakeLoad(out, out_idx);
      body = MakeIf(MakeAnd(spatial_cond, reduce_cond),
                    MakeStore(out, out_idx, ReduceCombine(*s.reduce, cur, value)));
    }

    int first_reduce = -1;
    for (size_t p = 0; p < s.leaves.size(); ++p) {
      if (s.iters[s.leaves[p]].reduce) {
        first_reduce = static_cast<int>(p);
        break;
      }
    }
    const int init_pos = s.init_at >= 0 ? s.LeafPosition(s.init_at) : first_reduce;

    for (int p = static_cast<int>(s.leaves.size()) - 1; p >= 0; --p) {
      const int iter = s.leaves[p];
      // Stages attached here.
      std::vector<Stmt> before, after;
      std::vector<BufferPtr> allocs;
      // The producers computed before the body, in stage order; shared ones write memory other
      // threads read (CUDA).
      struct Producer {
        Stmt nest;
        const Stage* stage;
        bool shared;
        bool grid;  // written by several blocks, read by all: a grid barrier follows
      };
      std::vector<Producer> producers;
      for (size_t ai = 0; ai < stages_.size(); ++ai) {
        const Stage& a = stages_[ai];
        if (a.inlined() || a.attach.kind != AttachPoint::Kind::kAt || a.attach.stage != s.name ||
            a.attach.iter != iter) {
          continue;
        }
        if (p == cross || p == cluster) {
          return absl::FailedPreconditionError(absl::StrCat(
              "stage ", a.name, " is attached to the cross-thread reduction loop ",
              s.iters[iter].var->name, " of stage ", s.name, "; attach it to another loop"));
        }
        auto it = realized_.find(a.buffer.get());
        if (it != realized_.end()) allocs.push_back(it->second.buffer);
        if (!a.computed_by.empty()) continue;  // written by the stage that computes it
        auto nest = BuildNest(static_cast<int>(ai));
        if (!nest.ok()) return nest.status();
        const bool shared = a.buffer->scope != MemScope::kLocal && target_.is_cuda();
        if (a.attach.reverse) {
          after.push_back(*nest);
        } else {
          producers.push_back({*nest, &a, shared, WritesAcrossBlocks(static_cast<int>(ai))});
        }
      }
      if (std::none_of(producers.begin(), producers.end(),
                       [](const Producer& x) { return x.shared; })) {
        for (const Producer& x : producers) before.push_back(x.nest);
      } else {
        // Everyone waits for the shared producers to be written before anything reads them (the
        // body, or a producer attached here such as a register copy of a shared tile), and
        // (when this nest runs repeatedly) for the previous iteration's readers to finish. The
        // shared producers go first, unless one reads what a non-shared producer here writes;
        // then each keeps its place.
        bool feeds_shared = false;
        for (const Producer& sp : producers) {
          if (!sp.shared) continue;
          for (const LoadNode* l : CollectLoads(sp.stage->body)) {
            for (const Producer& op : producers) {
              feeds_shared |= !op.shared && l->buffer.get() == op.stage->buffer.get();
            }
          }
        }
        if (!feeds_shared) {
          std::stable_partition(producers.begin(), producers.end(),
                                [](const Producer& x) { return x.shared; });
        }
        // A barrier goes before a producer that reads what a shared producer since the last
        // barrier wrote, and before any non-shared producer after one, and one follows the last
        // shared producer. It is a grid barrier (which also synchronizes the block) when what
        // was written across blocks since the last grid barrier is read at other blocks' indices
        // or may be read after the producers. A global buffer is the whole tensor, so one
        // iteration's writes never overwrite what another's readers still read: no grid barrier
        // before.
        // Only shared memory is overwritten by the next iteration while others may still read
        // it: a global stage writes each element of its tensor once.
        if (RunsRepeatedly(si, iter) &&
            std::any_of(producers.begin(), producers.end(), [](const Producer& x) {
              return x.stage->buffer->scope == MemScope::kShared;
            })) {
          before.push_back(MakeBarrier());
        }
        auto barrier = [](bool grid) {
          return MakeBarrier(grid ? BarrierScope::kGrid : BarrierScope::kBlock);
        };
        auto reads = [](const Producer& r, const Buffer* b) {
          return !CollectLoads(r.stage->body, b).empty();
        };
        std::vector<const Producer*> since_barrier, since_grid_barrier;
        for (const Producer& x : producers) {
          bool grid = false, block = false;
          for (const Producer* w : since_grid_barrier) {
            for (const Buffer* b : WrittenBuffers(*w->stage)) {
              grid |= reads(x, b) && !SameBlockOnly(w->nest, x.nest, b);
            }
          }
          for (const Producer* w : since_barrier) {
            for (const Buffer* b : WrittenBuffers(*w->stage)) block |= !x.shared || reads(x, b);
          }
          if (grid || block) {
            before.push_back(barrier(grid));
            since_barrier.clear();
            if (grid) since_grid_barrier.clear();
          }
          before.push_back(x.nest);
          if (x.shared) since_barrier.push_back(&x);
          if (x.grid) since_grid_barrier.push_back(&x);
        }
        if (!since_grid_barrier.empty() || !since_barrier.empty()) {
          before.push_back(barrier(!since_grid_barrier.empty()));
        }
      }
      if (!before.empty() || !after.empty()) {
        std::vector<Stmt> seq = before;
        seq.push_back(body);
        seq.insert(seq.end(), after.begin(), after.end());
        body = MakeSeq(seq);
      }
      for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) body = MakeAllocate(*it, body);

      Stmt loop = p == cross || p == cluster ? body : MakeLoop(s, iter, body, unrolled[p]);
      if (wide && p == init_pos) {
        // acc = identity; the reduction loops; out = acc rounded to the output type.
        loop = MakeAllocate(
            acc_buf,
            MakeSeq(
                {MakeStore(acc_buf, {MakeInt(0)}, ReduceIdentity(*s.reduce, DType::kFloat64)), loop,
                 MakeIf(spatial_cond,
                        MakeStore(out, out_idx, MakeCast(vt, MakeLoad(acc_buf, {MakeInt(0)}))))}));
      } else if (s.reduce && p == init_pos && cross < 0) {
        // The initialization nest: the spatial loops at and below this position.
        Stmt init = MakeIf(spatial_cond, init_in_place());
        for (int q = static_cast<int>(s.leaves.size()) - 1; q >= p; --q) {
          if (!s.iters[s.leaves[q]].reduce) init = MakeLoop(s, s.leaves[q], init, unrolled[q]);
        }
        loop = MakeSeq({init, loop});
      }
      if (cross >= 0 && p == first_reduce) {
        const IterVar& tv = s.iters[s.leaves[cross]];
        Expr acc = MakeLoad(acc_buf, {MakeInt(0)});
        BufferPtr res = MakeBuffer(Sanitize(s.name) + "_red", vt, {1}, MemScope::kLocal);
        Expr store_cond = spatial_cond;
        const IterVar* cv = cluster >= 0 ? &s.iters[s.leaves[cluster]] : nullptr;
        if (s.buffer->scope != MemScope::kLocal) {
          store_cond = MakeAnd(store_cond, Expr(tv.var) == 0);
          if (cv != nullptr) store_cond = MakeAnd(store_cond, Expr(cv->var) == 0);
        }
        if (cv != nullptr && online) {
          return absl::FailedPreconditionError(
              absl::StrCat("stage ", s.name, " computes ", s.online_max,
                           " in the same pass (fuse_online_max), which has no cluster-wide form; "
                           "reduce it within a CTA"));
        }
        Stmt reduce_and_store;
        Stmt init = MakeStore(acc_buf, {MakeInt(0)}, ReduceIdentity(*s.reduce, vt));
        if (centered) {
          // The sums pass, then the squares pass, then one all-reduce of the pairs.
          CenteredSumPass sums(acc_buf.get(), sum_acc, count_acc);
          Stmt sum_loop = sums.Visit(loop);
          if (!sums.ok()) {
            return absl::InternalError(absl::StrCat("stage ", s.name,
                                                    ": the accumulation of its squares did not "
                                                    "keep the form (e - mean) * (e - mean)"));
          }
          BufferPtr sum_res = MakeBuffer(Sanitize(s.name) + "_sum_red", vt, {1}, MemScope::kLocal);
          std::vector<Stmt> first = {MakeStore(sum_acc, {MakeInt(0)}, MakeFloat(0, vt))};
          if (count_acc) first.push_back(MakeStore(count_acc, {MakeInt(0)}, MakeFloat(0, vt)));
          first.push_back(sum_loop);
          init = MakeSeq({MakeSeq(first), init});
          reduce_and_store = MakeAllocate(
              sum_res,
              MakeAllocate(
                  res,
                  MakeSeq({MakeCenteredAllReduce(MakeLoad(sum_acc, {MakeInt(0)}), acc, thread_count,
                                                 sum_res, res, tv.thread, BlockDim(tv.thread)),
                           MakeIf(store_cond,
                                  MakeSeq({MakeStore(out, out_idx, MakeLoad(res, {MakeInt(0)})),
                                           MakeStore(sum_out, sum_idx,
                                                     MakeLoad(sum_res, {MakeInt(0)}))}))})));
        } else if (online) {
          // The block's maximum first; each thread's sum rescaled to it, then summed.
          BufferPtr max_res =
              MakeBuffer(Sanitize(s.name) + "_max_red", max_out->dtype, {1}, MemScope::kLocal);
          Expr mx = MakeLoad(max_acc, {MakeInt(0)});
          Expr block_max = MakeLoad(max_res, {MakeInt(0)});
          Expr rescaled = acc * MakeCall("exp", {mx - block_max}, vt);
          reduce_and_store = MakeAllocate(
              max_res,
              MakeAllocate(
                  res,
                  MakeSeq(
                      {MakeAllReduce(ReduceOp::kMax, mx, max_res, tv.thread, BlockDim(tv.thread)),
                       MakeAllReduce(*s.reduce, rescaled, res, tv.thread, BlockDim(tv.thread)),
                       MakeIf(store_cond,
                              MakeSeq({MakeStore(out, out_idx, MakeLoad(res, {MakeInt(0)})),
                                       MakeStore(max_out, max_idx, block_max)}))})));
          init = MakeSeq({init, MakeStore(max_acc, {MakeInt(0)},
                                          ReduceIdentity(ReduceOp::kMax, max_out->dtype))});
        } else {
          // The block's value; with a cluster, then the cluster's (one value per CTA, through
          // distributed shared memory).
          std::vector<Stmt> steps = {
              MakeAllReduce(*s.reduce, acc, res, tv.thread, BlockDim(tv.thread))};
          BufferPtr result = res;
          if (cv != nullptr) {
            result = MakeBuffer(Sanitize(s.name) + "_cluster_red", vt, {1}, MemScope::kLocal);
            steps.push_back(MakeAllReduce(*s.reduce, MakeLoad(res, {MakeInt(0)}), result,
                                          cv->thread, BlockDim(cv->thread)));
          }
          steps.push_back(
              MakeIf(store_cond, MakeStore(out, out_idx, MakeLoad(result, {MakeInt(0)}))));
          reduce_and_store = MakeSeq(steps);
          if (result != res) reduce_and_store = MakeAllocate(result, reduce_and_store);
          reduce_and_store = MakeAllocate(res, reduce_and_store);
        }
        Stmt block = MakeAllocate(acc_buf, MakeSeq({init, loop, reduce_and_store}));
        if (online) block = MakeAllocate(max_acc, block);
        if (count_acc) block = MakeAllocate(count_acc, block);
        if (sum_acc) block = MakeAllocate(sum_acc, block);
        loop = MakeFor(tv.var, MakeInt(0), MakeInt(BlockDim(tv.thread)), ForKind::kThreadBinding,
                       tv.thread, block, tv.annotations);
        if (cv != nullptr) {
          loop = MakeFor(cv->var, MakeInt(0), MakeInt(BlockDim(cv->thread)),
                         ForKind::kThreadBinding, cv->thread, loop, cv->annotations);
        }
      }
      body = loop;
    }
    if (s.leaves.empty()) {
      // A 0-d stage: the body alone (with the reduction's init if any).
      if (s.reduce && cross < 0) {
        body = MakeSeq({init_in_place(), body});
      }
    }
    return body;
  }

  const Schedule& sch_;
  const Target& target_;
  std::vector<Stage> stages_;
  std::vector<StageBound> bounds_;
  std::unordered_map<const Buffer*, Realized> realized_;
  Analyzer analyzer_;
  // Loop variables bound to block indices, with their binding; those of attached stages.
  std::unordered_map<const VarNode*, ThreadTag> block_vars_;
  std::unordered_set<const VarNode*> attached_block_vars_;
  LaunchConfig launch_;                 // of the kernel being built
  std::vector<LaunchConfig> launches_;  // per root stage
  const bool wide_;
};

}  // namespace

absl::StatusOr<Program> Lower(const Schedule& schedule, const Target& target) {
  return Lowerer(schedule, target, /*wide_accumulation=*/false).Run();
}

absl::StatusOr<Schedule> ReferenceSchedule(const Workload& workload, const Target& target) {
  auto sch = Schedule::Create(workload);
  if (!sch.ok()) return sch.status();
  if (!target.is_cuda()) return sch;
  std::vector<std::string> names;
  for (const Stage& s : sch->stages()) names.push_back(s.name);
  for (const std::string& name : names) {
    auto b = sch->GetBlock(name);
    if (!b.ok()) return b.status();
    auto loops = sch->GetLoops(*b);
    if (!loops.ok()) return loops.status();
    std::vector<LoopRV> spatial;
    for (LoopRV l : *loops) {
      if (!sch->LoopStage(l).iters[sch->LoopIter(l)].reduce) spatial.push_back(l);
    }
    if (spatial.empty()) continue;
    LoopRV fused = spatial[0];
    if (spatial.size() > 1) {
      auto f = sch->Fuse(spatial);
      if (!f.ok()) return f.status();
      fused = *f;
    }
    const int64_t threads = std::min<int64_t>(256, sch->LoopExtent(fused));
    auto parts = sch->Split(fused, {-1, threads});
    if (!parts.ok()) return parts.status();
    if (auto st = sch->Bind((*parts)[0], "blockIdx.x"); !st.ok()) return st;
    if (auto st = sch->Bind((*parts)[1], "threadIdx.x"); !st.ok()) return st;
  }
  return sch;
}

absl::StatusOr<Program> LowerReference(const Workload& workload, const Target& target) {
  auto sch = ReferenceSchedule(workload, target);
  if (!sch.ok()) return sch.status();
  return Lowerer(*sch, target, /*wide_accumulation=*/true).Run();
}

}  // namespace tessel::schedules
