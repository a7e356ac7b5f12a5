#pragma once

// The registration function of each primitive family (the .cc file of the same name in this
// folder). InstructionTable::Builtin (register.cc) calls them all, in this order; a new family
// adds its function here and there.

#include "schedules/schedule/instruction_table.h"

namespace tessel::schedules {

void RegisterLookupInstructions(InstructionTable* table);
void RegisterSamplingInstructions(InstructionTable* table);
void RegisterLoopTransformationInstructions(InstructionTable* table);
void RegisterLoopKindInstructions(InstructionTable* table);
void RegisterCacheInstructions(InstructionTable* table);
void RegisterComputeAtInstructions(InstructionTable* table);
void RegisterComputeInlineInstructions(InstructionTable* table);
void RegisterLayoutInstructions(InstructionTable* table);
void RegisterAnnotationInstructions(InstructionTable* table);
void RegisterReductionInstructions(InstructionTable* table);
void RegisterReductionFusionInstructions(InstructionTable* table);
void RegisterTensorizeInstructions(InstructionTable* table);

}  // namespace tessel::schedules
