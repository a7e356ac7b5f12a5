// lower_tensor_intrinsics: the loop nests `tensorize` marked (ir/tensor_intrin.h) become
// tensor-core intrinsic calls, and fragment buffers per-thread register arrays.
//
// First every mma nest of a kernel is matched: its accumulator, A and B operands are fragments,
// each indexed by exactly one of the nest's loops per tile axis (coefficient 1). That gives each
// fragment its role and which of its axes are the tile's rows and columns. Then:
//   - an mma nest becomes one call tessel_mma_m16n8k16_<acc>_<ab>(&acc[t], &a[t], &b[t]), t the
//     tile's first register in each operand;
//   - an ldmatrix nest becomes, in every lane, tessel_ldmatrix_x4 (A) or _x2 (B), transposed when
//     the shared copy is contiguous along the tile's rows, with the lane's row address;
//   - an accumulator nest (mma_accumulator, and the mma stage's initialization) runs in every lane
//     over the 2 x 2 elements the lane holds: rows l/4 + 8h, columns 2 (l % 4) + e;
//   - a fragment is allocated as a local array of its tiles' registers, tile after tile in
//     row-major tile order.
//   - a wgmma nest (sm_90a) becomes one call tessel_wgmma_m64n<N>k16_... per warp, issued by the
//     warpgroup: A's address is the group's first warp's rows (the warp variable threadIdx.y
//     rounded down to a multiple of 4), B's is the same for the group's four warps, each with its
//     descriptor's byte offsets and swizzle mode from the swizzled shared buffer's layout. Every
//     maximal run of wgmma calls that neither writes shared memory nor synchronizes is fenced
//     (wgmma.fence), committed and waited for; where shared memory is written before the barrier
//     that precedes such a run outside a software pipeline, the writers fence the async proxy
//     first (inject_software_pipeline does so for pipelined loops).
// Any other access of a fragment is an error naming it, and so is a tensorize mark on the host.

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedules/ir/affine.h"
#include "schedules/ir/expr_functor.h"
#include "schedules/ir/stmt_functor.h"
#include "schedules/ir/structural.h"
#include "schedules/ir/substitute.h"
#include "schedules/ir/tensor_intrin.h"
#include "schedules/lower/passes.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules {

namespace {

constexpr int64_t kWarp = 32;

// A fragment's role and register layout.
struct Fragment {
  enum class Role : uint8_t { kA, kB, kAcc } role;
  int row_dim = -1, col_dim = -1;  // axes of the buffer: tile rows (m or n) and columns (k or n)
  int64_t tile_rows = 0, tile_cols = 0, regs_per_tile = 0;  // elements a lane holds per tile
  BufferPtr flat;                                           // the register array
  int64_t Tiles(const Buffer& b) const {
    return (b.shape[row_dim] / tile_rows) * (b.shape[col_dim] / tile_cols);
  }
};

// mma.sync's A fragment, which wgmma's register-A form takes too: 16 x 16 tiles, 8 16-bit
// elements a lane.
Fragment AFragment() {
  Fragment fa{Fragment::Role::kA};
  fa.tile_rows = 16, fa.tile_cols = 16, fa.regs_per_tile = 8;
  return fa;
}

const char* RoleName(Fragment::Role r) {
  switch (r) {
    case Fragment::Role::kA:
      return "an A operand";
    case Fragment::Role::kB:
      return "a B operand";
    case Fragment::Role::kAcc:
      return "an accumulator";
  }
  return "?";
}

// A tensorized loop nest: the marked loop and the loops inside it, and the innermost body.
struct Nest {
  const TensorIntrinInfo* intrin = nullptr;
  std::vector<const ForNode*> loops;
  Stmt body;
};

const TensorIntrinInfo* MarkOf(const ForNode& f) { return TensorizedBy(f.annotations); }

Stmt Unwrap(const Stmt& s) {
  const auto* seq = As<SeqNode>(s);
  return seq && seq->stmts.size() == 1 ? Unwrap(seq->stmts[0]) : s;
}

// The loops of the nest marked at `f`, as many as the intrinsic's form (fewer for an mma stage's
// initialization, whose nest has no k loop).
Nest NestAt(const ForNode& f) {
  Nest n;
  n.intrin = MarkOf(f);
  n.loops.push_back(&f);
  const size_t want = n.intrin->forms[0].size();
  Stmt body = Unwrap(f.body);
  while (n.loops.size() < want) {
    const auto* inner = As<ForNode>(body);
    if (!inner) break;
    n.loops.push_back(inner);
    body = Unwrap(inner->body);
  }
  n.body = body;
  return n;
}

std::string NestDesc(const Nest& n) {
  return absl::StrCat("the ", n.intrin->name, " nest at loop ", n.loops[0]->var->name);
}

// The single axis of `idx` that uses `v`, with coefficient 1; -1 when none; -2 when the use is
// not of that form.
int AxisOf(const std::vector<Expr>& idx, const VarNode* v) {
  int axis = -1;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (!UsesVar(idx[d], v)) continue;
    int64_t coeff = 0;
    AffineForm rest;
    if (axis >= 0 || !SplitAffine(idx[d], v, &coeff, &rest) || coeff != 1) return -2;
    axis = static_cast<int>(d);
  }
  return axis;
}

// The product's two loads of an mma nest's store acc = acc + a * b, A (the one indexed by the
// nest's m loop) first.
struct MmaAccess {
  const StoreNode* store = nullptr;
  const LoadNode* a = nullptr;
  const LoadNode* b = nullptr;
};

absl::StatusOr<MmaAccess> MatchMmaStore(const Nest& n) {
  MmaAccess m;
  m.store = As<StoreNode>(n.body);
  const auto* add = m.store ? As<BinaryNode>(m.store->value) : nullptr;
  const BinaryNode* mul = nullptr;
  if (add && add->op == BinaryOp::kAdd) {
    const auto* acc = As<LoadNode>(add->a);
    mul = As<BinaryNode>(add->b);
    if (!acc || acc->buffer != m.store->buffer) {
      acc = As<LoadNode>(add->b);
      mul = As<BinaryNode>(add->a);
    }
    if (!acc || acc->buffer != m.store->buffer) mul = nullptr;
  }
  if (mul && mul->op == BinaryOp::kMul) {
    m.a = LoadUnderCast(mul->a);
    m.b = LoadUnderCast(mul->b);
  }
  // A first: the operand indexed by the nest's m loop.
  if (m.a && m.b && AxisOf(m.a->indices, n.loops[0]->var.get()) < 0) std::swap(m.a, m.b);
  if (!m.a || !m.b) {
    return absl::FailedPreconditionError(
        absl::StrCat(NestDesc(n), " is not one unguarded store acc = acc + a * b (found ",
                     n.body ? ToString(n.body) : "nothing",
                     "); tensorize loops that no split leaves guarded (tiles that divide)"));
  }
  return m;
}

std::string IndexList(const std::vector<Expr>& idx) {
  std::string out = "[";
  for (size_t i = 0; i < idx.size(); ++i) absl::StrAppend(&out, i ? ", " : "", ToString(idx[i]));
  return out + "]";
}

