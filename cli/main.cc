// SPDX-License-Identifier: Apache-2.0
// fsdpsim: one executable, many subcommands (cli/commands.cc). Exit codes: 0 success, 1 invalid
// input, 2 usage error; errors are one line on stderr. No exception escapes main.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <streambuf>
#include <string>
#include <system_error>
#include <vector>

#include "cli/command.h"
#include "cli/printable.h"
#include "core/base/printable.h"

namespace {

// OpenBLAS starts its thread pool (one thread per core) in its library constructor, before main,
// although the kernels pin it to one thread at first use (docs/design/backends.md, "The unsharded
// reference and determinism"). Under an address-space limit (ulimit -v 1 GB, most of it taken by
// the CUDA libraries' mappings) a pool thread spins in blas_memory_alloc, and every command, even
// --version, then hangs at exit in the pool's shutdown, which joins it (issue 16). Only
// OPENBLAS_NUM_THREADS=1 in the environment before the constructor runs keeps the pool from
// starting, and a setenv from .preinit_array does not survive libc's own start-up, which resets
// environ. So the first thing the process does (.preinit_array runs before any library's
// constructor) is to re-execute itself once with the variable set; when exec fails it goes on as
// before. The kernels use one thread anyway, so no user setting is lost.
constexpr char kBlasThreads[] = "OPENBLAS_NUM_THREADS=";

void pin_blas_threads_before_libraries_start(int /*argc*/, char** argv, char** envp) {
  const std::size_t prefix = sizeof(kBlasThreads) - 1;
  std::size_t count = 0;
  for (char** e = envp; *e != nullptr; ++e, ++count) {
    if (std::strncmp(*e, kBlasThreads, prefix) == 0 && std::strcmp(*e + prefix, "1") == 0) {
      return;  // pinned already (this is the re-executed process, or the user set it)
    }
  }
  auto** env = static_cast<char**>(std::malloc((count + 2) * sizeof(char*)));
  if (env == nullptr) {
    return;
  }
  std::size_t n = 0;
  for (char** e = envp; *e != nullptr; ++e) {
    if (std::strncmp(*e, kBlasThreads, prefix) != 0) {
      env[n++] = *e;
    }
  }
  static char pinned[] = "OPENBLAS_NUM_THREADS=1";
  env[n++] = pinned;
  env[n] = nullptr;
  execve("/proc/self/exe", argv, env);
  std::free(env);  // no /proc: run unpinned
}

__attribute__((section(".preinit_array"), used)) void (*pin_blas_threads_entry)(
    int, char**, char**) = &pin_blas_threads_before_libraries_start;

void print_help(std::ostream& os) {
  os << "usage: fsdpsim <command> [options]\n"
        "       fsdpsim <command> --help\n"
        "       fsdpsim --version\n\n"
        "fsdpsim plans, simulates and runs fully-sharded data-parallel training in the style of\n"
        "Megatron-FSDP v2 (DBuffer layouts, fully_shard).\n\n"
        "commands:\n";
  for (const auto& c : fsdp::cli::all_commands()) {
    os << "  " << c.name << std::string(12 - std::min<std::size_t>(c.name.size(), 11), ' ')
       << c.summary << "\n";
  }
  os << "\nexit codes: 0 success, 1 invalid input, 2 usage error\n";
}

int run(int argc, char** argv) {
  fsdp::cli::Io io{std::cout, std::cerr, isatty(STDOUT_FILENO) != 0,
                   isatty(STDERR_FILENO) != 0};
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_help(std::cerr);
    return fsdp::cli::kExitUsage;
  }
  const std::string& first = args.front();
  if (first == "--help" || first == "-h" || first == "help") {
    // `help [COMMAND]`: one word at most, and it must name a command (docs/cli.md).
    if (args.size() > 2 || (args.size() == 2 && first != "help")) {
      std::cerr << "fsdpsim: usage error: unexpected argument '"
                << fsdp::cli::printable(args.back()) << "' after '" << first
                << "'; expected: fsdpsim help [COMMAND] (try 'fsdpsim --help')\n";
      return fsdp::cli::kExitUsage;
    }
    if (args.size() == 2) {
      const auto* c = fsdp::cli::find_command(args[1]);
      if (c == nullptr) {
        std::cerr << "fsdpsim: usage error: help: unknown command '"
                  << fsdp::cli::printable(args[1])
                  << "'; expected one of:";
        for (const auto& known : fsdp::cli::all_commands()) {
          std::cerr << " " << known.name;
        }
        std::cerr << " (try 'fsdpsim --help')\n";
        return fsdp::cli::kExitUsage;
      }
      std::vector<std::string> help_args = {"--help"};
      return c->run(help_args, io);
    }
    print_help(std::cout);
    return fsdp::cli::kExitOk;
  }
  if ((first == "--version" || first == "-V") && args.size() > 1) {
    std::cerr << "fsdpsim: usage error: unexpected argument '"
              << fsdp::cli::printable(args[1]) << "' after '" << first
              << "' (try 'fsdpsim --help')\n";
    return fsdp::cli::kExitUsage;
  }
  if (first == "--version" || first == "-V") {
    std::cout << "fsdpsim " << FSDP_VERSION << "\n";
    return fsdp::cli::kExitOk;
  }
  const auto* command = fsdp::cli::find_command(first);
  if (command == nullptr) {
    std::cerr << "fsdpsim: usage error: unknown command '"
              << fsdp::printable_text(first, first.size()) << "'; expected one of:";
    for (const auto& c : fsdp::cli::all_commands()) {
      std::cerr << " " << c.name;
    }
    std::cerr << " (try 'fsdpsim --help')\n";
    return fsdp::cli::kExitUsage;
  }
  args.erase(args.begin());
  return command->run(args, io);
}

