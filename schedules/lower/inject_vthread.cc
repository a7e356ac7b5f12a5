#include "schedules/lower/inject_vthread.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/ir/stmt_functor.h"
#include "schedules/ir/substitute.h"

namespace tessel::schedules {

namespace {

using BufferSet = std::unordered_set<const Buffer*>;

// Calls f on every statement of the tree, pre-order; f returns false to skip the children.
template <typename F>
void Walk(const Stmt& s, F&& f) {
  if (!s || !f(s)) return;
  for (const Stmt& c : ChildStmts(s)) Walk(c, f);
}

// The buffers a statement reads and writes, leaving out those it allocates itself.
struct Access {
  BufferSet reads, writes;
};

Access AccessOf(const Stmt& s) {
  Access a;
  BufferSet allocated;
  Walk(s, [&](const Stmt& t) {
    for (const Expr& e : OwnExprs(t)) {
      for (const LoadNode* l : CollectLoads(e)) a.reads.insert(l->buffer.get());
    }
    if (const auto* st = As<StoreNode>(t)) a.writes.insert(st->buffer.get());
    if (const auto* al = As<AllocateNode>(t)) allocated.insert(al->buffer.get());
    return true;
  });
  for (const Buffer* b : allocated) {
    a.reads.erase(b);
    a.writes.erase(b);
  }
  return a;
}

// Injects one vthread loop whose body has had its own inner vthread loops injected already.
class Injector {
 public:
  Injector(const ForNode& loop, Stmt body) : loop_(loop), body_(std::move(body)) {}

  // The injected statement, or nullopt with the reason in *why.
  std::optional<Stmt> Run(std::string* why) {
    if (!IsConstInt(loop_.extent, &extent_) || !IsConstInt(loop_.min, &min_)) {
      *why = "the extent is not a constant";
      return std::nullopt;
    }
    std::string unsupported;
    Walk(body_, [&](const Stmt& s) {
      if (s->kind == StmtKind::kAllReduce) unsupported = "it holds a cross-thread reduction";
      if (s->kind == StmtKind::kEvaluate) unsupported = "it holds an intrinsic call";
      if (const auto* a = As<AllocateNode>(s)) {
        if (a->buffer->scope == MemScope::kFragment) unsupported = "it holds a fragment buffer";
        if (a->buffer->scope == MemScope::kLocal) inner_local_.insert(a->buffer.get());
      }
      return unsupported.empty();
    });
    if (!unsupported.empty()) {
      *why = unsupported;
      return std::nullopt;
    }
    Classify();
    if (!NeedsV(body_)) {
      // Nothing depends on the virtual thread: V identical runs (kept, so that a body that is
      // not idempotent runs V times as written).
      *why = "the body does not depend on the virtual thread";
      return std::nullopt;
    }
    if (!HasHoistable(body_)) {
      *why = "every statement depends on the virtual thread";
      return std::nullopt;
    }
    Out out = Transform(body_);
    if (!fail_.empty()) {
      *why = fail_;
      return std::nullopt;
    }
    if (std::string bad = Check(); !bad.empty()) {
      *why = bad;
      return std::nullopt;
    }
    Stmt result = Finalize(std::move(out));
    if (!expanded_.empty()) {
      Expr lane = min_ == 0 ? Expr(loop_.var) : Expr(loop_.var) - min_;
      // buffer[idx] -> expanded[v - min, idx].
      std::unordered_map<const Buffer*, BufferRemap> remap;
      for (const auto& [b, to] : expanded_) {
        remap[b] = BufferRemap{to, [lane](const std::vector<Expr>& idx) {
                                 std::vector<Expr> out = {lane};
                                 out.insert(out.end(), idx.begin(), idx.end());
                                 return out;
                               }};
      }
      result = RemapBuffers(result, remap);
    }
    return result;
  }

 private:
  // ---- Which statements depend on the virtual thread.

  bool Dep(const Expr& e) const {
    if (!e) return false;
    std::vector<const VarNode*> vars;
    CollectVars(e, &vars);
    for (const VarNode* v : vars) {
      if (dep_vars_.count(v)) return true;
    }
    for (const LoadNode* l : CollectLoads(e)) {
      if (touched_.count(l->buffer.get())) return true;
    }
    return false;
  }