// The axes that loops `row` and `col` index in `access` of fragment `b` (checked); other axes
// must have extent 1.
absl::Status TileAxes(const Nest& n, const Buffer& b, const std::vector<Expr>& idx,
                      const VarNode* row, const VarNode* col, const VarNode* other, int* row_dim,
                      int* col_dim) {
  *row_dim = AxisOf(idx, row);
  *col_dim = AxisOf(idx, col);
  const bool other_used = other && AxisOf(idx, other) != -1;
  if (*row_dim < 0 || *col_dim < 0 || *row_dim == *col_dim || other_used) {
    return absl::FailedPreconditionError(
        absl::StrCat(NestDesc(n), " indexes fragment ", b.name, " at ", IndexList(idx),
                     "; each tile axis must be indexed by one of the nest's loops plus an offset"));
  }
  for (size_t d = 0; d < b.shape.size(); ++d) {
    if (static_cast<int>(d) != *row_dim && static_cast<int>(d) != *col_dim && b.shape[d] != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("fragment ", b.name, " has extent ", b.shape[d], " on axis ", d,
                       ", which is no tile axis; attach it where its other axes have extent 1"));
    }
  }
  return absl::OkStatus();
}

// A write-back nest's body that is one store, under conditions (none with an else), of a 16-bit
// element to a global buffer whose rows are whole 16-byte vectors, contiguous: its conditions,
// outermost first, and the store (null where the body is of another form).
struct GuardedStore {
  std::vector<Expr> conds;
  const StoreNode* store = nullptr;
};
GuardedStore RowVectorStore(const Stmt& body) {
  GuardedStore out;
  Stmt x = body;
  while (const auto* i = As<IfThenElseNode>(x)) {
    if (i->else_case) return {};
    out.conds.push_back(i->cond);
    x = i->then_case;
  }
  const auto* st = As<StoreNode>(x);
  if (!st || st->buffer->scope != MemScope::kGlobal ||
      (st->buffer->dtype != DType::kFloat16 && st->buffer->dtype != DType::kBFloat16) ||
      st->buffer->shape.empty() || st->buffer->shape.back() % 8 != 0 ||
      st->buffer->Strides().back() != 1) {
    return {};
  }
  out.store = st;
  return out;
}

class TensorLowering : public StmtMutator {
 public:
  // `bulk_stores`: the target has bulk tensor copies, so write-backs annotated kBulkStore go
  // through the copy engine, their tensor maps (over `buffers`, the program's) added to `maps`
  // (the kernel's).
  TensorLowering(const Kernel& k, const Analyzer& analyzer, bool bulk_stores,
                 const std::vector<ProgramBuffer>& buffers, std::vector<TensorMapSpec>* maps)
      : kernel_(k),
        analyzer_(analyzer),
        bulk_stores_(bulk_stores),
        buffers_(buffers),
        maps_(maps) {}

  // Phase 1: the roles of the kernel's fragments, from its mma nests.
  absl::Status FindFragments(const Stmt& body) {
    absl::Status st;
    WalkStmt(body, [&](const Stmt& s) {
      const auto* f = As<ForNode>(s);
      if (!st.ok() || !f || !MarkOf(*f)) return;
      const TensorIntrin kind = MarkOf(*f)->kind;
      if (kind != TensorIntrin::kMma && kind != TensorIntrin::kWgmma) return;
      Nest n = NestAt(*f);
      if (n.loops.size() == 3) st = kind == TensorIntrin::kMma ? AddMma(n) : AddWgmma(n);
    });
    return st;
  }

  absl::Status status() const { return status_; }
  // Whether a write-back went through bulk tensor stores.
  bool stored_in_bulk() const { return stored_in_bulk_; }

