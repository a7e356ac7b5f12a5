#include "costmodel/features.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "schedules/ir/dtype.h"
#include "schedules/ir/tensor_intrin.h"

namespace tessel::costmodel {
namespace {

using schedules::BinaryOp;
using schedules::Buffer;
using schedules::DType;
using schedules::Expr;
using schedules::ExprKind;
using schedules::ForKind;
using schedules::MemScope;
using schedules::Stmt;
using schedules::StmtKind;
using schedules::ThreadTag;
using schedules::VarNode;

constexpr int kTopBuffers = 4;  // global buffers described one by one (features.h)
constexpr int kLoopKinds = 5;   // ForKind values

float Log2p(double x) { return static_cast<float>(std::log2(1.0 + std::max(0.0, x))); }
float Ratio(double a, double b) { return b > 0 ? static_cast<float>(a / b) : 0.0f; }

int64_t ConstExtent(const Expr& e) {
  int64_t v = 1;
  return schedules::IsConstInt(e, &v) && v > 0 ? v : 1;
}

// Where a memory access's stride falls (per element of the access, in elements).
enum StrideClass { kStride0 = 0, kStride1 = 1, kStrided = 2 };
StrideClass ClassOf(bool linear, int64_t stride) {
  if (!linear) return kStrided;
  if (stride == 0) return kStride0;
  return std::abs(stride) == 1 ? kStride1 : kStrided;
}

// What is known of one global buffer over the whole program.
struct BufferStats {
  int order = 0;  // first appearance in Program::buffers (or walk order)
  double read_bytes = 0, write_bytes = 0;
  double unique_bytes = 0;
  // Of its heaviest access (the one executed most often).
  double best_access_bytes = -1;
  double stride = 0;     // innermost-loop stride in elements; -1 when not linear
  double tx_stride = 0;  // threadIdx.x stride in elements; -1 when not linear
  double footprint_bytes = 0;
  double reuse_extent = 0;
};

// One enclosing loop.
struct Frame {
  const VarNode* var;
  int64_t extent;
  ForKind kind;
  ThreadTag tag;
  bool counted;  // contributes its extent to the multiplicity (a repeated thread tag does not)
};

// Everything accumulated over a program (per kernel values are combined as the features say).
struct Totals {
  double work = 0, loop_iters = 0;
  double flops = 0;
  std::array<double, kLoopKinds> flops_in{};
  double f_addsub = 0, f_mul = 0, f_div = 0, f_minmax = 0, f_math = 0;
  double int_ops = 0, casts = 0, selects = 0, guards = 0, intrinsics = 0, allreduce = 0;
  // [scope][read=0/write=1]: global, shared, local.
  double bytes[3][2] = {};
  double stride_bytes[2][3] = {};     // global/shared x StrideClass
  double tx_stride_bytes[2][3] = {};  // global/shared x StrideClass (CUDA)
  double vector_bytes = 0, vectorized_loops = 0, vectorized_access_bytes = 0;
  double unrolled_loops = 0, max_unroll_product = 0, max_unroll_pragma = 0;
  double barriers_static = 0, barriers_per_thread = 0;
  // Tensor cores: mma.sync and wgmma flops (and wgmma's alone), cp.async bytes, the deepest
  // software pipeline.
  double tensor_flops = 0, wgmma_flops = 0, async_copy_bytes = 0, pipeline_stages = 0,
         pipeline_fetch_spread = 0, pipeline_fragments_across = 0, bulk_copy_bytes = 0,
         pipeline_producer = 0, tma_multicast = 0, bulk_store_bytes = 0;
  // Iterations of the serial loops around a block binding: a persistent block's rounds of tiles.
  double block_rounds = 1;
  // Threads that take turns at shared memory (kPipelineTurns: a ping-pong kernel's warpgroups).
  double pipeline_turns = 1;
  // The widest XOR swizzle of a shared buffer, in bytes (0: none).
  double shared_swizzle_bytes = 0;
  double max_depth = 0, loops = 0;
  double heaviest_store = -1, innermost_extent = 0;
  double max_shared_alloc = 0, max_local_alloc = 0;
  double parallel_launches = 0;  // executions of outermost parallel loops (host fork/joins)
};

// The per-kernel values that pick the dominant kernel and describe its launch.
struct KernelSummary {
  double weight = 0;  // flops + global bytes
  double vthread = 1;
  double parallel = 1;
};

class Walker {
 public:
  Walker(const schedules::Program& program, const schedules::Target& target, Totals* totals,
         std::unordered_map<const Buffer*, BufferStats>* buffers)
      : program_(program), target_(target), t_(*totals), buffers_(*buffers) {}

