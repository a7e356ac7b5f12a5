#pragma once

// Shared by the GPU suites (CTest label `gpu`): a test that needs a GPU skips itself, with the
// reason, where none is usable, so CTest reports it as skipped rather than passed; and design-space
// samples verified on the GPU against the reference.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "schedules/space/space_generator.h"
#include "schedules/workload/builtins.h"
#include "tests/e2e/e2e_util.h"
#include "worker/backend.h"
#include "worker/cuda/cuda_runner.h"

#define SKIP_WITHOUT_GPU()                                             \
  do {                                                                 \
    absl::Status gpu = ::tessel::worker::CudaDeviceStatus();           \
    if (!gpu.ok()) GTEST_SKIP() << "no usable GPU: " << gpu.message(); \
  } while (false)

namespace tessel::testing {

// Verifies on GPU 0, against the reference on random inputs, samples of `spec`'s design space for
// sm_90: the valid ones among seeds 0 to `seeds` - 1 that `keep` accepts, at most `most` of them.
// Each mismatch fails the test, showing the seed, the trace and the source. Returns how many were
// checked (0 after a failure to set up, which fails the test too).
inline int VerifySamplesOnGpu(const std::string& spec, uint64_t seeds, int most,
                              const std::function<bool(const schedules::Candidate&)>& keep) {
  auto device = worker::CudaDevice::Open(0);
  auto w = schedules::ParseWorkloadSpec(spec);
  const schedules::Target target = schedules::CudaTarget("sm_90");
  auto ref = w.ok() ? GenerateReference(*w, target)
                    : absl::StatusOr<schedules::GeneratedSource>(w.status());
  auto g = w.ok() ? schedules::SpaceGenerator::Create(*w, target)
                  : absl::StatusOr<schedules::SpaceGenerator>(w.status());
  for (const absl::Status& s : {device.status(), w.status(), ref.status(), g.status()}) {
    if (!s.ok()) {
      ADD_FAILURE() << spec << ": " << s;
      return 0;
    }
  }
  worker::VerifyOptions vo;
  vo.run.device = device->get();
  int checked = 0;
  for (uint64_t seed = 0; seed < seeds && checked < most; ++seed) {
    auto c = g->Sample(seed);
    if (!c.ok() || !keep(*c)) continue;
    ++checked;
    absl::Status v = worker::RunAndVerify(c->source, *ref, seed, vo);
    EXPECT_TRUE(v.ok()) << spec << ", seed " << seed << ": " << v << "\n"
                        << c->trace->ToJsonString() << "\n"
                        << c->source.code;
  }
  return checked;
}

}  // namespace tessel::testing
