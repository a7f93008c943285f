import os
import shutil
import lit.formats

config.name = "kgen"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Inputs", "unit", "gpu", "CMakeLists.txt"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kgen_obj_root, "test")

config.environment["PATH"] = os.pathsep.join(
    [config.kgen_tools_dir, config.filecheck_dir, config.environment.get("PATH", "")])
# Each lit run gets its own cache so tests never see a user's cache.
config.environment["KGEN_CACHE_DIR"] = os.path.join(config.test_exec_root, "lit-cache")
config.substitutions.append(("%kgen_src", config.kgen_src_root))
if config.kgen_enable_mlir:
    config.available_features.add("mlir")
if os.path.exists("/usr/local/cuda/lib64/libnvrtc.so") or os.environ.get("KGEN_HAVE_NVRTC"):
    config.available_features.add("nvrtc")
# nvcc, where a CUDA toolkit is installed: `kgen emit --inline` files are
# built with it as they are, outside kgen.
nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
if nvcc:
    config.available_features.add("nvcc")
    config.substitutions.append(("%nvcc", nvcc))
for lib in ["/usr/lib/x86_64-linux-gnu/libamdhip64.so.5", "/opt/rocm/lib/libamdhip64.so"]:
    if os.path.exists(lib):
        config.available_features.add("hiprtc")
