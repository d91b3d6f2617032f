# -*- Python -*-
# lit configuration for Mnemo: .mn model files and .mlir dialect tests.

import os

import lit.formats
from lit.llvm import llvm_config

config.name = "Mnemo"
# An external shell, so tests can check exact exit statuses with $?.
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mn", ".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mnemo_obj_root, "test")
# Inputs that tests include or import, not tests themselves.
config.excludes = ["Inputs", "unit", "fuzz", "CMakeLists.txt"]

config.substitutions.append(("%examples", os.path.join(config.mnemo_src_root, "examples")))
config.substitutions.append(("%stdlib", os.path.join(config.mnemo_src_root, "lang")))
config.substitutions.append(("%reference", os.path.join(config.mnemo_src_root, "test", "reference")))
# Debian's Python, which has python3-torch and python3-numpy.
config.substitutions.append(("%python", "/usr/bin/python3"))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["mnemoc", "mnemo-opt", "mnemo-interp", "mnemo-difftest"], [config.mnemo_tools_dir])

# The CUDA backend: `cuda-toolkit` when the runtime was built with it (the
# kernels compile, the trainer links), `cuda-device` when a GPU is usable.
# Tests that need a GPU say REQUIRES: cuda-device and are reported as
# UNSUPPORTED (skipped, with the missing feature named) on machines without.
if config.mnemo_cuda in ("ON", "1", "TRUE"):
    config.available_features.add("cuda-toolkit")
    llvm_config.add_tool_substitutions(["mnemo-nvrtc", "mnemo-build-emulated-trainer"], [config.mnemo_tools_dir])
    import subprocess
    try:
        smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
        if smi.returncode == 0 and "GPU" in smi.stdout:
            config.available_features.add("cuda-device")
    except (OSError, subprocess.SubprocessError):
        pass
if "cuda-device" not in config.available_features:
    lit_config.note("no CUDA device: tests that need a GPU are reported as UNSUPPORTED")
