#include "cli/token_command.h"

#include <iostream>
#include <memory>
#include <string>

#include "cli/exit_code.h"
#include "server/tokens_file.h"

namespace tessel::cli {
namespace {

struct TokenFlags {
  std::string role;
  std::string tokens;
  std::string name;
};

int RunTokenCreate(const TokenFlags& f) {
  absl::StatusOr<server::Role> role = server::ParseRole(f.role);
  if (!role.ok()) {
    std::cerr << "tessel token create: --role " << role.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<server::CreatedToken> t = server::CreateToken(f.tokens, *role, f.name);
  if (!t.ok()) {
    std::cerr << "tessel token create: " << t.status().message() << "\n";
    return 1;
  }
  std::cerr << "tessel token create: " << server::RoleName(t->principal.role) << " token '"
            << t->principal.name << "' added to " << f.tokens
            << "; it is shown once, here (only its hash is kept):\n";
  std::cout << t->token << std::endl;
  return 0;
}

}  // namespace

void AddTokenCommand(CLI::App& app) {
  CLI::App* token = app.add_subcommand("token", "Manage the tokens of tessel serve --tokens");
  token->require_subcommand(1);
  auto f = std::make_shared<TokenFlags>();
  CLI::App* create = token->add_subcommand(
      "create", "Make a token, add its hash to a tokens file and print the token once");
  create->add_option("--role", f->role, "client, worker or admin")->required();
  create->add_option("--tokens", f->tokens, "The tokens file (created when missing)")->required();
  create->add_option("--name", f->name,
                     "A name for the token, shown in the server's log and recorded with the jobs "
                     "it submits (default: ROLE-N)");
  create->callback([f]() { SetExitCode(RunTokenCreate(*f)); });
}

}  // namespace tessel::cli
