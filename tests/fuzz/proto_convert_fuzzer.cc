// Fuzz target: the proto-to-domain conversions (proto/convert.h) of what a peer sends: a worker's
// MeasureResult (then the server's check of it, store/record_check.h CheckMeasurement), and a
// server's MeasureBatch (its candidates' and reference's sources, its timing options). Input: the
// serialized bytes, parsed as each of WorkerMessage, MeasureResult and MeasureBatch.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "google/protobuf/stubs/logging.h"
#include "measure/measurement.h"
#include "proto/convert.h"
#include "proto/tessel.pb.h"
#include "schedules/ir/buffer.h"
#include "store/record_check.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using tessel::fuzz::Require;
namespace tp = tessel::proto;

void Result(const tp::MeasureResult& r) {
  tessel::measure::Measurement m = tp::FromProto(r);
  if (tessel::store::CheckMeasurement(m).ok()) {
    // A measurement the server accepts survives the trip back to a proto and again.
    tp::MeasureResult back;
    tp::ToProto(m, &back);
    Require(tessel::store::CheckMeasurement(tp::FromProto(back)).ok(),
            "an accepted measurement is refused after a round trip");
  }
}

void SourceOf(const tp::Source& s) {
  absl::StatusOr<tessel::schedules::GeneratedSource> g = tp::FromProto(s);
  if (!g.ok()) return;
  // What the worker computes of an accepted source's buffers before it allocates them
  // (worker/output_compare.cc): sizes must be countable (UBSan checks the arithmetic).
  for (const tessel::schedules::ProgramBuffer& b : g->buffers) {
    Require(b.buffer->NumElements() >= 0 && b.buffer->AllocatedBytes() >= 0,
            "an accepted buffer has a negative size");
  }
  tp::Source back;
  tp::ToProto(*g, &back);
  Require(tp::FromProto(back).ok(), "an accepted source is refused after a round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Parsing garbage is expected here: protobuf's complaints (invalid UTF-8, ...) are not wanted.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  const int n = static_cast<int>(size);
  if (static_cast<size_t>(n) != size) return 0;
  if (tp::WorkerMessage w; w.ParseFromArray(data, n) && w.has_result()) Result(w.result());
  if (tp::MeasureResult r; r.ParseFromArray(data, n)) Result(r);
  if (tp::MeasureBatch b; b.ParseFromArray(data, n)) {
    for (const tp::Candidate& c : b.candidates()) SourceOf(c.source());
    if (b.has_reference()) SourceOf(b.reference());
    if (b.options().has_timing()) (void)tp::FromProto(b.options().timing());
  }
  return 0;
}
