//===- ElementType.h - Element types of Mnemo tensors -----------*- C++ -*-===//
//
// The element types a Mnemo tensor can have, shared by the frontend (which
// types model files) and the reference interpreter (which rounds to them).
// Free of MLIR, like the shape rules.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_LANG_ELEMENTTYPE_H
#define MNEMO_LANG_ELEMENTTYPE_H

#include <optional>
#include <string>

namespace mnemo {

/// I1 holds masks and I16 the column indices of compressed sparse weights
/// (mnemoc --mode=inference); the others can be written in a model file.
enum class ElementType { F32, F16, BF16, I64, I32, I16, I8, I1 };

/// "f32", "bf16", ..., "i1".
const char *spell(ElementType type);

/// The element types a model file may name: f32, f16, bf16, i32, i8.
std::optional<ElementType> parseElementType(const std::string &name);

inline bool isFloat(ElementType t) {
  return t == ElementType::F32 || t == ElementType::F16 ||
         t == ElementType::BF16;
}

} // namespace mnemo

#endif // MNEMO_LANG_ELEMENTTYPE_H
