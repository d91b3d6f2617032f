//===- ArgumentRole.h - What a step function's argument is ----------------===//
//
// The one enumeration of a step argument's roles. The frontend and autodiff
// give each argument one (lang/ModelAttributes.h writes it into the IR),
// plan-memory places the argument by it, the emitters write its name into
// the generated model table (runtime/Model.h's ArgumentInfo::role), and the
// trainer and checkpoints read it back by that name. Plain C++, so the
// runtime, which never depends on LLVM, and the compiler share it.
//
//===----------------------------------------------------------------------===//

#ifndef MNEMO_RUNTIME_ARGUMENTROLE_H
#define MNEMO_RUNTIME_ARGUMENTROLE_H

#include <cstring>

namespace mnemo {

enum class ArgumentRole : int {
  Input = 0,      ///< one batch's model input
  Target = 1,     ///< one batch's target
  Param = 2,      ///< a trained parameter
  Buffer = 3,     ///< state the forward reads but does not train (observers)
  OptState = 4,   ///< optimizer state: moments, masks, the loss scale
  Step = 5,       ///< the step counter
  TotalSteps = 6, ///< the run's length in steps (schedules)
};

constexpr int kArgumentRoleCount = int(ArgumentRole::TotalSteps) + 1;

/// The role's name in the IR and the generated model table.
constexpr const char *argumentRoleName(ArgumentRole role) {
  constexpr const char *kNames[] = {
      "input", "target", "param", "buffer", "opt_state", "step", "total_steps"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kArgumentRoleCount);
  return kNames[int(role)];
}

/// The role named `name` (argumentRoleName's inverse); false if there is
/// none.
inline bool parseArgumentRole(const char *name, ArgumentRole &role) {
  for (int r = 0; r < kArgumentRoleCount; ++r)
    if (std::strcmp(name, argumentRoleName(ArgumentRole(r))) == 0) {
      role = ArgumentRole(r);
      return true;
    }
  return false;
}

/// Whether the trainer keeps the argument across steps and checkpoints it
/// (parameters, buffers, optimizer state), rather than feeding it per step.
constexpr bool isPersistentRole(ArgumentRole role) {
  return role == ArgumentRole::Param || role == ArgumentRole::Buffer ||
         role == ArgumentRole::OptState;
}

} // namespace mnemo

#endif // MNEMO_RUNTIME_ARGUMENTROLE_H
