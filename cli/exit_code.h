#pragma once

namespace tessel::cli {

// The exit status a subcommand's callback sets for main() to return.
void SetExitCode(int code);
int ExitCode();

}  // namespace tessel::cli
