// qkv-opt: mlir-opt with the qkv dialect, the qkv passes and the qkv-cpu pipelines.
//   qkv-opt --qkv-recognize-attention file.mlir
//   qkv-opt --qkv-cpu file.mlir                  (the whole CPU pipeline)
//   qkv-opt --qkv-cpu-to-linalg file.mlir        (one stage)
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "qkv/compiler/transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  qkv::ir::registerQkvDialects(registry);
  mlir::registerAllPasses();
  qkv::ir::registerQkvPassesAndPipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "qkv optimizer driver (mlir-opt + the qkv dialect)\n", registry));
}
