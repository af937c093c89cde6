// SPDX-License-Identifier: Apache-2.0
// Issue 16, "Files in and out" (and the start-up defect that kept every command from ending under
// the suite's 1 GB limit): every case runs the real fsdpsim binary (run_fsdpsim.h).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/file_io.h"
#include "tests/regressions/run_fsdpsim.h"

namespace fsdp::regressions {
namespace {

// OpenBLAS's thread pool, started before main, kept every command from ending under a 1 GB
// address-space limit; the suite's default limits are that limit.
TEST(StartupRegression, EveryCommandEndsUnderTheMemoryLimit) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--version"}, {"--help"}, {"hardware"}, {"model", "--list"}}) {
    const auto start = std::chrono::steady_clock::now();
    const ProcessResult r = run_fsdpsim(args);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_FALSE(r.timed_out) << args.front();
    EXPECT_EQ(r.signal, 0) << args.front();
    EXPECT_EQ(r.exit_code, 0) << args.front() << ": " << r.err;
    EXPECT_FALSE(r.out.empty()) << args.front();
    EXPECT_LT(seconds, 10.0) << args.front();
  }
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The bad-input shape of issue 16: a one-line error with `code`, in time, not killed.
void expect_one_line_error(const ProcessResult& r, int code, const std::string& names,
                           const std::string& context) {
  EXPECT_FALSE(r.timed_out) << context;
  EXPECT_EQ(r.signal, 0) << context;
  EXPECT_EQ(r.exit_code, code) << context << ": " << r.err;
  EXPECT_TRUE(is_one_line(r.err)) << context << ": " << r.err;
  EXPECT_TRUE(has(r.err, names)) << context << ": " << r.err;
}

// Every file argument of every subcommand, with PATH in place of the file.
std::vector<std::vector<std::string>> input_file_commands(const std::string& path) {
  return {{"layout", "--input", path, "--dp", "2"},
          {"layout", "--model", path, "--dp", "2"},
          {"model", "--config", path},
          {"hardware", "--file", path},
          {"simulate", "--model", path},
          {"simulate", "--hardware", path},
          {"schedule", "--model", path},
          {"sweep", "--model", path, "--nodes", "1"},
          {"sweep", "--hardware", path, "--nodes", "1"},
          {"compare", path, path},
          {"calibrate", "--predict", path}};
}

// A FIFO as an input file blocked forever (the reader waited for a writer).
TEST(FilesRegression, FifoInputIsRefusedNotWaitedOn) {
  const std::string dir = make_temp_dir("fifo");
  const std::string fifo = dir + "/pipe.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Limits limits;
  limits.timeout_s = 10;
  for (const auto& args : input_file_commands(fifo)) {
    expect_one_line_error(run_fsdpsim(args, limits), 1, "is a FIFO", args[0] + " " + args[1]);
  }
}

// /dev/zero and /dev/urandom were read until memory ran out.
TEST(FilesRegression, DeviceInputIsRefusedNotReadToExhaustion) {
  Limits limits;
  limits.timeout_s = 10;
  for (const char* device : {"/dev/zero", "/dev/urandom"}) {
    for (const auto& args : input_file_commands(device)) {
      expect_one_line_error(run_fsdpsim(args, limits), 1, "is a character device",
                            args[0] + " " + args[1] + " " + std::string(device));
    }
  }
}

// The same class: a directory, and a regular file over the size limit (refused before reading).
TEST(FilesRegression, DirectoryAndOversizedInputsAreRefused) {
  const std::string dir = make_temp_dir("big");
  expect_one_line_error(run_fsdpsim({"model", "--config", dir}), 1, "is a directory", "dir");
  const std::string big = dir + "/big.json";
  { std::ofstream out(big); }
  std::filesystem::resize_file(big, static_cast<std::uintmax_t>(kMaxInputFileBytes) + 1);
  const ProcessResult r = run_fsdpsim({"layout", "--input", big, "--dp", "2"});
  expect_one_line_error(r, 1, std::to_string(kMaxInputFileBytes), "big");
  EXPECT_TRUE(has(r.err, std::to_string(kMaxInputFileBytes + 1))) << r.err;
}

// Every command exited 0 when its standard output could not be written.
TEST(FilesRegression, UnwritableStdoutIsAnError) {
  Limits full;
  full.stdout_path = "/dev/full";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--version"},
        {"--help"},
        {"hardware"},
        {"model", "--list"},
        {"schedule", "--model", "llama-3-8b", "--mesh", "dp=2"},
        {"simulate", "--mesh", "dp=2"},
        {"layout", "--shapes", "4x4", "--dp", "2"}}) {
    expect_one_line_error(run_fsdpsim(args, full), 1, "No space left on device", args[0]);
  }
  // A command that already failed keeps its exit code.
  const ProcessResult usage = run_fsdpsim({"simulate", "--no-such-option"}, full);
  EXPECT_EQ(usage.exit_code, 2) << usage.err;
}

