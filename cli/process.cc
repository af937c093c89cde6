// SPDX-License-Identifier: Apache-2.0
#include "cli/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/base/strings.h"

extern char** environ;

namespace fsdp::cli {

Expected<ProgramExit> run_program(const std::vector<std::string>& argv) {
  if (argv.empty()) {
    return Error(ErrorCode::kInternal, "run_program: an empty argument vector");
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
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, cargv[0], &actions, nullptr, cargv.data(), environ);
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
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return Error(ErrorCode::kUnavailable,
                   str_cat("cannot wait for '", argv[0], "': ", std::strerror(errno)));
    }
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace fsdp::cli
