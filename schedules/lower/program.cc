#include "schedules/lower/program.h"

#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessel::schedules {

const char* BufferRoleName(BufferRole r) {
  switch (r) {
    case BufferRole::kInput:
      return "input";
    case BufferRole::kOutput:
      return "output";
    case BufferRole::kWorkspace:
      return "workspace";
  }
  return "?";
}

int ProgramBufferIndex(const std::vector<ProgramBuffer>& buffers, const Buffer* b) {
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].buffer.get() == b) return static_cast<int>(i);
  }
  return -1;
}

int64_t TensorMapIndex(std::vector<TensorMapSpec>* maps, const TensorMapSpec& spec) {
  for (size_t i = 0; i < maps->size(); ++i) {
    if ((*maps)[i] == spec) return static_cast<int64_t>(i);
  }
  maps->push_back(spec);
  return static_cast<int64_t>(maps->size()) - 1;
}

std::string ToString(const LaunchConfig& l) {
  return absl::StrCat(
      "grid ", absl::StrJoin(l.grid, "x"), ", block ", absl::StrJoin(l.block, "x"),
      ", dynamic shared ", l.dynamic_shared_bytes, " bytes", l.cooperative ? ", cooperative" : "",
      l.tensor_maps.empty() ? "" : absl::StrCat(", ", l.tensor_maps.size(), " tensor maps"));
}

std::string ToString(const SharedPlan& plan) {
  std::vector<std::string> slots;
  for (const SharedSlot& s : plan.slots) {
    const std::string what =
        s.kind == SharedSlot::Kind::kBuffer
            ? s.buffer->name
            : absl::StrCat(s.kind == SharedSlot::Kind::kReduceScratch ? "reduce" : "cluster",
                           "_scratch ", DTypeName(s.dtype), "[", s.elements, "]");
    slots.push_back(absl::StrCat(what, " at ", s.offset));
  }
  return absl::StrCat("shared ", plan.bytes, " bytes", plan.dynamic ? " (dynamic)" : "", ": ",
                      absl::StrJoin(slots, ", "));
}

std::string ToString(const VectorLoop& plan) {
  const auto* loop = As<ForNode>(plan.loop);
  const std::string head = absl::StrCat("vectorize ", loop->var->name, ": ");
  if (plan.kind == VectorLoop::Kind::kScalar) return absl::StrCat(head, "scalar (", plan.why, ")");
  const char* kind = plan.kind == VectorLoop::Kind::kVectorStore  ? "vector store"
                     : plan.kind == VectorLoop::Kind::kLaneStores ? "lane stores"
                                                                  : "reduction";
  std::vector<std::string> loads;
  for (const Expr& l : plan.loads) loads.push_back(As<LoadNode>(l)->buffer->name);
  std::string s = absl::StrCat(head, kind, ", ", plan.lanes, " lanes");
  if (!loads.empty()) absl::StrAppend(&s, ", loads ", absl::StrJoin(loads, ", "));
  if (!plan.guards.empty()) {
    absl::StrAppend(&s, ", ", plan.guards.size(), plan.guards.size() == 1 ? " guard" : " guards");
  }
  if (!plan.chunk_guards.empty()) {
    absl::StrAppend(&s, ", ", plan.chunk_guards.size(),
                    plan.chunk_guards.size() == 1 ? " chunk guard" : " chunk guards");
  }
  if (plan.zero_unless) absl::StrAppend(&s, ", zero-filled");
  return s;
}

std::string ToString(const Program& p) {
  std::ostringstream os;
  os << "program " << p.name << " (" << (p.target == TargetKind::kCuda ? "cuda" : "host") << ", "
     << (p.needs_int64_indices ? "64" : "32") << "-bit indices)\n";
  os << "buffers:\n";
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer& b = *p.buffers[i].buffer;
    os << "  [" << i << "] " << BufferRoleName(p.buffers[i].role) << " " << b.name << ": "
       << DTypeName(b.dtype) << "[" << absl::StrJoin(b.shape, ", ") << "]";
    if (!b.strides.empty()) os << " strides [" << absl::StrJoin(b.strides, ", ") << "]";
    os << "\n";
  }
  for (const Kernel& k : p.kernels) {
    os << "kernel " << k.name << ": grid (" << absl::StrJoin(k.launch.grid, ", ") << ") block ("
       << absl::StrJoin(k.launch.block, ", ") << ") dynamic shared "
       << k.launch.dynamic_shared_bytes << " bytes\n";
    std::vector<std::string> params;
    for (const BufferPtr& b : k.params) params.push_back(b->name);
    os << "  params: " << absl::StrJoin(params, ", ") << "\n";
    if (!k.shared.slots.empty()) os << "  " << ToString(k.shared) << "\n";
    for (const VectorLoop& v : k.vectors) os << "  " << ToString(v) << "\n";
    // The body, indented under its kernel.
    std::istringstream body(ToString(k.body));
    for (std::string line; std::getline(body, line);) os << "  " << line << "\n";
  }
  return os.str();
}

}  // namespace tessel::schedules