  // Fixed point: the variables derived from v (lets of dependent values, loops with dependent
  // bounds) and the local buffers allocated inside the loop that a dependent statement writes.
  void Classify() {
    dep_vars_ = {loop_.var.get()};
    bool changed = true;
    while (changed) {
      changed = false;
      Mark(body_, false, &changed);
    }
  }

  void Mark(const Stmt& s, bool ctx, bool* changed) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::kFor: {
        const auto& n = static_cast<const ForNode&>(*s);
        const bool d = ctx || Dep(n.min) || Dep(n.extent);
        if (d && dep_vars_.insert(n.var.get()).second) *changed = true;
        Mark(n.body, d, changed);
        return;
      }
      case StmtKind::kIfThenElse: {
        const auto& n = static_cast<const IfThenElseNode&>(*s);
        const bool d = ctx || Dep(n.cond);
        Mark(n.then_case, d, changed);
        Mark(n.else_case, d, changed);
        return;
      }
      case StmtKind::kLetStmt: {
        const auto& n = static_cast<const LetStmtNode&>(*s);
        if ((ctx || Dep(n.value)) && dep_vars_.insert(n.var.get()).second) *changed = true;
        Mark(n.body, ctx, changed);
        return;
      }
      case StmtKind::kStore: {
        const auto& n = static_cast<const StoreNode&>(*s);
        bool d = ctx || Dep(n.value);
        for (const Expr& i : n.indices) d = d || Dep(i);
        if (d && inner_local_.count(n.buffer.get()) && touched_.insert(n.buffer.get()).second) {
          *changed = true;
        }
        return;
      }
      default:
        for (const Stmt& c : ChildStmts(s)) Mark(c, ctx, changed);
        return;
    }
  }

  // Whether a statement depends on the virtual thread: an expression of it does, or it writes a
  // touched buffer.
  bool NeedsV(const Stmt& s) {
    if (!s) return false;
    if (auto it = needs_v_.find(s.get()); it != needs_v_.end()) return it->second;
    bool r = false;
    for (const Expr& e : OwnExprs(s)) r = r || Dep(e);
    if (const auto* st = As<StoreNode>(s)) r = r || touched_.count(st->buffer.get()) > 0;
    for (const Stmt& c : ChildStmts(s)) r = r || NeedsV(c);
    needs_v_[s.get()] = r;
    return r;
  }

  // Whether a statement holds something to emit once: a barrier or a store that does not depend
  // on the virtual thread.
  bool HasHoistable(const Stmt& s) {
    if (!s) return false;
    if (auto it = hoistable_.find(s.get()); it != hoistable_.end()) return it->second;
    bool r = s->kind == StmtKind::kBarrier || (s->kind == StmtKind::kStore && !NeedsV(s));
    for (const Stmt& c : ChildStmts(s)) r = r || HasHoistable(c);
    hoistable_[s.get()] = r;
    return r;
  }

  static bool HasBarrier(const Stmt& s) {
    bool found = false;
    Walk(s, [&](const Stmt& t) {
      found = found || t->kind == StmtKind::kBarrier;
      return !found;
    });
    return found;
  }

  // ---- The rewrite.

  // A piece of the result. `w`: `s` depends on v and is not wrapped yet (the caller wraps runs of
  // such pieces in one loop over v); `units` are its dependent units.
  struct Out {
    Stmt s;
    bool w = false;
    std::vector<int> units;
  };

  // A statement emitted as a whole: once (w false) or in a loop over v.
  struct Unit {
    Access access;
    bool w = false;
    int group = -1;            // the loop over v that holds it (w only)
    std::vector<int> anchors;  // enclosing descended loops and branches, outermost first; 0: root
    bool in_loop = false;      // inside a descended loop
  };

  int AddUnit(const Stmt& s, bool w) {
    Unit u;
    u.access = AccessOf(s);
    u.w = w;
    u.anchors = anchors_;
    u.in_loop = loop_depth_ > 0;
    units_.push_back(std::move(u));
    return static_cast<int>(units_.size()) - 1;
  }

