// SPDX-License-Identifier: Apache-2.0
#include "cli/command.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/base/strings.h"

namespace po = boost::program_options;

namespace fsdp::cli {

const Command* find_command(std::string_view name) {
  for (const Command& c : all_commands()) {
    if (c.name == name) {
      return &c;
    }
  }
  return nullptr;
}

std::optional<int> parse_command_line(std::string_view command, std::string_view usage,
                                      std::string_view description, po::options_description& desc,
                                      std::span<const std::string> args, po::variables_map& vm,
                                      Io& io) {
  desc.add_options()("help,h", "print this help and exit");
  try {
    std::vector<std::string> argv(args.begin(), args.end());
    po::store(po::command_line_parser(argv).options(desc).run(), vm);
    if (vm.count("help") != 0) {
      io.out << "usage: fsdpsim " << usage << "\n\n" << description << "\n\n" << desc << "\n";
      return kExitOk;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    return report_usage_error(io, command, e.what());
  }
  return std::nullopt;
}

int report_error(Io& io, const Error& error) {
  io.err << "fsdpsim: error: " << error.message() << "\n";
  return kExitInvalidInput;
}

int report_usage_error(Io& io, std::string_view command, std::string_view message) {
  io.err << "fsdpsim " << command << ": usage error: " << message << " (try 'fsdpsim " << command
         << " --help')\n";
  return kExitUsage;
}

Expected<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("cannot open '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    return Error(ErrorCode::kInvalidArgument, str_cat("cannot read '", path, "'"));
  }
  return ss.str();
}

}  // namespace fsdp::cli
