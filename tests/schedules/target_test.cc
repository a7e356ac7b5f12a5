// Targets (issue 23): sm_90a is a target of its own with sm_90's limits and Hopper's
// architecture-specific instructions; which devices run which code (the one rule the dispatcher,
// the worker and the deploy runtime use); the errors that list the known architectures.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "schedules/target/target.h"

namespace tessel::schedules {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(Target, Sm90aIsATargetOfItsOwnWithTheLimitsOfSm90) {
  absl::StatusOr<Target> a = MakeTarget("cuda", "sm_90a");
  ASSERT_TRUE(a.ok()) << a.status();
  const Target h = CudaTarget("sm_90");
  EXPECT_EQ(a->ToString(), "cuda -arch=sm_90a");
  EXPECT_NE(a->ToString(), h.ToString());  // records, cost models and logs keep them apart
  EXPECT_EQ(a->arch, "sm_90a");
  EXPECT_EQ(a->device_name, h.device_name);
  EXPECT_EQ(a->max_threads_per_block, h.max_threads_per_block);
  EXPECT_EQ(a->max_shared_bytes_per_block, h.max_shared_bytes_per_block);
  EXPECT_EQ(a->max_shared_bytes_optin, h.max_shared_bytes_optin);
  EXPECT_EQ(a->shared_bytes_per_sm, h.shared_bytes_per_sm);
  EXPECT_EQ(a->max_registers_per_thread, h.max_registers_per_thread);
  EXPECT_EQ(a->registers_per_block, h.registers_per_block);
  EXPECT_EQ(a->sm_count, h.sm_count);
  EXPECT_EQ(a->max_vector_bytes, h.max_vector_bytes);
  EXPECT_EQ(a->max_cluster_ctas, h.max_cluster_ctas);
  EXPECT_EQ(a->l2_bytes, h.l2_bytes);
}

TEST(Target, FeaturesSayWhatEachArchitectureOffers) {
  const Target a80 = CudaTarget("sm_80");
  const Target a90 = CudaTarget("sm_90");
  const Target a90a = CudaTarget("sm_90a");
  const Target host = HostTarget();
  EXPECT_FALSE(a80.HasArchSpecificFeatures());
  EXPECT_FALSE(a90.HasArchSpecificFeatures());
  EXPECT_TRUE(a90a.HasArchSpecificFeatures());
  EXPECT_FALSE(host.HasArchSpecificFeatures());
  for (TargetFeature f : {TargetFeature::kThreadBlockClusters, TargetFeature::kBulkTensorCopy}) {
    SCOPED_TRACE(TargetFeatureName(f));
    EXPECT_FALSE(a80.Supports(f));
    EXPECT_TRUE(a90.Supports(f));
    EXPECT_TRUE(a90a.Supports(f));
    EXPECT_FALSE(host.Supports(f));
  }
  for (TargetFeature f : {TargetFeature::kWgmma, TargetFeature::kSetmaxnreg}) {
    SCOPED_TRACE(TargetFeatureName(f));
    EXPECT_FALSE(a80.Supports(f));
    EXPECT_FALSE(a90.Supports(f));
    EXPECT_TRUE(a90a.Supports(f));
    EXPECT_FALSE(host.Supports(f));
  }
  EXPECT_STREQ(TargetFeatureName(TargetFeature::kWgmma), "wgmma");
}

TEST(Target, AnUnknownArchitectureIsRefusedListingTheKnownOnes) {
  EXPECT_THAT(KnownCudaArchs(), ElementsAre("sm_80", "sm_90", "sm_90a"));
  EXPECT_EQ(KnownCudaArchsText(), "sm_80, sm_90 or sm_90a");
  for (const char* bad : {"sm_89", "sm_90A", "compute_90a", "sm_80a"}) {
    absl::StatusOr<Target> t = MakeTarget("cuda", bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(t.status().message(),
              std::string("unknown CUDA architecture '") + bad +
                  "'; use sm_80, sm_90 or sm_90a, the architectures Tessel has a built-in "
                  "description of");
  }
  EXPECT_EQ(MakeTarget("cuda")->arch, "sm_90");  // the default is unchanged
}

TEST(Target, TheKeyOfEveryKnownTargetReadsBack) {
  for (const std::string& arch : KnownCudaArchs()) {
    absl::StatusOr<Target> t = TargetOfKey(CudaTarget(arch).ToString());
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->arch, arch);
    EXPECT_TRUE(t->is_cuda());
  }
  EXPECT_FALSE(TargetOfKey("host")->is_cuda());
  absl::StatusOr<Target> bad = TargetOfKey("cuda -arch=sm_75");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "target 'cuda -arch=sm_75' is not one this build knows (host, cuda -arch=sm_80, cuda "
            "-arch=sm_90, cuda -arch=sm_90a)");
}

