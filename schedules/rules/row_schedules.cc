#include "schedules/rules/row_schedules.h"

#include <algorithm>

#include "schedules/util/check.h"
#include "schedules/util/status_macros.h"

namespace tessel::schedules::rules {

absl::Status BindRowSplit(Schedule* s, std::vector<LoopRV> p, const char* outer) {
  if (p.size() == 4) {
    TESSEL_RETURN_IF_ERROR(s->Bind(p[0], outer));
    p.erase(p.begin());
  }
  TESSEL_RETURN_IF_ERROR(s->Unroll(p[0]));
  TESSEL_RETURN_IF_ERROR(s->Bind(p[1], "threadIdx.x"));
  return s->Vectorize(p[2]);
}

absl::Status RowInRegisters(Schedule* s, const std::string& consumer,
                            const std::vector<std::string>& reds, const std::string& x,
                            const std::vector<Factor>& split) {
  auto bind_row_split = [&](std::vector<LoopRV> p) { return BindRowSplit(s, p, "cluster.x"); };
  TESSEL_ASSIGN_OR_RETURN(BlockRV y, s->GetBlock(consumer));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> yl, s->GetLoops(y));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> ys, s->Split(yl[1], split));
  TESSEL_RETURN_IF_ERROR(s->Bind(yl[0], "blockIdx.x"));
  TESSEL_RETURN_IF_ERROR(bind_row_split(ys));
  std::vector<BlockRV> readers;
  for (auto it = reds.rbegin(); it != reds.rend(); ++it) {  // consumers first
    TESSEL_ASSIGN_OR_RETURN(BlockRV b, s->GetBlock(*it));
    TESSEL_RETURN_IF_ERROR(s->SetScope(b, "local"));
    TESSEL_RETURN_IF_ERROR(s->ComputeAt(b, yl[0]));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> loops, s->GetLoops(b));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> p, s->Split(loops.back(), split));
    TESSEL_RETURN_IF_ERROR(bind_row_split(p));
    readers.insert(readers.begin(), b);
  }
  readers.push_back(y);
  TESSEL_ASSIGN_OR_RETURN(BlockRV xl, s->CacheRead(x, "local", readers));
  TESSEL_RETURN_IF_ERROR(s->SplitBufferAxis(xl, 1, split));
  TESSEL_RETURN_IF_ERROR(s->ComputeAt(xl, yl[0]));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> xloops, s->GetLoops(xl));
  xloops.erase(xloops.begin());  // the row, extent 1 at the row loop
  return bind_row_split(xloops);
}

absl::Status GridRows(Schedule* s, const std::string& consumer,
                      const std::vector<std::string>& reds, const std::string& x,
                      const std::vector<std::string>& shared_operands,
                      const std::vector<Factor>& split) {
  TESSEL_CHECK(split.size() == 4) << "GridRows needs {blocks, vectors, threads, lanes}";
  const std::vector<Factor> slice(split.begin() + 1, split.end());
  auto bind_slice = [&](std::vector<LoopRV> p) { return BindRowSplit(s, p, "blockIdx.x"); };
  // The statistics as one tuple reduction (the first leads), in local memory at the row.
  std::vector<BlockRV> blocks;
  for (const std::string& name : reds) {
    TESSEL_ASSIGN_OR_RETURN(BlockRV b, s->GetBlock(name));
    TESSEL_RETURN_IF_ERROR(s->SetScope(b, "local"));
    blocks.push_back(b);
  }
  if (blocks.size() > 1) TESSEL_RETURN_IF_ERROR(s->FuseReductions(blocks));
  const BlockRV stats = blocks[0];
  // Its partials: one per block and row (rfactor).
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> loops, s->GetLoops(stats));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> ks, s->Split(loops.back(), {split[0], -1}));
  TESSEL_ASSIGN_OR_RETURN(BlockRV rf, s->RFactor(ks[0]));
  // The partials combined by every block in two passes over them, each reduced across the block
  // (for a variance: the sum, then the squares about the mean; no division).
  TESSEL_RETURN_IF_ERROR(s->Annotate(stats, "two_pass", 2));
  // The consumer: (block, row, j, thread, v).
  TESSEL_ASSIGN_OR_RETURN(BlockRV y, s->GetBlock(consumer));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> yl, s->GetLoops(y));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> ys, s->Split(yl[1], split));
  TESSEL_RETURN_IF_ERROR(s->Reorder({ys[0], yl[0]}));
  const LoopRV block = ys[0], row = yl[0];
  TESSEL_RETURN_IF_ERROR(bind_slice(ys));
  // The row's statistics: every block combines the partials of the row.
  TESSEL_RETURN_IF_ERROR(s->ComputeAt(stats, row));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> bl, s->GetLoops(stats));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> p, s->Split(bl.back(), {-1, split[0]}));
  TESSEL_RETURN_IF_ERROR(s->Bind(p[1], "threadIdx.x"));
  // This block's partials of the row, its chunk loop bound to the block, its slice folded in
  // the combiner's two passes (it is in registers).
  TESSEL_RETURN_IF_ERROR(s->ComputeAt(rf, row));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> ql, s->GetLoops(rf));
  TESSEL_RETURN_IF_ERROR(s->Bind(ql[ql.size() - 2], "blockIdx.x"));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> qs, s->Split(ql.back(), slice));
  TESSEL_RETURN_IF_ERROR(bind_slice(qs));
  TESSEL_RETURN_IF_ERROR(s->Annotate(rf, "two_pass", 1));
  // The row's slice in registers, read by the partials and by the consumer.
  TESSEL_ASSIGN_OR_RETURN(BlockRV xc, s->CacheRead(x, "local", {rf, y}));
  TESSEL_RETURN_IF_ERROR(s->SplitBufferAxis(xc, 1, split));
  TESSEL_RETURN_IF_ERROR(s->ComputeAt(xc, row));
  TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> cl, s->GetLoops(xc));
  cl.erase(cl.begin());  // the row, extent 1 at the row loop
  TESSEL_RETURN_IF_ERROR(bind_slice(cl));
  // The operand read once and the output written once stream past L2, where what is re-read
  // every row stays: without the hints layernorm's bias came from DRAM each row (0.47 of the
  // copy bandwidth on an H100).
  TESSEL_RETURN_IF_ERROR(s->Annotate(xc, "stream_loads", 1));
  TESSEL_RETURN_IF_ERROR(s->Annotate(y, "stream_stores", 1));
  for (const std::string& operand : shared_operands) {
    TESSEL_ASSIGN_OR_RETURN(BlockRV wc, s->CacheRead(operand, "shared", {y}));
    TESSEL_RETURN_IF_ERROR(s->ComputeAt(wc, block));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> wl, s->GetLoops(wc));
    TESSEL_ASSIGN_OR_RETURN(std::vector<LoopRV> ws, s->Split(wl.back(), slice));
    TESSEL_RETURN_IF_ERROR(bind_slice(ws));
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules::rules
