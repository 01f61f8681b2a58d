// Names for JIT-compiled code in `perf report`: with QKV_PERF_MAP=1 every kernel linked
// in this process writes its functions' addresses, sizes and names to
// /tmp/perf-<pid>.map, the file Linux perf reads for code that has no ELF file behind it
// (the "perf map" convention, tools/perf/Documentation/jit-interface.txt).
#include "PerfMap.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include <unistd.h>

#include <qkv/runtime/env.hpp>

#include "llvm/ExecutionEngine/JITLink/JITLink.h"
#include "llvm/ExecutionEngine/Orc/LinkGraphLinkingLayer.h"
#include "llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h"

namespace qkv::jit {

namespace {

/// Appends "<start> <size> <name>" (hex, hex, text) for each function a link graph
/// defines, once its addresses are final.
class PerfMapPlugin : public llvm::orc::LinkGraphLinkingLayer::Plugin {
public:
  void modifyPassConfig(llvm::orc::MaterializationResponsibility &, llvm::jitlink::LinkGraph &,
                        llvm::jitlink::PassConfiguration &config) override {
    // Functions of internal linkage (the GEMM's block functions, most OpenMP bodies) are
    // not live roots: the pruning pass drops their symbols (keeping their code, which
    // the entry points reach) unless they are marked live first.
    config.PrePrunePasses.push_back([](llvm::jitlink::LinkGraph &g) {
      for (llvm::jitlink::Symbol *s : g.defined_symbols())
        if (s->hasName() && s->isCallable())
          s->setLive(true);
      return llvm::Error::success();
    });
    config.PostFixupPasses.push_back([this](llvm::jitlink::LinkGraph &g) {
      write(g);
      return llvm::Error::success();
    });
  }
  llvm::Error notifyFailed(llvm::orc::MaterializationResponsibility &) override {
    return llvm::Error::success();
  }
  llvm::Error notifyRemovingResources(llvm::orc::JITDylib &, llvm::orc::ResourceKey) override {
    return llvm::Error::success();
  }
  void notifyTransferringResources(llvm::orc::JITDylib &, llvm::orc::ResourceKey,
                                   llvm::orc::ResourceKey) override {}

private:
  static void write(llvm::jitlink::LinkGraph &g) {
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    std::string path = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
    std::FILE *f = std::fopen(path.c_str(), "a");
    if (!f)
      return; // a profile without names is still a profile; the kernel itself is fine
    for (llvm::jitlink::Symbol *s : g.defined_symbols())
      if (s->hasName() && s->getSize() > 0 && s->isCallable())
        std::fprintf(f, "%llx %llx %s\n",
                     static_cast<unsigned long long>(s->getAddress().getValue()),
                     static_cast<unsigned long long>(s->getSize()),
                     std::string(*s->getName()).c_str());
    std::fclose(f);
  }
};

} // namespace

void add_perf_map(llvm::orc::LLJIT &jit) {
  static const bool wanted = env_switch("QKV_PERF_MAP").value_or(false);
  if (!wanted)
    return;
  if (auto *layer = llvm::dyn_cast<llvm::orc::ObjectLinkingLayer>(&jit.getObjLinkingLayer()))
    layer->addPlugin(std::make_shared<PerfMapPlugin>());
}

} // namespace qkv::jit
