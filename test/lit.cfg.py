# lit configuration of zcc's compiler tests.
import os
import lit.formats

config.name = "zcc"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.zcc_obj_root, "test")

config.environment["FILECHECK_OPTS"] = "--enable-var-scope"
config.environment["PATH"] = os.pathsep.join(
    [config.zcc_tools_dir + "/zcc", config.zcc_tools_dir + "/zcc-opt",
     os.path.join(config.zcc_obj_root, "runtime"),
     config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])

# The reference models beside the checkout (../shared/models) and ours.
shared = os.path.normpath(os.path.join(config.zcc_src_root, "..", "shared", "models"))
config.substitutions.append(("%shared_models", shared))
config.substitutions.append(("%examples", os.path.join(config.zcc_src_root, "examples")))
if os.path.isdir(shared):
    config.available_features.add("shared-models")
if config.zcc_sanitized:
    config.available_features.add("asan")
    # allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons a new slab from
    # inline code. The zero dialect's attributes allocate their storage from
    # our (instrumented) code, which poisons slabs that the system's
    # uninstrumented libMLIR then hands out without unpoisoning: a false
    # use-after-poison. Heap, stack and global checks stay on.
    config.environment["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=0:allow_user_poisoning=0"

# Debian's chromium renders the HTML pages (test/e2e/pages.test).
import shutil
if shutil.which("chromium"):
    config.available_features.add("chromium")

# Debian's python3 with python3-onnx and python3-numpy writes test models.
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(
    ("%op_histogram", "/usr/bin/python3 " + os.path.join(config.test_source_root, "Inputs", "op_histogram.py")))
config.substitutions.append(
    ("%check_trainable", "/usr/bin/python3 " + os.path.join(config.test_source_root, "Inputs", "check_trainable.py")))
config.substitutions.append(
    ("%check_loss", "/usr/bin/python3 " + os.path.join(config.test_source_root, "Inputs", "check_loss.py")))
config.substitutions.append(("%zrun_path", os.path.join(config.zcc_obj_root, "runtime", "zrun")))
config.substitutions.append(("%zcc_src", config.zcc_src_root))
config.substitutions.append(("%zcc_obj", config.zcc_obj_root))
config.substitutions.append(
    ("%check_trajectory", "/usr/bin/python3 " + os.path.join(config.test_source_root, "Inputs", "check_trajectory.py")))
config.substitutions.append(
    ("%check_trace", "/usr/bin/python3 " + os.path.join(config.test_source_root, "Inputs", "check_trace.py")
     + " --schema " + os.path.join(config.test_source_root, "Inputs", "trace-event.schema.json")))
config.substitutions.append(
    ("%check_scaling", "/usr/bin/python3 " + os.path.join(config.test_source_root, "Inputs", "check_loss_scaling.py")))

# GPU tests (REQUIRES: cuda) run where zrun's CUDA backend finds a device;
# CI has none and skips them. tools/gpu-check.sh runs the GPU suite there.
import subprocess
_zrun = os.path.join(config.zcc_obj_root, "runtime", "zrun")
if os.path.exists(_zrun) and subprocess.run([_zrun, "devices"], capture_output=True).returncode == 0:
    config.available_features.add("cuda")

# ptxas (the CUDA toolkit's PTX assembler, here and in CI though there is no
# GPU) checks the kernels zero-fuse-elementwise generates for sm_90.
import shutil
_ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
if os.path.exists(_ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", _ptxas))
