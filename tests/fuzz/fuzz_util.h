#pragma once

// Helpers shared by the fuzz targets (tests/fuzz/*_fuzzer.cc). A target runs single-threaded in
// one process (libFuzzer, or the corpus replay test).

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tessel::fuzz {

// A fresh folder under $TMPDIR (or /tmp), made on first use and removed with what it holds when
// the process exits normally.
const std::string& ScratchDir();

// A property every accepted input must have: prints `what` and aborts (the fuzzer reports the
// input) when `ok` is false.
inline void Require(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace tessel::fuzz
