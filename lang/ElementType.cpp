//===- ElementType.cpp - Element types of Mnemo tensors -------------------===//

#include "lang/ElementType.h"

#include <iterator>

using namespace mnemo;

const char *mnemo::spell(ElementType type) {
  // In the order of the enum.
  constexpr const char *kNames[] = {"f32", "f16", "bf16", "i64",
                                    "i32", "i16", "i8",   "i1"};
  static_assert(std::size(kNames) == size_t(ElementType::I1) + 1);
  return kNames[int(type)];
}

std::optional<ElementType> mnemo::parseElementType(const std::string &name) {
  for (ElementType t : {ElementType::F32, ElementType::F16, ElementType::BF16,
                        ElementType::I32, ElementType::I8})
    if (name == spell(t))
      return t;
  return std::nullopt;
}
