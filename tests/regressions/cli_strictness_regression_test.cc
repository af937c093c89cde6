// SPDX-License-Identifier: Apache-2.0
// Issue 16, class 6 (strict command lines): every case is a command line that used to run with
// something silently ignored, or leaked library text; each must now end in a one-line error
// naming the offending word, with exit 2 (usage) or 1 (invalid input) (docs/cli.md,
// "Command lines").
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tests/regressions/run_fsdpsim.h"

namespace fsdp::regressions {
namespace {

// The suite's limits: 1 GB of address space (under ASan, ASan's own limits; run_fsdpsim.h).
Limits limits() { return Limits{}; }

// Runs fsdpsim and checks the common shape of a rejected command line: the exit code, no
// timeout or signal, nothing on stdout, one line on stderr that contains `needle`.
void expect_rejected(const std::vector<std::string>& args, int exit_code,
                     const std::string& needle) {
  const ProcessResult r = run_fsdpsim(args, limits());
  std::string shown;
  for (const std::string& a : args) {
    shown += " '" + a + "'";
  }
  SCOPED_TRACE("fsdpsim" + shown);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.exit_code, exit_code) << r.err;
  EXPECT_TRUE(is_one_line(r.err)) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(CliStrictnessRegression, StrayPositionalArgumentIsAnErrorInEverySubcommand) {
  // `simulate --mesh dp=8 dp_inner=4` ran dp=8; the same held for seven more subcommands.
  expect_rejected({"simulate", "--mesh", "dp=8", "dp_inner=4"}, 2, "'dp_inner=4'");
  for (const char* command :
       {"model", "hardware", "layout", "schedule", "simulate", "train", "commbench", "sweep",
        "calibrate"}) {
    expect_rejected({command, "stray"}, 2, "unexpected argument 'stray'");
  }
  expect_rejected({"compare", "a.json", "b.json", "c.json"}, 2, "got 3");
}

TEST(CliStrictnessRegression, PrefetchWithAOneDirectionPrefetchIsAConflict) {
  // --prefetch silently won over --forward-prefetch.
  expect_rejected({"simulate", "--prefetch", "next(2)", "--forward-prefetch", "none"}, 2,
                  "--forward-prefetch");
  expect_rejected({"schedule", "--backward-prefetch", "none", "--prefetch", "next(2)"}, 2,
                  "--backward-prefetch");
}

TEST(CliStrictnessRegression, TensorAtomicWithUnpaddedOrBlockIsAConflict) {
  // --tensor-atomic silently dropped --shard-layout unpadded and --block 3.
  expect_rejected({"schedule", "--tensor-atomic", "--shard-layout", "unpadded"}, 2, "unpadded");
  expect_rejected({"simulate", "--tensor-atomic", "--block", "3"}, 2, "--block 3");
  expect_rejected({"train", "--tensor-atomic", "--block", "3"}, 1, "--block 3");
  expect_rejected({"calibrate", "--tensor-atomic", "--shard-layout", "unpadded", "--predict",
                   "cpu.json"},
                  1, "--shard-layout unpadded");
}

TEST(CliStrictnessRegression, EmptyOptionValueIsAnErrorForEveryOption) {
  // Empty values meant the default for some options (--trace '', --dp-inner '') and were
  // errors for others (--mesh '').
  expect_rejected({"simulate", "--mesh", ""}, 2, "--mesh has an empty value");
  expect_rejected({"simulate", "--trace", ""}, 2, "--trace has an empty value");
  expect_rejected({"sweep", "--dp-inner", ""}, 2, "--dp-inner has an empty value");
  expect_rejected({"train", "--prefetch", ""}, 2, "--prefetch has an empty value");
  expect_rejected({"layout", "--shapes="}, 2, "--shapes");
}

TEST(CliStrictnessRegression, ControlCharactersInAnArgumentKeepTheErrorOneLine) {
  // Found by fuzz/cli_args_fuzz.cc: an option name or value with a newline or an escape
  // sequence was echoed raw, so the "one line" error spanned lines (or cleared the screen).
  expect_rejected({"layout", "--shape,\n", "2"}, 2, "'--shape,\\x0a'");
  expect_rejected({"simulate", "--mesh", "dp=8\x1b[2J\n"}, 1, "dp=8\\x1b[2J\\x0a");
  expect_rejected({"bogus\x1b[2J"}, 2, "'bogus\\x1b[2J'");
}

TEST(CliStrictnessRegression, HelpOfAnUnknownCommandIsAUsageError) {
  // `help bogus` printed the general help and exited 0.
  expect_rejected({"help", "bogus"}, 2, "'bogus'");
  expect_rejected({"help", "simulate", "extra"}, 2, "'extra'");
  expect_rejected({"--version", "extra"}, 2, "'extra'");
  const ProcessResult ok = run_fsdpsim({"help", "simulate"}, limits());
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("usage: fsdpsim simulate"), std::string::npos);
}

// Writes `text` to a fresh file and returns its path.
std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = make_temp_dir("cli_strictness") + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "w");
  EXPECT_NE(f, nullptr) << path;
  if (f != nullptr) {
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  return path;
}

TEST(CliStrictnessRegression, TraceFieldOfTheWrongTypeNamesTheFileNotTheLibrary) {
  // compare and calibrate --fit printed "[json.exception.type_error.302] type must be string,
  // but is number" for a metadata event whose name is a number, and
  // "[json.exception.out_of_range.406] ..." for a number past double's range.
  const std::string named = write_file("t.json", R"({"traceEvents":[{"ph":"M","name":5}]})");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"compare", named, named},
        std::vector<std::string>{"compare", write_file("big.json", R"({"traceEvents":[1e400]})"),
                                 named}}) {
    const ProcessResult r = run_fsdpsim(args, limits());
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(is_one_line(r.err)) << r.err;
    EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(".json'"), std::string::npos) << r.err;  // names the file
  }
}

TEST(CliStrictnessRegression, LayoutTableColumnsNeverRunTogether) {
  // Offsets and element counts wider than their column were printed with no space between:
  // "     1500000000000000005000000000000000050000000000000000".
  const ProcessResult r =
      run_fsdpsim({"layout", "--shapes", "50000000000000000,50000000000000000", "--dp", "2",
                   "--format", "table"},
                  limits());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" 50000000000000000 50000000000000000 50000000000000000 "),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("500000000000000005"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace fsdp::regressions
