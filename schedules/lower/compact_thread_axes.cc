#include "schedules/lower/compact_thread_axes.h"

#include <unordered_map>
#include <vector>

#include "schedules/ir/substitute.h"

namespace tessel::schedules {

namespace {

// Per axis of a candidate buffer: the thread dimension that indexes it at every access seen so
// far (kNone before the first access), or kVThread once some access rules it out.
using AxisTags = std::vector<ThreadTag>;
constexpr ThreadTag kRuledOut = ThreadTag::kVThread;

class Scan {
 public:
  void Run(const Stmt& s) {
    if (!s) return;
    if (const auto* f = As<ForNode>(s); f && IsPerThreadTag(f->thread)) {
      thread_vars_[f->var.get()] = f->thread;
    }
    if (const auto* a = As<AllocateNode>(s);
        a && a->buffer->scope == MemScope::kLocal && a->buffer->strides.empty()) {
      axes_.emplace(a->buffer.get(), AxisTags(a->buffer->shape.size(), ThreadTag::kNone));
      buffers_[a->buffer.get()] = a->buffer;
    }
    if (const auto* st = As<StoreNode>(s)) Access(st->buffer.get(), st->indices);
    if (const auto* r = As<AllReduceNode>(s)) RuleOut(r->result.get());
    for (const Expr& e : OwnExprs(s)) {
      for (const LoadNode* l : CollectLoads(e)) Access(l->buffer.get(), l->indices);
    }
    for (const Stmt& c : ChildStmts(s)) Run(c);
  }

  // The compacted buffers, with the axes each keeps.
  std::unordered_map<const Buffer*, BufferRemap> Remaps() const {
    std::unordered_map<const Buffer*, BufferRemap> out;
    for (const auto& [b, tags] : axes_) {
      std::vector<size_t> keep;
      std::vector<int64_t> shape;
      for (size_t d = 0; d < tags.size(); ++d) {
        const bool drop = IsPerThreadTag(tags[d]) && b->shape[d] > 1;
        if (!drop) {
          keep.push_back(d);
          shape.push_back(b->shape[d]);
        }
      }
      if (keep.size() == tags.size()) continue;
      const bool scalar = keep.empty();
      if (scalar) shape = {1};
      const BufferPtr& old = buffers_.at(b);
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
    auto it = axes_.find(b);
    if (it == axes_.end()) return;
    AxisTags& tags = it->second;
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
    auto it = axes_.find(b);
    if (it != axes_.end()) it->second.assign(it->second.size(), kRuledOut);
  }

  std::unordered_map<const VarNode*, ThreadTag> thread_vars_;
  std::unordered_map<const Buffer*, AxisTags> axes_;
  std::unordered_map<const Buffer*, BufferPtr> buffers_;
};

}  // namespace

Stmt CompactThreadAxes(const Stmt& body) {
  Scan scan;
  scan.Run(body);
  return RemapBuffers(body, scan.Remaps());
}

}  // namespace tessel::schedules
