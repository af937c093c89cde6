// SPDX-License-Identifier: Apache-2.0
#include "tests/regressions/run_fsdpsim.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <stdexcept>

namespace fsdp::regressions {
namespace {

void drain(int fd, std::string& into) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    return;
  }
}

}  // namespace

ProcessResult run_program(const std::vector<std::string>& argv, const Limits& limits) {
  ProcessResult result;
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error("run_program: pipe failed");
  }
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("run_program: fork failed");
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    if (!limits.cwd.empty() && chdir(limits.cwd.c_str()) != 0) _exit(127);
    const int in = open(limits.stdin_path.c_str(), O_RDONLY);
    if (in >= 0) dup2(in, 0);
    if (!limits.stdout_path.empty()) {
      const int o = open(limits.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (o < 0) _exit(127);
      dup2(o, 1);
    } else {
      dup2(out_pipe[1], 1);
    }
    dup2(err_pipe[1], 2);
    if (limits.address_space_bytes > 0) {
      rlimit rl{};
      rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(limits.address_space_bytes);
      setrlimit(RLIMIT_AS, &rl);
    }
    setpgid(0, 0);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<std::int64_t>(limits.timeout_s * 1000));
  bool out_open = true;
  bool err_open = true;
  int status = 0;
  bool reaped = false;
  while (!reaped) {
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    poll(fds, 2, 20);
    if (out_open) drain(out_pipe[0], result.out);
    if (err_open) drain(err_pipe[0], result.err);
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      reaped = true;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      reaped = true;
    }
  }
  // The pipes may still hold output written just before exit (or by grandchildren).
  fcntl(out_pipe[0], F_SETFL, 0);
  fcntl(err_pipe[0], F_SETFL, 0);
  if (!result.timed_out) {
    drain(out_pipe[0], result.out);
    drain(err_pipe[0], result.err);
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

ProcessResult run_fsdpsim(const std::vector<std::string>& args, const Limits& limits) {
  std::vector<std::string> argv{FSDPSIM_EXE};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(argv, limits);
}

std::string make_temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  const auto dir = std::filesystem::temp_directory_path() /
                   ("fsdp-regr-" + tag + "-" + std::to_string(getpid()) + "-" +
                    std::to_string(counter.fetch_add(1)));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

bool is_one_line(const std::string& text) {
  if (text.empty()) return false;
  const auto first_nl = text.find('\n');
  if (first_nl == std::string::npos) return true;
  return first_nl == text.size() - 1 && first_nl > 0;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace fsdp::regressions
