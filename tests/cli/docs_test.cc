// SPDX-License-Identifier: Apache-2.0
// The docs are true to the binary: every fsdpsim command line shown in the README, the CLI
// reference and the user guide parses (options and their syntax; values that need work are left
// to the commands' own tests), every option the CLI reference tabulates is in its command's
// --help, and the README and docs/validation.md quote the validation figures the reports print
// (planner/step_report.h kAccuracy).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/base/number_text.h"
#include "core/base/strings.h"
#include "planner/step_report.h"
#include "tests/cli/cli_test_util.h"

namespace fsdp::cli {
namespace {

using testing::run_command;

std::string read(const std::string& relative) {
  std::ifstream in(std::string(FSDP_SOURCE_DIR) + "/" + relative);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Shell-like words: whitespace-separated, '...' and "..." quoted.
std::vector<std::string> shell_words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char ch : line) {
    if (quote != 0) {
      if (ch == quote) {
        quote = 0;
      } else {
        word += ch;
      }
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      in_word = true;
    } else if (ch == ' ' || ch == '\t') {
      if (in_word) {
        words.push_back(word);
        word.clear();
        in_word = false;
      }
    } else {
      word += ch;
      in_word = true;
    }
  }
  if (in_word) {
    words.push_back(word);
  }
  return words;
}

// The fsdpsim command lines of the fenced code blocks of a Markdown file, continuation lines
// joined, with a placeholder-free argument list (usage forms such as `--model M` are skipped).
std::vector<std::vector<std::string>> documented_commands(const std::string& text) {
  std::vector<std::vector<std::string>> commands;
  std::istringstream lines(text);
  bool fenced = false;
  std::string pending;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      pending.clear();
      continue;
    }
    if (!fenced) {
      continue;
    }
    if (!pending.empty()) {
      line = pending + " " + line;
      pending.clear();
    }
    if (!line.empty() && line.back() == '\\') {
      pending = line.substr(0, line.size() - 1);
      continue;
    }
    // Drop a trailing comment or note: "# ..." and "(open in ...)".
    if (const auto hash = line.find(" #"); hash != std::string::npos) {
      line = line.substr(0, hash);
    }
    if (const auto note = line.find("   ("); note != std::string::npos) {
      line = line.substr(0, note);
    }
    std::vector<std::string> words = shell_words(line);
    // Skip a launcher and a path to the binary: "mpirun -np 4 fsdpsim", "./build/.../fsdpsim".
    std::size_t at = 0;
    while (at < words.size() && words[at].find("fsdpsim") == std::string::npos) {
      ++at;
    }
    if (at >= words.size()) {
      continue;
    }
    const std::string& binary = words[at];
    const bool is_binary = binary == "fsdpsim" ||
                           (binary.size() > 8 && binary.compare(binary.size() - 8, 8, "/fsdpsim") == 0);
    if (!is_binary) {
      continue;
    }
    std::vector<std::string> args(words.begin() + static_cast<std::ptrdiff_t>(at) + 1, words.end());
    if (args.empty() || args[0].rfind("-", 0) == 0) {
      continue;  // `fsdpsim --help` and the like
    }
    static const std::regex placeholder(R"(^[A-Z][A-Z_]*(\.[a-z]+)?$|<|\.\.\.|\|)");
    bool usage_form = false;
    for (const std::string& a : args) {
      usage_form = usage_form || std::regex_search(a, placeholder);
    }
    // Pipelines and redirections are not arguments.
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "&&" || args[i] == "&" || args[i] == ">" || args[i] == "2>&1" ||
          args[i] == "|") {
        args.resize(i);
        break;
      }
    }
    if (!usage_form) {
      commands.push_back(std::move(args));
    }
  }
  return commands;
}

TEST(DocsTest, EveryDocumentedCommandLineParses) {
  std::int64_t checked = 0;
  set_parse_only(true);
  for (const char* file : {"README.md", "docs/cli.md", "docs/user-guide.md"}) {
    for (const std::vector<std::string>& command : documented_commands(read(file))) {
      const Command* c = find_command(command[0]);
      ASSERT_NE(c, nullptr) << file << ": no subcommand '" << command[0] << "'";
      const std::vector<std::string> args(command.begin() + 1, command.end());
      const auto r = run_command(c->run, args);
      EXPECT_EQ(r.code, kExitOk) << file << ": fsdpsim " << join(command, " ") << "\n" << r.err;
      ++checked;
    }
  }
  set_parse_only(false);
  EXPECT_GT(checked, 20);
}

// The options of the tables under "## `fsdpsim NAME`" in docs/cli.md, per NAME.
std::vector<std::pair<std::string, std::string>> tabulated_options() {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream lines(read("docs/cli.md"));
  std::string command;
  static const std::regex section(R"(^## `fsdpsim ([a-z]+)`)");
  static const std::regex option(R"(`(--[a-z0-9-]+))");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, section)) {
      command = m[1];
      continue;
    }
    if (line.rfind("##", 0) == 0) {
      command.clear();
    }
    if (command.empty() || line.rfind("| `--", 0) != 0) {
      continue;
    }
    const std::string first_column = line.substr(0, line.find('|', 1));
    for (auto it = std::sregex_iterator(first_column.begin(), first_column.end(), option);
         it != std::sregex_iterator(); ++it) {
      out.emplace_back(command, (*it)[1]);
    }
  }
  return out;
}

TEST(DocsTest, EveryTabulatedOptionIsInItsCommandsHelp) {
  const auto options = tabulated_options();
  EXPECT_GT(options.size(), 50u);
  for (const auto& [command, option] : options) {
    const Command* c = find_command(command);
    ASSERT_NE(c, nullptr) << command;
    const auto r = run_command(c->run, {"--help"});
    EXPECT_NE(r.out.find(str_cat(option, " ")), std::string::npos)
        << "docs/cli.md documents " << option << " for fsdpsim " << command
        << ", which its --help does not list";
  }
}

TEST(DocsTest, TheReadmeAndTheValidationQuoteTheReportedAccuracy) {
  const planner::Accuracy& a = planner::kAccuracy;
  const std::string tps = str_cat("median ", fixed_text(a.tokens_per_second_median_pct, 1), "%, max ",
                                  fixed_text(a.tokens_per_second_max_pct, 1), "%");
  const std::string memory = str_cat("median ", fixed_text(a.memory_median_pct, 1), "%, max ",
                                     fixed_text(a.memory_max_pct, 1), "%");
  for (const char* file : {"README.md", "docs/validation.md"}) {
    // Whitespace runs (line breaks inside a paragraph) read as one space.
    const std::string text = std::regex_replace(read(file), std::regex(R"(\s+)"), " ");
    EXPECT_NE(text.find(tps), std::string::npos) << file << " lacks " << tps;
    EXPECT_NE(text.find(memory), std::string::npos) << file << " lacks " << memory;
  }
}

}  // namespace
}  // namespace fsdp::cli
