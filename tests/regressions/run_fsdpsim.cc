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
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

extern char** environ;

namespace fsdp::regressions {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// The child's environment. An ASan build (the dev and ci presets, README.md, "Building by hand")
// cannot start under RLIMIT_AS: its shadow memory alone reserves terabytes of address space. There
// the limit becomes ASan's own: one allocation over it (max_allocation_size_mb; malloc returns
// null, operator new ends the child with an "out of memory" report) or a resident set over it
// (hard_rss_limit_mb) ends the child with exit 1 and a report of more than one line, so a test
// that expects a one-line refusal fails as it would under RLIMIT_AS.
std::vector<std::string> child_environment(const Limits& limits) {
  std::vector<std::string> env;
  std::string asan_options;
  const auto overridden = [&](const char* entry) {
    for (const std::string& o : limits.environment) {
      const std::size_t eq = o.find('=');
      if (eq != std::string::npos && std::strncmp(entry, o.c_str(), eq + 1) == 0) {
        return true;
      }
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "ASAN_OPTIONS=", 13) == 0) {
      asan_options = *e + 13;
    } else if (!overridden(*e)) {
      env.emplace_back(*e);
    }
  }
  env.insert(env.end(), limits.environment.begin(), limits.environment.end());
  if (kAddressSanitizer && limits.address_space_bytes > 0) {
    const std::string mb =
        std::to_string(std::max<std::int64_t>(1, limits.address_space_bytes >> 20));
    asan_options += std::string(asan_options.empty() ? "" : ":") + "hard_rss_limit_mb=" + mb +
                    ":max_allocation_size_mb=" + mb + ":allocator_may_return_null=1";
  }
  if (!asan_options.empty()) {
    env.push_back("ASAN_OPTIONS=" + asan_options);
  }
  return env;
}

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
  const std::vector<std::string> env = child_environment(limits);
  std::vector<char*> cenv;
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
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
    if (limits.address_space_bytes > 0 && !kAddressSanitizer) {
      rlimit rl{};
      rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(limits.address_space_bytes);
      setrlimit(RLIMIT_AS, &rl);
    }
    setpgid(0, 0);
    execve(cargv[0], cargv.data(), cenv.data());
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