  KernelSummary Kernel(const schedules::Kernel& k) {
    kernel_ = &k;
    summary_ = KernelSummary{};
    stack_.clear();
    lets_.clear();
    mult_ = 1;
    thread_mult_ = 1;
    in_kind_.fill(0);
    unroll_product_ = 1;
    shared_alloc_ = static_cast<double>(k.launch.dynamic_shared_bytes);
    local_alloc_ = 0;
    const double flops0 = t_.flops, global0 = t_.bytes[0][0] + t_.bytes[0][1];
    Visit(k.body);
    t_.max_shared_alloc = std::max(t_.max_shared_alloc, shared_alloc_);
    t_.max_local_alloc = std::max(t_.max_local_alloc, local_alloc_);
    summary_.weight = (t_.flops - flops0) + (t_.bytes[0][0] + t_.bytes[0][1] - global0);
    return summary_;
  }

 private:
  void Visit(const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::kFor:
        return VisitFor(*schedules::As<schedules::ForNode>(s));
      case StmtKind::kStore: {
        const auto& n = *schedules::As<schedules::StoreNode>(s);
        t_.work += mult_;
        if (mult_ > t_.heaviest_store) {
          t_.heaviest_store = mult_;
          t_.innermost_extent = 0;
          for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) {
            if (it->tag == ThreadTag::kNone) {
              t_.innermost_extent = static_cast<double>(it->extent);
              break;
            }
          }
        }
        CountExpr(n.value);
        for (const Expr& i : n.indices) CountIndex(i);
        Access(*n.buffer, n.indices, /*write=*/true);
        return;
      }
      case StmtKind::kAllocate: {
        const auto& n = *schedules::As<schedules::AllocateNode>(s);
        const double bytes = static_cast<double>(n.buffer->AllocatedBytes());
        if (n.buffer->scope == MemScope::kShared) {
          shared_alloc_ += bytes;
          t_.shared_swizzle_bytes =
              std::max(t_.shared_swizzle_bytes, static_cast<double>(n.buffer->swizzle_bytes));
        } else if (n.buffer->scope != MemScope::kGlobal) {
          local_alloc_ += bytes;
        }
        return Visit(n.body);
      }
      case StmtKind::kIfThenElse: {
        const auto& n = *schedules::As<schedules::IfThenElseNode>(s);
        t_.guards += mult_;
        CountIndex(n.cond);
        Visit(n.then_case);
        Visit(n.else_case);
        return;
      }
      case StmtKind::kSeq:
        for (const Stmt& c : schedules::As<schedules::SeqNode>(s)->stmts) Visit(c);
        return;
      case StmtKind::kLetStmt: {
        const auto& n = *schedules::As<schedules::LetStmtNode>(s);
        CountIndex(n.value);
        lets_.emplace_back(n.var.get(), &n.value);
        Visit(n.body);
        lets_.pop_back();
        return;
      }
      case StmtKind::kBarrier:
        t_.barriers_static += 1;
        t_.barriers_per_thread += thread_mult_;
        return;
      case StmtKind::kAllReduce: {
        const auto& n = *schedules::As<schedules::AllReduceNode>(s);
        t_.allreduce += mult_;
        for (const schedules::Expr& v : n.values) CountExpr(v);
        for (const schedules::BufferPtr& r : n.results) Access(*r, {}, /*write=*/true);
        return;
      }
      case StmtKind::kScope: {
        // An expanded all-reduce (lower_all_reduce) counts as the all-reduce it expands.
        const auto& n = *schedules::As<schedules::ScopeNode>(s);
        return Visit(n.origin ? n.origin : n.body);
      }
      case StmtKind::kEvaluate:
        t_.intrinsics += mult_;
        CountExpr(schedules::As<schedules::EvaluateNode>(s)->value);
        return;
    }
  }

  // mma.sync m16n8k16: 2 x 16 x 8 x 16 flops a warp, counted per lane (as mult_ counts); a
  // cp.async of N bytes (tessel_cp_async_N); the bytes a block's producer moves with bulk tensor
  // copies, from its expect-tx of each stage (one thread issues them).
  void CountTensorCall(const schedules::CallNode& call) {
    const std::string& name = call.name;
    int64_t tx = 0;
    if (name == schedules::kCallMbarrierExpectTx && call.args.size() == 2 &&
        schedules::IsConstInt(call.args[1], &tx)) {
      t_.bulk_copy_bytes += thread_mult_ * static_cast<double>(tx);
      return;
    }
    if (schedules::TmaStoreRank(name) > 0) {
      // A warp's bulk tensor store (its first lane issues it) of its tensor map's box, written to
      // the global buffer the map is over: counted as the lanes' stores of it would be (mult_
      // counts the warp's lanes).
      int64_t map = -1;
      const auto& maps = kernel_->launch.tensor_maps;
      if (!call.args.empty() && schedules::IsConstInt(call.args[0], &map) && map >= 0 &&
          map < static_cast<int64_t>(maps.size()) && maps[map].buffer >= 0 &&
          maps[map].buffer < static_cast<int>(program_.buffers.size())) {
        const Buffer& out = *program_.buffers[maps[map].buffer].buffer;
        double box = schedules::DTypeBytes(out.dtype);
        for (int64_t e : maps[map].box) box *= static_cast<double>(e);
        t_.bulk_store_bytes += thread_mult_ * box;
        const double bytes =
            box * mult_ / static_cast<double>(std::max<int64_t>(1, target_.warp_size));
        t_.bytes[0][1] += bytes;
        buffers_[&out].write_bytes += bytes;
      }
      return;
    }
    if (schedules::IsTmaMulticastCall(name)) t_.tma_multicast = 1;
    if (const int64_t n = schedules::WgmmaCallN(name); n > 0) {
      // wgmma m64nNk16: each warp's call is its 16 x N x 16 share of the warpgroup's product.
      const double lane_flops = 2.0 * 16 * static_cast<double>(n) * 16 / 32;
      t_.tensor_flops += mult_ * lane_flops;
      t_.wgmma_flops += mult_ * lane_flops;
      AddFlops(lane_flops);
    } else if (name.rfind(schedules::kCallMma, 0) == 0) {
      constexpr double kLaneFlops = 2.0 * 16 * 8 * 16 / 32;
      t_.tensor_flops += mult_ * kLaneFlops;
      AddFlops(kLaneFlops);  // the program's arithmetic, whatever unit does it
    } else if (const int64_t bytes = schedules::CpAsyncCallBytes(name); bytes > 0) {
      t_.async_copy_bytes += mult_ * static_cast<double>(bytes);
    }
  }

