#include "schedules/lower/program.h"

namespace tessel::schedules {

const char* BufferRoleName(BufferRole r) {
  switch (r) {
    case BufferRole::kInput: return "input";
    case BufferRole::kOutput: return "output";
    case BufferRole::kWorkspace: return "workspace";
  }
  return "?";
}

}  // namespace tessel::schedules
