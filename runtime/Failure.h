//===- Failure.h - A failure reported through an error string ---*- C++ -*-===//
//
// The runtime's functions report a failure by returning false with the
// message in a `std::string &error` that the caller prints or passes up.
// Part of the trainer's runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_FAILURE_H
#define MNEMO_RUNTIME_FAILURE_H

#include <string>
#include <utility>

namespace mnemo {

/// Sets `error` to `message` and returns false, for
/// `return failWith(error, "cannot open '" + path + "'");`.
inline bool failWith(std::string &error, std::string message) {
  error = std::move(message);
  return false;
}

} // namespace mnemo

#endif // MNEMO_RUNTIME_FAILURE_H
