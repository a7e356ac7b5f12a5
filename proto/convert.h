#pragma once

// Conversions between the proto messages of tessel.proto and Tessel's domain types. Proto types
// stay at the edges (the worker's stream, the measuring child's pipe); everything inside works on
// the domain types. Threads: every function is pure and may run on any thread.

#include "absl/status/statusor.h"
#include "measure/measurement.h"
#include "proto/tessel.pb.h"
#include "schedules/codegen/source.h"

namespace tessel::proto {

void ToProto(const schedules::GeneratedSource& in, Source* out);
// Checks what a peer could get wrong (an unknown dtype or role, a parameter index out of range, a
// launch without 3 extents) and says which field.
absl::StatusOr<schedules::GeneratedSource> FromProto(const Source& in);

void ToProto(const measure::TimingOptions& in, TimingOptions* out);
// Fails for max_repeats < 1 or min_repeats > max_repeats.
absl::StatusOr<measure::TimingOptions> FromProto(const TimingOptions& in);

// measure::ScreenOptions (enabled when the proto is set; `confirm` is per candidate and stays
// false). FromProto fails where FromProto(TimingOptions) does, or for a negative or non-finite
// best_ms or margin.
void ToProto(const measure::ScreenOptions& in, ScreenOptions* out);
absl::StatusOr<measure::ScreenOptions> FromProto(const ScreenOptions& in);

TimingKind ToProto(measure::TimingKind in);
// TIMING_KIND_UNSPECIFIED (a worker of an older release, which always measures in full) and any
// unknown value become kConfirmed.
measure::TimingKind FromProto(TimingKind in);

MeasureStatus ToProto(measure::MeasureStatus in);
// MEASURE_STATUS_UNSPECIFIED (a peer that did not set it) becomes kWorkerError.
measure::MeasureStatus FromProto(MeasureStatus in);

// measure::Artifact: its launch JSON travels as the Source's kernels and buffers. ToProto fails
// only for an artifact whose launch JSON is malformed; FromProto checks the Source as above.
absl::Status ToProto(const measure::Artifact& in, Artifact* out);
absl::StatusOr<measure::Artifact> FromProto(const Artifact& in);

// The batch and candidate ids are the caller's to set. An artifact whose launch JSON is malformed
// is left out. FromProto turns a result whose artifact is malformed into a worker_error saying so.
void ToProto(const measure::Measurement& in, MeasureResult* out);
measure::Measurement FromProto(const MeasureResult& in);

}  // namespace tessel::proto
