#include "schedules/lower/compact_thread_axes.h"

#include <unordered_map>
#include <vector>

#include "schedules/ir/substitute.h"

namespace tessel::schedules {

namespace {

// Bindings that are fixed for a thread: its thread indices, its rank in a cluster, its block.
bool FixedForThread(ThreadTag t) { return IsPerThreadTag(t) || IsBlockTag(t); }

// A local buffer and, per axis, the per-thread binding that indexes it at every access seen so
// far (kNone before the first access), or kRuledOut once some access rules it out.
constexpr ThreadTag kRuledOut = ThreadTag::kVThread;
struct Candidate {
  BufferPtr buffer;
  std::vector<ThreadTag> tags;
};

class Scan {
 public:
  void Run(const Stmt& s) {
    if (!s) return;
    if (const auto* f = As<ForNode>(s); f && FixedForThread(f->thread)) {
      thread_vars_[f->var.get()] = f->thread;
    }
    if (const auto* a = As<AllocateNode>(s);
        a && a->buffer->scope == MemScope::kLocal && a->buffer->strides.empty()) {
      candidates_.emplace(
          a->buffer.get(),
          Candidate{a->buffer, std::vector<ThreadTag>(a->buffer->shape.size(), ThreadTag::kNone)});
    }
    if (const auto* st = As<StoreNode>(s)) Access(st->buffer.get(), st->indices);
    if (const auto* r = As<AllReduceNode>(s)) {
      for (const BufferPtr& b : r->results) RuleOut(b.get());
    }
    for (const Expr& e : OwnExprs(s)) {
      for (const LoadNode* l : CollectLoads(e)) Access(l->buffer.get(), l->indices);
    }
    for (const Stmt& c : ChildStmts(s)) Run(c);
  }

  // The compacted buffers, with the axes each keeps.
  std::unordered_map<const Buffer*, BufferRemap> Remaps() const {
    std::unordered_map<const Buffer*, BufferRemap> out;
    for (const auto& [b, c] : candidates_) {
      const std::vector<ThreadTag>& tags = c.tags;
      std::vector<size_t> keep;
      std::vector<int64_t> shape;
      for (size_t d = 0; d < tags.size(); ++d) {
        const bool drop = FixedForThread(tags[d]) && b->shape[d] > 1;
        if (!drop) {
          keep.push_back(d);
          shape.push_back(b->shape[d]);
        }
      }
      if (keep.size() == tags.size()) continue;
      const bool scalar = keep.empty();
      if (scalar) shape = {1};
      const BufferPtr& old = c.buffer;
      out[b] = BufferRemap{MakeBuffer(old->name, old->dtype, shape, old->scope),
                           [keep, scalar](const std::vector<Expr>& idx) {
                             if (scalar) return std::vector<Expr>{MakeInt(0)};
                             std::vector<Expr> kept;
                             for (size_t d : keep) kept.push_back(idx[d]);
                             return kept;
                           }};
    }
    return out;
  }

 private:
  void Access(const Buffer* b, const std::vector<Expr>& idx) {
    auto it = candidates_.find(b);
    if (it == candidates_.end()) return;
    std::vector<ThreadTag>& tags = it->second.tags;
    for (size_t d = 0; d < tags.size() && d < idx.size(); ++d) {
      ThreadTag t = kRuledOut;
      if (const auto* v = As<VarNode>(idx[d])) {
        auto tv = thread_vars_.find(v);
        if (tv != thread_vars_.end()) t = tv->second;
      }
      if (tags[d] == ThreadTag::kNone) tags[d] = t;
      if (tags[d] != t) tags[d] = kRuledOut;
    }
  }

  void RuleOut(const Buffer* b) {
    auto it = candidates_.find(b);
    if (it != candidates_.end()) it->second.tags.assign(it->second.tags.size(), kRuledOut);
  }

  std::unordered_map<const VarNode*, ThreadTag> thread_vars_;
  std::unordered_map<const Buffer*, Candidate> candidates_;
};

}  // namespace

Stmt CompactThreadAxes(const Stmt& body) {
  Scan scan;
  scan.Run(body);
  return RemapBuffers(body, scan.Remaps());
}

}  // namespace tessel::schedules
