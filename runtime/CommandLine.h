//===- CommandLine.h - The runtime programs' options ------------*- C++ -*-===//
//
// What the trainer and the inference program (runtime/Trainer.cpp,
// runtime/Infer.cpp) read from their command lines the same way: one option
// at a time, each value checked where it is read, and every mistake a
// "PROGRAM: error: ..." line and exit status 1, never a guess. The options
// of both programs that choose where the steps run (--device,
// --matmul-precision, --threads) are read here once.
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_COMMANDLINE_H
#define MNEMO_RUNTIME_COMMANDLINE_H

#include "runtime/Executor.h"

#include <cstdint>
#include <string>

namespace mnemo::runtime {

/// Prints "PROGRAM: error: MESSAGE" and exits with status 1.
[[noreturn]] void exitWithError(const char *program,
                                const std::string &message);

class CommandLine {
public:
  /// `usage` is printed for --help and -h.
  CommandLine(const char *program, const char *usage, int argc, char **argv);

  /// Moves to the next option; false after the last. --help prints the
  /// usage and exits.
  bool next();
  /// The option being read ("--data").
  const std::string &option() const { return current; }
  bool is(const char *name) const { return current == name; }

  /// The option's value, the next argument.
  std::string value();
  /// A value that names a file or directory: never empty (--save "" would
  /// otherwise mean "no checkpoint").
  std::string path();
  /// A whole number in [min, max].
  int64_t number(int64_t min, int64_t max);
  /// Reads the option into `options` when it is --device,
  /// --matmul-precision or --threads; false for any other.
  bool deviceOption(DeviceOptions &options);
  /// An option neither program knows.
  [[noreturn]] void unknown() const;

  [[noreturn]] void fail(const std::string &message) const {
    exitWithError(program, message);
  }

private:
  const char *program;
  const char *usage;
  int argc;
  char **argv;
  int index = 0;
  std::string current;
};

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_COMMANDLINE_H