// Standard output through one buffer that writes fd 1 itself and keeps the first write error
// (errno), because C stdio forgets it once a later flush has nothing left to write.
class StdoutBuffer : public std::streambuf {
 public:
  StdoutBuffer() { setp(buffer_, buffer_ + sizeof buffer_); }
  int error() const { return error_; }

 protected:
  int sync() override { return drain() ? 0 : -1; }
  int_type overflow(int_type ch) override {
    if (!drain()) {
      return traits_type::eof();
    }
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }

 private:
  bool drain() {
    const char* p = pbase();
    auto left = static_cast<std::size_t>(pptr() - pbase());
    while (left > 0 && error_ == 0) {
      const ssize_t n = ::write(STDOUT_FILENO, p, left);
      if (n < 0) {
        if (errno != EINTR) {
          error_ = errno;
        }
        continue;
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    setp(buffer_, buffer_ + sizeof buffer_);
    return error_ == 0;
  }

  char buffer_[1 << 16];
  int error_ = 0;
};

// Every command's output ends here: a stdout that could not be written (a full disk, /dev/full)
// is an error, not a silent success (issue 16; docs/cli.md, "Input and output files").
int finish_stdout(const StdoutBuffer& buffer, int code) {
  std::cout.flush();
  if (buffer.error() == 0 && std::cout.good()) {
    return code;
  }
  std::cerr << "fsdpsim: error: cannot write standard output: "
            << (buffer.error() != 0 ? std::strerror(buffer.error()) : "write failed") << "\n";
  return code == fsdp::cli::kExitOk ? fsdp::cli::kExitInvalidInput : code;
}

}  // namespace

int main(int argc, char** argv) {
  // Never destroyed: std::cout may still flush into it while the program exits.
  static auto* const stdout_buffer = new StdoutBuffer;
  std::cout.rdbuf(stdout_buffer);
  if (isatty(STDOUT_FILENO) != 0) {
    std::cout.setf(std::ios::unitbuf);  // a terminal sees each line as it is printed
  }
  int code = fsdp::cli::kExitInvalidInput;
  // No library exception reaches the user bare (issue 16): memory and thread exhaustion get a
  // sentence of their own.
  try {
    code = run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << "fsdpsim: error: out of memory (the run needs more than this process may "
                 "allocate; try a smaller mesh, model or microbatch count)\n";
  } catch (const std::system_error& e) {
    const std::string what = e.what();
    std::cerr << "fsdpsim: error: the system refused a resource: "
              << fsdp::printable_text(what, what.size()) << " (" << e.code().message() << ")\n";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    std::cerr << "fsdpsim: error: " << fsdp::printable_text(what, what.size()) << "\n";
  } catch (...) {
    std::cerr << "fsdpsim: error: unknown exception\n";
  }
  return finish_stdout(*stdout_buffer, code);
}
