//===- ElementType.cpp - Element types of Mnemo tensors -------------------===//

#include "lang/ElementType.h"

using namespace mnemo;

const char *mnemo::spell(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return "f32";
  case ElementType::F16:
    return "f16";
  case ElementType::BF16:
    return "bf16";
  case ElementType::I64:
    return "i64";
  case ElementType::I32:
    return "i32";
  case ElementType::I16:
    return "i16";
  case ElementType::I8:
    return "i8";
  case ElementType::I1:
    return "i1";
  }
  return "?";
}

std::optional<ElementType> mnemo::parseElementType(const std::string &name) {
  for (ElementType t : {ElementType::F32, ElementType::F16, ElementType::BF16,
                        ElementType::I32, ElementType::I8})
    if (name == spell(t))
      return t;
  return std::nullopt;
}
