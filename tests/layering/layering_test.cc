// The include rules of the layout (DESIGN.md section 2): each library includes only the folders
// it depends on (directly or through them), so that no dependency runs the wrong way. Scans
// every .h and .cc under the source tree for `#include "folder/..."` lines and reports each
// include a rule forbids as file:line with the rule it breaks.

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace tessel::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// What each library folder may include besides itself: its direct dependencies (DESIGN.md
// section 2); what they depend on is allowed too. proto's conversions (proto/convert.h) also
// speak schedules' GeneratedSource.
const std::map<std::string, std::set<std::string>>& DirectDependencies() {
  static const auto* deps = new std::map<std::string, std::set<std::string>>{
      {"schedules", {}},
      {"measure", {}},
      {"costmodel", {"schedules", "measure"}},
      {"search", {"schedules", "costmodel", "measure"}},
      {"store", {"schedules", "measure"}},
      {"proto", {"schedules", "measure"}},
      {"server", {"search", "store", "proto", "measure"}},
      {"worker", {"proto", "schedules", "measure"}},
      // The runtime reads the log (store) and loads with the worker's backends (worker/host,
      // worker/cuda): the same compilers and driver loader that measured the kernels.
      {"runtime", {"store", "worker"}},
  };
  return *deps;
}

// Folders of ours that an include may name; those not in DirectDependencies (cli, bench, tests)
// may include anything.
const std::set<std::string>& OurFolders() {
  static const auto* folders = new std::set<std::string>{
      "schedules", "measure", "costmodel", "search", "store", "proto",   "server",
      "worker",    "runtime", "cli",       "bench",  "tests", "examples"};
  return *folders;
}

// Single files with a stricter rule than their folder's: the client does not embed a worker.
const std::map<std::string, std::set<std::string>>& ForbiddenForFile() {
  static const auto* rules = new std::map<std::string, std::set<std::string>>{
      {"cli/client.cc", {"worker"}},
  };
  return *rules;
}

// The folders `folder` may include: itself and the closure of its dependencies.
std::set<std::string> Allowed(const std::string& folder) {
  std::set<std::string> out = {folder};
  std::vector<std::string> todo = {folder};
  while (!todo.empty()) {
    const std::string f = todo.back();
    todo.pop_back();
    for (const std::string& d : DirectDependencies().at(f)) {
      if (out.insert(d).second) todo.push_back(d);
    }
  }
  return out;
}

// Every include of the tree under `root` that breaks a rule, as "file:line: rule".
std::vector<std::string> LayeringViolations(const fs::path& root) {
  static const std::regex kInclude(R"(^\s*#\s*include\s+"([A-Za-z0-9_]+)/)");
  std::vector<std::string> out;
  std::vector<fs::path> files;
  for (const auto& [folder, unused] : DirectDependencies()) {
    if (!fs::is_directory(root / folder)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".h" || ext == ".cc")) files.push_back(e.path());
    }
  }
  for (const auto& [file, unused] : ForbiddenForFile()) {
    if (fs::is_regular_file(root / file)) files.push_back(root / file);
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& path : files) {
    const std::string rel = fs::relative(path, root).generic_string();
    const std::string folder = rel.substr(0, rel.find('/'));
    const auto forbidden = ForbiddenForFile().find(rel);
    const bool library = DirectDependencies().count(folder) > 0;
    const std::set<std::string> allowed = library ? Allowed(folder) : std::set<std::string>{};
    std::ifstream in(path);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::smatch m;
      if (!std::regex_search(line, m, kInclude)) continue;
      const std::string used = m[1];
      if (!OurFolders().count(used)) continue;  // absl/, nlohmann/, google/, ...
      if (library && !allowed.count(used)) {
        std::set<std::string> deps = allowed;
        deps.erase(folder);
        out.push_back(
            absl::StrCat(rel, ":", n, ": ", folder, "/ may not include ", used, "/ (it depends on ",
                         deps.empty() ? "nothing of ours" : absl::StrJoin(deps, ", "), ")"));
      } else if (forbidden != ForbiddenForFile().end() && forbidden->second.count(used)) {
        out.push_back(absl::StrCat(rel, ":", n, ": ", rel, " may not include ", used, "/"));
      }
    }
  }
  return out;
}

TEST(Layering, TheSourceTreeKeepsTheIncludeRules) {
  const std::vector<std::string> violations = LayeringViolations(TESSEL_SOURCE_DIR);
  EXPECT_THAT(violations, IsEmpty()) << absl::StrJoin(violations, "\n");
}

TEST(Layering, ReportsEachViolationAsFileLineAndRule) {
  const fs::path root = MakeTempDir("tessel_layering_");
  auto write = [&](const std::string& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  };
  write("measure/status.h", "#pragma once\n#include \"absl/status/status.h\"\n");
  write("proto/convert.h",
        "#pragma once\n#include \"measure/status.h\"\n#include \"worker/backend.h\"\n");
  write("costmodel/model.cc", "#include \"schedules/ir/ir.h\"\n  #  include \"store/log.h\"\n");
  write("server/job.cc", "#include \"costmodel/model.h\"\n#include \"schedules/ir/ir.h\"\n");
  write("cli/client.cc", "#include \"proto/convert.h\"\n#include \"worker/daemon/daemon.h\"\n");
  write("cli/worker_command.cc", "#include \"worker/daemon/daemon.h\"\n");
  EXPECT_THAT(
      LayeringViolations(root),
      ElementsAre(
          "cli/client.cc:2: cli/client.cc may not include worker/",
          "costmodel/model.cc:2: costmodel/ may not include store/ (it depends on measure, "
          "schedules)",
          "proto/convert.h:3: proto/ may not include worker/ (it depends on measure, schedules)"));
}

}  // namespace
}  // namespace tessel::testing
