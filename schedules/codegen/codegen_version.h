#pragma once

// The code generators' version (schedules/codegen/): raised whenever a change makes the CUDA or
// host printer emit different source for the same program. A tuning record keeps the version
// that printed the source it measured (measure::Artifact::codegen_version), so a reader can tell
// when a source regenerated from the record's trace may not be the kernel that was measured.

namespace tessel::schedules {

inline constexpr int kCodegenVersion = 8;

}  // namespace tessel::schedules
