//===- OutputFiles.cpp - Checking a program's outputs before it runs ------===//

#include "runtime/OutputFiles.h"
#include "runtime/Failure.h"

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mnemo::runtime {

namespace {

std::string parentOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string baseOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// What a path names: the file's identity when it exists, and its
/// canonical spelling (the real directory and the name) either way.
struct Identity {
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
  std::string canonical;
};

Identity identify(const std::string &path) {
  Identity id;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.device = st.st_dev;
    id.inode = st.st_ino;
  }
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real))
    id.canonical = real;
  else if (::realpath(parentOf(path).c_str(), real))
    id.canonical = std::string(real) + "/" + baseOf(path);
  else
    id.canonical = path;
  return id;
}

bool sameFile(const Identity &a, const Identity &b) {
  return (a.exists && b.exists && a.device == b.device && a.inode == b.inode) ||
         a.canonical == b.canonical;
}

std::string quoted(const std::string &path) { return "'" + path + "'"; }

/// Can `directory` take a new file? Creates one and removes it.
bool probeDirectory(const std::string &option, const std::string &target,
                    const std::string &directory, std::string &error) {
  struct stat st;
  if (::stat(directory.c_str(), &st) != 0)
    return failWith(error, option + " " + quoted(target) + ": the directory " +
                               quoted(directory) + " does not exist");
  if (!S_ISDIR(st.st_mode))
    return failWith(error, option + " " + quoted(target) + ": " +
                               quoted(directory) + " is not a directory");
  std::string probe = directory + "/.mnemo-probe." + std::to_string(::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return failWith(error, option + " " + quoted(target) +
                               ": cannot create a file in " +
                               quoted(directory) + ": " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

bool checkFile(const NamedFile &out, std::string &error) {
  if (out.path.empty())
    return failWith(error, out.option + " needs a file name, not ''");
  struct stat st;
  if (::stat(out.path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return failWith(error, out.option + " " + quoted(out.path) +
                                 " is a directory; name a file in it");
    if (!S_ISREG(st.st_mode))
      return failWith(
          error,
          out.option + " " + quoted(out.path) +
              " exists and is not a regular file; writing it would replace "
              "it");
  }
  if (out.path.back() == '/')
    return failWith(error,
                    out.option + " " + quoted(out.path) + " names a directory");
  return probeDirectory(out.option, out.path, parentOf(out.path), error);
}

bool checkDirectory(const NamedFile &dir, std::string &error) {
  if (dir.path.empty())
    return failWith(error, dir.option + " needs a directory name, not ''");
  struct stat st;
  if (::stat(dir.path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return failWith(error, dir.option + " " + quoted(dir.path) +
                                 " exists and is not a directory");
    return probeDirectory(dir.option, dir.path, dir.path, error);
  }
  std::string path = dir.path;
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  return probeDirectory(dir.option, dir.path, parentOf(path), error);
}

} // namespace

std::string temporaryFor(const std::string &path) {
  return path + ".tmp." + std::to_string(::getpid());
}

namespace {
bool writeAll(int fd, const void *data, size_t size) {
  const char *p = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    size -= size_t(n);
  }
  return true;
}
} // namespace

bool writeAtomically(const std::string &path, const std::vector<Bytes> &pieces,
                     std::string &error) {
  std::string tmp = temporaryFor(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return failWith(error,
                    "cannot write '" + path + "': " + std::strerror(errno));
  bool ok = true;
  for (const Bytes &piece : pieces)
    ok = ok && writeAll(fd, piece.data, piece.size);
  ok = ok && ::fsync(fd) == 0;
  int saved = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot write '" + path + "': " + std::strerror(ok ? errno : saved);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

bool checkOutputs(const std::vector<NamedFile> &outputs,
                  const std::vector<OutputDirectory> &directories,
                  const std::vector<NamedFile> &inputs, std::string &error) {
  std::vector<NamedFile> files = outputs;
  for (const OutputDirectory &d : directories) {
    if (!checkDirectory(d.directory, error))
      return false;
    std::string base = d.directory.path;
    if (base.back() != '/')
      base += "/";
    for (const std::string &name : d.files)
      files.push_back({d.directory.option, base + name});
  }
  for (const NamedFile &out : outputs)
    if (!checkFile(out, error))
      return false;
  std::vector<Identity> ids;
  for (const NamedFile &f : files)
    ids.push_back(identify(f.path));
  // The program's own file (Linux names it /proc/self/exe).
  Identity self = identify("/proc/self/exe");
  for (size_t i = 0; i < files.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (sameFile(ids[i], ids[j]))
        return failWith(error, files[j].option + " and " + files[i].option +
                                   " both name " + quoted(files[i].path) +
                                   "; one would overwrite the other");
    for (const NamedFile &in : inputs)
      if (!in.path.empty() && sameFile(ids[i], identify(in.path)))
        return failWith(error, files[i].option + " " + quoted(files[i].path) +
                                   " is the file " + in.option +
                                   " reads; writing it would " +
                                   "destroy the input");
    if (self.exists && sameFile(ids[i], self))
      return failWith(error, files[i].option + " " + quoted(files[i].path) +
                                 " is this program; writing it would "
                                 "destroy it");
  }
  return true;
}

bool namesSameFile(const std::string &a, const std::string &b) {
  return sameFile(identify(a), identify(b));
}

std::vector<std::string> removeStaleTemporaries(const std::string &path) {
  std::vector<std::string> removed;
  if (path.empty())
    return removed;
  std::string directory = parentOf(path), prefix = baseOf(path) + ".tmp.";
  DIR *dir = ::opendir(directory.c_str());
  if (!dir)
    return removed;
  while (dirent *entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix))
      continue;
    std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    pid_t pid = pid_t(std::atol(digits.c_str()));
    if (pid <= 0 || pid == ::getpid() ||
        !(::kill(pid, 0) != 0 && errno == ESRCH))
      continue; // its writer may still be running
    std::string stale = directory + "/" + name;
    if (::unlink(stale.c_str()) == 0)
      removed.push_back(stale);
  }
  ::closedir(dir);
  return removed;
}

} // namespace mnemo::runtime