// A failed write (here: over RLIMIT_FSIZE, as on a full disk) truncated the output file and
// destroyed the previous one.
TEST(FilesRegression, FailedWriteKeepsThePreviousFile) {
  const std::string dir = make_temp_dir("keep");
  const std::string trace = dir + "/trace.json";
  const std::string plot = dir + "/plot.svg";
  write_text(trace, "previous trace\n");
  write_text(plot, "previous plot\n");
  Limits limits;
  for (const auto& [option, path] : {std::pair<std::string, std::string>{"--trace", trace},
                                     {"--plot", plot},
                                     {"--gantt", plot}}) {
    // The shell is the test's, not fsdpsim's: it sets a 64 KiB file-size limit, and ignores
    // SIGXFSZ so that the write fails with EFBIG instead of killing the process.
    const ProcessResult r =
        run_program({"/bin/sh", "-c", "trap '' XFSZ; ulimit -f 64; exec \"$0\" \"$@\"", FSDPSIM_EXE,
                     "simulate", "--mesh", "dp=2", option, path},
                    limits);
    expect_one_line_error(r, 1, "File too large", option);
    EXPECT_TRUE(has(r.err, option)) << r.err;
  }
  EXPECT_EQ(read_text(trace), "previous trace\n");
  EXPECT_EQ(read_text(plot), "previous plot\n");
  EXPECT_EQ(list_dir(dir), (std::vector<std::string>{"plot.svg", "trace.json"}));
}

// The same mechanism in process: a failed producer leaves the old file and no temporary file.
TEST(FilesRegression, FailedProducerLeavesNoTemporaryFile) {
  const std::string dir = make_temp_dir("producer");
  const std::string out = dir + "/out.txt";
  write_text(out, "old\n");
  const Status failed = write_output_file_with(out, [](int fd, const std::string&) -> Status {
    EXPECT_EQ(write(fd, "partial", 7), 7);
    return Error(ErrorCode::kUnavailable, "the producer failed");
  });
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().message(), "the producer failed");
  EXPECT_EQ(read_text(out), "old\n");
  EXPECT_EQ(list_dir(dir), std::vector<std::string>{"out.txt"});
  ASSERT_TRUE(write_output_file(out, "new\n").has_value());
  EXPECT_EQ(read_text(out), "new\n");
  EXPECT_EQ(list_dir(dir), std::vector<std::string>{"out.txt"});
}

