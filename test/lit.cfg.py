# -*- Python -*-
# lit configuration for Mnemo: .mn model files and .mlir dialect tests.

import os
import shutil
import subprocess

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
# One bad-input case: exit status, message, and the files it must not touch
# (test/robustness/expect.py).
config.substitutions.append(("%expect", "/usr/bin/python3 " + os.path.join(
    config.mnemo_src_root, "test", "robustness", "expect.py")))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# OpenBLAS's and oneDNN's kernel choices, so that the suite runs as on
# another CPU (OPENBLAS_CORETYPE=Haswell, SkylakeX, Zen;
# ONEDNN_MAX_CPU_ISA=AVX2, AVX512_CORE): lit passes no variable it does not
# know of, and a tolerance must hold for every kernel.
for name in ("OPENBLAS_CORETYPE", "ONEDNN_MAX_CPU_ISA"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
llvm_config.add_tool_substitutions(["mnemoc", "mnemo-opt", "mnemo-interp", "mnemo-difftest", "mnemo-translate"], [config.mnemo_tools_dir])

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
# Trainers built with oneDNN (libdnnl-dev) run their convolutions through it.
if getattr(config, "mnemo_onednn", ""):
    config.available_features.add("onednn")
# Trainers built with MPI (libopenmpi-dev) run data-parallel under mpirun.
# As root (CI, the development machines) Open MPI asks to be told so.
if getattr(config, "mnemo_mpi", "") and shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
if "cuda-device" not in config.available_features:
    lit_config.note("no CUDA device: tests that need a GPU are reported as UNSUPPORTED")

# Full disks and read-only directories, for the robustness tests: a small
# tmpfs mounted in a private mount namespace (unshare -m), which vanishes
# with the command. Needs root (CI and the development machines run as
# root); elsewhere those tests are UNSUPPORTED.
try:
    probe = subprocess.run(["unshare", "-m", "sh", "-c",
                            "d=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs $d && umount $d; rc=$?; rmdir $d; exit $rc"],
                           capture_output=True, timeout=20)
    if probe.returncode == 0:
        config.available_features.add("tmpfs-mount")
except (OSError, subprocess.SubprocessError):
    pass
