// qkv-memref-args-to-pointers: a private function called only directly takes each of its
// identity-layout memref arguments as its aligned pointer and dynamic sizes. A repeated
// layer's function (Import.cpp, one per run of identical blocks) is called once per layer
// from the entry with every weight of that layer; as memref descriptors each weight was
// five to nine values loaded from the entry's arguments and passed on, straight-line code
// that LLVM optimised and generated once per layer (docs/compiler.md, "Whole models").
#include "mlir/Conversion/LLVMCommon/MemRefBuilder.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_MEMREFARGSTOPOINTERS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

/// Whether an argument of type `type` can travel as its aligned pointer and its dynamic
/// sizes: its layout is the identity (row-major, contiguous: its strides follow from its
/// sizes) and its offset therefore 0, and LLVM has a descriptor for it.
bool passesAsPointer(Type type, const LLVMTypeConverter &converter) {
  auto memref = dyn_cast<MemRefType>(type);
  return memref && memref.getLayout().isIdentity() && !memref.getMemorySpace() &&
         converter.convertType(memref);
}

/// The calls of `fn`, or nullopt when it is not a private function with a body that
/// something calls, or when an op other than a func.call uses its symbol (an address
/// taken, a call through another op).
std::optional<SmallVector<func::CallOp>> directCalls(func::FuncOp fn, const SymbolUserMap &users) {
  if (!fn.isPrivate() || fn.isExternal())
    return std::nullopt;
  SmallVector<func::CallOp> calls;
  for (Operation *user : users.getUsers(fn)) {
    auto call = dyn_cast<func::CallOp>(user);
    if (!call)
      return std::nullopt;
    calls.push_back(call);
  }
  if (calls.empty())
    return std::nullopt;
  return calls;
}

/// The arguments of `fn` to pass as pointers: identity-layout memrefs that the function
/// does not deallocate (the descriptor it rebuilds has the aligned pointer as
/// its allocated one).
SmallVector<unsigned> pointerArgs(func::FuncOp fn, const LLVMTypeConverter &converter) {
  SmallVector<unsigned> picked;
  for (BlockArgument arg : fn.getArguments())
    if (passesAsPointer(arg.getType(), converter) &&
        llvm::none_of(arg.getUsers(), [](Operation *op) { return isa<memref::DeallocOp>(op); }))
      picked.push_back(arg.getArgNumber());
  return picked;
}

/// The descriptor of a `type` memref at `ptr` with dynamic sizes `sizes` (in order),
/// its strides those of a row-major array.
Value rebuildDescriptor(OpBuilder &b, Location loc, const LLVMTypeConverter &converter,
                        MemRefType type, Value ptr, ValueRange sizes) {
  auto d = MemRefDescriptor::poison(b, loc, converter.convertType(type));
  d.setAllocatedPtr(b, loc, ptr);
  d.setAlignedPtr(b, loc, ptr);
  d.setConstantOffset(b, loc, 0);
  Type index = converter.getIndexType();
  Value stride = LLVM::ConstantOp::create(b, loc, index, b.getIntegerAttr(index, 1));
  unsigned next = sizes.size();
  for (int64_t k = type.getRank() - 1; k >= 0; --k) {
    Value size =
        type.isDynamicDim(k)
            ? sizes[--next]
            : LLVM::ConstantOp::create(b, loc, index, b.getIntegerAttr(index, type.getDimSize(k)));
    d.setSize(b, loc, k, size);
    d.setStride(b, loc, k, stride);
    if (k > 0)
      stride = LLVM::MulOp::create(b, loc, stride, size);
  }
  return d;
}

/// `fn` takes each argument in `picked` as an `!llvm.ptr` followed by its dynamic sizes
/// (inserted through the function, so that the other arguments keep their attributes),
/// and rebuilds its descriptor at its entry.
void rewriteCallee(func::FuncOp fn, ArrayRef<unsigned> picked, const LLVMTypeConverter &converter) {
  auto ptr = LLVM::LLVMPointerType::get(fn.getContext());
  Type index = converter.getIndexType();
  Block &entry = fn.getBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  for (unsigned i : llvm::reverse(picked)) { // later indices first: inserting shifts them
    BlockArgument arg = entry.getArgument(i);
    Location loc = arg.getLoc();
    auto type = cast<MemRefType>(arg.getType());
    SmallVector<OpOperand *> uses =
        llvm::map_to_vector(arg.getUses(), [](OpOperand &use) { return &use; });
    arg.setType(ptr);
    for (int64_t k = 0, n = type.getNumDynamicDims(); k < n; ++k)
      (void)fn.insertArgument(i + 1 + k, index, DictionaryAttr(), loc);
    auto sizes = entry.getArguments().slice(i + 1, type.getNumDynamicDims());
    Value descriptor = rebuildDescriptor(b, loc, converter, type, arg, sizes);
    Value memref = UnrealizedConversionCastOp::create(b, loc, type, descriptor).getResult(0);
    for (OpOperand *use : uses)
      use->set(memref);
  }
  fn.setType(FunctionType::get(fn.getContext(), entry.getArgumentTypes(),
                               fn.getFunctionType().getResults()));
}

/// `call` passes each operand in `picked` as its aligned pointer and dynamic sizes.
void rewriteCall(func::CallOp call, ArrayRef<unsigned> picked, const LLVMTypeConverter &converter) {
  OpBuilder b(call);
  Location loc = call.getLoc();
  for (unsigned i : llvm::reverse(picked)) {
    Value operand = call.getOperand(i);
    auto type = cast<MemRefType>(operand.getType());
    MemRefDescriptor d(
        UnrealizedConversionCastOp::create(b, loc, converter.convertType(type), operand)
            .getResult(0));
    SmallVector<Value> sizes;
    for (int64_t k = 0; k < type.getRank(); ++k)
      if (type.isDynamicDim(k))
        sizes.push_back(d.size(b, loc, k));
    call.setOperand(i, d.alignedPtr(b, loc));
    call->insertOperands(i + 1, sizes);
  }
}

struct MemRefArgsToPointersPass
    : qkv::ir::impl::MemRefArgsToPointersBase<MemRefArgsToPointersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    LLVMTypeConverter converter(&getContext());
    SymbolTableCollection tables;
    SymbolUserMap users(tables, module);
    for (auto fn : module.getOps<func::FuncOp>()) {
      std::optional<SmallVector<func::CallOp>> calls = directCalls(fn, users);
      if (!calls)
        continue;
      SmallVector<unsigned> picked = pointerArgs(fn, converter);
      if (picked.empty())
        continue;
      rewriteCallee(fn, picked, converter);
      for (func::CallOp call : *calls)
        rewriteCall(call, picked, converter);
    }
  }
};

} // namespace