  Stmt Wrap(const Stmt& s, const std::vector<int>& units) {
    const int g = next_group_++;
    for (int u : units) units_[u].group = g;
    return MakeFor(loop_.var, loop_.min, loop_.extent, ForKind::kUnrolled, ThreadTag::kVThread, s,
                   loop_.annotations);
  }

  Stmt Finalize(Out o) { return o.w ? Wrap(o.s, o.units) : o.s; }

  // Descends into a child as its own anchor (a loop iteration or a branch).
  Stmt Descend(const Stmt& s, bool loop) {
    if (!s) return s;
    anchors_.push_back(next_anchor_++);
    if (loop) ++loop_depth_;
    Stmt r = Finalize(Transform(s));
    if (loop) --loop_depth_;
    anchors_.pop_back();
    return r;
  }

  Out Transform(const Stmt& s) {
    if (!NeedsV(s)) {
      AddUnit(s, false);
      return {s, false, {}};
    }
    if (!HasHoistable(s)) return Whole(s);
    switch (s->kind) {
      case StmtKind::kSeq: {
        std::vector<Stmt> out, run;
        std::vector<int> run_units;
        auto flush = [&]() {
          if (run.empty()) return;
          out.push_back(Wrap(MakeSeq(run), run_units));
          run.clear();
          run_units.clear();
        };
        for (const Stmt& c : static_cast<const SeqNode&>(*s).stmts) {
          Out o = Transform(c);
          if (o.w) {
            run.push_back(o.s);
            run_units.insert(run_units.end(), o.units.begin(), o.units.end());
          } else {
            flush();
            out.push_back(o.s);
          }
        }
        flush();
        return {MakeSeq(out), false, {}};
      }
      case StmtKind::kFor: {
        const auto& n = static_cast<const ForNode&>(*s);
        if (Dep(n.min) || Dep(n.extent)) return Stuck(s, "a loop whose bounds depend on it");
        const bool binding = n.kind == ForKind::kThreadBinding && IsThreadTag(n.thread);
        const bool loop = n.kind == ForKind::kSerial || n.kind == ForKind::kUnrolled ||
                          (n.kind == ForKind::kThreadBinding && n.thread == ThreadTag::kVThread);
        if (!binding && !loop) return Stuck(s, absl::StrCat("a ", ForKindName(n.kind), " loop"));
        Stmt body = binding ? Finalize(Transform(n.body)) : Descend(n.body, /*loop=*/true);
        return {MakeFor(n.var, n.min, n.extent, n.kind, n.thread, body, n.annotations), false, {}};
      }
      case StmtKind::kAllocate: {
        const auto& n = static_cast<const AllocateNode&>(*s);
        if (touched_.count(n.buffer.get())) {
          const Buffer& b = *n.buffer;
          std::vector<int64_t> shape = {extent_};
          shape.insert(shape.end(), b.shape.begin(), b.shape.end());
          std::vector<int64_t> strides;
          if (!b.strides.empty()) {
            strides = {b.AllocatedElements()};
            strides.insert(strides.end(), b.strides.begin(), b.strides.end());
          }
          expanded_[n.buffer.get()] = Reshaped(b, shape, strides);
        }
        return {MakeAllocate(n.buffer, Finalize(Transform(n.body))), false, {}};
      }
      case StmtKind::kIfThenElse: {
        const auto& n = static_cast<const IfThenElseNode&>(*s);
        if (Dep(n.cond)) return Stuck(s, "a condition that depends on it");
        Stmt t = Descend(n.then_case, /*loop=*/false);
        Stmt e = Descend(n.else_case, /*loop=*/false);
        return {MakeIf(n.cond, t, e), false, {}};
      }
      case StmtKind::kLetStmt: {
        const auto& n = static_cast<const LetStmtNode&>(*s);
        if (Dep(n.value)) return Stuck(s, "a let whose value depends on it");
        return {MakeLet(n.var, n.value, Finalize(Transform(n.body))), false, {}};
      }
      default:
        return Whole(s);
    }
  }

  // A dependent statement emitted as a whole in a loop over v.
  Out Whole(const Stmt& s) { return {s, true, {AddUnit(s, true)}}; }

