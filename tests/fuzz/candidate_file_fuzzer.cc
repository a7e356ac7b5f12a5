// Fuzz target: candidate files (schedules/space/candidate.h ReadCandidateFile, what
// `tessel measure --candidate` reads). Input: the file's bytes, written to a scratch file.

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "absl/status/statusor.h"
#include "schedules/space/candidate.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string* path = new std::string(tessel::fuzz::ScratchDir() + "/candidate.json");
  {
    std::ofstream out(*path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    tessel::fuzz::Require(out.good(), "cannot write " + *path);
  }
  absl::StatusOr<tessel::schedules::CandidateFile> file =
      tessel::schedules::ReadCandidateFile(*path);
  if (!file.ok()) {
    tessel::fuzz::Require(!file.status().message().empty(), "an error without a message");
  }
  return 0;
}
