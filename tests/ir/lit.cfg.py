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
