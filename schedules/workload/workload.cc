#include "schedules/workload/workload.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "schedules/ir/expr_functor.h"

namespace tessel::schedules {

const TensorDef* Workload::Find(const std::string& tensor_name) const {
  int i = IndexOf(tensor_name);
  return i < 0 ? nullptr : &tensors[i];
}

int Workload::IndexOf(const std::string& tensor_name) const {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == tensor_name) return static_cast<int>(i);
  }
  return -1;
}

bool Workload::IsOutput(const std::string& tensor_name) const {
  for (const auto& o : outputs) {
    if (o == tensor_name) return true;
  }
  return false;
}

namespace {

class FlopCounter : public ExprVisitor {
 public:
  double flops = 0;

 protected:
  void VisitBinary(const BinaryNode& n, const Expr& self) override {
    if (IsFloat(n.dtype)) flops += 1;
    ExprVisitor::VisitBinary(n, self);
  }
  void VisitCall(const CallNode& n, const Expr& self) override {
    if (IsFloat(n.dtype)) flops += 1;
    ExprVisitor::VisitCall(n, self);
  }
};

class ReadCollector : public ExprVisitor {
 public:
  std::vector<const LoadNode*> loads;

 protected:
  void VisitLoad(const LoadNode& n, const Expr& self) override {
    loads.push_back(&n);
    ExprVisitor::VisitLoad(n, self);
  }
};

}  // namespace

double Workload::Flops() const {
  double total = 0;
  for (const TensorDef& t : tensors) {
    if (t.is_input) continue;
    FlopCounter c;
    c.Visit(t.body);
    double per_point = c.flops + (t.reduce ? 1 : 0);
    double points = static_cast<double>(t.buffer->NumElements());
    for (int64_t e : t.reduce_extents) points *= static_cast<double>(e);
    total += per_point * points;
  }
  return total;
}

int64_t Workload::CompulsoryBytes() const {
  int64_t bytes = 0;
  for (const TensorDef& t : tensors) {
    if (t.is_input || IsOutput(t.name)) bytes += t.buffer->AllocatedBytes();
  }
  return bytes;
}

absl::Status ValidateWorkload(const Workload& w) {
  std::set<std::string> seen;
  std::set<const Buffer*> defined;
  for (const TensorDef& t : w.tensors) {
    if (!seen.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", t.name, " is defined twice; give each tensor its own name"));
    }
    if (!t.buffer) return absl::InternalError(absl::StrCat("tensor ", t.name, " has no buffer"));
    for (int64_t d : t.buffer->shape) {
      if (d <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", t.name, " has extent ", d, "; every extent must be positive"));
      }
    }
    if (!t.is_input) {
      if (!t.body) return absl::InternalError(absl::StrCat("tensor ", t.name, " has no body"));
      if (t.axes.size() != t.buffer->shape.size()) {
        return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, " has ", t.axes.size(),
                                                       " axes but rank ", t.buffer->shape.size()));
      }
      if (t.reduce_axes.size() != t.reduce_extents.size() ||
          (t.reduce.has_value() != !t.reduce_axes.empty())) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", t.name, " mixes reduction axes and reduction kind"));
      }
      for (int64_t e : t.reduce_extents) {
        if (e <= 0) {
          return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, " reduces over extent ",
                                                         e, "; extents must be positive"));
        }
      }
      ReadCollector rc;
      rc.Visit(t.body);
      for (const LoadNode* l : rc.loads) {
        if (!defined.count(l->buffer.get())) {
          return absl::InvalidArgumentError(
              absl::StrCat("tensor ", t.name, " reads ", l->buffer->name,
                           ", which is not defined before it; define tensors before their use"));
        }
      }
      if (t.body->dtype != t.buffer->dtype) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", t.name, " is declared ", DTypeName(t.buffer->dtype),
                         " but its body is ", DTypeName(t.body->dtype), "; add a cast such as ",
                         DTypeName(t.buffer->dtype), "(...)"));
      }
    }
    defined.insert(t.buffer.get());
  }
  if (w.outputs.empty()) {
    return absl::InvalidArgumentError("the workload has no output; add a line `output NAME`");
  }
  for (const std::string& o : w.outputs) {
    const TensorDef* t = w.Find(o);
    if (!t) {
      return absl::InvalidArgumentError(
          absl::StrCat("output ", o, " is not a tensor of the workload"));
    }
    if (t->is_input) {
      return absl::InvalidArgumentError(
          absl::StrCat("output ", o, " is an input; outputs must be computed tensors"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
