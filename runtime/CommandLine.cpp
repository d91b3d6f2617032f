//===- CommandLine.cpp - The runtime programs' options --------------------===//

#include "runtime/CommandLine.h"

#include "runtime/cpu/Parallel.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

using namespace mnemo::runtime;

void mnemo::runtime::exitWithError(const char *program,
                                   const std::string &message) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: error: %s\n", program, message.c_str());
  std::exit(1);
}

CommandLine::CommandLine(const char *program, const char *usage, int argc,
                         char **argv)
    : program(program), usage(usage), argc(argc), argv(argv) {}

bool CommandLine::next() {
  if (++index >= argc)
    return false;
  current = argv[index];
  if (current == "--help" || current == "-h") {
    std::fputs(usage, stdout);
    std::exit(0);
  }
  return true;
}

std::string CommandLine::value() {
  if (index + 1 >= argc)
    fail(current + " needs a value");
  return argv[++index];
}

std::string CommandLine::path() {
  std::string text = value();
  if (text.empty())
    fail(current + " needs a path, not ''");
  return text;
}

int64_t CommandLine::number(int64_t min, int64_t max) {
  std::string text = value();
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno || *end || v < min || v > max)
    fail(current + " needs a whole number " +
         (max < INT64_MAX
              ? "from " + std::to_string(min) + " to " + std::to_string(max)
              : "of at least " + std::to_string(min)) +
         ", not '" + text + "'");
  return v;
}

bool CommandLine::deviceOption(DeviceOptions &options) {
  if (is("--threads")) {
    options.threads = int(number(1, cpu::kMaxThreads));
  } else if (is("--device")) {
    options.device = value();
    if (options.device != "cuda" && options.device != "cpu")
      fail("--device is cuda or cpu, not '" + options.device + "'");
  } else if (is("--matmul-precision")) {
    std::string precision = value();
    if (!parseMatmulPrecision(precision, options.cuda))
      fail("--matmul-precision is high or highest, not '" + precision + "'");
  } else {
    return false;
  }
  return true;
}

void CommandLine::unknown() const {
  fail("unknown option '" + current + "' (see --help)");
}