  void VisitFor(const schedules::ForNode& n) {
    t_.pipeline_stages = std::max(
        t_.pipeline_stages, static_cast<double>(schedules::SoftwarePipelineStages(n.annotations)));
    if (schedules::PipelineFetchSpread(n.annotations) > 0) t_.pipeline_fetch_spread = 1;
    if (schedules::PipelineFragmentsAcross(n.annotations) > 0) t_.pipeline_fragments_across = 1;
    if (schedules::SoftwarePipelineStages(n.annotations) >= 2) {
      t_.pipeline_producer = std::max(
          t_.pipeline_producer, static_cast<double>(schedules::PipelineProducer(n.annotations)));
    }
    const int64_t extent = ConstExtent(n.extent);
    if (schedules::IsThreadTag(n.thread) && schedules::PipelineTurns(n.annotations) > 0) {
      t_.pipeline_turns = std::max(t_.pipeline_turns, static_cast<double>(extent));
    }
    if (n.thread == ThreadTag::kBlockX || n.thread == ThreadTag::kBlockY ||
        n.thread == ThreadTag::kBlockZ) {
      double rounds = 1;
      for (const Frame& f : stack_) {
        if (f.tag == ThreadTag::kNone) rounds *= static_cast<double>(f.extent);
      }
      t_.block_rounds = std::max(t_.block_rounds, rounds);
    }
    bool counted = true;
    if (n.kind == ForKind::kThreadBinding && n.thread != ThreadTag::kVThread) {
      // Sibling stages of one kernel bind the same thread index again; a nested repeat of a tag
      // (not produced by lowering today) would not multiply the threads.
      for (const Frame& f : stack_) counted = counted && f.tag != n.thread;
    }
    const bool per_thread = n.thread == ThreadTag::kNone || n.thread == ThreadTag::kVThread;
    stack_.push_back({n.var.get(), extent, n.kind, n.thread, counted});
    const double saved_mult = mult_, saved_thread = thread_mult_, saved_unroll = unroll_product_;
    if (counted) mult_ *= static_cast<double>(extent);
    if (per_thread) {
      thread_mult_ *= static_cast<double>(extent);
      t_.loops += 1;
      t_.loop_iters += mult_;
    }
    if (n.kind == ForKind::kParallel && in_kind_[static_cast<int>(ForKind::kParallel)] == 0) {
      t_.parallel_launches += saved_mult;
    }
    in_kind_[static_cast<int>(n.kind)] += 1;
    if (n.kind == ForKind::kVectorized) t_.vectorized_loops += 1;
    if (n.kind == ForKind::kUnrolled) {
      t_.unrolled_loops += 1;
      unroll_product_ *= static_cast<double>(extent);
      t_.max_unroll_product = std::max(t_.max_unroll_product, unroll_product_);
    }
    for (const auto& [key, value] : n.annotations) {
      if (key.find("unroll") != std::string::npos) {
        t_.max_unroll_pragma = std::max(t_.max_unroll_pragma, static_cast<double>(value));
      }
    }
    t_.max_depth = std::max(t_.max_depth, static_cast<double>(stack_.size()));
    Visit(n.body);
    in_kind_[static_cast<int>(n.kind)] -= 1;
    mult_ = saved_mult;
    thread_mult_ = saved_thread;
    unroll_product_ = saved_unroll;
    stack_.pop_back();
  }

