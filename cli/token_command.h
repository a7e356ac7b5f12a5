#pragma once

#include "CLI/CLI.hpp"

namespace tessel::cli {

// `tessel token create --role client|worker|admin --tokens FILE [--name NAME]`: makes a random
// token, appends its SHA-256, role and name to the tokens file (server/tokens_file.h; created
// with mode 0600 when missing) and prints the token once on stdout. A running `tessel serve
// --tokens FILE` accepts it at its next call (it reads the file again when it changes).
void AddTokenCommand(CLI::App& app);

}  // namespace tessel::cli