 protected:
  Stmt VisitFor(const ForNode& f, const Stmt& self) override {
    if (!status_.ok()) return self;
    if (!MarkOf(f)) {
      if (f.thread == ThreadTag::kNone) return StmtMutator::VisitFor(f, self);
      thread_loops_.push_back(&f);
      Stmt out = StmtMutator::VisitFor(f, self);
      thread_loops_.pop_back();
      return out;
    }
    if (kernel_.launch.block[0] != kWarp) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          "kernel ", kernel_.name, " runs tensor-core intrinsics but its block has ",
          kernel_.launch.block[0],
          " threads along threadIdx.x; the lanes of a warp are "
          "threadIdx.x, so bind the block's other loops so that threadIdx.x has extent 32")));
    }
    Nest n = NestAt(f);
    switch (n.intrin->kind) {
      case TensorIntrin::kMma:
        return n.loops.size() == 3 ? Mma(n) : Lanes(n);
      case TensorIntrin::kLdmatrix:
        return Ldmatrix(n);
      case TensorIntrin::kAccumulator:
        return Lanes(n);
      case TensorIntrin::kWgmma:
        return n.loops.size() == 3 ? Wgmma(n) : Lanes(n);
    }
    return self;
  }
  Stmt VisitAllocate(const AllocateNode& a, const Stmt& self) override {
    Stmt body = Visit(a.body);
    if (a.buffer->scope != MemScope::kFragment) {
      return body == a.body ? self : MakeAllocate(a.buffer, body);
    }
    auto it = fragments_.find(a.buffer.get());
    if (it == fragments_.end()) {
      return Fail(absl::FailedPreconditionError(
          absl::StrCat("fragment ", a.buffer->name, " is not an operand or accumulator of any ",
                       "mma_m16n8k16 nest; fragments hold tensor-core tiles only")));
    }
    return MakeAllocate(it->second.flat, body);
  }
  Stmt VisitStore(const StoreNode& s, const Stmt& self) override {
    if (s.buffer->scope == MemScope::kFragment) return Stray(*s.buffer, ToString(self));
    CheckExprs(OwnExprs(self));
    return self;
  }
  Stmt VisitIfThenElse(const IfThenElseNode& n, const Stmt& self) override {
    CheckExprs({n.cond});
    return StmtMutator::VisitIfThenElse(n, self);
  }
  Stmt VisitLetStmt(const LetStmtNode& n, const Stmt& self) override {
    CheckExprs({n.value});
    return StmtMutator::VisitLetStmt(n, self);
  }

 private:
  Stmt Fail(absl::Status st) {
    if (status_.ok()) status_ = std::move(st);
    return MakeSeq({});
  }
  Stmt Stray(const Buffer& b, const std::string& where) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        "fragment ", b.name, " is accessed outside a tensorized nest (", where,
        "); a fragment's lanes hold parts of its tiles, so tensorize the loops that read or "
        "write it element by element with mma_accumulator")));
  }
  void CheckExprs(const std::vector<Expr>& exprs) {
    for (const Expr& e : exprs) {
      for (const LoadNode* l : CollectLoads(e)) {
        if (l->buffer->scope == MemScope::kFragment) Stray(*l->buffer, ToString(e));
      }
    }
  }

  absl::Status AddFragment(const Nest& n, const BufferPtr& b, Fragment f) {
    if (b->shape[f.row_dim] % f.tile_rows != 0 || b->shape[f.col_dim] % f.tile_cols != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "fragment ", b->name, " has ", b->shape[f.row_dim], " x ", b->shape[f.col_dim],
          " elements on its tile axes; as ", RoleName(f.role), " of ", NestDesc(n),
          " it holds tiles of ", f.tile_rows, " x ", f.tile_cols, ": tile it to multiples"));
    }
    auto it = fragments_.find(b.get());
    if (it != fragments_.end()) {
      if (it->second.role != f.role || it->second.row_dim != f.row_dim) {
        return absl::FailedPreconditionError(absl::StrCat(
            "fragment ", b->name, " is ", RoleName(it->second.role), " of one mma nest and ",
            RoleName(f.role), " of ", NestDesc(n), "; give each use its own fragment"));
      }
      return absl::OkStatus();
    }
    f.flat = MakeBuffer(b->name, b->dtype, {f.Tiles(*b) * f.regs_per_tile}, MemScope::kLocal);
    fragments_.emplace(b.get(), f);
    return absl::OkStatus();
  }

  absl::Status AddMma(const Nest& n) {
    auto m = MatchMmaStore(n);
    if (!m.ok()) return m.status();
    const VarNode* vm = n.loops[0]->var.get();
    const VarNode* vn = n.loops[1]->var.get();
    const VarNode* vk = n.loops[2]->var.get();
    const LoadNode* a = m->a;
    const LoadNode* b = m->b;
    mmas_[n.loops[0]] = *m;
    Fragment fa = AFragment(), fb{Fragment::Role::kB}, fc{Fragment::Role::kAcc};
    fb.tile_rows = 8, fb.tile_cols = 16, fb.regs_per_tile = 4;
    fc.tile_rows = 16, fc.tile_cols = 8, fc.regs_per_tile = 4;
    for (const Buffer* x : {a->buffer.get(), b->buffer.get(), m->store->buffer.get()}) {
      if (x->scope != MemScope::kFragment) {
        return absl::FailedPreconditionError(absl::StrCat(NestDesc(n), " accesses ", x->name,
                                                          " in ", MemScopeName(x->scope),
                                                          " memory; mma operands are fragments"));
      }
    }
    absl::Status st = TileAxes(n, *a->buffer, a->indices, vm, vk, vn, &fa.row_dim, &fa.col_dim);
    if (st.ok()) st = TileAxes(n, *b->buffer, b->indices, vn, vk, vm, &fb.row_dim, &fb.col_dim);
    if (st.ok()) {
      st = TileAxes(n, *m->store->buffer, m->store->indices, vm, vn, vk, &fc.row_dim, &fc.col_dim);
    }
    if (st.ok()) st = AddFragment(n, a->buffer, fa);
    if (st.ok()) st = AddFragment(n, b->buffer, fb);
    if (st.ok()) st = AddFragment(n, m->store->buffer, fc);
    return st;
  }

  // A wgmma nest: acc = acc + A * B, acc an f32 fragment, B a 16-bit shared buffer, A one too
  // or a fragment (the warp's registers, loaded by ldmatrix as mma.sync's A).
  absl::Status AddWgmma(const Nest& n) {
    auto m = MatchMmaStore(n);
    if (!m.ok()) return m.status();
    const VarNode* vm = n.loops[0]->var.get();
    const VarNode* vn = n.loops[1]->var.get();
    const VarNode* vk = n.loops[2]->var.get();
    const bool a_registers = m->a->buffer->scope == MemScope::kFragment;
    for (const LoadNode* x : {m->a, m->b}) {
      if (x->buffer->scope != MemScope::kShared && !(x == m->a && a_registers)) {
        return absl::FailedPreconditionError(absl::StrCat(
            NestDesc(n), " reads ", x->buffer->name, " in ", MemScopeName(x->buffer->scope),
            " memory; wgmma reads B from shared memory (cache_read \"shared\") and A from shared "
            "memory or a fragment (cache_read \"fragment\" of its shared copy)"));
      }
    }
    if (a_registers) {
      Fragment fa = AFragment();
      TESSEL_RETURN_IF_ERROR(
          TileAxes(n, *m->a->buffer, m->a->indices, vm, vk, vn, &fa.row_dim, &fa.col_dim));
      TESSEL_RETURN_IF_ERROR(AddFragment(n, m->a->buffer, fa));
    }
    const Buffer& acc = *m->store->buffer;
    if (acc.scope != MemScope::kFragment || acc.dtype != DType::kFloat32) {
      return absl::FailedPreconditionError(
          absl::StrCat(NestDesc(n), " accumulates into ", acc.name, " (", MemScopeName(acc.scope),
                       ", ", DTypeName(acc.dtype),
                       "); wgmma accumulates in an f32 fragment (cache_write \"fragment\")"));
    }
    mmas_[n.loops[0]] = *m;
    Fragment fc{Fragment::Role::kAcc};
    fc.tile_rows = 16, fc.tile_cols = 8, fc.regs_per_tile = 4;
    TESSEL_RETURN_IF_ERROR(
        TileAxes(n, acc, m->store->indices, vm, vn, vk, &fc.row_dim, &fc.col_dim));
    return AddFragment(n, m->store->buffer, fc);
  }

  const Fragment* FragmentOf(const Buffer* b) const {
    auto it = fragments_.find(b);
    return it == fragments_.end() ? nullptr : &it->second;
  }

  // The first register of the tile at `idx` (the nest's loops at zero) in fragment `f`.
  Expr TileRegister(const Fragment& f, const Buffer& b, const std::vector<Expr>& idx) const {
    const int64_t col_tiles = b.shape[f.col_dim] / f.tile_cols;
    return analyzer_.Simplify(
        (idx[f.row_dim] / f.tile_rows * col_tiles + idx[f.col_dim] / f.tile_cols) *
        f.regs_per_tile);
  }

  std::vector<Expr> AtZero(const Nest& n, const std::vector<Expr>& idx) const {
    std::unordered_map<const VarNode*, Expr> zero;
    for (const ForNode* l : n.loops) zero[l->var.get()] = MakeInt(0, l->var->dtype);
    std::vector<Expr> out;
    for (const Expr& i : idx) out.push_back(analyzer_.Simplify(Substitute(i, zero)));
    return out;
  }

  // The accumulator tile an mma or wgmma nest `m` updates: its first register.
  Expr AccumulatorOperand(const Nest& n, const MmaAccess& m) const {
    const Fragment& fc = *FragmentOf(m.store->buffer.get());
    return MakeLoad(fc.flat, {TileRegister(fc, *m.store->buffer, AtZero(n, m.store->indices))});
  }

  Expr RegisterOperand(const Nest& n, const LoadNode& l) const {
    const Fragment& f = *FragmentOf(l.buffer.get());
    return MakeLoad(f.flat, {TileRegister(f, *l.buffer, AtZero(n, l.indices))});
  }

  // An mma nest FindFragments matched (its store and its A and B loads, in that order).
  Stmt Mma(const Nest& n) {
    const MmaAccess& m = mmas_.at(n.loops[0]);
    const Fragment& fc = *FragmentOf(m.store->buffer.get());
    const Expr acc = AccumulatorOperand(n, m);
    const std::string name =
        absl::StrCat(kCallMma, "_", DTypeName(fc.flat->dtype), "_", DTypeName(m.a->buffer->dtype));
    return MakeEvaluate(
        MakeCall(name, {acc, RegisterOperand(n, *m.a), RegisterOperand(n, *m.b)}, DType::kInt32));
  }

  // A new lane variable and the loop over the warp's lanes around `body`.
  static VarPtr LaneVar() { return MakeVar("lane", DType::kInt32); }
  static Stmt LaneLoop(const VarPtr& lane, Stmt body) {
    return MakeFor(lane, MakeInt(0, lane->dtype), MakeInt(kWarp, lane->dtype),
                   ForKind::kThreadBinding, ThreadTag::kThreadX, std::move(body));
  }

  Stmt Ldmatrix(const Nest& n) {
    const auto* st = As<StoreNode>(n.body);
    const LoadNode* src = st ? As<LoadNode>(st->value) : nullptr;
    const Fragment* f = st ? FragmentOf(st->buffer.get()) : nullptr;
    if (!src || src->buffer->scope != MemScope::kShared || n.loops.size() != 2) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          NestDesc(n), " is not one unguarded copy from shared memory into a fragment (found ",
          n.body ? ToString(n.body) : "nothing", ")")));
    }
    if (!f || f->role == Fragment::Role::kAcc) {
      return Fail(absl::FailedPreconditionError(
          absl::StrCat(NestDesc(n), " loads fragment ", st->buffer->name,
                       ", which no mma_m16n8k16 nest reads as an A or B operand")));
    }
    // Which loop runs along the tile's rows, which along its columns (k).
    const Buffer& fb = *st->buffer;
    const VarNode* u = n.loops[0]->var.get();
    const VarNode* v = n.loops[1]->var.get();
    const VarNode* row = AxisOf(st->indices, u) == f->row_dim ? u : v;
    const VarNode* col = row == u ? v : u;
    int64_t row_ext = 0;
    IsConstInt((row == u ? n.loops[0] : n.loops[1])->extent, &row_ext);
    // A B operand may be loaded two tiles (16 rows) at a time: ldmatrix.x4.
    const bool two_tiles = f->role == Fragment::Role::kB && row_ext == 2 * f->tile_rows;
    if (AxisOf(st->indices, row) != f->row_dim || AxisOf(st->indices, col) != f->col_dim ||
        (row_ext != f->tile_rows && !two_tiles)) {
      return Fail(absl::FailedPreconditionError(
          absl::StrCat(NestDesc(n), " does not run over one ", f->tile_rows, " x ", f->tile_cols,
                       " tile of ", fb.name, " (", RoleName(f->role),
                       "): its loops must index the tile's rows and "
                       "columns")));
    }
    const Expr flat = FlatIndex(*src->buffer, src->indices);
    int64_t row_coeff = 0, col_coeff = 0;
    AffineForm rest;
    const bool affine =
        SplitAffine(flat, row, &row_coeff, &rest) && SplitAffine(flat, col, &col_coeff, &rest);
    const bool trans = affine && row_coeff == 1;
    const int64_t stride = trans ? col_coeff : row_coeff;
    if (!affine || (col_coeff != 1 && row_coeff != 1)) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          NestDesc(n), " reads ", src->buffer->name,
          " with neither the tile's rows nor its columns contiguous; ldmatrix reads 8 "
          "consecutive elements a row: keep one tile axis innermost in the shared copy")));
    }
    if (stride % 8 != 0) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          NestDesc(n), " reads rows of ", src->buffer->name, " ", stride,
          " elements apart; ldmatrix needs 16-byte aligned rows: pad the shared copy with "
          "storage_align to a multiple of 8 elements")));
    }
    // Lane l gives the address of row l % 8 of 8 x 8 matrix j = (l / 8) % x, in the order of the
    // registers: an A tile's are (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
    // (rows 8-15, k 8-15); a B tile's (rows 0-7, k 0-7), (rows 0-7, k 8-15), then the next
    // tile's.
    const int64_t x = f->role == Fragment::Role::kA || two_tiles ? 4 : 2;
    VarPtr lane = LaneVar();
    Expr lv = MakeCast(kIndexType, lane);
    Expr j = lv / 8 % x, i = lv % 8;
    Expr r = f->role == Fragment::Role::kA ? j % 2 * 8 : j / 2 * 8;
    Expr c = f->role == Fragment::Role::kA ? j / 2 * 8 : j % 2 * 8;
    if (trans) {
      c = c + i;
    } else {
      r = r + i;
    }
    std::unordered_map<const VarNode*, Expr> at = {{row, r}, {col, c}};
    std::vector<Expr> sidx;
    Analyzer an = analyzer_;
    an.Bind(lane, 0, kWarp);
    for (const Expr& e : src->indices) sidx.push_back(an.Simplify(Substitute(e, at)));
    const std::string name = absl::StrCat(kCallLdmatrix, "_x", x, trans ? "_trans" : "");
    Expr dst = MakeLoad(f->flat, {TileRegister(*f, fb, AtZero(n, st->indices))});
    return LaneLoop(
        lane, MakeEvaluate(MakeCall(name, {dst, MakeLoad(src->buffer, sidx)}, DType::kInt32)));
  }

  // How wgmma reads one operand from its swizzled shared buffer: the descriptor's fields.
  struct Descriptor {
    bool mn_major = false;  // the tile's rows (m or n) contiguous: wgmma's transpose flag
    int64_t lbo = 16, sbo = 0, mode = 0;
  };
  // `start`: the indices of the warpgroup's tile (the nest's loops at zero).
  absl::StatusOr<Descriptor> DescriptorOf(const Nest& n, const LoadNode& l,
                                          const std::vector<Expr>& start, const VarNode* row,
                                          const VarNode* k) const {
    const Buffer& b = *l.buffer;
    const int rank = static_cast<int>(b.shape.size());
    const int row_axis = AxisOf(l.indices, row), k_axis = AxisOf(l.indices, k);
    if (row_axis < 0 || k_axis < 0 || row_axis == k_axis ||
        std::max(row_axis, k_axis) != rank - 1 || std::min(row_axis, k_axis) != rank - 2) {
      return absl::FailedPreconditionError(absl::StrCat(
          NestDesc(n), " reads ", b.name, " at ", IndexList(l.indices),
          "; wgmma reads an operand's tile rows and k along the shared copy's last two axes"));
    }
    if (b.swizzle_bytes == 0 || b.shape[rank - 2] % 8 != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(NestDesc(n), " reads ", b.name, ", which is ",
                       b.swizzle_bytes ? absl::StrCat("swizzled with ", b.shape[rank - 2], " rows")
                                       : std::string("not swizzled"),
                       "; wgmma reads swizzled shared operands (annotate the copy ",
                       kStorageSwizzle, ") with a multiple of 8 rows"));
    }
    // Where the tile starts: k on a 16-element step (K-major: inside a swizzle row), the rows of
    // an MN-major operand on a swizzle atom, those of a K-major one on a multiple of 8.
    const int64_t atom = SwizzleAtomElements(b);
    const bool mn = row_axis == rank - 1;
    if (!analyzer_.CanProve(start[k_axis] % 16 == 0) ||
        !analyzer_.CanProve(start[row_axis] % (mn ? atom : 8) == 0)) {
      return absl::FailedPreconditionError(absl::StrCat(
          NestDesc(n), " starts its tile of ", b.name, " at ", IndexList(start),
          "; wgmma's descriptors need k on a multiple of 16 and the rows on a multiple of ",
          mn ? atom : 8, " (", mn ? "a swizzle atom" : "8 rows", ")"));
    }
    Descriptor d;
    d.mn_major = mn;
    const int64_t w = b.swizzle_bytes;
    d.mode = w == 128 ? 1 : w == 64 ? 2 : 3;
    d.sbo = 8 * w;  // the next 8 rows (K-major) or 8 k (MN-major) of an atom
    if (d.mn_major) d.lbo = b.shape[rank - 2] * w;  // the next atom along the tile's rows
    return d;
  }

  // A wgmma nest FindFragments matched: one call in every warp of the warpgroup.
  Stmt Wgmma(const Nest& n) {
    const MmaAccess& m = mmas_.at(n.loops[0]);
    const VarNode* vm = n.loops[0]->var.get();
    const VarNode* vn = n.loops[1]->var.get();
    const VarNode* vk = n.loops[2]->var.get();
    int64_t cols = 0;
    IsConstInt(n.loops[1]->extent, &cols);
    if (m.a->buffer->scope == MemScope::kFragment) return WgmmaFromRegisters(n, m, cols);
    // The warp loop along A's rows: threadIdx.y, 16 rows a warp, in groups of 4; the only warp
    // loop (threadIdx.y or z) A's rows depend on.
    std::vector<const ForNode*> warp_loops;
    const Expr a_flat = FlatIndex(*m.a->buffer, m.a->indices);
    for (const ForNode* t : thread_loops_) {
      const bool warp_tag = t->thread == ThreadTag::kThreadY || t->thread == ThreadTag::kThreadZ;
      if (warp_tag && UsesVar(a_flat, t->var.get())) warp_loops.push_back(t);
    }
    const ForNode* warp = warp_loops.size() == 1 ? warp_loops[0] : nullptr;
    int64_t warps = 0, coeff = 0;
    AffineForm rest;
    const int row_axis = AxisOf(m.a->indices, vm);
    const bool grouped =
        warp && warp->thread == ThreadTag::kThreadY && IsConstInt(warp->extent, &warps) &&
        warps % 4 == 0 && SplitAffine(m.a->indices[row_axis], warp->var.get(), &coeff, &rest) &&
        coeff == 16 && !UsesVar(FlatIndex(*m.b->buffer, m.b->indices), warp->var.get());
    if (!grouped) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          NestDesc(n), " reads A rows ", ToString(m.a->indices[row_axis]),
          "; a warpgroup is the warps threadIdx.y = 4g .. 4g + 3, so A's rows must depend on one "
          "warp loop, threadIdx.y with a multiple of 4 warps, as 16 * threadIdx.y + ..., and B's "
          "on none: bind the warps along m to threadIdx.y")));
    }
    std::vector<Expr> a_idx = AtZero(n, m.a->indices);
    const Expr w = MakeCast(warp->var->dtype, Expr(warp->var));
    for (Expr& e : a_idx) {
      e = analyzer_.Simplify(Substitute(e, {{warp->var.get(), w / 4 * 4}}));
    }
    const std::vector<Expr> b_idx = AtZero(n, m.b->indices);
    auto da = DescriptorOf(n, *m.a, a_idx, vm, vk);
    if (!da.ok()) return Fail(da.status());
    auto db = DescriptorOf(n, *m.b, b_idx, vn, vk);
    if (!db.ok()) return Fail(db.status());
    const Expr acc = AccumulatorOperand(n, m);
    const std::string name = WgmmaCall(cols, m.a->buffer->dtype, da->mn_major, db->mn_major);
    return MakeEvaluate(MakeCall(name,
                                 {acc, MakeLoad(m.a->buffer, a_idx), MakeLoad(m.b->buffer, b_idx),
                                  MakeInt(da->lbo), MakeInt(da->sbo), MakeInt(da->mode),
                                  MakeInt(db->lbo), MakeInt(db->sbo), MakeInt(db->mode)},
                                 DType::kInt32));
  }

  // A wgmma nest whose A is the warp's fragment: each warp passes its own registers (its 16 rows
  // of the warpgroup's 64), B the warpgroup's tile through a descriptor, the same for its warps.
  Stmt WgmmaFromRegisters(const Nest& n, const MmaAccess& m, int64_t cols) {
    const VarNode* vn = n.loops[1]->var.get();
    const VarNode* vk = n.loops[2]->var.get();
    const Expr b_flat = FlatIndex(*m.b->buffer, m.b->indices);
    const ForNode* warps = nullptr;
    for (const ForNode* t : thread_loops_) {
      if (t->thread == ThreadTag::kThreadY) warps = t;
      if (t->thread == ThreadTag::kThreadY && UsesVar(b_flat, t->var.get())) warps = nullptr;
    }
    int64_t count = 0;
    if (!warps || !IsConstInt(warps->extent, &count) || count % 4 != 0) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          NestDesc(n),
          " reads A from registers; a warpgroup is the warps threadIdx.y = 4g .. "
          "4g + 3, so the nest needs a threadIdx.y loop of a multiple of 4 warps that B's tile "
          "does not depend on: bind the warps along m to threadIdx.y")));
    }
    const std::vector<Expr> b_idx = AtZero(n, m.b->indices);
    auto db = DescriptorOf(n, *m.b, b_idx, vn, vk);
    if (!db.ok()) return Fail(db.status());
    const Expr acc = AccumulatorOperand(n, m);
    const std::string name =
        WgmmaCall(cols, m.a->buffer->dtype, false, db->mn_major, /*a_registers=*/true);
    return MakeEvaluate(MakeCall(name,
                                 {acc, RegisterOperand(n, *m.a), MakeLoad(m.b->buffer, b_idx),
                                  MakeInt(db->lbo), MakeInt(db->sbo), MakeInt(db->mode)},
                                 DType::kInt32));
  }

  // Runs the accumulator nest's body in every lane over the 2 x 2 elements it holds.
  Stmt Lanes(const Nest& n) {
    if (n.loops.size() != 2) {
      return Fail(
          absl::FailedPreconditionError(absl::StrCat(NestDesc(n), " is not a nest of two loops")));
    }
    const VarNode* u = n.loops[0]->var.get();
    const VarNode* v = n.loops[1]->var.get();
    // A wgmma accumulator's nest spans several 16 x 8 tiles along its columns (registers 4 apart).
    int64_t col_ext = 8;
    IsConstInt(n.loops[1]->extent, &col_ext);
    if (col_ext % 8 != 0 || col_ext <= 0) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          NestDesc(n), " runs ", col_ext, " columns; an accumulator nest covers 8 or a multiple")));
    }
    VarPtr lane = LaneVar();
    VarPtr h = MakeVar(n.loops[0]->var->name + "_h");
    VarPtr e = MakeVar(n.loops[1]->var->name + "_e");
    VarPtr j = MakeVar(n.loops[1]->var->name + "_j");
    // Fragment accesses first (they need the loops' variables), then the loops' values.
    class Rewriter : public ExprMutator {
     public:
      Rewriter(TensorLowering& t, const Nest& n, const VarNode* u, const VarNode* v, Expr reg)
          : t_(t), n_(n), u_(u), v_(v), reg_(std::move(reg)) {}
      Expr VisitLoad(const LoadNode& l, const Expr& self) override {
        if (l.buffer->scope != MemScope::kFragment) return ExprMutator::VisitLoad(l, self);
        return MakeLoad(Flat(*l.buffer), {Register(l.buffer, l.indices)});
      }
      BufferPtr Flat(const Buffer& b) {
        const Fragment* f = t_.FragmentOf(&b);
        return f ? f->flat : nullptr;
      }
      Expr Register(const BufferPtr& b, const std::vector<Expr>& idx) {
        const Fragment* f = t_.FragmentOf(b.get());
        if (!f || f->role != Fragment::Role::kAcc || AxisOf(idx, u_) != f->row_dim ||
            AxisOf(idx, v_) != f->col_dim) {
          if (status.ok()) {
            status = absl::FailedPreconditionError(absl::StrCat(
                NestDesc(n_), " accesses fragment ", b->name,
                " other than as an accumulator indexed [rows + its first loop, columns + its "
                "second loop]"));
          }
          return MakeInt(0);
        }
        return t_.TileRegister(*f, *b, t_.AtZero(n_, idx)) + reg_;
      }
      absl::Status status;

     private:
      TensorLowering& t_;
      const Nest& n_;
      const VarNode *u_, *v_;
      Expr reg_;
    } rw(*this, n, u, v, Expr(j) * 4 + Expr(h) * 2 + Expr(e));
    class StmtRw : public StmtMutator {
     public:
      explicit StmtRw(Rewriter& rw) : rw_(rw) {}
      Expr VisitExpr(const Expr& x) override { return rw_.Visit(x); }
      Stmt VisitStore(const StoreNode& s, const Stmt& self) override {
        Stmt out = StmtMutator::VisitStore(s, self);
        const auto* st = As<StoreNode>(out);
        if (s.buffer->scope != MemScope::kFragment) return out;
        return MakeStore(rw_.Flat(*s.buffer), {rw_.Register(s.buffer, s.indices)}, st->value);
      }

     private:
      Rewriter& rw_;
    } srw(rw);
    Stmt body = srw.Visit(n.body);
    if (!rw.status.ok()) return Fail(rw.status);
    if (bulk_stores_ && BulkStore(n.loops[0]->annotations) > 0) {
      if (Stmt bulk = BulkStores(body, u, v, lane, h, e, j, col_ext)) return LaneLoop(lane, bulk);
    }
    if (Stmt quads = QuadStores(body, u, v, lane, h, e, j, col_ext)) return LaneLoop(lane, quads);
    Expr lv = MakeCast(kIndexType, lane);
    body = Substitute(body, {{u, lv / 4 + Expr(h) * 8}, {v, Expr(j) * 8 + lv % 4 * 2 + Expr(e)}});
    Analyzer an = analyzer_;
    an.Bind(lane, 0, kWarp);
    an.Bind(h, 0, 2);
    an.Bind(e, 0, 2);
    an.Bind(j, 0, col_ext / 8);
    body = an.Simplify(body);
    // A lane's two elements of a row are adjacent: stores to memory are a vector where
    // plan_vectorization finds one.
    bool to_memory = false;
    WalkStmt(body, [&](const Stmt& x) {
      if (const auto* st = As<StoreNode>(x)) to_memory |= !IsRegisterScope(st->buffer->scope);
    });
    body = MakeFor(e, MakeInt(0), MakeInt(2), to_memory ? ForKind::kVectorized : ForKind::kUnrolled,
                   ThreadTag::kNone, body);
    body = MakeFor(h, MakeInt(0), MakeInt(2), ForKind::kUnrolled, ThreadTag::kNone, body);
    if (col_ext > 8) {
      body =
          MakeFor(j, MakeInt(0), MakeInt(col_ext / 8), ForKind::kUnrolled, ThreadTag::kNone, body);
    } else {
      body = Substitute(body, {{j.get(), MakeInt(0)}});
    }
    return LaneLoop(lane, body);
  }

  // The accumulator's write-back as 16-byte stores (kCallQuadStore): where the nest's body is one
  // store, under conditions or not, of a 16-bit element to a global buffer whose rows are whole
  // 16-byte vectors, contiguous along the nest's columns, over groups of four 8-column tiles.
  // In each group a lane holds 2 columns of each tile; the four lanes of a row trade them (a
  // transpose within the quad) so that lane q stores tile q's 8 columns in one vector. Each
  // value is computed under its own element's conditions (zero elsewhere: no load past a
  // buffer), the store under those of its vector's first element: the conditions of a padded
  // tile are the same over its 8 columns where the rows are whole vectors. Null where the body is
  // of another form (the element-wise write-back stays).
  // `u`, `v`: the nest's row and column variables; `h`, `e`, `j`: those of the lane's element
  // (rows l / 4 + 8 h, columns 8 j + 2 (l % 4) + e) in the body's register indices.
  Stmt QuadStores(const Stmt& body, const VarNode* u, const VarNode* v, const VarPtr& lane,
                  const VarPtr& h, const VarPtr& e, const VarPtr& j, int64_t col_ext) {
    if (col_ext % 32 != 0) return nullptr;
    const auto [conds, st] = RowVectorStore(body);
    if (!st) return nullptr;
    // Consecutive columns are consecutive elements of the buffer's last axis.
    for (size_t d = 0; d < st->indices.size(); ++d) {
      const bool last = d + 1 == st->indices.size();
      int64_t coeff = 0;
      AffineForm rest;
      if (last ? !SplitAffine(st->indices[d], v, &coeff, &rest) || coeff != 1
               : UsesVar(st->indices[d], v)) {
        return nullptr;
      }
    }
    const Expr lv = MakeCast(kIndexType, lane);
    const Expr q = lv % 4;
    VarPtr g = MakeVar(j->name + "_g");
    Analyzer an = analyzer_;
    an.Bind(lane, 0, kWarp);
    an.Bind(h, 0, 2);
    an.Bind(g, 0, col_ext / 32);
    const Expr row = lv / 4 + Expr(h) * 8;
    // This lane's vector: tile 4 g + q's first column; it starts at a multiple of 8 elements.
    const std::unordered_map<const VarNode*, Expr> vector_at = {{u, row},
                                                                {v, (Expr(g) * 4 + q) * 8}};
    std::vector<Expr> at;
    for (const Expr& i : st->indices) at.push_back(an.Simplify(Substitute(i, vector_at)));
    int64_t misaligned = -1;
    if (!IsConstInt(an.Simplify(FlatIndex(*st->buffer, at) % 8), &misaligned) || misaligned != 0) {
      return nullptr;
    }
    auto all = [&](const std::unordered_map<const VarNode*, Expr>& with) {
      Expr c;
      for (const Expr& x : conds) c = MakeAnd(c, Substitute(x, with));
      return c;
    };
    // The value stored, in f32 (before the cast to the element type, where it is one).
    Expr value = st->value;
    if (const auto* c = As<CastNode>(value); c && c->dtype == st->buffer->dtype) value = c->value;
    value = MakeCast(DType::kFloat32, value);
    std::vector<Expr> args = {MakeLoad(st->buffer, at)};
    Expr pred = all(vector_at);
    args.push_back(an.Simplify(pred ? MakeCast(DType::kInt32, pred) : MakeInt(1, DType::kInt32)));
    args.push_back(MakeCast(DType::kInt32, q));
    for (int64_t t = 0; t < 4; ++t) {
      for (int64_t el = 0; el < 2; ++el) {
        const std::unordered_map<const VarNode*, Expr> with = {
            {u, row},
            {v, (Expr(g) * 4 + t) * 8 + lv % 4 * 2 + el},
            {j.get(), Expr(g) * 4 + t},
            {e.get(), MakeInt(el)}};
        Expr val = Substitute(value, with);
        if (Expr c = all(with)) val = MakeSelect(c, val, MakeFloat(0.0));
        args.push_back(an.Simplify(val));
      }
    }
    Stmt call = MakeEvaluate(MakeCall(QuadStoreCall(st->buffer->dtype), args, DType::kInt32));
    Stmt out =
        MakeFor(g, MakeInt(0), MakeInt(col_ext / 32), ForKind::kUnrolled, ThreadTag::kNone, call);
    return MakeFor(h, MakeInt(0), MakeInt(2), ForKind::kUnrolled, ThreadTag::kNone, out);
  }

  // The guard of a bulk write-back (BulkStores) from the store `st`'s conditions: those of the
  // warp as a whole (no lane's row or column in them, `u`, `v` or a threadIdx.x loop's variable)
  // are kept, around its chunks; a bound of the buffer's own extent on one of its indices is the
  // copy engine's, which writes nothing past the extents, so it is dropped. Null inside where
  // nothing is kept; nullopt where a condition is of another form (the lanes' stores stay).
  std::optional<Expr> WarpGuard(const std::vector<Expr>& conds, const StoreNode& st,
                                const VarNode* u, const VarNode* v) const {
    std::vector<const VarNode*> lane_vars = {u, v};
    for (const ForNode* f : thread_loops_) {
      if (f->thread == ThreadTag::kThreadX) lane_vars.push_back(f->var.get());
    }
    Expr guard;
    std::function<bool(const Expr&)> take = [&](const Expr& cond) {
      if (const auto* b = As<BinaryNode>(cond); b && b->op == BinaryOp::kAnd) {
        return take(b->a) && take(b->b);
      }
      if (std::none_of(lane_vars.begin(), lane_vars.end(),
                       [&](const VarNode* x) { return UsesVar(cond, x); })) {
        guard = MakeAnd(guard, cond);
        return true;
      }
      const auto* lt = As<BinaryNode>(cond);
      int64_t bound = 0;
      if (!lt || lt->op != BinaryOp::kLt || !IsConstInt(lt->b, &bound)) return false;
      for (size_t d = 0; d < st.indices.size(); ++d) {
        if (bound == st.buffer->shape[d] &&
            StructuralEqual(analyzer_.Simplify(lt->a), analyzer_.Simplify(st.indices[d]))) {
          return true;
        }
      }
      return false;
    };
    for (const Expr& cond : conds) {
      if (!take(cond)) return std::nullopt;
    }
    return guard;
  }

  // The visited warp's index among the block's computing warps (the enclosing threadIdx.y and
  // .z loops, innermost fastest) and how many there are; false where a loop's extent is not
  // constant.
  bool WarpOfBlock(Expr* warp, int64_t* warps) const {
    *warp = MakeInt(0);
    *warps = 1;
    for (const ForNode* f : thread_loops_) {
      int64_t extent = 0;
      if (!IsThreadTag(f->thread) || f->thread == ThreadTag::kThreadX) continue;
      if (!IsConstInt(f->extent, &extent)) return false;
      *warp = *warp * extent + MakeCast(kIndexType, f->var) - f->min;
      *warps *= extent;
    }
    *warp = analyzer_.Simplify(*warp);
    return true;
  }

  // The accumulator's write-back through shared memory and bulk tensor stores (kBulkStore),
  // where the nest's body is one store of a 16-bit element to a global buffer whose last axis is
  // the nest's columns and second-last its rows (coefficient 1, no other axis using either), over
  // whole 64-column chunks, rows of whole 16-byte vectors, under conditions WarpGuard takes. The
  // warp's lanes write each chunk's 16 x 64 elements (rounded to the element type, two adjacent
  // columns a lane) into one of two 128-byte swizzled slots of a staging buffer of the warp's
  // own, then its first lane stores the slot with one bulk tensor store (box 1 x ... x 16 x 64 of
  // a tensor map over the buffer) and commits it as a bulk group. A slot is written again once no
  // group still reads it. Null where the body is of another form. `u`, `v`, `lane`, `h`, `e`,
  // `j`: as for QuadStores.
  Stmt BulkStores(const Stmt& body, const VarNode* u, const VarNode* v, const VarPtr& lane,
                  const VarPtr& h, const VarPtr& e, const VarPtr& j, int64_t col_ext) {
    constexpr int64_t kChunk = 64, kRows = 16, kSlots = 2, kSwizzle = 128;
    const auto [conds, st] = RowVectorStore(body);
    if (col_ext % kChunk != 0 || !st || st->indices.size() < 2 || st->indices.size() > 5) {
      return nullptr;
    }
    const size_t rank = st->indices.size();
    for (size_t d = 0; d < rank; ++d) {
      const VarNode* own = d + 1 == rank ? v : d + 2 == rank ? u : nullptr;
      const VarNode* other = own == v ? u : v;
      int64_t coeff = 0;
      AffineForm rest;
      if (UsesVar(st->indices[d], other) ||
          (own ? !SplitAffine(st->indices[d], own, &coeff, &rest) || coeff != 1
               : UsesVar(st->indices[d], u))) {
        return nullptr;
      }
    }
    const std::optional<Expr> guard = WarpGuard(conds, *st, u, v);
    Expr warp;
    int64_t warps = 0;
    const int buffer = ProgramBufferIndex(buffers_, st->buffer.get());
    if (!guard || !WarpOfBlock(&warp, &warps) || buffer < 0) return nullptr;
    auto stage = std::make_shared<Buffer>();
    stage->name = st->buffer->name + "_stage";
    stage->dtype = st->buffer->dtype;
    stage->shape = {warps, kSlots, kRows, kChunk};
    stage->scope = MemScope::kShared;
    stage->swizzle_bytes = kSwizzle;
    std::vector<int64_t> box(rank, 1);
    box[rank - 2] = kRows;
    box[rank - 1] = kChunk;
    const int64_t map = TensorMapIndex(maps_, TensorMapSpec{buffer, box, kSwizzle});
    stored_in_bulk_ = true;

    VarPtr c = MakeVar(j->name + "_c");   // the chunk
    VarPtr jc = MakeVar(j->name + "_i");  // the 8-column tile within it
    const Expr lv = MakeCast(kIndexType, lane);
    const Expr slot = Expr(c) % kSlots;
    // The lane's element (rows l / 4 + 8 h, columns 8 j + 2 (l % 4) + e) of tile j = 8 c + jc.
    const Expr row = lv / 4 + Expr(h) * 8, col = Expr(jc) * 8 + lv % 4 * 2 + Expr(e);
    Expr value = Substitute(st->value, {{u, row}, {v, Expr(c) * kChunk + col}});
    value = Substitute(value, {{j.get(), Expr(c) * (kChunk / 8) + Expr(jc)}});
    Stmt write = MakeStore(stage, {warp, slot, row, col}, value);
    Analyzer an = analyzer_;
    an.Bind(lane, 0, kWarp);
    an.Bind(h, 0, 2);
    an.Bind(e, 0, 2);
    an.Bind(jc, 0, kChunk / 8);
    an.Bind(c, 0, col_ext / kChunk);
    write = an.Simplify(write);
    write = MakeFor(e, MakeInt(0), MakeInt(2), ForKind::kVectorized, ThreadTag::kNone, write);
    write = MakeFor(h, MakeInt(0), MakeInt(2), ForKind::kUnrolled, ThreadTag::kNone, write);
    write =
        MakeFor(jc, MakeInt(0), MakeInt(kChunk / 8), ForKind::kUnrolled, ThreadTag::kNone, write);
    // The box's coordinates, innermost first: the chunk's first column, the warp's first row,
    // the outer axes' indices.
    std::vector<Expr> at;
    for (const Expr& i : st->indices) {
      at.push_back(an.Simplify(Substitute(i, {{u, MakeInt(0)}, {v, Expr(c) * kChunk}})));
    }
    std::vector<Expr> args = {MakeInt(map), MakeLoad(stage, {warp, slot, MakeInt(0), MakeInt(0)})};
    for (size_t i = rank; i-- > 0;) args.push_back(MakeCast(DType::kInt32, at[i]));
    const Expr first = lv == int64_t{0};
    // Before writing a slot, the group that last read it must be done: with an even number of
    // chunks that is any but the latest group (the other slot's); with an odd number, a tile's
    // first chunk takes the slot of the previous tile's last one (persistent blocks take tiles
    // in rounds), so it waits for every group.
    const int64_t chunk_count = col_ext / kChunk;
    Stmt wait = TensorCallStmt(BulkWaitReadCall(kSlots - 1));
    if (chunk_count % 2 == 1) {
      wait = chunk_count == 1
                 ? TensorCallStmt(BulkWaitReadCall(0))
                 : MakeIf(Expr(c) == int64_t{0}, TensorCallStmt(BulkWaitReadCall(0)), wait);
    }
    Stmt chunk = MakeSeq({
        MakeIf(first, wait),
        TensorCallStmt(kCallSyncwarp),
        write,
        TensorCallStmt(kCallFenceProxyAsync),
        TensorCallStmt(kCallSyncwarp),
        MakeIf(first, MakeSeq({TensorCallStmt(TmaStoreCall(static_cast<int64_t>(rank)), args),
                               TensorCallStmt(kCallBulkCommit)})),
    });
    Stmt chunks =
        MakeFor(c, MakeInt(0), MakeInt(chunk_count), ForKind::kUnrolled, ThreadTag::kNone, chunk);
    return MakeAllocate(stage, *guard ? MakeIf(*guard, chunks) : chunks);
  }

  const Kernel& kernel_;
  const Analyzer& analyzer_;
  const bool bulk_stores_;
  const std::vector<ProgramBuffer>& buffers_;
  std::vector<TensorMapSpec>* maps_;
  bool stored_in_bulk_ = false;
  std::vector<const ForNode*> thread_loops_;  // the thread-bound loops around the visit
  std::map<const Buffer*, Fragment> fragments_;
  std::map<const ForNode*, MmaAccess> mmas_;  // by the nest's marked loop, A first (FindFragments)
  absl::Status status_;
};

