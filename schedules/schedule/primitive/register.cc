#include "schedules/schedule/primitive/register.h"

namespace tessel::schedules {

const InstructionTable& InstructionTable::Builtin() {
  // Built on first use by explicit calls (thread-safe: a function-local static).
  static const InstructionTable* const table = [] {
    auto* t = new InstructionTable();
    RegisterLookupInstructions(t);
    RegisterSamplingInstructions(t);
    RegisterLoopTransformationInstructions(t);
    RegisterLoopKindInstructions(t);
    RegisterCacheInstructions(t);
    RegisterComputeAtInstructions(t);
    RegisterComputeInlineInstructions(t);
    RegisterLayoutInstructions(t);
    RegisterAnnotationInstructions(t);
    RegisterReductionInstructions(t);
    RegisterReductionFusionInstructions(t);
    RegisterTensorizeInstructions(t);
    return t;
  }();
  return *table;
}

}  // namespace tessel::schedules
