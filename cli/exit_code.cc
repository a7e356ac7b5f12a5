#include "cli/exit_code.h"

namespace tessel::cli {

namespace {
int g_exit_code = 0;
}  // namespace

void SetExitCode(int code) { g_exit_code = code; }
int ExitCode() { return g_exit_code; }

}  // namespace tessel::cli
