//===- Npy.h - NumPy's .npy files -------------------------------*- C++ -*-===//
//
// Reads NumPy's .npy format (numpy.save): the magic "\x93NUMPY", a version,
// a header that is a Python dict literal ({'descr': '<f4', 'fortran_order':
// False, 'shape': (50000, 3, 32, 32)}), then the elements in C order. The
// array comes back as a StoredTensor (safetensors' dtype names), so a
// trainer reads .npy and .safetensors arrays alike. Little-endian numbers,
// booleans and bytes only; a Fortran-order, big-endian or object array, a
// truncated file or one with bytes after its data is an error.
//
// Part of the runtime: plain C++17, no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_NPY_H
#define MNEMO_RUNTIME_NPY_H

#include "runtime/Safetensors.h"

#include <string>

namespace mnemo::runtime {

/// Reads `path` into `tensor` (named `name`). Returns false with `error`
/// set when the file is missing or is not an array this reader takes.
bool readNpy(const std::string &path, const std::string &name,
             StoredTensor &tensor, std::string &error);

} // namespace mnemo::runtime

#endif // MNEMO_RUNTIME_NPY_H