  // The vthread product and the host's parallel extent of the nest of an access (the largest of
  // the kernel counts).
  void NoteNest() {
    double vthread = 1, parallel = 1;
    for (const Frame& f : stack_) {
      if (f.tag == ThreadTag::kVThread) vthread *= static_cast<double>(f.extent);
      if (f.kind == ForKind::kParallel) parallel *= static_cast<double>(f.extent);
    }
    summary_.vthread = std::max(summary_.vthread, vthread);
    summary_.parallel = std::max(summary_.parallel, parallel);
  }

  // Arithmetic of a value (float operations by class, int operations, casts, selects, loads).
  void CountExpr(const Expr& e) {
    if (!e) return;
    switch (e->kind) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
      case ExprKind::kVar:
        return;
      case ExprKind::kBinary: {
        const auto& n = *schedules::As<schedules::BinaryNode>(e);
        if (schedules::IsFloat(n.a->dtype)) {
          Flop(n.op);
        } else {
          t_.int_ops += mult_;
        }
        CountExpr(n.a);
        CountExpr(n.b);
        return;
      }
      case ExprKind::kUnary: {
        const auto& n = *schedules::As<schedules::UnaryNode>(e);
        if (schedules::IsFloat(n.a->dtype)) {
          Flop(BinaryOp::kSub);
        } else {
          t_.int_ops += mult_;
        }
        CountExpr(n.a);
        return;
      }
      case ExprKind::kSelect: {
        const auto& n = *schedules::As<schedules::SelectNode>(e);
        t_.selects += mult_;
        CountExpr(n.cond);
        CountExpr(n.true_value);
        CountExpr(n.false_value);
        return;
      }
      case ExprKind::kCast:
        t_.casts += mult_;
        CountExpr(schedules::As<schedules::CastNode>(e)->value);
        return;
      case ExprKind::kCall: {
        const auto& n = *schedules::As<schedules::CallNode>(e);
        if (schedules::IsMathIntrinsic(n.name)) {
          t_.f_math += mult_;
          AddFlops(1);
        } else if (schedules::IsQuadStoreCall(n.name) && !n.args.empty()) {
          // A write-back of 8 elements a lane (16 bytes) to the buffer its first argument
          // addresses: counted as those stores, the address not as a read.
          t_.intrinsics += mult_;
          const auto* dst = schedules::As<schedules::LoadNode>(n.args[0]);
          if (dst) {
            for (const Expr& i : dst->indices) CountIndex(i);
            const double one = mult_;
            mult_ *= 8;
            Access(*dst->buffer, dst->indices, /*write=*/true);
            mult_ = one;
          }
          for (size_t a = 1; a < n.args.size(); ++a) CountExpr(n.args[a]);
          return;
        } else {
          t_.intrinsics += mult_;
          CountTensorCall(n);
        }
        for (const Expr& a : n.args) CountExpr(a);
        return;
      }
      case ExprKind::kLoad: {
        const auto& n = *schedules::As<schedules::LoadNode>(e);
        for (const Expr& i : n.indices) CountIndex(i);
        Access(*n.buffer, n.indices, /*write=*/false);
        return;
      }
    }
  }

  // Index arithmetic: every operation counts as an integer operation.
  void CountIndex(const Expr& e) {
    if (!e) return;
    switch (e->kind) {
      case ExprKind::kBinary: {
        const auto& n = *schedules::As<schedules::BinaryNode>(e);
        t_.int_ops += mult_;
        CountIndex(n.a);
        CountIndex(n.b);
        return;
      }
      case ExprKind::kLoad:
      case ExprKind::kCall:
      case ExprKind::kSelect:
        return CountExpr(e);
      case ExprKind::kUnary:
        t_.int_ops += mult_;
        return CountIndex(schedules::As<schedules::UnaryNode>(e)->a);
      case ExprKind::kCast:
        return CountIndex(schedules::As<schedules::CastNode>(e)->value);
      default:
        return;
    }
  }

  void Flop(BinaryOp op) {
    switch (op) {
      case BinaryOp::kAdd:
      case BinaryOp::kSub:
        t_.f_addsub += mult_;
        break;
      case BinaryOp::kMul:
        t_.f_mul += mult_;
        break;
      case BinaryOp::kDiv:
      case BinaryOp::kMod:
        t_.f_div += mult_;
        break;
      default:
        t_.f_minmax += mult_;
        break;
    }
    AddFlops(1);
  }

  void AddFlops(double n) {
    const double f = n * mult_;
    t_.flops += f;
    for (int k = 0; k < kLoopKinds; ++k) {
      if (in_kind_[k] > 0) t_.flops_in[k] += f;
    }
  }

  const Expr* LetValue(const VarNode* v) const {
    for (auto it = lets_.rbegin(); it != lets_.rend(); ++it) {
      if (it->first == v) return it->second;
    }
    return nullptr;
  }

  // The coefficient of `v` in `e` when `e` is linear in it (floor division and modulo by a
  // constant are treated as the loop's consecutive iterations see them); false otherwise.
  bool Coef(const Expr& e, const VarNode* v, int64_t* c, int depth = 0) const {
    *c = 0;
    if (!e || depth > 64) return e != nullptr;
    switch (e->kind) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
        return true;
      case ExprKind::kVar: {
        const auto* n = static_cast<const VarNode*>(e.get());
        if (n == v) {
          *c = 1;
          return true;
        }
        if (const Expr* val = LetValue(n)) return Coef(*val, v, c, depth + 1);
        return true;
      }
      case ExprKind::kCast:
        return Coef(schedules::As<schedules::CastNode>(e)->value, v, c, depth + 1);
      case ExprKind::kUnary: {
        if (!Coef(schedules::As<schedules::UnaryNode>(e)->a, v, c, depth + 1)) return false;
        *c = -*c;
        return true;
      }
      case ExprKind::kBinary: {
        const auto& n = *schedules::As<schedules::BinaryNode>(e);
        int64_t ca = 0, cb = 0;
        const bool la = Coef(n.a, v, &ca, depth + 1), lb = Coef(n.b, v, &cb, depth + 1);
        if (!la || !lb) return false;
        int64_t k = 0;
        switch (n.op) {
          case BinaryOp::kAdd:
            *c = ca + cb;
            return true;
          case BinaryOp::kSub:
            *c = ca - cb;
            return true;
          case BinaryOp::kMul:
            if (ca == 0 && cb == 0) return true;
            if (ca == 0 && schedules::IsConstInt(n.a, &k)) {
              *c = k * cb;
              return true;
            }
            if (cb == 0 && schedules::IsConstInt(n.b, &k)) {
              *c = k * ca;
              return true;
            }
            return false;
          case BinaryOp::kDiv:
            if (ca == 0) return true;
            if (!schedules::IsConstInt(n.b, &k) || k == 0) return false;
            if (ca % k == 0) {
              *c = ca / k;
              return true;
            }
            return std::abs(ca) < std::abs(k);  // consecutive iterations share a quotient
          case BinaryOp::kMod:
            if (ca == 0) return true;
            if (!schedules::IsConstInt(n.b, &k) || k == 0) return false;
            if (ca % k == 0) return true;  // 0
            *c = ca;
            return std::abs(ca) < std::abs(k);
          case BinaryOp::kMin:
          case BinaryOp::kMax:
            if (ca == 0 && cb == 0) return true;
            if (schedules::IsConstInt(n.b, &k)) {
              *c = ca;
              return true;
            }
            if (schedules::IsConstInt(n.a, &k)) {
              *c = cb;
              return true;
            }
            return false;
          default:
            return ca == 0 && cb == 0;
        }
      }
      case ExprKind::kSelect: {
        const auto& n = *schedules::As<schedules::SelectNode>(e);
        int64_t x = 0, y = 0, z = 0;
        return Coef(n.cond, v, &x, depth + 1) && Coef(n.true_value, v, &y, depth + 1) &&
               Coef(n.false_value, v, &z, depth + 1) && x == 0 && y == 0 && z == 0;
      }
      case ExprKind::kCall:
        for (const Expr& a : schedules::As<schedules::CallNode>(e)->args) {
          int64_t x = 0;
          if (!Coef(a, v, &x, depth + 1) || x != 0) return false;
        }
        return true;
      case ExprKind::kLoad:
        for (const Expr& a : schedules::As<schedules::LoadNode>(e)->indices) {
          int64_t x = 0;
          if (!Coef(a, v, &x, depth + 1) || x != 0) return false;
        }
        return true;
    }
    return true;
  }

  // The flattened-element stride of an access along loop variable `v`.
  bool Stride(const Buffer& b, const std::vector<Expr>& idx, const VarNode* v,
              int64_t* stride) const {
    *stride = 0;
    if (v == nullptr) return true;
    const std::vector<int64_t> strides = b.Strides();
    for (size_t d = 0; d < idx.size() && d < strides.size(); ++d) {
      int64_t c = 0;
      if (!Coef(idx[d], v, &c)) return false;
      *stride += c * strides[d];
    }
    return true;
  }

  // Whether `e` depends on loop variable `v` (through let bindings too).
  bool DependsOn(const Expr& e, const VarNode* v, int depth = 0) const {
    if (!e || depth > 64) return false;
    switch (e->kind) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
        return false;
      case ExprKind::kVar: {
        const auto* n = static_cast<const VarNode*>(e.get());
        if (n == v) return true;
        const Expr* val = LetValue(n);
        return val != nullptr && DependsOn(*val, v, depth + 1);
      }
      case ExprKind::kBinary: {
        const auto& n = *schedules::As<schedules::BinaryNode>(e);
        return DependsOn(n.a, v, depth + 1) || DependsOn(n.b, v, depth + 1);
      }
      case ExprKind::kUnary:
        return DependsOn(schedules::As<schedules::UnaryNode>(e)->a, v, depth + 1);
      case ExprKind::kCast:
        return DependsOn(schedules::As<schedules::CastNode>(e)->value, v, depth + 1);
      case ExprKind::kSelect: {
        const auto& n = *schedules::As<schedules::SelectNode>(e);
        return DependsOn(n.cond, v, depth + 1) || DependsOn(n.true_value, v, depth + 1) ||
               DependsOn(n.false_value, v, depth + 1);
      }
      case ExprKind::kCall:
        for (const Expr& a : schedules::As<schedules::CallNode>(e)->args) {
          if (DependsOn(a, v, depth + 1)) return true;
        }
        return false;
      case ExprKind::kLoad:
        for (const Expr& a : schedules::As<schedules::LoadNode>(e)->indices) {
          if (DependsOn(a, v, depth + 1)) return true;
        }
        return false;
    }
    return false;
  }

  void Access(const Buffer& b, const std::vector<Expr>& idx, bool write) {
    NoteNest();
    const int scope = b.scope == MemScope::kGlobal ? 0 : b.scope == MemScope::kShared ? 1 : 2;
    const double elem = schedules::DTypeBytes(b.dtype);
    const double bytes = elem * mult_;
    t_.bytes[scope][write ? 1 : 0] += bytes;
    // The innermost loop run by one thread, and threadIdx.x.
    const Frame* inner = nullptr;
    const VarNode* tx = nullptr;
    for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) {
      if (!inner && it->tag == ThreadTag::kNone) inner = &*it;
      if (!tx && it->tag == ThreadTag::kThreadX) tx = it->var;
    }
    if (inner && inner->kind == ForKind::kVectorized) {
      t_.vector_bytes = std::max(t_.vector_bytes, elem * static_cast<double>(inner->extent));
    }
    if (in_kind_[static_cast<int>(ForKind::kVectorized)] > 0) t_.vectorized_access_bytes += bytes;
    if (scope == 2) return;
    int64_t stride = 0, tx_stride = 0;
    const bool linear = Stride(b, idx, inner ? inner->var : nullptr, &stride);
    const bool tx_linear = Stride(b, idx, tx, &tx_stride);
    t_.stride_bytes[scope][ClassOf(linear, stride)] += bytes;
    if (target_.is_cuda()) t_.tx_stride_bytes[scope][ClassOf(tx_linear, tx_stride)] += bytes;
    if (scope != 0) return;

    BufferStats& s = buffers_[&b];
    if (s.unique_bytes == 0) {
      s.unique_bytes = static_cast<double>(b.AllocatedBytes());
      s.order = static_cast<int>(buffers_.size()) + 1000;  // after Program::buffers
    }
    (write ? s.write_bytes : s.read_bytes) += bytes;
    if (bytes <= s.best_access_bytes) return;
    s.best_access_bytes = bytes;
    s.stride = linear ? static_cast<double>(std::abs(stride)) : -1;
    s.tx_stride = !target_.is_cuda() ? 0
                  : tx_linear        ? static_cast<double>(std::abs(tx_stride))
                                     : -1;
    // Reuse: the innermost per-thread loop the access does not depend on, and the bytes it
    // touches inside that loop.
    double footprint = elem, reuse = 0;
    for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) {
      if (it->tag != ThreadTag::kNone && it->tag != ThreadTag::kVThread) continue;
      bool depends = false;
      for (const Expr& i : idx) depends = depends || DependsOn(i, it->var);
      if (!depends) {
        reuse = static_cast<double>(it->extent);
        break;
      }
      footprint *= static_cast<double>(it->extent);
    }
    s.footprint_bytes = footprint;
    s.reuse_extent = reuse;
  }

  const schedules::Program& program_;
  const schedules::Target& target_;
  Totals& t_;
  std::unordered_map<const Buffer*, BufferStats>& buffers_;
  const schedules::Kernel* kernel_ = nullptr;
  KernelSummary summary_;
  std::vector<Frame> stack_;
  std::vector<std::pair<const VarNode*, const Expr*>> lets_;
  double mult_ = 1;         // executions of the current statement over all threads
  double thread_mult_ = 1;  // executions of it in one thread
  std::array<int, kLoopKinds> in_kind_{};
  double unroll_product_ = 1;
  double shared_alloc_ = 0, local_alloc_ = 0;
};