// The same class: `dot` wrote the SVG itself, so a failed render left a broken file in place
// of the previous one. A stand-in `dot` on PATH writes half a file and fails.
TEST(FilesRegression, FailedRenderKeepsThePreviousSvg) {
  const std::string bin = make_temp_dir("fake-dot");
  write_text(bin + "/dot", "#!/bin/sh\necho '<svg partial' > \"$4\"\nexit 3\n");
  ASSERT_EQ(chmod((bin + "/dot").c_str(), 0755), 0);
  // In the child's environment only: a PATH set in this process would hand the fake dot to
  // every later case (the security cases that render with the real one).
  const char* path = std::getenv("PATH");
  Limits limits;
  limits.environment = {"PATH=" + bin + ":" + (path == nullptr ? "" : path)};
  const std::string dir = make_temp_dir("render");
  write_text(dir + "/out.svg", "previous svg\n");
  const ProcessResult r = run_fsdpsim({"schedule", "--model", "llama-3-8b", "--mesh", "dp=2",
                                       "--format", "dot", "--output", dir + "/out.svg"},
                                      limits);
  expect_one_line_error(r, 1, "dot failed", "fake dot");
  EXPECT_TRUE(has(r.err, "exit status 3")) << r.err;
  EXPECT_EQ(read_text(dir + "/out.svg"), "previous svg\n");
  EXPECT_EQ(list_dir(dir), (std::vector<std::string>{"out.dot", "out.svg"}));
}

// Output errors said "cannot write 'PATH'" without the reason.
TEST(FilesRegression, OutputErrorsNameTheReason) {
  const std::string missing = make_temp_dir("reason") + "/no-such-dir/out";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"simulate", "--mesh", "dp=2", "--trace", missing},
        {"simulate", "--mesh", "dp=2", "--gantt", missing},
        {"schedule", "--model", "llama-3-8b", "--mesh", "dp=2", "--output", missing}}) {
    expect_one_line_error(run_fsdpsim(args), 1, "No such file or directory", args[3]);
  }
  const ProcessResult dir = run_fsdpsim({"simulate", "--mesh", "dp=2", "--trace", "/tmp"});
  expect_one_line_error(dir, 1, "is a directory", "directory");
}

// `calibrate --fit T --out T` overwrote its own input.
TEST(FilesRegression, OutputThatIsAnInputIsRefused) {
  const std::string dir = make_temp_dir("same");
  const std::string trace = dir + "/run.json";
  write_text(trace, "{\"traceEvents\": []}\n");
  const ProcessResult r =
      run_fsdpsim({"calibrate", "--fit", trace, "--base", "h100", "--out", trace});
  expect_one_line_error(r, 2, "same file", "calibrate");
  EXPECT_EQ(read_text(trace), "{\"traceEvents\": []}\n");
  // Other members: simulate's outputs over its model file, and two outputs on one path.
  const std::string model = dir + "/m.json";
  write_text(model, "{}\n");
  expect_one_line_error(run_fsdpsim({"simulate", "--model", model, "--trace", model}), 2,
                        "same file", "simulate model");
  EXPECT_EQ(read_text(model), "{}\n");
  expect_one_line_error(run_fsdpsim({"simulate", "--mesh", "dp=2", "--plot", dir + "/a.svg",
                                     "--gantt", dir + "/./a.svg"}),
                        2, "same file", "simulate plot/gantt");
  EXPECT_EQ(list_dir(dir), (std::vector<std::string>{"m.json", "run.json"}));
}

// `--hardware PATH` treated an existing file without a dot as a preset name.
TEST(FilesRegression, HardwareFileWithoutADotIsRead) {
  const std::string dir = make_temp_dir("hw");
  const ProcessResult shown = run_fsdpsim({"hardware", "--show", "h100", "--format", "json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  std::string json = shown.out;
  const std::string from = "\"name\": \"";
  const std::size_t at = json.find(from);
  ASSERT_NE(at, std::string::npos) << json;
  json.replace(at + from.size(), json.find('"', at + from.size()) - at - from.size(), "my-cluster");
  write_text(dir + "/cluster", json);
  Limits limits;
  limits.cwd = dir;
  const ProcessResult r = run_fsdpsim({"hardware", "--file", "cluster"}, limits);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ProcessResult sim =
      run_fsdpsim({"simulate", "--mesh", "dp=2", "--hardware", "cluster"}, limits);
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_TRUE(has(sim.out, "my-cluster")) << sim.out;
  // Not a file and not a preset: still the preset error.
  const ProcessResult unknown = run_fsdpsim({"simulate", "--hardware", "no-such-thing"}, limits);
  expect_one_line_error(unknown, 1, "no-such-thing", "unknown");
}

}  // namespace
}  // namespace fsdp::regressions
