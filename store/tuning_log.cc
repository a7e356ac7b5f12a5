#include "store/tuning_log.h"

namespace tessel::store {

const char* JobStateName(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kDone:
      return "done";
    case JobState::kCancelled:
      return "cancelled";
    case JobState::kFailed:
      return "failed";
  }
  return "unknown";
}

bool IsFinished(JobState s) {
  return s == JobState::kDone || s == JobState::kCancelled || s == JobState::kFailed;
}

}  // namespace tessel::store