const char* const kBufferFields[] = {"touched_bytes",   "unique_bytes", "reuse",
                                     "written",         "stride",       "tx_stride",
                                     "footprint_bytes", "reuse_extent"};

}  // namespace

const std::vector<std::string>& FeatureNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = {
        // Work and arithmetic.
        "kernels", "log2_work", "log2_loop_iters", "log2_flops", "log2_flops_serial",
        "log2_flops_parallel", "log2_flops_vectorized", "log2_flops_unrolled", "log2_flops_bound",
        "log2_float_addsub", "log2_float_mul", "log2_float_div", "log2_float_minmax_cmp",
        "log2_float_math", "log2_int_ops", "log2_casts", "log2_selects", "log2_guards",
        "log2_intrinsics", "log2_allreduce",
        // Memory.
        "log2_global_read_bytes", "log2_global_write_bytes", "log2_shared_read_bytes",
        "log2_shared_write_bytes", "log2_local_read_bytes", "log2_local_write_bytes",
        "log2_global_unique_bytes", "log2_global_reuse", "log2_intensity_touched",
        "log2_intensity_unique", "global_frac_stride0", "global_frac_stride1",
        "global_frac_strided", "shared_frac_stride0", "shared_frac_stride1", "shared_frac_strided",
        "global_frac_tx_stride0", "global_frac_tx_stride1", "global_frac_tx_strided",
        "shared_frac_tx_stride0", "shared_frac_tx_stride1", "shared_frac_tx_strided",
        // Launch of the dominant kernel.
        "log2_block_x", "log2_block_y", "log2_block_z", "log2_thread_x", "log2_thread_y",
        "log2_thread_z", "log2_vthread", "log2_blocks", "log2_threads_per_block", "warp_efficiency",
        "log2_waves", "wave_efficiency", "log2_parallel_extent", "log2_parallel_launches",
        // On-chip storage.
        "log2_shared_alloc_bytes", "shared_frac_of_sm", "log2_local_alloc_bytes",
        "local_frac_of_registers",
        // Vectors, unrolling, barriers, loops.
        "log2_vector_bytes", "log2_vectorized_loops", "frac_bytes_vectorized",
        "log2_unrolled_loops", "log2_max_unroll_product", "log2_max_unroll_pragma",
        "log2_barriers_static", "log2_barriers_per_thread", "loop_depth", "log2_loops",
        "log2_innermost_extent", "log2_tensor_core_flops", "log2_async_copy_bytes",
        "pipeline_stages", "pipeline_fetch_spread", "log2_wgmma_flops", "log2_bulk_copy_bytes",
        "pipeline_producer", "log2_cluster_ctas", "tma_multicast", "log2_block_rounds",
        "log2_pipeline_turns", "log2_shared_swizzle_bytes", "pipeline_fragments_across",
        // Split reductions.
        "log2_workspace_per_output",
        // Cache hints.
        "global_frac_streamed",
        // Bulk tensor stores.
        "log2_bulk_store_bytes"};
    for (int b = 0; b < kTopBuffers; ++b) {
      for (const char* f : kBufferFields) n.push_back("buf" + std::to_string(b) + "_" + f);
    }
    return n;
  }();
  return names;
}

