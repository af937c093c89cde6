// SPDX-License-Identifier: Apache-2.0
#include "cli/command.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/printable.h"
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

namespace {
bool g_parse_only = false;  // set_parse_only: the fuzz target's seam, never set by fsdpsim
}  // namespace

void set_parse_only(bool on) { g_parse_only = on; }

std::optional<int> parse_command_line(std::string_view command, std::string_view usage,
                                      std::string_view description, po::options_description& desc,
                                      std::span<const std::string> args, po::variables_map& vm,
                                      Io& io) {
  desc.add_options()("help,h", "print this help and exit");
  try {
    std::vector<std::string> argv(args.begin(), args.end());
    const po::parsed_options parsed = po::command_line_parser(argv).options(desc).run();
    // Strict command lines (docs/cli.md, "Command lines"): no subcommand takes positional
    // arguments through this parser, so a stray word is an error rather than silently dropped,
    // and an option that takes a value never takes an empty one.
    std::string after;  // the tokens of the option before, for the message
    for (const po::option& opt : parsed.options) {
      if (opt.string_key.empty() || opt.position_key >= 0) {
        const std::string word = opt.original_tokens.empty() ? std::string()
                                                             : opt.original_tokens.front();
        return report_usage_error(
            io, command,
            str_cat("unexpected argument '", word, "'",
                    after.empty() ? std::string() : str_cat(" after '", after, "'"),
                    "; expected only --options and their values"));
      }
      after = join(opt.original_tokens, " ");
      for (const std::string& value : opt.value) {
        if (value.empty()) {
          return report_usage_error(io, command,
                                    str_cat("--", opt.string_key,
                                            " has an empty value; expected a value (or leave "
                                            "the option out for its default)"));
        }
      }
    }
    po::store(parsed, vm);
    if (vm.count("help") != 0) {
      io.out << "usage: fsdpsim " << usage << "\n\n" << description << "\n\n" << desc << "\n";
      return kExitOk;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    return report_usage_error(io, command, e.what());
  }
  if (g_parse_only) {
    return kExitOk;
  }
  return std::nullopt;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u == 0x1b) {
      out += "\\e";
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    }
  }
  return out;
}

int report_error(Io& io, const Error& error) {
  io.err << "fsdpsim: error: " << printable(error.message()) << "\n";
  return kExitInvalidInput;
}

int report_usage_error(Io& io, std::string_view command, std::string_view message) {
  io.err << "fsdpsim " << command << ": usage error: " << printable(message) << " (try 'fsdpsim "
         << command << " --help')\n";
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
