// SPDX-License-Identifier: Apache-2.0
#include "cli/command.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "core/base/file_io.h"
#include "core/base/printable.h"
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

// Messages quote paths and values from the command line and from files: their control characters
// are written as \xNN (printable_text), so an error is one line and sends no escape sequence to
// the terminal (docs/cli.md, "Input and output files" and "Command lines").
std::string printable(std::string_view text) { return printable_text(text, text.size()); }

int report_error(Io& io, const Error& error) {
  io.err << "fsdpsim: error: " << printable(error.message()) << "\n";
  return kExitInvalidInput;
}

int report_usage_error(Io& io, std::string_view command, std::string_view message) {
  io.err << "fsdpsim " << command << ": usage error: " << printable(message) << " (try 'fsdpsim "
         << command << " --help')\n";
  return kExitUsage;
}

namespace {

// Equal once made absolute and normal, whether or not the files exist yet.
bool same_output_path(const std::string& a, const std::string& b) {
  std::error_code ec_a;
  std::error_code ec_b;
  const auto pa = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ec_a), ec_a);
  const auto pb = std::filesystem::weakly_canonical(std::filesystem::absolute(b, ec_b), ec_b);
  return same_file(a, b) || (!ec_a && !ec_b && pa == pb);
}

}  // namespace

std::optional<int> refuse_outputs_over_inputs(Io& io, std::string_view command,
                                              const std::vector<FileArgument>& outputs,
                                              const std::vector<FileArgument>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const FileArgument& out = outputs[i];
    if (out.path.empty()) {
      continue;
    }
    for (const FileArgument& in : inputs) {
      if (!in.path.empty() && same_file(out.path, in.path)) {
        return report_usage_error(
            io, command, str_cat(out.option, " '", out.path, "' is the same file as ", in.option,
                                 " '", in.path, "'; an output must not replace an input"));
      }
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (!outputs[j].path.empty() && same_output_path(out.path, outputs[j].path)) {
        return report_usage_error(io, command,
                                  str_cat(out.option, " '", out.path, "' is the same file as ",
                                          outputs[j].option, " '", outputs[j].path,
                                          "'; expected distinct output files"));
      }
    }
  }
  return std::nullopt;
}

void draw_progress(std::ostream& err, std::int64_t done, std::int64_t total, std::string_view what,
                   bool end_line) {
  constexpr int kWidth = 40;
  const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
  err << "\r[" << std::string(static_cast<std::size_t>(filled), '#')
      << std::string(static_cast<std::size_t>(kWidth - filled), '.') << "] " << done << "/"
      << total << " " << what << (end_line && done == total ? "\n" : "") << std::flush;
}

Expected<std::string> read_text_file(const std::string& path) {
  return read_input_file(path);
}

}  // namespace fsdp::cli
