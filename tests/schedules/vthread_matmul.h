#pragma once

// A matmul with virtual threads, scheduled as the CUDA multi-level tiling does it, for the
// vthread injection tests (tests/schedules/inject_vthread_test.cc on the host and in IR,
// tests/gpu/inject_vthread_gpu_test.cc on a GPU). Header-only.

#include <stdexcept>
#include <string>
#include <vector>

#include "schedules/schedule/schedule.h"
#include "tests/schedules/test_workloads.h"

namespace tessel::schedules::test_workloads {

inline void Checked(const absl::Status& st) {
  if (!st.ok()) throw std::runtime_error(st.ToString());
}

struct VTile {
  int64_t vm = 2, vn = 2;  // virtual threads per axis (1: no vthread loop)
  int64_t threads = 4;     // per axis (CUDA only)
  int64_t tile = 2;        // per-thread tile per axis
  int64_t kstep = 4;       // the shared-memory step of k
  bool local_caches = true;
};

// C's loops: i0 j0 | iv jv | it jt | i3 j3 bound to blocks, vthread and threads on CUDA (the
// host: i0 parallel, no thread level); C_local at jt, its loops k0 k1 i j; A and B in shared
// memory at k0 and (optionally) in registers at k1.
inline Schedule VThreadMatmul(const Workload& w, const VTile& p, bool cuda) {
  Schedule sch = NewSchedule(w);
  BlockRV c = BlockOf(sch, "C");
  BlockRV cl = ValueOrDie(sch.CacheWrite(c, "local"));
  std::vector<LoopRV> l = LoopsOf(sch, c);
  const int64_t th = cuda ? p.threads : 1;
  std::vector<LoopRV> is = ValueOrDie(sch.Split(l[0], {-1, p.vm, th, p.tile}));
  std::vector<LoopRV> js = ValueOrDie(sch.Split(l[1], {-1, p.vn, th, p.tile}));
  Checked(sch.Reorder({is[0], js[0], is[1], js[1], is[2], js[2], is[3], js[3]}));
  if (cuda) {
    Checked(sch.Bind(is[0], "blockIdx.y"));
    Checked(sch.Bind(js[0], "blockIdx.x"));
    Checked(sch.Bind(is[2], "threadIdx.y"));
    Checked(sch.Bind(js[2], "threadIdx.x"));
  } else {
    Checked(sch.Parallel(is[0]));
  }
  if (p.vm > 1) Checked(sch.Bind(is[1], "vthread"));
  if (p.vn > 1) Checked(sch.Bind(js[1], "vthread"));
  Checked(sch.ComputeAt(cl, js[2]));
  std::vector<LoopRV> cls = LoopsOf(sch, cl);  // i, j, k
  std::vector<LoopRV> ks = ValueOrDie(sch.Split(cls[2], {-1, p.kstep}));
  Checked(sch.Reorder({ks[0], ks[1], cls[0], cls[1]}));
  Checked(sch.DecomposeReduction(cl, ks[0]));
  for (const std::string name : {"A", "B"}) {
    BlockRV sh = ValueOrDie(sch.CacheRead(name, "shared", {cl}));
    if (p.local_caches) {
      BlockRV lo = ValueOrDie(sch.CacheRead(sch.GetStage(sh).name, "local", {cl}));
      Checked(sch.ComputeAt(lo, ks[1]));
    }
    Checked(sch.ComputeAt(sh, ks[0]));
    if (cuda) {
      LoopRV fused = ValueOrDie(sch.Fuse(LoopsOf(sch, sh)));
      std::vector<LoopRV> f = ValueOrDie(sch.Split(fused, {-1, th, th}));
      Checked(sch.Bind(f[1], "threadIdx.y"));
      Checked(sch.Bind(f[2], "threadIdx.x"));
    }
  }
  return sch;
}

}  // namespace tessel::schedules::test_workloads
