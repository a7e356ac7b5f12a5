#pragma once

// Running the tessel binary of this build as a user does, through the shell.

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tessel::testing {

struct CliResult {
  int status;          // the exit status, -1 when it did not exit
  std::string output;  // stdout, and stderr unless left out
};

// The tessel binary of this build ($TESSEL_BINARY overrides it, e.g. in a relocated bundle).
inline std::string TesselBinaryPath() {
  if (const char* b = std::getenv("TESSEL_BINARY"); b != nullptr && b[0] != '\0') return b;
  return std::string(TESSEL_BINARY_DIR) + "/cli/tessel";
}

// A shell command (through /bin/sh), its stderr too unless left out.
inline CliResult RunShell(const std::string& cmd, bool with_stderr = true) {
  FILE* pipe = popen((cmd + (with_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  CliResult r{-1, ""};
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int st = pclose(pipe);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// `tessel <args>` through /bin/sh (args are shell words, quoted as a user would).
inline CliResult RunTessel(const std::string& args, bool with_stderr = true) {
  return RunShell(TesselBinaryPath() + " " + args, with_stderr);
}

}  // namespace tessel::testing