// What a statement holds, for placing wgmma's fences.
struct Holds {
  bool wgmma = false;
  bool sync = false;          // a barrier or any write of shared memory
  bool shared_write = false;  // a write of shared memory
};
Holds HoldsOf(const Stmt& s) {
  Holds h;
  WalkStmt(s, [&](const Stmt& x) {
    if (const auto* st = As<StoreNode>(x)) {
      const bool shared = st->buffer->scope == MemScope::kShared;
      h.sync |= shared;
      h.shared_write |= shared;
    }
    h.sync |= As<BarrierNode>(x) != nullptr;
    if (const auto* ev = As<EvaluateNode>(x)) {
      if (const auto* c = As<CallNode>(ev->value)) h.wgmma |= IsWgmmaCall(c->name);
    }
  });
  return h;
}

// Fences each maximal run of wgmma calls that neither writes shared memory nor synchronizes:
// wgmma.fence before it, commit and wait for all after it. A barrier before such a run, with shared
// writes before the barrier in the same sequence, gets the async-proxy fence in front of it unless
// the sequence is a software pipeline's body (inject_software_pipeline places that one).
Stmt FenceWgmma(const Stmt& s, bool pipelined_body = false);

// FenceWgmma of a sequence: its statements', the async-proxy fence before a barrier that shared
// writes precede and a wgmma run follows (outside a pipeline's body).
Stmt FenceWgmmaSeq(const SeqNode& seq, bool pipelined_body) {
  const size_t n = seq.stmts.size();
  std::vector<Holds> holds(n);
  for (size_t i = 0; i < n; ++i) holds[i] = HoldsOf(seq.stmts[i]);
  std::vector<bool> wgmma_after(n + 1, false);  // a later statement calls wgmma
  for (size_t i = n; i-- > 0;) wgmma_after[i] = wgmma_after[i + 1] || holds[i].wgmma;
  std::vector<Stmt> out;
  bool written = false;
  for (size_t i = 0; i < n; ++i) {
    const Stmt& x = seq.stmts[i];
    if (As<BarrierNode>(x) && written && wgmma_after[i + 1] && !pipelined_body) {
      out.push_back(TensorCallStmt(kCallFenceProxyAsync));
    }
    written |= holds[i].shared_write;
    out.push_back(FenceWgmma(x));
  }
  return MakeSeq(out);
}

