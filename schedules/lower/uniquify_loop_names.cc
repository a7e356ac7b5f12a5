#include <set>
#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "schedules/ir/substitute.h"
#include "schedules/lower/passes.h"

namespace tessel::schedules {

// Stages nest inside each other's loops, and generated code must not shadow an outer loop's
// variable: a name already taken gets the stage's name as a prefix (and a number if needed).
absl::Status UniquifyLoopNames(LoweringState* state) {
  std::set<std::string> used;
  for (Stage& s : state->stages) {
    if (s.inlined()) continue;
    std::unordered_map<const VarNode*, Expr> map;
    for (IterVar& iv : s.iters) {
      std::string name = iv.var->name;
      if (used.count(name)) {
        name = SanitizeName(s.name) + "_" + iv.var->name;
        for (int i = 1; used.count(name); ++i) name = absl::StrCat(name, "_", i);
        VarPtr nv = MakeVar(name, iv.var->dtype);
        map[iv.var.get()] = nv;
        iv.var = nv;
      }
      used.insert(name);
    }
    if (map.empty()) continue;
    for (VarPtr& a : s.axes) {
      if (auto it = map.find(a.get()); it != map.end())
        a = std::static_pointer_cast<const VarNode>(it->second);
    }
    for (VarPtr& a : s.reduce_axes) {
      if (auto it = map.find(a.get()); it != map.end())
        a = std::static_pointer_cast<const VarNode>(it->second);
    }
    s.body = Substitute(s.body, map);
  }
  return absl::OkStatus();
}

}  // namespace tessel::schedules
