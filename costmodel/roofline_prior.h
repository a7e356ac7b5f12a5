#pragma once

// The cold-start prior of the cost model: a roofline estimate of a candidate's time from its
// features (features.h), used to rank candidates before a model has been trained (and so before
// any measurement of the workload exists). A cold search that scores at random measures what a
// random search would; most spaces have a structural choice that the traffic alone decides
// (softmax: an online normalizer reads each row twice instead of three times; matmul: larger
// block tiles re-read the operands less), and the roofline ranks those correctly with no data.
//
// The estimate, in arbitrary units (only the order within a workload matters):
//   time = max(flops / balance, global bytes read + written) / utilization + kernels * launch
// where `balance` is the machine balance in float operations per byte, utilization is the share
// of the machine the launch can keep busy (CUDA: resident threads of the dominant kernel over
// kFullSmThreads per SM, from the waves and threads per block; host: the parallel extent over
// kHostLanes, times the vector lanes used), and a kernel launch costs the time of `launch`
// bytes. The target kind is read from the features: warp_efficiency is non-zero only on CUDA.
//
// Threads: free functions, callable from any thread.

#include <vector>

#include "costmodel/features.h"

namespace tessel::costmodel {

// Higher = predicted faster: 1 / the estimate above, for each feature vector (0 for a vector of
// the wrong length).
std::vector<double> RooflineScores(const std::vector<Features>& features);

}  // namespace tessel::costmodel
