//===- Program.cpp - A model file and everything it imports ---------------===//

#include "frontend/Program.h"
#include "frontend/Diagnostics.h"
#include "frontend/Parser.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <set>

using namespace mnemo;

std::vector<const Definition *> Program::mainModels() const {
  std::vector<const Definition *> models;
  for (const auto &def : mainModule().definitions)
    if (def->isModel)
      models.push_back(def.get());
  return models;
}

const Definition *Program::find(const std::string &name,
                                const Module *from) const {
  if (from)
    for (const auto &def : from->definitions)
      if (def->name == name)
        return def.get();
  auto it = definitions.find(name);
  return it == definitions.end() ? nullptr : it->second;
}

namespace {
class Loader {
public:
  Loader(const std::vector<std::string> &searchPaths, Diagnostics &diags)
      : searchPaths(searchPaths), diags(diags) {}

  void load(std::unique_ptr<llvm::MemoryBuffer> buffer, Program &program) {
    std::string name = buffer->getBufferIdentifier().str();
    loaded.insert(canonical(name));
    unsigned id = diags.getSourceMgr().AddNewSourceBuffer(std::move(buffer),
                                                          llvm::SMLoc());
    std::unique_ptr<Module> module = parseBuffer(id, diags);
    module->fileName = name;
    Module &ref = *module;
    program.modules.push_back(std::move(module));
    for (const auto &def : ref.definitions) {
      def->module = &ref;
      define(*def, ref, program);
    }
    for (const Import &import : ref.imports)
      resolve(import, name, program);
  }

private:
  static std::string canonical(const std::string &path) {
    llvm::SmallString<256> real;
    if (llvm::sys::fs::real_path(path, real))
      return path;
    return std::string(real);
  }

  void define(const Definition &def, const Module &module, Program &program) {
    for (const auto &other : module.definitions) {
      if (other.get() == &def)
        break;
      if (other->name == def.name) {
        diags.error(def.nameRange.Start, "'" + def.name + "' is defined twice",
                    {def.nameRange});
        diags.note(other->nameRange.Start, "the first definition is here");
        return;
      }
    }
    program.definitions.emplace(def.name, &def);
  }

  void resolve(const Import &import, const std::string &importer,
               Program &program) {
    llvm::SmallString<128> relative;
    for (llvm::StringRef part : llvm::split(import.path, '.'))
      llvm::sys::path::append(relative, part);
    relative += ".mn";

    std::vector<std::string> candidates;
    llvm::SmallString<256> local(llvm::sys::path::parent_path(importer));
    llvm::sys::path::append(local, relative);
    candidates.push_back(std::string(local));
    for (const std::string &dir : searchPaths) {
      llvm::SmallString<256> path(dir);
      llvm::sys::path::append(path, relative);
      candidates.push_back(std::string(path));
    }
    for (const std::string &candidate : candidates) {
      if (!llvm::sys::fs::is_regular_file(candidate))
        continue;
      if (loaded.count(canonical(candidate)))
        return;
      uint64_t size = 0;
      if (!llvm::sys::fs::file_size(candidate, size) &&
          size > kMaxModelFileBytes) {
        diags.error(import.range.Start,
                    "'" + candidate + "' is larger than " +
                        std::to_string(kMaxModelFileBytes >> 20) +
                        " MiB, the most a model file may hold",
                    {import.range});
        return;
      }
      auto buffer = llvm::MemoryBuffer::getFile(candidate, /*IsText=*/true);
      if (!buffer) {
        diags.error(import.range.Start,
                    "cannot read '" + candidate +
                        "': " + buffer.getError().message(),
                    {import.range});
        return;
      }
      load(std::move(*buffer), program);
      return;
    }
    std::string searched;
    for (const std::string &c : candidates)
      searched += "\n    " + c +
                  (llvm::sys::fs::exists(c) ? " (not a regular file)" : "");
    diags.error(import.range.Start,
                "cannot find module '" + import.path + "'; looked for" +
                    searched,
                {import.range});
  }

  const std::vector<std::string> &searchPaths;
  Diagnostics &diags;
  std::set<std::string> loaded;
};
} // namespace

std::unique_ptr<Program>
mnemo::loadProgram(std::unique_ptr<llvm::MemoryBuffer> buffer,
                   const std::vector<std::string> &searchPaths,
                   Diagnostics &diags) {
  auto program = std::make_unique<Program>();
  Loader(searchPaths, diags).load(std::move(buffer), *program);
  return program;
}

/// The file at `path` ("-": stdin), read in chunks up to the cap, so that
/// a device or a pipe that never ends is an error, not an endless read.
static std::unique_ptr<llvm::MemoryBuffer> readModelFile(llvm::StringRef path,
                                                         std::string &error) {
  llvm::sys::fs::file_t file = llvm::sys::fs::getStdinHandle();
  if (path != "-") {
    if (llvm::sys::fs::is_directory(path)) {
      error = "cannot read '" + path.str() + "': it is a directory";
      return nullptr;
    }
    llvm::Expected<llvm::sys::fs::file_t> opened =
        llvm::sys::fs::openNativeFileForRead(path);
    if (!opened) {
      error = "cannot read '" + path.str() +
              "': " + llvm::toString(opened.takeError());
      return nullptr;
    }
    file = *opened;
  }
  llvm::SmallString<0> text;
  bool tooLarge = false;
  for (;;) {
    size_t used = text.size();
    text.resize_for_overwrite(used + 65536);
    llvm::Expected<size_t> n = llvm::sys::fs::readNativeFile(
        file, llvm::MutableArrayRef<char>(text.data() + used, 65536));
    if (!n) {
      error =
          "cannot read '" + path.str() + "': " + llvm::toString(n.takeError());
      break;
    }
    text.truncate(used + *n);
    if (*n == 0)
      break;
    if (text.size() > kMaxModelFileBytes) {
      tooLarge = true;
      break;
    }
  }
  if (path != "-")
    llvm::sys::fs::closeFile(file);
  if (tooLarge)
    error = "'" + path.str() + "' is larger than " +
            std::to_string(kMaxModelFileBytes >> 20) +
            " MiB, the most a model file may hold; is it a model file?";
  if (!error.empty())
    return nullptr;
  return llvm::MemoryBuffer::getMemBufferCopy(text,
                                              path == "-" ? "<stdin>" : path);
}

std::unique_ptr<Program>
mnemo::loadProgramFile(llvm::StringRef path,
                       const std::vector<std::string> &searchPaths,
                       Diagnostics &diags) {
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> buffer = readModelFile(path, error);
  if (!buffer) {
    diags.error(error);
    return nullptr;
  }
  return loadProgram(std::move(buffer), searchPaths, diags);
}
