#pragma once

// The schedule state of one stage (one computed tensor): its computation, its loop nest as a tree
// of split/fuse relations over the root iteration variables, the kinds of its leaf loops, where
// it is attached, and its storage. Schedule (schedule.h) owns the stages and is the only writer.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "schedules/ir/buffer.h"
#include "schedules/ir/combiner.h"
#include "schedules/ir/expr.h"
#include "schedules/ir/stmt.h"

namespace tessel::schedules {

// Stage annotation (CUDA): the stage computes every position of its tile, unguarded, also
// those outside its domain (a tile that does not divide the extent): a copy into shared memory
// writes zeros there (its source is not read), others compute on what their inputs hold there.
// Only for stages whose out-of-domain positions no one stores: fetches and fragments feeding a
// tensor-core computation whose output stage keeps its guards.
inline constexpr char kPadTile[] = "pad_tile";
// Stage annotation: store the stage's shared buffer XOR-swizzled with this width in bytes (32, 64
// or 128; Buffer::swizzle_bytes), as the tensor cores' matrix descriptors read it; or
// kSwizzleWidest.
inline constexpr char kStorageSwizzle[] = "storage_swizzle";
// kStorageSwizzle's value for the widest swizzle whose rows the realized buffer's contiguous
// extent holds a whole number of (128, 64 or 32 bytes), in place of the stage's storage_align
// padding; where none does, the buffer is not swizzled and keeps its padding. A design space
// samples it against the padding alone (ldmatrix reads both without bank conflicts; which is
// faster depends on the tiles), whatever width the sampled tiles leave.
inline constexpr int64_t kSwizzleWidest = 1;

struct IterVar {
  VarPtr var;      // the loop variable (root iters: the tensor's axis variables)
  int64_t extent;  // loop extent (derived iters: from the relations; attached stages: region)
  bool reduce = false;
  ForKind kind = ForKind::kSerial;
  ThreadTag thread = ThreadTag::kNone;
  std::vector<std::pair<std::string, int64_t>> annotations;
};

// parent = outer * factor + inner (split), fused = outer * extent(inner) + inner (fuse).
struct IterRelation {
  enum class Kind : uint8_t { kSplit, kFuse } kind;
  int parent = -1;  // split: the split iter; fuse: unused
  int outer = -1;
  int inner = -1;
  int fused = -1;  // fuse: the result
  int64_t factor = 0;
  // split: the outer extent that was asked for (0: none). The outer loop never runs fewer
  // iterations, even where ceil(parent / factor) is smaller; the extra ones are guarded.
  int64_t outer_min = 0;
};

struct AttachPoint {
  enum class Kind : uint8_t { kRoot, kInline, kAt } kind = Kind::kRoot;
  std::string stage;     // kAt: the stage whose loop this one is attached to
  int iter = -1;         // kAt: that loop (an iter id of `stage`)
  bool reverse = false;  // reverse_compute_at: a consumer emitted after the producer's body
};

struct StorageAlign {
  int axis;
  int64_t factor;
  int64_t offset;
};

struct Stage {
  std::string name;
  // Logical output buffer: full tensor shape, the stage's scope. Loads in other stages' bodies
  // refer to this buffer; lowering realizes it (region-shaped for shared/local attached stages).
  BufferPtr buffer;
  std::vector<VarPtr> axes;         // spatial root variables, one per dimension
  std::vector<VarPtr> reduce_axes;  // reduction root variables
  std::optional<ReduceOp> reduce;
  Expr body;  // value of one point (reductions: the term that is combined)

  // Root iters first (axes, then reduce axes), at indices [0, num_root()). An iter's index is its
  // id: relations, leaves and attach points refer to iters by id. Resetting the loops drops the
  // derived iters and later ones reuse their ids, so it bumps loop_generation: a loop handle made
  // under an older generation no longer names a loop of this stage.
  std::vector<IterVar> iters;
  std::vector<IterRelation> relations;
  std::vector<int> leaves;  // leaf iters in loop order, outermost first
  AttachPoint attach;
  std::vector<StorageAlign> aligns;
  int init_at = -1;  // decompose_reduction: the loop before which the init nest goes
  std::map<std::string, int64_t> annotations;  // kPadTile, "auto_unroll_max_step", ...
  // Whether the stage is annotated kPadTile (computes its whole tile).
  bool pads_tile() const {
    auto it = annotations.find(kPadTile);
    return it != annotations.end() && it->second > 0;
  }
  bool is_output = false;
  std::string origin;  // "compute", "cache_read", "cache_write", "rfactor"
  // A tuple reduction (fuse_reductions): `body` is tuple(v0, ..., vK-1) (TupleValues), the
  // value each reduction point contributes to each component of `combiner`, and `reduce` is
  // unset; `outputs` are the stages whose values it computes, this one first, each an expression
  // of the components (combiner->lhs). The others have the same body and combiner, name this
  // stage in computed_by, have no loop nest of their own and follow this stage's attachment.
  struct TupleOutput {
    std::string stage;
    Expr value;
  };
  CombinerPtr combiner;
  std::vector<TupleOutput> outputs;
  std::string computed_by;
  int loop_generation = 0;  // bumped whenever the loops are reset to the root iters

  // The stages this one computes in its own pass (the outputs of a tuple reduction but itself).
  std::vector<std::string> FusedStages() const {
    std::vector<std::string> out;
    for (size_t i = 1; i < outputs.size(); ++i) out.push_back(outputs[i].stage);
    return out;
  }
  // Whether the stage reduces: a plain reduction (`reduce`) or a tuple reduction (`combiner`).
  bool reduces() const { return reduce.has_value() || combiner != nullptr; }
  int num_root() const { return static_cast<int>(axes.size() + reduce_axes.size()); }
  bool inlined() const { return attach.kind == AttachPoint::Kind::kInline; }
  // Position of `iter` in the leaf order, or -1.
  int LeafPosition(int iter) const;
  // Recomputes the extents of derived iters from the root extents. A split's inner loop keeps
  // its factor, the outer gets max(ceil(parent / factor), outer_min): never fewer iterations
  // than were asked for at the split, and always enough to cover the parent when its extent
  // changes later (region inference); the extra iterations are guarded.
  void PropagateExtents();
  // The value of every iter (root iters included) as an expression of the leaf variables,
  // relative to the root's minimum: root = outer * factor + inner, fused -> outer, inner.
  std::vector<Expr> IterValues() const;
};

// Whether `s` reads `b`, and every load of it indexes it with exactly the stage's axes, in order
// (an elementwise reader).
bool ReadsAtIdentity(const Stage& s, const Buffer* b);

// The body of a tuple reduction: a call "tuple" of one value a component.
Expr MakeTuple(std::vector<Expr> values);
// The component values of a tuple reduction's body (empty when `body` is no tuple).
const std::vector<Expr>& TupleValues(const Expr& body);

}  // namespace tessel::schedules
