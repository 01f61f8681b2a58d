// A kernel's LLVM module split into parts that are optimised and compiled on their own
// threads. LLVM's optimiser and code generator are single-threaded and take most of a
// cold compile; a kernel's module is one entry function plus one OpenMP task body per
// parallel loop nest (the fused attention, each projection), which do not call one
// another, so they compile independently.
#include "CodegenParts.h"

#include "ObjectJit.h"

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/kernel_abi.hpp>

#include <algorithm>
#include <cassert>
#include <future>
#include <thread>

#include "llvm/ADT/DenseMap.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Transforms/Utils/Cloning.h"

namespace qkv::jit {

unsigned codegen_parts(int requested) {
  if (requested > 0)
    return static_cast<unsigned>(requested);
  return std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
}

void take_objects(CompiledPart &p, std::vector<std::string> &objects) {
  if (!p.glue_object.empty())
    objects.push_back(std::move(p.glue_object));
  objects.push_back(std::move(p.object));
}

namespace {

using PartOf = llvm::DenseMap<const llvm::GlobalValue *, unsigned>;

/// Union-find over the functions with bodies: direct calls join caller and callee, except,
/// with `defer`, a call of a deferred function (a deferred schedule's stub, called from the
/// entry; a GEMM's skinny function, called from its tasks): its part is compiled when such
/// a call is first made.
struct CallClusters {
  llvm::DenseMap<llvm::Function *, llvm::Function *> parent;

