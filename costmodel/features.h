#pragma once

// Cost-model features of a lowered program (DESIGN.md section 5). One fixed-length vector of
// floats per candidate, computed from the Program the candidate lowers to (never from its source
// text), so the same trace gives the same features on every machine.
//
// The features and their order are versioned by kFeatureVersion: a saved model records the
// version it was trained with, and a model of another version is not loaded. Bump the version
// whenever a feature is added, removed, reordered or computed differently. FeatureNames()
// names them, one name per slot; costmodel/FEATURES.md documents each one and how it is counted.
// Magnitudes are log2(1 + x). Extraction is one walk of the IR (a few microseconds for a tiled
// matmul) and reads nothing of the machine it runs on.
//
// Threads: free functions, callable from any thread.

#include <string>
#include <vector>

#include "schedules/lower/program.h"
#include "schedules/target/target.h"

namespace tessel::costmodel {

using Features = std::vector<float>;

inline constexpr int kFeatureVersion = 13;

// One name per feature slot, in order; ExtractFeatures returns FeatureNames().size() values.
const std::vector<std::string>& FeatureNames();

Features ExtractFeatures(const schedules::Program& program, const schedules::Target& target);

}  // namespace tessel::costmodel
