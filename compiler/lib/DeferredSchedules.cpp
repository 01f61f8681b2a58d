#include "DeferredSchedules.h"

#include "CodegenParts.h"
#include "Import.h"
#include "LlvmTranslation.h"
#include "ObjectJit.h"

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/kernel_abi.hpp>
#include <qkv/runtime/stage.hpp>

#include <set>
#include <sstream>

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Metadata.h"

namespace qkv::jit {

namespace {

/// The stub's metadata: the schedule's MLIR bytecode and the pipeline's options.
constexpr const char *kMlirMetadata = "qkv.deferred_mlir";

/// Declares in `b`'s module (or, for a function with a body, defines) each symbol that
/// `op` uses from `symbols`, once (`done`): functions, memref globals (declared without
/// their values: the kernel's module defines them) and LLVM globals (the same).
void declare_uses(mlir::Operation *op, mlir::SymbolTable &symbols, mlir::OpBuilder &b,
                  std::set<std::string> &done) {
  auto uses = mlir::SymbolTable::getSymbolUses(op);
  if (!uses)
    return;
  for (const mlir::SymbolTable::SymbolUse &use : *uses) {
    std::string name = use.getSymbolRef().getRootReference().str();
    if (!done.insert(name).second)
      continue;
    mlir::Operation *def = symbols.lookup(name);
    if (auto fn = llvm::dyn_cast_or_null<mlir::func::FuncOp>(def)) {
      declare_uses(fn, symbols, b, done);
      b.clone(*fn);
    } else if (auto g = llvm::dyn_cast_or_null<mlir::memref::GlobalOp>(def)) {
      auto copy = llvm::cast<mlir::memref::GlobalOp>(b.clone(*g));
      copy.removeInitialValueAttr();
      copy.setPublic();
    } else if (auto g = llvm::dyn_cast_or_null<mlir::LLVM::GlobalOp>(def)) {
      auto copy = llvm::cast<mlir::LLVM::GlobalOp>(b.clone(*g));
      copy.removeValueAttr();
      copy.getInitializerRegion().getBlocks().clear();
      copy.setLinkage(mlir::LLVM::Linkage::External);
    } else {
      internal_error("a deferred schedule uses '" + name +
                     "', which is not a function or a global of its kernel");
    }
  }
}

/// The one call of `fn` in `module` (the attention op's code that outlined it).
mlir::func::CallOp only_call(mlir::func::FuncOp fn, mlir::ModuleOp module) {
  auto uses = mlir::SymbolTable::getSymbolUses(fn, module);
  if (!uses)
    internal_error("the uses of the deferred schedule " + fn.getName().str() + " are unknown");
  mlir::func::CallOp call;
  int n = 0;
  for (const mlir::SymbolTable::SymbolUse &use : *uses) {
    call = llvm::dyn_cast<mlir::func::CallOp>(use.getUser());
    ++n;
  }
  if (n != 1 || !call)
    internal_error("the deferred schedule " + fn.getName().str() + " is not called once");
  return call;
}

/// Each argument of `fn` to which `call` passes a constant (the static dims and the scale
/// the linalg stage has folded by now) becomes that constant, made in fn's entry: the
/// schedule's code is optimised for them, as the code the kernel compiles at once is.
void bind_constant_arguments(mlir::func::FuncOp fn, mlir::func::CallOp call) {
  mlir::OpBuilder b = mlir::OpBuilder::atBlockBegin(&fn.front());
  for (auto [arg, value] : llvm::zip(fn.getArguments(), call.getOperands()))
    if (mlir::Operation *def = value.getDefiningOp();
        def && def->hasTrait<mlir::OpTrait::ConstantLike>())
      arg.replaceAllUsesWith(
          b.clone(*def)->getResult(llvm::cast<mlir::OpResult>(value).getResultNumber()));
}

/// `fn` in a module of its own, public, with what it uses declared.
mlir::OwningOpRef<mlir::ModuleOp> side_module(mlir::func::FuncOp fn, mlir::SymbolTable &symbols) {
  mlir::OwningOpRef<mlir::ModuleOp> side = mlir::ModuleOp::create(fn.getLoc());
  mlir::OpBuilder b = mlir::OpBuilder::atBlockEnd(side->getBody());
  std::set<std::string> done{fn.getName().str()};
  declare_uses(fn, symbols, b, done);
  llvm::cast<mlir::func::FuncOp>(b.clone(*fn)).setPublic();
  return side;
}

/// The held schedule with the constants its call in `module` passes bound, as MLIR bytecode.
std::string bytecode(HeldSchedule &held, mlir::ModuleOp module) {
  auto fn = module.lookupSymbol<mlir::func::FuncOp>(held.name);
  auto copy = held.module->lookupSymbol<mlir::func::FuncOp>(held.name);
  if (!fn || !copy)
    internal_error("the deferred schedule " + held.name + " is gone from its kernel");
  bind_constant_arguments(copy, only_call(fn, module));
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  if (mlir::failed(mlir::writeBytecodeToFile(*held.module, os)))
    internal_error("cannot write the deferred schedule " + held.name + " as bytecode");
  return bytes;
}

/// CpuPipelineOptions as text. Each field is named here, so one added to the struct fails to
/// compile until it is written and read back below or said not to matter to a deferred
/// schedule's stages (the linalg tail, loops and llvm on the CPU): the CUDA tiles and warp
/// code are never deferred (no flash pass runs there), and recognition is the qkv stage's.
std::string encode(const ir::CpuPipelineOptions &o) {
  const auto &[vectorBits, qTile, kvTile, decodeRows, threads, l1Bytes, l2Bytes, gemmKc, gemmMc,
               isa, matmulPrecision, gpuTiles, warpTiles, recognizeAttention] = o;
  (void)gpuTiles, (void)warpTiles, (void)recognizeAttention;
  std::ostringstream os;
  os << vectorBits << ' ' << qTile << ' ' << kvTile << ' ' << decodeRows << ' ' << threads << ' '
     << l1Bytes << ' ' << l2Bytes << ' ' << gemmKc << ' ' << gemmMc << ' ' << isa << ' '
     << matmulPrecision;
  return os.str();
}

ir::CpuPipelineOptions decode(llvm::StringRef text) {
  ir::CpuPipelineOptions o;
  auto &[vectorBits, qTile, kvTile, decodeRows, threads, l1Bytes, l2Bytes, gemmKc, gemmMc, isa,
         matmulPrecision, gpuTiles, warpTiles, recognizeAttention] = o;
  (void)gpuTiles, (void)warpTiles, (void)recognizeAttention;
  std::istringstream is(text.str());
  is >> vectorBits >> qTile >> kvTile >> decodeRows >> threads >> l1Bytes >> l2Bytes >> gemmKc >>
      gemmMc >> isa >> matmulPrecision;
  if (!is)
    internal_error("a deferred schedule's pipeline options do not read back: '" + text.str() + "'");
  return o;
}

/// The schedule's MLIR module read back into `ctx` and lowered to the LLVM dialect: the
/// `linalg` stage's passes after the flash pass, then the `loops` and `llvm` stages.
mlir::OwningOpRef<mlir::ModuleOp> lower_to_llvm_dialect(mlir::MLIRContext &ctx,
                                                        llvm::StringRef bytes,
                                                        const ir::CpuPipelineOptions &o,
                                                        const std::string &name) {
  std::string diags;
  auto handler = ir::collect_diagnostics(ctx, diags);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(bytes, mlir::ParserConfig(&ctx));
  if (!module)
    throw CompileError("linalg", "cannot read the deferred schedule " + name + " back: " + diags);
  std::string what = "the deferred schedule " + name + ": ";
  ir::runStageOrThrow(
      *module, stage_name(Stage::Linalg), diags,
      [](mlir::OpPassManager &pm) {
        ir::addCpuLinalgTail(pm);
        return true;
      },
      what);
  for (Stage stage : {Stage::Loops, Stage::Llvm})
    ir::runStageOrThrow(
        *module, stage_name(stage), diags,
        [&](mlir::OpPassManager &pm) { return ir::addCpuStage(pm, stage, o); }, what);
  return module;
}

} // namespace

std::vector<HeldSchedule> hold_deferred_schedules(mlir::ModuleOp module) {
  std::vector<HeldSchedule> out;
  mlir::SymbolTable symbols(module);
  for (auto fn : module.getOps<mlir::func::FuncOp>()) {
    if (fn.isDeclaration() || !fn.getName().starts_with(abi::kDeferredSchedulePrefix))
      continue;
    out.push_back({fn.getName().str(), side_module(fn, symbols)});
    fn.getBody().getBlocks().clear();
    fn.setPrivate();
  }
  return out;
}

std::vector<DeferredSchedule> bind_deferred_schedules(std::vector<HeldSchedule> &held,
                                                      mlir::ModuleOp module) {
  std::vector<DeferredSchedule> out;
  for (HeldSchedule &h : held)
    out.push_back({h.name, bytecode(h, module)});
  return out;
}

void add_deferred_stubs(llvm::Module &m, const std::vector<DeferredSchedule> &schedules,
                        const ir::CpuPipelineOptions &o) {
  llvm::LLVMContext &ctx = m.getContext();
  std::string options = encode(o);
  for (const DeferredSchedule &s : schedules) {
    llvm::Function *f = m.getFunction(s.name);
    if (!f || !f->isDeclaration())
      internal_error("the kernel's LLVM module has no declaration of " + s.name);
    new llvm::UnreachableInst(ctx, llvm::BasicBlock::Create(ctx, "", f));
    f->addFnAttr(kDeferredAttr);
    f->setMetadata(kMlirMetadata, llvm::MDTuple::get(ctx, {llvm::MDString::get(ctx, s.mlir),
                                                           llvm::MDString::get(ctx, options)}));
  }
}

std::unique_ptr<llvm::Module> lower_deferred_stub(llvm::Module &m, llvm::TargetMachine &tm) {
  llvm::Function *stub = nullptr;
  for (llvm::Function &f : m)
    if (f.getMetadata(kMlirMetadata))
      stub = &f;
  if (!stub)
    return nullptr;
  auto *md = llvm::cast<llvm::MDTuple>(stub->getMetadata(kMlirMetadata));
  std::string name = stub->getName().str();
  ir::CpuPipelineOptions o = decode(llvm::cast<llvm::MDString>(md->getOperand(1))->getString());
  std::unique_ptr<mlir::MLIRContext> ctx = ir::newCompileContext();
  mlir::OwningOpRef<mlir::ModuleOp> module = lower_to_llvm_dialect(
      *ctx, llvm::cast<llvm::MDString>(md->getOperand(0))->getString(), o, name);
  std::unique_ptr<llvm::Module> out = translate(*module, m.getContext());
  if (!out)
    throw CompileError("llvm-ir", "cannot translate the deferred schedule " + name);
  prepare_module(*out, tm, {name});
  set_code_attributes(*out, tm, o.vectorBits);
  llvm::Function *f = out->getFunction(name);
  if (!f || f->isDeclaration())
    internal_error("the deferred schedule " + name + " lost its function when lowered");
  f->setLinkage(stub->getLinkage());
  f->setVisibility(stub->getVisibility());
  if (llvm::Metadata *level = m.getModuleFlag(kOptLevelFlag))
    out->addModuleFlag(llvm::Module::Error, kOptLevelFlag, level);
  return out;
}

} // namespace qkv::jit
