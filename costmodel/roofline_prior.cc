#include "costmodel/roofline_prior.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace tessel::costmodel {
namespace {

// Machine balance (float operations per global byte at which compute and memory take the same
// time): an H100's 60 TFLOP/s of FP32 over its 3.3 TB/s is about 18; a server CPU core's
// vector units over its share of the memory bandwidth is about the same order.
constexpr double kCudaBalance = 16;
constexpr double kHostBalance = 8;
// Resident threads per SM that keep its memory pipeline and ALUs busy (half the Hopper limit).
constexpr double kFullSmThreads = 1024;
// Host: parallel iterations that occupy a node's cores.
constexpr double kHostLanes = 16;
// A kernel launch and the gap after it, in bytes of global traffic (about 3 us at 3 TB/s).
constexpr double kLaunchBytes = 1e7;

struct Slots {
  int kernels = -1, flops = -1, global_read = -1, global_write = -1, waves = -1,
      threads_per_block = -1, warp_efficiency = -1, parallel_extent = -1, vector_bytes = -1,
      frac_vectorized = -1;
};

const Slots& FeatureSlots() {
  static const Slots slots = [] {
    Slots s;
    const std::vector<std::string>& names = FeatureNames();
    auto find = [&](const char* name) {
      auto it = std::find(names.begin(), names.end(), name);
      return it == names.end() ? -1 : static_cast<int>(it - names.begin());
    };
    s.kernels = find("kernels");
    s.flops = find("log2_flops");
    s.global_read = find("log2_global_read_bytes");
    s.global_write = find("log2_global_write_bytes");
    s.waves = find("log2_waves");
    s.threads_per_block = find("log2_threads_per_block");
    s.warp_efficiency = find("warp_efficiency");
    s.parallel_extent = find("log2_parallel_extent");
    s.vector_bytes = find("log2_vector_bytes");
    s.frac_vectorized = find("frac_bytes_vectorized");
    return s;
  }();
  return slots;
}

double Linear(const Features& f, int slot) {  // log2(1 + x) -> x
  return slot < 0 ? 0.0 : std::exp2(static_cast<double>(f[slot])) - 1.0;
}
double Raw(const Features& f, int slot) { return slot < 0 ? 0.0 : f[slot]; }

double Estimate(const Features& f) {
  const Slots& s = FeatureSlots();
  const bool cuda = Raw(f, s.warp_efficiency) > 0;
  const double bytes = Linear(f, s.global_read) + Linear(f, s.global_write);
  const double flops = Linear(f, s.flops);
  double utilization;
  double balance;
  if (cuda) {
    balance = kCudaBalance;
    const double per_sm = Linear(f, s.waves) * Linear(f, s.threads_per_block) *
                          std::max(Raw(f, s.warp_efficiency), 1.0 / 32);
    utilization = std::min(1.0, per_sm / kFullSmThreads);
  } else {
    balance = kHostBalance;
    const double lanes = std::max(1.0, Linear(f, s.vector_bytes) / 4.0);
    const double vector_share = std::clamp(Raw(f, s.frac_vectorized), 0.0, 1.0);
    utilization = std::min(1.0, std::max(1.0, Linear(f, s.parallel_extent)) / kHostLanes) *
                  (1.0 + (lanes - 1.0) * vector_share) / 8.0;
  }
  utilization = std::max(utilization, 1e-3);
  const double kernels = std::max(1.0, Raw(f, s.kernels));
  return std::max(flops / balance, bytes) / utilization + kernels * kLaunchBytes;
}

}  // namespace

std::vector<double> RooflineScores(const std::vector<Features>& features) {
  std::vector<double> out(features.size(), 0.0);
  const size_t n = FeatureNames().size();
  for (size_t i = 0; i < features.size(); ++i) {
    if (features[i].size() != n) continue;
    out[i] = 1.0 / Estimate(features[i]);
  }
  return out;
}

}  // namespace tessel::costmodel