Stmt FenceWgmma(const Stmt& s, bool pipelined_body) {
  const Holds h = HoldsOf(s);
  if (!h.wgmma) return s;
  if (!h.sync) {
    return MakeSeq({TensorCallStmt(kCallWgmmaFence), s, TensorCallStmt(kCallWgmmaCommit),
                    TensorCallStmt(WgmmaWaitCall(0))});
  }
  switch (s->kind) {
    case StmtKind::kSeq:
      return FenceWgmmaSeq(static_cast<const SeqNode&>(*s), pipelined_body);
    case StmtKind::kFor: {
      const auto& f = static_cast<const ForNode&>(*s);
      return MakeFor(f.var, f.min, f.extent, f.kind, f.thread,
                     FenceWgmma(f.body, SoftwarePipelineStages(f.annotations) >= 2), f.annotations);
    }
    case StmtKind::kAllocate: {
      const auto& a = static_cast<const AllocateNode&>(*s);
      return MakeAllocate(a.buffer, FenceWgmma(a.body, pipelined_body));
    }
    case StmtKind::kIfThenElse: {
      const auto& n = static_cast<const IfThenElseNode&>(*s);
      return MakeIf(n.cond, FenceWgmma(n.then_case),
                    n.else_case ? FenceWgmma(n.else_case) : n.else_case);
    }
    default:
      return s;
  }
}