TEST(CudaArchRunsOn, ADeviceRunsItsOwnArchitectureAndItsArchitectureSpecificVariant) {
  EXPECT_TRUE(CudaArchRunsOn("sm_90", "sm_90"));
  EXPECT_TRUE(CudaArchRunsOn("sm_90a", "sm_90"));
  EXPECT_TRUE(CudaArchRunsOn("sm_80", "sm_80"));
  EXPECT_FALSE(CudaArchRunsOn("sm_90a", "sm_80"));
  EXPECT_FALSE(CudaArchRunsOn("sm_90a", "sm_89"));
  EXPECT_FALSE(CudaArchRunsOn("sm_90a", "sm_100"));
  EXPECT_FALSE(CudaArchRunsOn("sm_90", "sm_80"));
  EXPECT_FALSE(CudaArchRunsOn("sm_80", "sm_90"));  // records are reused for the same arch only
  EXPECT_FALSE(CudaArchRunsOn("", "sm_90"));
  EXPECT_EQ(CudaDeviceArchOf("sm_90a"), "sm_90");
  EXPECT_EQ(CudaDeviceArchOf("sm_80"), "sm_80");
  EXPECT_THAT(KnownCudaArchsRunnableOn("sm_90"), ElementsAre("sm_90", "sm_90a"));
  EXPECT_THAT(KnownCudaArchsRunnableOn("sm_80"), ElementsAre("sm_80"));
  EXPECT_THAT(KnownCudaArchsRunnableOn("sm_86"), IsEmpty());
}

TEST(CudaArchRunsOn, TheRefusalSaysWhichDevicesRunTheCode) {
  EXPECT_TRUE(CheckCudaArchRunsOn("sm_90a", "sm_90").ok());
  absl::Status s = CheckCudaArchRunsOn("sm_90a", "sm_80");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "sm_90a code runs only on devices of compute capability 9.0 (sm_90), and this device "
            "is sm_80");
  EXPECT_EQ(CheckCudaArchRunsOn("sm_90", "sm_80").message(),
            "sm_90 code runs only on sm_90 devices, and this device is sm_80");
  // A malformed architecture (a peer may send anything) gets a message, not a crash.
  EXPECT_FALSE(CheckCudaArchRunsOn("a", "sm_90").ok());
}

TEST(CudaBuildArch, BuildsForTheTargetWhereItRunsElseForTheDevice) {
  EXPECT_EQ(*CudaBuildArch("sm_90a", "sm_90"), "sm_90a");
  EXPECT_EQ(*CudaBuildArch("sm_90", "sm_90"), "sm_90");
  EXPECT_EQ(*CudaBuildArch("", "sm_90"), "sm_90");       // no architecture asked: the device's
  EXPECT_EQ(*CudaBuildArch("sm_80", "sm_90"), "sm_90");  // portable code: built for the device
  absl::StatusOr<std::string> elsewhere = CudaBuildArch("sm_90a", "sm_80");
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_EQ(elsewhere.status().message(),
            "sm_90a code runs only on devices of compute capability 9.0 (sm_90), and this device "
            "is sm_80");
}

}  // namespace
}  // namespace tessel::schedules