  /// The root of `f`'s cluster; `f` must have a body. Never inserts: an insertion could
  /// grow the map under a reference to one of its slots (path halving writes through one).
  llvm::Function *find(llvm::Function *f) {
    auto up = [&](llvm::Function *g) -> llvm::Function *& {
      auto it = parent.find(g);
      assert(it != parent.end() && "CallClusters::find of a declaration");
      return it->second;
    };
    while (up(f) != f) {
      llvm::Function *grand = up(up(f));
      up(f) = grand;
      f = grand;
    }
    return f;
  }
  CallClusters(llvm::Module &m, bool defer) {
    for (llvm::Function &f : m)
      if (!f.isDeclaration())
        parent[&f] = &f;
    for (llvm::Function &f : m)
      for (llvm::Instruction &i : llvm::instructions(f))
        if (auto *call = llvm::dyn_cast<llvm::CallBase>(&i))
          if (llvm::Function *callee = call->getCalledFunction();
              callee && !callee->isDeclaration() &&
              !(defer && callee->hasFnAttribute(kDeferredAttr)))
            parent[find(&f)] = find(callee);
  }
};

/// What `f` costs to optimise and compile, in instructions: each of them, and each basic
/// block as 100. Loops and branches cost more than their instructions (the loop vectorizer,
/// strength reduction and instruction selection work per block and per loop): compiled
/// alone, a 24-layer encoder's small elementwise task bodies (100-160 instructions, about
/// 30 blocks) took 7-11 ms, its attention body (1200, 98 blocks) 50, its skinny GEMM
/// (2300, 65 blocks) 37 and its loop-free glue (14000, 86 blocks) 117. A least-squares fit
/// of those and 60 clusters of 15 gallery graphs put a block at 100-150 instructions (the
/// rest within 5 ms rms); by instructions alone, or with glue at a quarter, the attention
/// body and the glue were each other's equal and went to one part.
std::size_t code_weight(llvm::Function &f) { return f.getInstructionCount() + 100 * f.size(); }

/// The part of each function with a body (see compile_in_parts); `used` receives how
/// many parts are compiled now and `deferred` how many after them are not (with `defer`,
/// each cluster of deferred functions is a part of its own, compiled when first called).
PartOf assign_parts(llvm::Module &m, unsigned parts, bool defer, unsigned &used,
                    unsigned &deferred) {
  CallClusters clusters(m, defer);
  std::vector<std::pair<llvm::Function *, std::size_t>> sizes; // cluster root, instructions
  llvm::DenseMap<llvm::Function *, std::size_t> slot;
  // A cluster is deferred when every function of it is deferred (kDeferredAttr).
  llvm::DenseMap<llvm::Function *, bool> all_deferred;
  for (llvm::Function &f : m)
    if (!f.isDeclaration()) {
      auto [it, fresh] = all_deferred.try_emplace(clusters.find(&f), true);
      it->second = it->second && defer && f.hasFnAttribute(kDeferredAttr);
    }
  std::vector<llvm::Function *> later; // roots of the deferred clusters, in module order
  for (llvm::Function &f : m) {
    if (f.isDeclaration())
      continue;
    llvm::Function *root = clusters.find(&f);
    if (all_deferred.lookup(root)) {
      if (!llvm::is_contained(later, root))
        later.push_back(root);
      continue;
    }
    auto [it, fresh] = slot.try_emplace(root, sizes.size());
    if (fresh)
      sizes.emplace_back(root, 0);
    sizes[it->second].second += code_weight(f);
  }
  // Largest first; equal sizes in module order (std::stable_sort's buffer is deprecated).
  std::vector<std::size_t> order(sizes.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return sizes[a].second != sizes[b].second ? sizes[a].second > sizes[b].second : a < b;
  });
  std::vector<std::size_t> load(
      std::max<std::size_t>(1, std::min<std::size_t>(parts, sizes.size())));
  llvm::DenseMap<llvm::Function *, unsigned> part_of_root;
  for (std::size_t i : order) {
    auto p = static_cast<unsigned>(std::min_element(load.begin(), load.end()) - load.begin());
    part_of_root[sizes[i].first] = p;
    load[p] += sizes[i].second;
  }
  used = static_cast<unsigned>(load.size());
  deferred = static_cast<unsigned>(later.size());
  for (unsigned i = 0; i < deferred; ++i)
    part_of_root[later[i]] = used + i;
  PartOf out;
  for (llvm::Function &f : m)
    if (!f.isDeclaration())
      out[&f] = part_of_root[clusters.find(&f)];
  return out;
}

/// Whether every use of `gv` is inside a function of part `p` (a use through a constant
/// expression or a global's initialiser counts as outside).
bool used_only_in_part(const llvm::GlobalValue &gv, const PartOf &part_of, unsigned p) {
  for (const llvm::User *u : gv.users()) {
    const auto *i = llvm::dyn_cast<llvm::Instruction>(u);
    if (!i || part_of.lookup(i->getFunction()) != p)
      return false;
  }
  return true;
}

/// Internal symbols another part refers to become hidden external ones (one kernel's
/// objects are linked into one JIT library, which resolves hidden symbols within it). An
/// internal function used only in its own part stays internal, so that once inlined there
/// it is deleted, not compiled a second time (the entry's body and its C interface, always
/// inlined into the packed wrapper: a third of a 24-layer encoder's code generation). Internal
/// constants stay internal: every part gets its own copy.
void externalize(llvm::Module &m, const PartOf &part_of) {
  auto open = [](llvm::GlobalValue &gv) {
    if (!gv.hasLocalLinkage())
      return;
    if (!gv.hasName())
      gv.setName("qkv.part.symbol");
    gv.setLinkage(llvm::GlobalValue::ExternalLinkage);
    gv.setVisibility(llvm::GlobalValue::HiddenVisibility);
  };
  for (llvm::Function &f : m)
    if (!f.isDeclaration() && !used_only_in_part(f, part_of, part_of.lookup(&f)))
      open(f);
  for (llvm::GlobalVariable &v : m.globals())
    if (!v.isConstant())
      open(v);
}

/// A copy of part p (p > 0) of `m` (externalized): its functions defined, every other
/// function declared, its own copy of each internal constant.
std::unique_ptr<llvm::Module> copy_part(llvm::Module &m, const PartOf &part_of, unsigned p) {
  llvm::ValueToValueMapTy map;
  return llvm::CloneModule(m, map, [&](const llvm::GlobalValue *gv) {
    if (llvm::isa<llvm::Function>(gv))
      return part_of.lookup(gv) == p;
    return gv->hasLocalLinkage(); // internal constants everywhere
  });
}

/// Leaves `m` as its part 0 once the other parts are copied out: their bodies deleted
/// (declarations now, external as in the copies); every global variable stays defined.
void keep_part_zero(llvm::Module &m, const PartOf &part_of) {
  for (llvm::Function &f : m)
    if (!f.isDeclaration() && part_of.lookup(&f) != 0)
      f.deleteBody();
}

/// Part p (p > 0) as bitcode, for a context of its own.
std::string part_bitcode(llvm::Module &m, const PartOf &part_of, unsigned p) {
  std::string bitcode;
  llvm::raw_string_ostream os(bitcode);
  llvm::WriteBitcodeToFile(*copy_part(m, part_of, p), os);
  return bitcode;
}

/// Whether `f` is glue: an entry point's packed wrapper (or its C interface, when not yet
/// inlined into it; both start with `_mlir_`), or a function only they call (a repeated
/// layer's).
bool is_glue(const llvm::Function &f) {
  if (f.getName().starts_with(abi::kPackedPrefix))
    return true;
  if (f.use_empty())
    return false;
  for (const llvm::User *u : f.users()) {
    const auto *call = llvm::dyn_cast<llvm::CallBase>(u);
    if (!call || call->getCalledFunction() != &f ||
        !call->getFunction()->getName().starts_with(abi::kPackedPrefix))
      return false;
  }
  return true;
}

/// After optimisation, glue without a loop (descriptors unpacked, buffers allocated,
/// layers and parallel regions called: straight-line code that runs once per call) is
/// generated as at -O0 (`optnone`): LLVM's optimising code generator was a third of a
/// 24-layer encoder's cold compile on its entry alone (0.37 s against 0.16 at -O0, the
/// entry's one block of thousands of instructions through instruction selection, register
/// allocation and stack slot colouring), for code whose speed does not show.
void generate_glue_fast(llvm::Module &m) {
  for (llvm::Function &f : m) {
    if (f.isDeclaration() || !is_glue(f) || has_loop(f))
      continue;
    f.addFnAttr(llvm::Attribute::NoInline);
    f.addFnAttr(llvm::Attribute::OptimizeNone);
  }
}

/// Object code for `m` by `tm`, or a CompileError.
std::string emit_or_throw(llvm::Module &m, llvm::TargetMachine &tm) {
  auto obj = emit_object(m, tm);
  if (!obj)
    throw CompileError("llvm-ir", "code generation failed: " + llvm::toString(obj.takeError()));
  return std::move(*obj);
}

/// Object code for `m`, optimised and marked by generate_glue_fast: its glue (the optnone
/// functions) by the non-optimising code generator (fast instruction selection and fast
/// register allocation: optnone alone keeps the greedy allocator, which took 160 of a
/// 24-layer encoder's entry's 180 ms of code generation), the rest by `tm`. A part with
/// both gives two objects: the glue is cloned into `glue_object`'s module and its bodies
/// deleted from `m`.
void emit_part(llvm::Module &m, llvm::TargetMachine &tm, bool shared_library, CompiledPart &out) {
  PartOf split;
  bool glue = false, other = false;
  for (llvm::Function &f : m)
    if (!f.isDeclaration()) {
      split[&f] = f.hasOptNone() ? 1 : 0;
      (f.hasOptNone() ? glue : other) = true;
    }
  if (glue && other) {
    externalize(m, split);
    std::unique_ptr<llvm::Module> part = copy_part(m, split, 1);
    keep_part_zero(m, split);
    auto fast = host_target_machine(shared_library);
    fast->setOptLevel(llvm::CodeGenOptLevel::None);
    out.glue_object = emit_or_throw(*part, *fast);
  } else if (glue) {
    tm.setOptLevel(llvm::CodeGenOptLevel::None);
  }
  out.object = emit_or_throw(m, tm);
}

CompiledPart compile_module(llvm::Module &m, int opt_level, bool keep_ir, bool shared_library) {
  auto tm = host_target_machine(shared_library);
  optimize(m, opt_level, *tm);
  generate_glue_fast(m);
  CompiledPart out;
  if (keep_ir) {
    llvm::raw_string_ostream os(out.ir);
    m.print(os, nullptr);
  }
  // An object added to the JIT runs no initialisers; the pipeline makes none.
  if (m.getNamedGlobal("llvm.global_ctors") || m.getNamedGlobal("llvm.global_dtors"))
    throw CompileError("llvm-ir", "the module has global constructors, which qkv cannot run");
  emit_part(m, *tm, shared_library, out);
  return out;
}

/// A part in a context of its own (LLVM contexts are not shared between threads).
CompiledPart compile_bitcode(const std::string &bitcode, int opt_level, bool keep_ir,
                             bool shared_library) {
  llvm::LLVMContext ctx;
  auto m = llvm::parseBitcodeFile(llvm::MemoryBufferRef(bitcode, "qkv-part"), ctx);
  if (!m)
    throw CompileError("llvm-ir", "cannot read a module part back: " +
                                      llvm::toString(m.takeError()));
  return compile_module(**m, opt_level, keep_ir, shared_library);
}

} // namespace

