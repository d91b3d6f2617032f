//===- OutputFiles.h - Checking a program's outputs up front ----*- C++ -*-===//
//
// A training run must not end by failing to write what it was asked to
// write, nor by writing over something it should not. Before the first
// step, every output the options name is checked:
//
// - it is a non-empty path whose directory exists and can hold a new file
//   (a file is created there and removed: permissions, read-only mounts
//   and missing directories show up now, not after 300 steps);
// - it is not a directory, nor anything but a regular file when it exists
//   (a rename onto /dev/null would replace the device);
// - no two outputs name the same file, and no output names an input (the
//   training data, the checkpoint resumed from) or the program itself, by
//   path or by identity (hard and symbolic links).
//
// Writes go through a temporary "<target>.tmp.<pid>" beside the target
// (runtime/Safetensors.h); one left by a save that was killed is removed
// the next time a run names that target, once its process is gone.
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_OUTPUTFILES_H
#define MNEMO_RUNTIME_OUTPUTFILES_H

#include <cstddef>
#include <string>
#include <vector>

namespace mnemo::runtime {

/// A file a program reads or writes, and the option that named it.
struct NamedFile {
  std::string option; // "--save"
  std::string path;
};

/// Checks `outputs` (files the run will write) against each other and
/// against `inputs` (files or directories it reads). `directories` are
/// outputs that are directories the run creates or fills (--dump), whose
/// `files` are outputs too. Returns false with `error` naming the option
/// and the path.
struct OutputDirectory {
  NamedFile directory;
  std::vector<std::string> files; // names inside it
};
bool checkOutputs(const std::vector<NamedFile> &outputs,
                  const std::vector<OutputDirectory> &directories,
                  const std::vector<NamedFile> &inputs, std::string &error);

/// Whether `a` and `b` name one file: by identity where both exist (hard
/// and symbolic links), else by their canonical paths.
bool namesSameFile(const std::string &a, const std::string &b);

/// Removes the temporary files "<path>.tmp.<pid>" that a killed write to
/// `path` left, where process <pid> no longer exists; returns what it
/// removed.
std::vector<std::string> removeStaleTemporaries(const std::string &path);

/// The temporary file a write to `path` goes through.
std::string temporaryFor(const std::string &path);

/// Writes `pieces`, one after the other, to `path` through its temporary,
/// fsynced and renamed over it: a write that fails or is interrupted
/// leaves what was at `path` as it was. `error` names `path`.
struct Bytes {
  const void *data;
  size_t size;
};
bool writeAtomically(const std::string &path, const std::vector<Bytes> &pieces,
                     std::string &error);

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_OUTPUTFILES_H
