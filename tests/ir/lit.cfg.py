# lit configuration for qkv's IR tests: qkv-opt and qkv on the PATH with FileCheck.
import os
import lit.formats

config.name = "qkv-ir"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.qkv_obj_root, "tests", "ir")
path = os.path.pathsep.join([config.qkv_tools_dir, config.llvm_tools_dir,
                             config.environment.get("PATH", os.environ.get("PATH", ""))])
config.environment["PATH"] = path
# lit gives tests a clean environment: pass on the kernel cache's settings, so that under
# ctest `qkv dump` uses the build tree's cache (QKV_CACHE_DIR), never ~/.cache/qkv/kernels,
# and QKV_CACHE=0 still turns it off.
for var in ("QKV_CACHE_DIR", "QKV_CACHE"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
