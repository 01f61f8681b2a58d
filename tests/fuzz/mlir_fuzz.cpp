// libFuzzer target: the .mlir parser path of qkv-opt with the qkv dialect. Each input is
// parsed and verified as a module in a context with the dialects qkv registers
// (qkv::ir::registerQkvDialects: qkv, func, arith, tensor, linalg, ...); a module that
// parses and verifies is printed back, in the custom and the generic form, which runs the
// qkv ops' printers. Diagnostics are swallowed: invalid IR must be an error, never a crash.
//
// libMLIR/libLLVM are not instrumented, so the sanitizers see qkv's parsers, verifiers and
// printers (compiler/lib), and coverage guides the search through those.
#include <cstdint>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include "qkv/compiler/transforms/Passes.h"

namespace {

mlir::MLIRContext &context() {
  // Never destroyed: the process exits right after the last input.
  static mlir::MLIRContext *ctx = [] {
    mlir::DialectRegistry registry;
    qkv::ir::registerQkvDialects(registry);
    auto *c = new mlir::MLIRContext(registry, mlir::MLIRContext::Threading::DISABLED);
    c->loadAllAvailableDialects();
    return c;
  }();
  return *ctx;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  mlir::MLIRContext &ctx = context();
  mlir::ScopedDiagnosticHandler quiet(&ctx, [](mlir::Diagnostic &) { return mlir::success(); });
  // As qkv-opt reads a file: a null-terminated MemoryBuffer in a SourceMgr. MLIR's lexer
  // relies on the terminator; parseSourceString(StringRef) on the fuzzer's unterminated
  // bytes reads past them (an ASan report inside libMLIR, not a qkv bug).
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.mlir"),
      llvm::SMLoc());
  mlir::ParserConfig config(&ctx, /*verifyAfterParse=*/true);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceFile<mlir::ModuleOp>(sources, config);
  if (!module)
    return 0;
  std::string out;
  llvm::raw_string_ostream os(out);
  module->print(os);
  module->print(os, mlir::OpPrintingFlags().printGenericOpForm());
  return 0;
}
