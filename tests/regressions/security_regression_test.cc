// SPDX-License-Identifier: Apache-2.0
// Issue 16, "Security": no file name reaches a shell, and no name from an input file reaches the
// terminal with its control characters; the external program that runs (`dot`) is bounded in
// time. Cases run the real fsdpsim binary (run_fsdpsim.h) or the
// one function that is the defect.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/trace_reader.h"
#include "core/base/printable.h"
#include "tests/regressions/expect_error.h"
#include "tests/regressions/run_fsdpsim.h"

namespace fsdp::regressions {
namespace {

bool dot_installed() {
  const char* path = std::getenv("PATH");
  std::string dirs = path == nullptr ? "" : path;
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t colon = dirs.find(':', start);
    const std::string dir = dirs.substr(start, colon == std::string::npos ? colon : colon - start);
    if (!dir.empty() && access((dir + "/dot").c_str(), X_OK) == 0) {
      return true;
    }
    if (colon == std::string::npos) {
      break;
    }
    start = colon + 1;
  }
  return false;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// A small schedule, quick to draw.
const std::vector<std::string> kSchedule = {"schedule", "--model",  "llama-3-8b", "--mesh",
                                            "dp=2",     "--format", "dot"};

// `schedule --output NAME.svg` rendered through std::system with NAME pasted into a shell command
// line: a name with quotes ran any command.
TEST(SecurityRegression, OutputNameNeverReachesAShell) {
  const std::string dir = make_temp_dir("shell");
  Limits limits;
  limits.cwd = dir;
  const std::string name = "x';touch PWNED;'.svg";
  std::vector<std::string> args = kSchedule;
  args.insert(args.end(), {"--output", name});
  const ProcessResult r = run_fsdpsim(args, limits);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> names = list_dir(dir);
  EXPECT_FALSE(contains(names, "PWNED"));
  EXPECT_TRUE(contains(names, "x';touch PWNED;'.dot"));
  if (dot_installed()) {
    EXPECT_TRUE(contains(names, name)) << r.err;
    EXPECT_EQ(names.size(), 2U);  // the .dot and the .svg, no temporary file
  } else {
    EXPECT_NE(r.err.find("not installed"), std::string::npos) << r.err;
    EXPECT_EQ(names.size(), 1U);
  }
}

// A plain quote in the name broke the shell command line, so `it's.svg` failed.
TEST(SecurityRegression, OutputNameWithAQuoteRenders) {
  const std::string dir = make_temp_dir("quote");
  std::vector<std::string> args = kSchedule;
  args.insert(args.end(), {"--output", dir + "/it's.svg"});
  const ProcessResult r = run_fsdpsim(args);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> names = list_dir(dir);
  EXPECT_TRUE(contains(names, "it's.dot"));
  if (dot_installed()) {
    EXPECT_TRUE(contains(names, "it's.svg")) << r.err;
    std::ifstream svg(dir + "/it's.svg");
    std::string head(4096, '\0');
    svg.read(head.data(), static_cast<std::streamsize>(head.size()));
    EXPECT_NE(head.find("<svg"), std::string::npos);
  }
}

// `dot` ran with no bound: a `dot` that hangs (here a fake one on PATH, a shell script whose child
// sleeps) hung `schedule --output FILE.svg` with it. Now it is killed, with its children, after
// --dot-timeout seconds; the error names the program and the bound, and a previous FILE.svg is
// left as it was.
TEST(SecurityRegression, HungDotIsKilledAfterItsTimeout) {
  const std::string bin = make_temp_dir("fake-dot");
  write_text(bin + "/dot", "#!/bin/sh\nsleep 60\necho rendered\n");
  ASSERT_EQ(chmod((bin + "/dot").c_str(), 0755), 0);
  const std::string dir = make_temp_dir("dot-timeout");
  write_text(dir + "/s.svg", "previous");
  const char* path = std::getenv("PATH");
  Limits limits;
  limits.environment = {"PATH=" + bin + ":" + (path != nullptr ? path : "/usr/bin:/bin")};
  std::vector<std::string> args = kSchedule;
  args.insert(args.end(), {"--output", dir + "/s.svg", "--dot-timeout", "1"});
  const auto start = std::chrono::steady_clock::now();
  const ProcessResult r = run_fsdpsim(args, limits);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  expect_one_line_error(r, 1, "dot did not render");
  EXPECT_NE(r.err.find("within 1 s (--dot-timeout)"), std::string::npos) << r.err;
  // The bound held, and the sleeping child was killed too: had it lived on, it would keep the
  // stderr pipe open (the harness reads it to the end) for its 60 s.
  EXPECT_LT(seconds, 15.0);
  EXPECT_EQ(list_dir(dir), (std::vector<std::string>{"s.dot", "s.svg"}));  // no temporary file
  std::ifstream previous(dir + "/s.svg");
  std::string text((std::istreambuf_iterator<char>(previous)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "previous");
}

TEST(SecurityRegression, DotTimeoutMustBePositiveAndFinite) {
  for (const char* bad : {"0", "-1", "nan", "inf", "1e308"}) {
    SCOPED_TRACE(bad);
    std::vector<std::string> args = kSchedule;
    args.insert(args.end(), {"--dot-timeout", bad});
    const ProcessResult r = run_fsdpsim(args);
    expect_one_line_error(r, 2, "--dot-timeout is ");
    EXPECT_EQ(r.out, "");
  }
}

// Tensor names from `layout --input` were printed raw: an escape sequence cleared the screen.
TEST(SecurityRegression, LayoutTensorNameWithAnEscapeIsRefused) {
  const std::string dir = make_temp_dir("escape");
  const std::string input = dir + "/tensors.json";
  write_text(input, R"({"tensors": [{"name": "w\u001b[2J\u001b[H", "shape": [4, 4]}]})");
  const ProcessResult r = run_fsdpsim({"layout", "--input", input, "--dp", "2"});
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(is_one_line(r.err)) << r.err;
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  EXPECT_NE(r.err.find("tensors[0]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\\x1b[2J"), std::string::npos) << r.err;
}

// The same class: op names of a trace file, which `compare` prints.
TEST(SecurityRegression, TraceOpNameWithAnEscapeIsRefused) {
  const std::string dir = make_temp_dir("trace-escape");
  const std::string trace = dir + "/t.json";
  write_text(trace,
             R"({"traceEvents": [{"ph": "X", "name": "forward \u001b]0;owned\u0007", "pid": 0,)"
             R"( "tid": 0, "ts": 0, "dur": 1}]})");
  const auto read = cli::read_trace(trace);
  ASSERT_FALSE(read.has_value());
  EXPECT_EQ(read.error().message().find('\x1b'), std::string::npos);
  EXPECT_NE(read.error().message().find("traceEvents[0]"), std::string::npos)
      << read.error().message();
  const ProcessResult r = run_fsdpsim({"compare", trace, trace});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(is_one_line(r.err)) << r.err;
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
}

// The same class: a UTF-8 C1 control (U+009B is CSI to many terminals) passed the name check
// of model files, which only knew C0 bytes and DEL.
TEST(SecurityRegression, NamesWithAUtf8C1ControlAreRefused) {
  EXPECT_FALSE(check_printable_name("unit",
                                    "layer\xc2\x9b"
                                    "2J")
                   .has_value());
  EXPECT_TRUE(check_printable_name("unit", "caf\xc3\xa9").has_value());  // é is text
  EXPECT_EQ(printable_text("a\xc2\x9b"), "a\\xc2\\x9b");
  const std::string dir = make_temp_dir("c1");
  const std::string model = dir + "/m.json";
  write_text(model, R"({"format": "fsdpsim-model", "version": 1, "name": "tiny", "units": [)"
                    R"({"name": "emb\u009b2J", "params": [{"name": "w", "shape": [4, 4],)"
                    R"( "dtype": "bf16"}]}]})");
  const ProcessResult r = run_fsdpsim({"model", "--config", model});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(is_one_line(r.err)) << r.err;
  EXPECT_EQ(r.err.find("\xc2\x9b"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unit name"), std::string::npos) << r.err;
}

// The same class, from the command line: a value or path with an escape sequence was echoed raw
// in the error line (and a newline in it split the line).
TEST(SecurityRegression, ErrorLinesNeverCarryControlCharacters) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"\x1b[2Jsim"},
        {"simulate", "--format", "\x1b[2J"},
        {"model", "--config", "/nonexistent/\x1b]0;owned\x07.json"},
        {"simulate", "--mesh", "dp=2\nfsdpsim: all good"}}) {
    const ProcessResult r = run_fsdpsim(args);
    EXPECT_GE(r.exit_code, 1) << r.err;
    EXPECT_LE(r.exit_code, 2) << r.err;
    EXPECT_TRUE(is_one_line(r.err)) << r.err;
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\x07'), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace fsdp::regressions