// Whether a loop of `body` is tensorized (with `kind`, when given).
bool HasTensorizeMark(const Stmt& body, std::optional<TensorIntrin> kind = std::nullopt) {
  bool found = false;
  WalkStmt(body, [&](const Stmt& s) {
    const auto* f = As<ForNode>(s);
    const TensorIntrinInfo* mark = f ? MarkOf(*f) : nullptr;
    found |= mark != nullptr && (!kind || mark->kind == *kind);
  });
  return found;
}

}  // namespace

absl::Status LowerTensorIntrinsics(LoweringState* state) {
  for (Kernel& k : state->program.kernels) {
    if (!HasTensorizeMark(k.body)) continue;
    if (!state->target.is_cuda()) continue;  // check_stages refused the marks already
    const bool wgmma = HasTensorizeMark(k.body, TensorIntrin::kWgmma);
    if (wgmma && !state->target.Supports(TargetFeature::kWgmma)) {
      return absl::FailedPreconditionError(
          absl::StrCat("kernel ", k.name, " tensorizes with wgmma_m64nNk16, which the target ",
                       state->target.ToString(), " does not have; wgmma needs cuda -arch=sm_90a"));
    }
    TensorLowering t(k, state->analyzer, state->target.Supports(TargetFeature::kBulkTensorCopy),
                     state->program.buffers, &k.launch.tensor_maps);
    if (absl::Status st = t.FindFragments(k.body); !st.ok()) return st;
    Stmt body = t.Visit(k.body);
    if (!t.status().ok()) return t.status();
    if (t.stored_in_bulk()) {
      // Bulk stores read shared memory until their groups say otherwise: every thread waits for
      // its own before the block leaves (and its shared memory goes to another).
      body = MakeSeq({body, TensorCallStmt(BulkWaitReadCall(0))});
    }
    k.body = wgmma ? FenceWgmma(body) : body;
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
