//===- TrainerBuild.cpp - Building a trainer from generated C++ -----------===//

#include "codegen/TrainerBuild.h"
#include "runtime/Failure.h"

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

bool writeFile(const llvm::Twine &path, llvm::StringRef contents,
               std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path.str(), ec);
  if (ec)
    return failWith(error,
                    "cannot write '" + path.str() + "': " + ec.message());
  os << contents;
  return true;
}

} // namespace

bool mnemo::runtimeHasCuda() {
  // The environment's link line replaces the built-in one; it names the
  // CUDA executor's library when it has one.
  if (auto link = llvm::sys::Process::GetEnv("MNEMO_RUNTIME_LINK"))
    return llvm::StringRef(*link).contains("MnemoCuda");
  return MNEMO_RUNTIME_CUDA;
}

TrainerBuildResult mnemo::buildTrainer(llvm::StringRef directory,
                                       llvm::StringRef source,
                                       llvm::StringRef cudaSource,
                                       bool inference) {
  using Status = TrainerBuildResult::Status;
  if (std::error_code ec = llvm::sys::fs::create_directories(directory))
    return {Status::UserError,
            "cannot create '" + directory.str() + "': " + ec.message()};
  llvm::SmallString<256> modelFile(directory), cudaFile(directory),
      trainer(directory), logFile(directory);
  llvm::sys::path::append(modelFile, "model.cpp");
  llvm::sys::path::append(cudaFile, "model_cuda.cpp");
  llvm::sys::path::append(trainer, inference ? "infer" : "train");
  llvm::sys::path::append(logFile, "build.log");
  bool cuda = runtimeHasCuda();
  std::string error;
  if (!writeFile(modelFile, source, error) ||
      (cuda && !writeFile(cudaFile, cudaSource, error)))
    return {Status::UserError, error};

  std::string compiler = setting("CXX", "c++");
  auto program = llvm::sys::findProgramByName(compiler);
  if (!program)
    return {Status::UserError, "cannot find the C++ compiler '" + compiler +
                                   "' (set CXX, or install g++)"};
  std::string include = setting("MNEMO_RUNTIME_INCLUDE", MNEMO_RUNTIME_INCLUDE);
  std::vector<std::string> args = {
      *program, "-std=c++17", "-O3", "-march=native", "-fno-math-errno",
      // As the runtime: one rounding per
      // operation, whichever compiler.
      "-ffp-contract=off", "-I" + include, modelFile.str().str()};
  if (cuda)
    args.push_back(cudaFile.str().str());
  args.push_back("-o");
  args.push_back(trainer.str().str());
  llvm::SmallVector<llvm::StringRef> libraries;
  // The program's main, then the runtime it calls.
  args.push_back(inference
                     ? setting("MNEMO_INFERENCE_MAIN", MNEMO_INFERENCE_MAIN)
                     : setting("MNEMO_TRAINER_MAIN", MNEMO_TRAINER_MAIN));
  std::string link = setting("MNEMO_RUNTIME_LINK", MNEMO_RUNTIME_LINK);
  llvm::StringRef(link).split(libraries, '|', -1, false);
  for (llvm::StringRef lib : libraries)
    args.push_back(lib.str());
  args.push_back("-pthread");
  llvm::SmallVector<llvm::StringRef> argRefs(args.begin(), args.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, logFile.str(),
                                                logFile.str()};
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

namespace {

/// The project's CMakeLists.txt: the build itself is the runtime's
/// (runtime/MnemoProject.cmake, copied with the runtime), so that a
/// project's build changes with the runtime it carries.
std::string projectCMake(llvm::StringRef modelName, bool inference) {
  const char *program = inference ? "infer" : "train";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "# Generated by mnemoc --emit=project for model " << modelName << ".\n"
     << "# Builds the " << (inference ? "inference program" : "trainer")
     << " with CMake and a C++17 compiler, with\n"
     << "# nlohmann-json, OpenBLAS, zlib (and oneDNN where installed) from\n"
     << "# the system, or the first three from Debian packages unpacked in\n"
     << "# -DMNEMO_DEPS_DIR=DIR (see runtime/MnemoHostLibraries.cmake; "
        "without\n"
     << "# OpenBLAS it runs on the GPU only):\n"
     << "#   cmake -S . -B build && cmake --build build   ->  build/" << program
     << "\n"
     << "# With the CUDA toolkit and cuDNN it also runs on NVIDIA GPUs\n"
     << "# (--device cuda; -DMNEMO_CUDA=OFF builds for the CPU only).\n"
     << "# -DMNEMO_RUNTIME_FROM=BUILD links the runtime another project from\n"
     << "# the same mnemoc built in BUILD instead of building it again (see\n"
     << "# runtime/MnemoProject.cmake).\n"
     << "cmake_minimum_required(VERSION 3.20)\n"
     << "project(mnemo_" << program << " LANGUAGES CXX)\n"
     << "include(${CMAKE_CURRENT_SOURCE_DIR}/runtime/MnemoProject.cmake)\n"
     << "mnemo_project(" << program << ")\n";
  return os.str();
}

} // namespace

TrainerBuildResult mnemo::writeProject(llvm::StringRef directory,
                                       llvm::StringRef source,
                                       llvm::StringRef cudaSource,
                                       llvm::StringRef modelName,
                                       bool inference) {
  using Status = TrainerBuildResult::Status;
  std::string root = setting("MNEMO_RUNTIME_INCLUDE", MNEMO_RUNTIME_INCLUDE);
  std::string error;
  // The runtime, and the op families' runtime side: the formula and kernel
  // headers that the runtime and the generated code include, the CPU
  // kernels' sources and the CUDA library calls (AttentionCudnn.h/.cpp; the
  // families' other files are the compiler's).
  std::vector<std::string> folders = {"runtime", "runtime/cpu", "runtime/cuda"};
  {
    llvm::SmallString<256> families(root);
    llvm::sys::path::append(families, "lang", "ops");
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(families, ec), end;
         it != end && !ec; it.increment(ec))
      if (llvm::sys::fs::is_directory(it->path()))
        folders.push_back("lang/ops/" +
                          llvm::sys::path::filename(it->path()).str());
    if (ec || folders.size() == 3)
      return {Status::UserError,
              "cannot read the op families in '" + families.str().str() +
                  "' (set MNEMO_RUNTIME_INCLUDE to the Mnemo source tree)"};
  }
  for (const std::string &sub : folders) {
    bool family = llvm::StringRef(sub).starts_with("lang/");
    llvm::SmallString<256> from(root), to(directory);
    llvm::sys::path::append(from, sub);
    llvm::sys::path::append(to, sub);
    if (std::error_code ec = llvm::sys::fs::create_directories(to))
      return {Status::UserError,
              "cannot create '" + to.str().str() + "': " + ec.message()};
    std::error_code ec;
    bool copied = false;
    for (llvm::sys::fs::directory_iterator it(from, ec), end; it != end && !ec;
         it.increment(ec)) {
      llvm::StringRef name = llvm::sys::path::filename(it->path());
      bool wanted =
          family
              ? name.ends_with("Formulas.h") || name.ends_with("Kernels.h") ||
                    name.ends_with("Kernels.cpp") || name.ends_with(".cuh") ||
                    name.ends_with("Cudnn.h") || name.ends_with("Cudnn.cpp")
              : name.ends_with(".cpp") || name.ends_with(".h") ||
                    name.ends_with(".cu") || name.ends_with(".cuh") ||
                    name.ends_with(".cmake");
      if (!wanted)
        continue;
      llvm::SmallString<256> target(to);
      llvm::sys::path::append(target, name);
      if (std::error_code copyError =
              llvm::sys::fs::copy_file(it->path(), target))
        return {Status::UserError, "cannot copy '" + it->path() + "' to '" +
                                       target.str().str() +
                                       "': " + copyError.message()};
      copied = true;
    }
    if (ec || (!copied && !family))
      return {Status::UserError,
              "cannot read the runtime's sources in '" + from.str().str() +
                  "' (set MNEMO_RUNTIME_INCLUDE to the Mnemo source tree)"};
  }
  if (!writeFile(directory + "/model.cpp", source, error) ||
      !writeFile(directory + "/model_cuda.cpp", cudaSource, error) ||
      !writeFile(directory + "/CMakeLists.txt",
                 projectCMake(modelName, inference), error))
    return {Status::UserError, error};
  return {Status::Built, directory.str()};
}
