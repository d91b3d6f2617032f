//===- MnemoInterfaces.cpp - Interfaces of the Mnemo op set ---------------===//

#include "lang/MnemoInterfaces.h"

#include "lang/MnemoInterfaces.cpp.inc"
