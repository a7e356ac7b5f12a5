#include "costmodel/features.h"

#include <algorithm>
#include <cmath>

namespace tessel::costmodel {
namespace {

float Log2p(double x) { return static_cast<float>(std::log2(1.0 + std::max(0.0, x))); }

}  // namespace

const std::vector<std::string>& FeatureNames() {
  static const std::vector<std::string> names = {
      "kernels", "log2_blocks", "log2_threads_per_block", "log2_dynamic_shared_bytes",
      "log2_global_bytes"};
  return names;
}

Features ExtractFeatures(const schedules::Program& program, const schedules::Target& target) {
  double blocks = 0, threads = 0, shared = 0, bytes = 0;
  for (const schedules::Kernel& k : program.kernels) {
    blocks = std::max<double>(blocks, k.launch.grid[0] * k.launch.grid[1] * k.launch.grid[2]);
    threads = std::max<double>(threads, k.launch.threads_per_block());
    shared = std::max<double>(shared, k.launch.dynamic_shared_bytes);
  }
  for (const schedules::ProgramBuffer& b : program.buffers) bytes += static_cast<double>(b.buffer->AllocatedBytes());
  return {static_cast<float>(program.kernels.size()), Log2p(blocks), Log2p(threads), Log2p(shared),
          Log2p(bytes)};
}

}  // namespace tessel::costmodel