  // A dependent statement that holds something to emit once but cannot be descended into.
  Out Stuck(const Stmt& s, const std::string& what) {
    if (HasBarrier(s) && fail_.empty()) {
      fail_ = absl::StrCat("a barrier is under ", what);
    }
    return Whole(s);
  }

  // ---- Whether the rewrite computes what the plain loop computes (see the header).

  std::string Check() const {
    BufferSet w_writes, h_writes;
    for (const Unit& u : units_) {
      for (const Buffer* b : u.access.writes) (u.w ? w_writes : h_writes).insert(b);
    }
    for (const Unit& u : units_) {
      if (u.w) continue;
      for (const Buffer* b : u.access.reads) {
        if (w_writes.count(b)) {
          return absl::StrCat("a statement emitted once reads ", b->name,
                              ", which a statement of each virtual thread writes");
        }
      }
      for (const Buffer* b : u.access.writes) {
        if (w_writes.count(b)) {
          return absl::StrCat("statements emitted once and per virtual thread both write ",
                              b->name);
        }
      }
    }
    // Every read of a buffer written once follows such a write in the same iteration.
    for (size_t ui = 0; ui < units_.size(); ++ui) {
      const Unit& u = units_[ui];
      for (const Buffer* b : u.access.reads) {
        if (!h_writes.count(b)) continue;
        bool covered = false;
        for (size_t hi = 0; hi < ui && !covered; ++hi) {
          const Unit& h = units_[hi];
          covered =
              !h.w && h.access.writes.count(b) &&
              std::find(u.anchors.begin(), u.anchors.end(), h.anchors.back()) != u.anchors.end();
        }
        if (!covered) {
          return absl::StrCat("a read of ", b->name,
                              " does not follow its write in the same iteration");
        }
      }
    }
    // Buffers written per virtual thread and not expanded: one loop over v, in no descended loop.
    for (const Buffer* b : w_writes) {
      if (expanded_.count(b)) continue;
      int group = -1;
      for (const Unit& u : units_) {
        if (!u.access.reads.count(b) && !u.access.writes.count(b)) continue;
        if (group >= 0 && u.group != group) {
          return absl::StrCat(b->name, " is shared by the virtual threads and used in two places");
        }
        group = u.group;
        if (u.in_loop) {
          return absl::StrCat(b->name,
                              " is shared by the virtual threads and written inside a loop");
        }
      }
    }
    return "";
  }

  const ForNode& loop_;
  const Stmt body_;
  int64_t extent_ = 0, min_ = 0;
  std::unordered_set<const VarNode*> dep_vars_;
  BufferSet inner_local_, touched_;
  std::unordered_map<const StmtNode*, bool> needs_v_, hoistable_;
  std::vector<Unit> units_;
  std::vector<int> anchors_ = {0};
  int next_anchor_ = 1, loop_depth_ = 0, next_group_ = 0;
  std::string fail_;
  std::unordered_map<const Buffer*, BufferPtr> expanded_;
};

class VThreadPass : public StmtMutator {
 public:
  explicit VThreadPass(std::vector<std::string>* kept) : kept_(kept) {}

 protected:
  Stmt VisitFor(const ForNode& n, const Stmt& self) override {
    Stmt s = StmtMutator::VisitFor(n, self);  // inner vthread loops first
    if (n.kind != ForKind::kThreadBinding || n.thread != ThreadTag::kVThread) return s;
    const auto& loop = static_cast<const ForNode&>(*s);
    if (int64_t extent = 0; IsConstInt(loop.extent, &extent) && extent == 1) {
      // One virtual thread: the body, run once.
      return Substitute(loop.body, {{loop.var.get(), loop.min}});
    }
    std::string why;
    std::optional<Stmt> r = Injector(loop, loop.body).Run(&why);
    if (r) return *r;
    if (kept_ != nullptr) kept_->push_back(absl::StrCat(n.var->name, ": ", why));
    return s;
  }

 private:
  std::vector<std::string>* kept_;
};

}  // namespace

Stmt InjectVirtualThreads(const Stmt& body, std::vector<std::string>* kept) {
  return VThreadPass(kept).Visit(body);
}

}  // namespace tessel::schedules
