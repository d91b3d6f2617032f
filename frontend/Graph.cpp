//===- Graph.cpp - The elaborated, typed model ----------------------------===//

#include "frontend/Graph.h"

#include <cmath>
#include <cstdio>

using namespace mnemo;

std::string TensorType::str() const {
  if (dtype == ElementType::I1)
    return "bool" + shape::format(shape);
  return spell(dtype) + shape::format(shape);
}

/// A ConfigValue of `kind` whose `field` holds `value`.
template <typename Field, typename T>
static ConfigValue with(ConfigValue::Kind kind, Field ConfigValue::*field,
                        T value) {
  ConfigValue c;
  c.kind = kind;
  c.*field = std::move(value);
  return c;
}
ConfigValue ConfigValue::ofInt(int64_t v) {
  return with(Kind::Int, &ConfigValue::intValue, v);
}
ConfigValue ConfigValue::ofFloat(double v) {
  return with(Kind::Float, &ConfigValue::floatValue, v);
}
ConfigValue ConfigValue::ofBool(bool v) {
  return with(Kind::Bool, &ConfigValue::boolValue, v);
}
ConfigValue ConfigValue::ofString(std::string s) {
  return with(Kind::String, &ConfigValue::text, std::move(s));
}
ConfigValue ConfigValue::ofSymbol(std::string s) {
  return with(Kind::Symbol, &ConfigValue::text, std::move(s));
}
ConfigValue ConfigValue::ofCall(std::string name, std::vector<Setting> args) {
  ConfigValue c = with(Kind::Call, &ConfigValue::text, std::move(name));
  c.args = std::move(args);
  return c;
}

const ConfigValue *ConfigValue::arg(const std::string &key) const {
  for (const Setting &s : args)
    if (s.key == key)
      return &s.value;
  return nullptr;
}

std::string ConfigValue::str() const {
  switch (kind) {
  case Kind::Int:
    return std::to_string(intValue);
  case Kind::Float: {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", floatValue);
    std::string s = buf;
    // Keep floats recognisable as floats: 1 -> 1.0.
    if (s.find_first_of(".eEn") == std::string::npos)
      s += ".0";
    return s;
  }
  case Kind::Bool:
    return boolValue ? "true" : "false";
  case Kind::String:
    return "\"" + text + "\"";
  case Kind::Symbol:
    return text;
  case Kind::List: {
    std::string s = "[";
    for (size_t i = 0; i < list.size(); ++i)
      s += (i ? ", " : "") + list[i].str();
    return s + "]";
  }
  case Kind::Call: {
    std::string s = text + "(";
    for (size_t i = 0; i < args.size(); ++i)
      s += (i ? ", " : "") + args[i].key + "=" + args[i].value.str();
    return s + ")";
  }
  }
  return "";
}

int64_t Graph::parameterCount() const {
  int64_t total = 0;
  for (const GraphArg &arg : args)
    if (arg.role == ArgRole::Param)
      total += shape::numElements(values[arg.value].shape).value_or(0);
  return total;
}