Features ExtractFeatures(const schedules::Program& program, const schedules::Target& target) {
  Totals t;
  std::unordered_map<const Buffer*, BufferStats> buffers;
  double unique_global = 0;
  // Elements of the largest output and of the largest workspace (a split reduction's partials).
  double output_elements = 0, workspace_elements = 0;
  for (size_t i = 0; i < program.buffers.size(); ++i) {
    const Buffer* b = program.buffers[i].buffer.get();
    BufferStats& s = buffers[b];
    s.order = static_cast<int>(i);
    s.unique_bytes = static_cast<double>(b->AllocatedBytes());
    unique_global += s.unique_bytes;
    double elements = 1;
    for (int64_t d : b->shape) elements *= static_cast<double>(d);
    const schedules::BufferRole role = program.buffers[i].role;
    if (role == schedules::BufferRole::kOutput) {
      output_elements = std::max(output_elements, elements);
    } else if (role == schedules::BufferRole::kWorkspace) {
      workspace_elements = std::max(workspace_elements, elements);
    }
  }
  Walker walker(program, target, &t, &buffers);
  const schedules::Kernel* dominant = nullptr;
  KernelSummary dom;
  for (const schedules::Kernel& k : program.kernels) {
    KernelSummary s = walker.Kernel(k);
    if (!dominant || s.weight > dom.weight) {
      dominant = &k;
      dom = s;
    }
  }

  Features f;
  f.reserve(FeatureNames().size());
  auto push = [&f](double x) { f.push_back(static_cast<float>(x)); };
  auto log = [&f](double x) { f.push_back(Log2p(x)); };

  push(static_cast<double>(program.kernels.size()));
  log(t.work);
  log(t.loop_iters);
  log(t.flops);
  for (double x : t.flops_in) log(x);
  log(t.f_addsub);
  log(t.f_mul);
  log(t.f_div);
  log(t.f_minmax);
  log(t.f_math);
  log(t.int_ops);
  log(t.casts);
  log(t.selects);
  log(t.guards);
  log(t.intrinsics);
  log(t.allreduce);

  for (int s = 0; s < 3; ++s) {
    log(t.bytes[s][0]);
    log(t.bytes[s][1]);
  }
  const double global_touched = t.bytes[0][0] + t.bytes[0][1];
  log(unique_global);
  log(Ratio(global_touched, unique_global));
  log(Ratio(t.flops, global_touched));
  log(Ratio(t.flops, unique_global));
  for (int s = 0; s < 2; ++s) {
    const double total = t.stride_bytes[s][0] + t.stride_bytes[s][1] + t.stride_bytes[s][2];
    for (int c = 0; c < 3; ++c) push(Ratio(t.stride_bytes[s][c], total));
  }
  for (int s = 0; s < 2; ++s) {
    const double total =
        t.tx_stride_bytes[s][0] + t.tx_stride_bytes[s][1] + t.tx_stride_bytes[s][2];
    for (int c = 0; c < 3; ++c) push(Ratio(t.tx_stride_bytes[s][c], total));
  }

  schedules::LaunchConfig launch;
  if (dominant) launch = dominant->launch;
  for (int64_t g : launch.grid) log(static_cast<double>(g));
  for (int64_t b : launch.block) log(static_cast<double>(b));
  log(dom.vthread);
  const double blocks = static_cast<double>(launch.grid[0] * launch.grid[1] * launch.grid[2]);
  const double threads = static_cast<double>(launch.threads_per_block());
  log(blocks);
  log(threads);
  if (target.is_cuda()) {
    const double warp = static_cast<double>(std::max<int64_t>(1, target.warp_size));
    push(threads / (std::ceil(threads / warp) * warp));
    const double sms = static_cast<double>(std::max<int64_t>(1, target.sm_count));
    log(blocks / sms);
    push(blocks / (std::ceil(blocks / sms) * sms));
  } else {
    push(0);
    log(0);
    push(0);
  }
  log(dom.parallel);
  log(t.parallel_launches);

  log(t.max_shared_alloc);
  push(target.is_cuda() ? Ratio(t.max_shared_alloc, static_cast<double>(target.shared_bytes_per_sm))
                        : 0.0);
  log(t.max_local_alloc);
  push(target.is_cuda()
           ? Ratio(t.max_local_alloc / 4, static_cast<double>(target.max_registers_per_thread))
           : 0.0);

  log(t.vector_bytes);
  log(t.vectorized_loops);
  const double all_bytes =
      global_touched + t.bytes[1][0] + t.bytes[1][1] + t.bytes[2][0] + t.bytes[2][1];
  push(Ratio(t.vectorized_access_bytes, all_bytes));
  log(t.unrolled_loops);
  log(t.max_unroll_product);
  log(t.max_unroll_pragma);
  log(t.barriers_static);
  log(t.barriers_per_thread);
  push(t.max_depth);
  log(t.loops);
  log(t.innermost_extent);
  log(t.tensor_flops);
  log(t.async_copy_bytes);
  push(t.pipeline_stages);
  push(t.pipeline_fetch_spread);
  log(t.wgmma_flops);
  log(t.bulk_copy_bytes);
  push(t.pipeline_producer);
  log(static_cast<double>(launch.cluster));
  push(t.tma_multicast);
  log(t.block_rounds);
  log(t.pipeline_turns);
  log(t.shared_swizzle_bytes);
  push(t.pipeline_fragments_across);
  log(Ratio(workspace_elements, output_elements));
  // The global bytes read or written with evict-first hints (a kernel's stream_loads and
  // stream_stores), of all the global bytes touched.
  std::unordered_set<const Buffer*> streamed_loads, streamed_stores;
  for (const schedules::Kernel& k : program.kernels) {
    for (const schedules::BufferPtr& b : k.stream_loads) streamed_loads.insert(b.get());
    for (const schedules::BufferPtr& b : k.stream_stores) streamed_stores.insert(b.get());
  }
  double streamed = 0;
  for (const auto& [b, s] : buffers) {
    if (streamed_loads.count(b)) streamed += s.read_bytes;
    if (streamed_stores.count(b)) streamed += s.write_bytes;
  }
  push(Ratio(streamed, global_touched));
  log(t.bulk_store_bytes);

  // The global buffers by bytes touched (then program order): a fixed number of slots.
  std::vector<const BufferStats*> order;
  order.reserve(buffers.size());
  for (const auto& [b, s] : buffers) order.push_back(&s);
  std::sort(order.begin(), order.end(), [](const BufferStats* a, const BufferStats* b) {
    const double ta = a->read_bytes + a->write_bytes, tb = b->read_bytes + b->write_bytes;
    return ta != tb ? ta > tb : a->order < b->order;
  });
  for (int i = 0; i < kTopBuffers; ++i) {
    if (i >= static_cast<int>(order.size())) {
      for (size_t j = 0; j < std::size(kBufferFields); ++j) push(0);
      continue;
    }
    const BufferStats& s = *order[i];
    const double touched = s.read_bytes + s.write_bytes;
    log(touched);
    log(s.unique_bytes);
    log(Ratio(touched, s.unique_bytes));
    push(s.write_bytes > 0 ? 1 : 0);
    // A stride that is not linear in the loop reads as a very large one.
    log(s.stride < 0 ? 1e9 : s.stride);
    log(s.tx_stride < 0 ? 1e9 : s.tx_stride);
    log(s.footprint_bytes);
    log(s.reuse_extent);
  }
  return f;
}

}  // namespace tessel::costmodel
