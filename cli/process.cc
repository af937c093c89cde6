// SPDX-License-Identifier: Apache-2.0
// The wait polls waitpid (WNOHANG) with a sleep that grows from 1 ms to 20 ms: no SIGCHLD
// handler (the process has threads and other children may exist), and a render that takes
// milliseconds is not slowed by more than about one poll.
#include "cli/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "core/base/strings.h"

extern char** environ;

namespace fsdp::cli {
namespace {

// waitpid without EINTR; false (errno set) on another failure.
bool wait_for(pid_t pid, int* status, int flags, pid_t* got) {
  for (;;) {
    *got = waitpid(pid, status, flags);
    if (*got >= 0) {
      return true;
    }
    if (errno != EINTR) {
      return false;
    }
  }
}

}  // namespace

Expected<ProgramExit> run_program(const std::vector<std::string>& argv, double timeout_s) {
  if (argv.empty()) {
    return Error(ErrorCode::kInternal, "run_program: an empty argument vector");
  }
  if (!(std::isfinite(timeout_s) && timeout_s > 0.0)) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("the time limit for '", argv[0], "' is ", timeout_s,
                         "; expected a positive number of seconds"));
  }
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (const std::string& a : argv) {
    cargv.push_back(const_cast<char*>(a.c_str()));
  }
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  // A group of its own, so a timeout kills whatever the program started too (a wrapper script's
  // children).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, cargv[0], &actions, &attr, cargv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  ProgramExit result;
  if (rc == ENOENT) {
    result.not_found = true;
    return result;
  }
  if (rc != 0) {
    return Error(ErrorCode::kUnavailable,
                 str_cat("cannot run '", argv[0], "': ", std::strerror(rc)));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  auto nap = std::chrono::milliseconds(1);
  int status = 0;
  for (;;) {
    pid_t got = 0;
    if (!wait_for(pid, &status, WNOHANG, &got)) {
      return Error(ErrorCode::kUnavailable,
                   str_cat("cannot wait for '", argv[0], "': ", std::strerror(errno)));
    }
    if (got == pid) {
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);  // in case it left the group
      wait_for(pid, &status, 0, &got);
      result.timed_out = true;
      result.signal = SIGKILL;
      return result;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace fsdp::cli
