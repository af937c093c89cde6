// SPDX-License-Identifier: Apache-2.0
// fsdpsim: one executable, many subcommands (cli/commands.cc). Exit codes: 0 success, 1 invalid
// input, 2 usage error; errors are one line on stderr. No exception escapes main.
#include <unistd.h>

#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include "cli/command.h"

namespace {

void print_help(std::ostream& os) {
  os << "usage: fsdpsim <command> [options]\n"
        "       fsdpsim <command> --help\n"
        "       fsdpsim --version\n\n"
        "fsdpsim plans, simulates and runs fully-sharded data-parallel training in the style of\n"
        "Megatron-FSDP v2 (DBuffer layouts, fully_shard).\n\n"
        "commands:\n";
  for (const auto& c : fsdp::cli::all_commands()) {
    os << "  " << c.name << std::string(12 - std::min<std::size_t>(c.name.size(), 11), ' ')
       << c.summary << "\n";
  }
  os << "\nexit codes: 0 success, 1 invalid input, 2 usage error\n";
}

int run(int argc, char** argv) {
  fsdp::cli::Io io{std::cout, std::cerr, isatty(STDOUT_FILENO) != 0,
                   isatty(STDERR_FILENO) != 0};
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_help(std::cerr);
    return fsdp::cli::kExitUsage;
  }
  const std::string& first = args.front();
  if (first == "--help" || first == "-h" || first == "help") {
    if (first == "help" && args.size() > 1) {
      if (const auto* c = fsdp::cli::find_command(args[1])) {
        std::vector<std::string> help_args = {"--help"};
        return c->run(help_args, io);
      }
    }
    print_help(std::cout);
    return fsdp::cli::kExitOk;
  }
  if (first == "--version" || first == "-V") {
    std::cout << "fsdpsim " << FSDP_VERSION << "\n";
    return fsdp::cli::kExitOk;
  }
  const auto* command = fsdp::cli::find_command(first);
  if (command == nullptr) {
    std::cerr << "fsdpsim: usage error: unknown command '" << first << "'; expected one of:";
    for (const auto& c : fsdp::cli::all_commands()) {
      std::cerr << " " << c.name;
    }
    std::cerr << " (try 'fsdpsim --help')\n";
    return fsdp::cli::kExitUsage;
  }
  args.erase(args.begin());
  return command->run(args, io);
}

}  // namespace

int main(int argc, char** argv) {
  // No library exception reaches the user bare (issue 16): memory and thread exhaustion get a
  // sentence of their own.
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << "fsdpsim: error: out of memory (the run needs more than this process may "
                 "allocate; try a smaller mesh, model or microbatch count)\n";
  } catch (const std::system_error& e) {
    std::cerr << "fsdpsim: error: the system refused a resource: " << e.what() << " ("
              << e.code().message() << ")\n";
  } catch (const std::exception& e) {
    std::cerr << "fsdpsim: error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "fsdpsim: error: unknown exception\n";
  }
  return fsdp::cli::kExitInvalidInput;
}
