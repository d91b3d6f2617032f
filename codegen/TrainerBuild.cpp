//===- TrainerBuild.cpp - Building a trainer from generated C++ -----------===//

#include "codegen/TrainerBuild.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace mnemo;

namespace {

/// Where the runtime's headers and libraries are: fixed when mnemoc was
/// built, overridable for an installed or relocated tree.
std::string setting(const char *variable, const char *builtIn) {
  if (auto value = llvm::sys::Process::GetEnv(variable))
    return *value;
  return builtIn;
}

} // namespace

TrainerBuildResult mnemo::buildTrainer(llvm::StringRef directory,
                                       llvm::StringRef source) {
  using Status = TrainerBuildResult::Status;
  if (std::error_code ec = llvm::sys::fs::create_directories(directory))
    return {Status::UserError,
            "cannot create '" + directory.str() + "': " + ec.message()};
  llvm::SmallString<256> modelFile(directory), trainer(directory),
      logFile(directory);
  llvm::sys::path::append(modelFile, "model.cpp");
  llvm::sys::path::append(trainer, "train");
  llvm::sys::path::append(logFile, "build.log");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(modelFile, ec);
    if (ec)
      return {Status::UserError,
              "cannot write '" + modelFile.str().str() + "': " + ec.message()};
    os << source;
  }

  std::string compiler = setting("CXX", "c++");
  auto program = llvm::sys::findProgramByName(compiler);
  if (!program)
    return {Status::UserError, "cannot find the C++ compiler '" + compiler +
                                   "' (set CXX, or install g++)"};
  std::string include = setting("MNEMO_RUNTIME_INCLUDE", MNEMO_RUNTIME_INCLUDE);
  std::vector<std::string> args = {*program,
                                   "-std=c++17",
                                   "-O3",
                                   "-march=native",
                                   "-fno-math-errno",
                                   "-I" + include,
                                   modelFile.str().str(),
                                   "-o",
                                   trainer.str().str()};
  llvm::SmallVector<llvm::StringRef> libraries;
  std::string link = setting("MNEMO_RUNTIME_LINK", MNEMO_RUNTIME_LINK);
  llvm::StringRef(link).split(libraries, '|', -1, false);
  for (llvm::StringRef lib : libraries)
    args.push_back(lib.str());
  args.push_back("-pthread");
  llvm::SmallVector<llvm::StringRef> argRefs(args.begin(), args.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, logFile.str(),
                                                logFile.str()};
  std::string error;
  int status = llvm::sys::ExecuteAndWait(args[0], argRefs, std::nullopt,
                                         redirects, 0, 0, &error);
  if (status != 0) {
    std::string log;
    if (auto buffer = llvm::MemoryBuffer::getFile(logFile))
      log = (*buffer)->getBuffer().str();
    if (log.size() > 4000)
      log = log.substr(0, 4000) + "\n[... see " + logFile.str().str() + "]";
    return {
        Status::CompilerBug,
        "the generated C++ in '" + modelFile.str().str() +
            "' did not compile (" +
            (error.empty() ? "exit status " + std::to_string(status) : error) +
            "); this is a bug in mnemoc, please report it with the "
            "model file. The compiler said:\n" +
            log};
  }
  return {Status::Built, trainer.str().str()};
}