std::vector<CompiledPart> compile_in_parts(llvm::Module &m, unsigned parts, int opt_level,
                                           bool keep_ir, bool shared_library, bool defer) {
  unsigned used = 1, deferred = 0;
  PartOf part_of = assign_parts(m, std::max(parts, 1u), defer, used, deferred);
  if (used == 1 && deferred == 0)
    return {compile_module(m, opt_level, keep_ir, shared_library)};
  externalize(m, part_of);
  if (deferred > 0) // what the JIT optimises a deferred part at (optimize_deferred)
    m.addModuleFlag(llvm::Module::Error, kOptLevelFlag, static_cast<uint32_t>(opt_level));
  // Parts 1 and on go to other threads (and deferred ones to the JIT) as bitcode, each in a
  // context of its own; part 0 is compiled here, in `m` itself, once the rest has been
  // copied out of it (one copy, write and read back fewer).
  std::vector<std::string> bitcode(used + deferred);
  for (unsigned p = 1; p < used + deferred; ++p)
    bitcode[p] = part_bitcode(m, part_of, p);
  std::vector<std::future<CompiledPart>> others;
  for (unsigned p = 1; p < used; ++p)
    others.push_back(std::async(std::launch::async, compile_bitcode, std::cref(bitcode[p]),
                                opt_level, keep_ir, shared_library));
  keep_part_zero(m, part_of);
  std::vector<CompiledPart> out;
  out.push_back(compile_module(m, opt_level, keep_ir, shared_library));
  for (auto &f : others)
    out.push_back(f.get());
  for (unsigned p = used; p < used + deferred; ++p)
    out.push_back({"", std::move(bitcode[p]), "", /*deferred=*/true});
  return out;
}

} // namespace qkv::jit
