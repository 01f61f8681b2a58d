// Kernel: argument checking, memref descriptors, the call, and stage IR.
#include <qkv/runtime/kernel.hpp>

#include <qkv/runtime/checks.hpp>
#include <qkv/runtime/cuda.hpp>
#include <qkv/runtime/kernel_abi.hpp>

#include "check_proofs.hpp"
#include "packed_weights.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

namespace qkv {

using abi::descriptor;

namespace {

template <std::size_t N> std::vector<std::string> names_of(const std::array<Stage, N> &stages) {
  std::vector<std::string> out;
  for (Stage s : stages)
    out.emplace_back(stage_name(s));
  return out;
}

} // namespace

const std::vector<std::string> &Kernel::stage_names() {
  static const std::vector<std::string> names = names_of(kCpuStages);
  return names;
}

const std::vector<std::string> &Kernel::cuda_stage_names() {
  static const std::vector<std::string> names = names_of(kCudaStages);
  return names;
}

Kernel::Kernel(Graph graph, KernelEntry entry,
               std::vector<std::pair<std::string, std::string>> stages,
               std::function<std::string(const std::string &)> lazy_stage, CompileStats stats)
    : graph_(std::make_shared<const Graph>(std::move(graph))), entry_(std::move(entry)),
      stages_(std::move(stages)), lazy_stage_(std::move(lazy_stage)),
      lazy_cache_(std::make_shared<std::map<std::string, std::string>>()),
      stats_(std::move(stats)), packed_(std::make_shared<PackedWeights>()) {
  if (!entry_.packed)
    internal_error("Kernel without an entry point");
  stats_.checked = entry_.checked;
  for (const PackedParam &p : entry_.packed_params) {
    const auto &args = graph_->arguments();
    if (p.argument < 0 || static_cast<std::size_t>(p.argument) >= args.size() ||
        graph_->node(args[static_cast<std::size_t>(p.argument)]).op != OpKind::Param ||
        p.panel_columns <= 0)
      internal_error("graph '" + graph_->name() + "': packed param " + std::to_string(p.argument) +
                     " is not a param of the graph");
  }
}

std::vector<std::pair<std::string, std::int64_t>> Kernel::schedule_runs() const {
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (std::size_t i = 0; i < entry_.schedules.size(); ++i)
    out.emplace_back(entry_.schedules[i],
                     __atomic_load_n(entry_.schedule_runs + i, __ATOMIC_RELAXED));
  return out;
}

std::vector<TileCounts> Kernel::tile_counts() const {
  std::vector<TileCounts> out;
  for (std::size_t i = 0; i < entry_.attentions.size(); ++i) {
    const std::int64_t *c = entry_.tile_counts + 3 * i;
    out.push_back({entry_.attentions[i], __atomic_load_n(c, __ATOMIC_RELAXED),
                   __atomic_load_n(c + 1, __ATOMIC_RELAXED), __atomic_load_n(c + 2, __ATOMIC_RELAXED)});
  }
  return out;
}

std::string Kernel::ir(std::string_view stage) const {
  const auto &names = entry_.on_cuda ? cuda_stage_names() : stage_names();
  if (std::find(names.begin(), names.end(), stage) == names.end()) {
    std::string list;
    for (const auto &n : names)
      list += (list.empty() ? "" : ", ") + n;
    user_error("unknown IR stage '" + std::string(stage) + "'; stages are " + list);
  }
  for (const auto &[name, text] : stages_)
    if (name == stage)
      return text;
  auto it = lazy_cache_->find(std::string(stage));
  if (it != lazy_cache_->end())
    return it->second;
  if (!lazy_stage_)
    user_error("IR stage '" + std::string(stage) + "' was not kept for this kernel");
  std::string text = lazy_stage_(std::string(stage));
  (*lazy_cache_)[std::string(stage)] = text;
  return text;
}

namespace {

std::int64_t int_at(const Tensor &t, std::int64_t i) {
  // Read as integers: through a double, i64 values past 2^53 would round (and a message
  // would name another value).
  return t.dtype() == DType::I64 ? t.data_as<std::int64_t>()[i] : t.data_as<std::int32_t>()[i];
}

/// The compiler's proofs that a mod's loads stay in bounds take every dynamic extent to be
/// below 2^40 (an axis that long could not be allocated); a longer one is refused here.
void check_extents(const Graph &g, const DimBindings &b) {
  for (const auto &[name, extent] : b)
    if (extent >= checks::proofs::kMaxExtent)
      user_error("graph '" + g.name() + "': dim '" + name + "' is " + std::to_string(extent) +
                 "; compiled kernels take extents below 2^40");
}

/// Embedding ids are range-checked here: compiled code reads table rows without bounds
/// checks. Ids come from an input, a param or a constant (no op computes integers).
void check_embedding_ids(const Graph &g, const TensorMap &inputs, const DimBindings &b) {
  for (const Node &n : g.nodes()) {
    if (n.op != OpKind::Embedding)
      continue;
    const Node &ids = g.node(n.inputs[0]);
    if (ids.op != OpKind::Input && ids.op != OpKind::Param && ids.op != OpKind::Constant)
      internal_error("embedding '" + n.name + "': ids from a " + std::string(op_name(ids.op)) +
                     " are not range-checked");
    const Tensor *t = ids.op == OpKind::Constant ? nullptr : &inputs.at(ids.name);
    std::int64_t count = t ? t->numel() : static_cast<std::int64_t>(ids.attrs.data->size());
    std::int64_t vocab = resolve(g.node(n.inputs[1]).dims, b)[0];
    for (std::int64_t i = 0; i < count; ++i) {
      // A constant's values are doubles holding integers (the graph keeps them so).
      std::int64_t v = t ? int_at(*t, i)
                         : static_cast<std::int64_t>((*ids.attrs.data)[static_cast<std::size_t>(i)]);
      if (v < 0 || v >= vocab)
        user_error("embedding '" + n.name + "': id " + std::to_string(v) + " at flat position " +
                   std::to_string(i) + " of '" + ids.name + "' is outside the table's " +
                   std::to_string(vocab) + " rows");
    }
  }
}

/// A cache view's lengths (and a paged one's block table) that come straight from inputs
/// are checked here: compiled code reads rows [0, lengths[b]) of the cache, through the
/// table, without bounds checks.
void check_cache_views(const Graph &g, const TensorMap &inputs, const DimBindings &b) {
  for (const Node &n : g.nodes()) {
    if (n.op != OpKind::CacheView && n.op != OpKind::PagedCacheView)
      continue;
    bool paged = n.op == OpKind::PagedCacheView;
    const Node &lengths = g.node(n.inputs[paged ? 2 : 1]);
    if (lengths.op != OpKind::Input && lengths.op != OpKind::Param)
      continue;
    Shape store = resolve(g.node(n.inputs[0]).dims, b);
    const Node *table = paged ? &g.node(n.inputs[1]) : nullptr;
    Shape ts = table ? resolve(table->dims, b) : Shape{};
    std::int64_t rows = paged ? ts[1] * store[2] : store[2];
    const Tensor &len = inputs.at(lengths.name);
    for (std::int64_t s = 0; s < len.numel(); ++s) {
      std::int64_t v = int_at(len, s);
      if (v < 0 || v > rows)
        user_error(std::string(op_name(n.op)) + " '" + n.name + "': lengths '" + lengths.name +
                   "'[" + std::to_string(s) + "] = " + std::to_string(v) + " is outside [0, " +
                   std::to_string(rows) + "], the rows the cache holds");
      if (!table || (table->op != OpKind::Input && table->op != OpKind::Param))
        continue;
      const Tensor &t = inputs.at(table->name);
      for (std::int64_t m = 0; m * store[2] < v; ++m) {
        std::int64_t page = int_at(t, s * ts[1] + m);
        if (page < 0 || page >= store[0])
          user_error(std::string(op_name(n.op)) + " '" + n.name + "': table '" + table->name +
                     "'[" + std::to_string(s) + ", " + std::to_string(m) +
                     "] = " + std::to_string(page) + " is not a page of the pool (" +
                     std::to_string(store[0]) + " pages); sequence " + std::to_string(s) +
                     " holds " + std::to_string(v) + " rows");
      }
    }
  }
}

} // namespace

TensorMap Kernel::checked_outputs(const TensorMap &inputs,
                                  std::vector<const Tensor *> &out_order) const {
  const Graph &g = *graph_;
  DimBindings b = bind_dims(g, signature(inputs));
  check_extents(g, b);
  check_embedding_ids(g, inputs, b);
  check_cache_views(g, inputs, b);

  TensorMap outputs;
  for (const auto &[name, id] : g.outputs()) {
    const Node &n = g.node(id);
    // The compiled function writes every element of every output.
    Tensor t;
    try {
      t = Tensor::uninitialized(n.dtype, resolve(n.dims, b));
    } catch (const Error &e) {
      user_error("graph '" + g.name() + "': output '" + name + "': " + e.what());
    }
    auto [it, fresh] = outputs.emplace(name, std::move(t));
    out_order.push_back(&it->second);
  }
  return outputs;
}

TensorMap Kernel::run(const TensorMap &inputs) const {
  const Graph &g = *graph_;
  std::vector<const Tensor *> out_order;
  TensorMap outputs = checked_outputs(inputs, out_order);
  std::vector<std::vector<std::int64_t>> descs;
  if (entry_.on_cuda) {
    run_on_cuda(inputs, out_order);
    return outputs;
  }
  for (NodeId id : g.arguments())
    descs.push_back(descriptor(inputs.at(g.node(id).name)));
  for (const Tensor *t : out_order)
    descs.push_back(descriptor(*t));
  std::vector<Tensor> packed = packed_weights(inputs);
  for (const Tensor &t : packed)
    descs.push_back(descriptor(t));
  if (!entry_.checked) {
    call(descs);
    return outputs;
  }
  checks::Run checked(g); // collects what the one call reports
  call(descs);
  if (std::optional<std::string> failure = checked.failure())
    user_error(*failure);
  return outputs;
}

void Kernel::call(std::vector<std::vector<std::int64_t>> &descs) const {
  std::vector<void *> ptrs(descs.size());
  std::vector<void *> packed(descs.size());
  for (std::size_t i = 0; i < descs.size(); ++i) {
    ptrs[i] = descs[i].data();
    packed[i] = &ptrs[i];
  }
  abi::call_generated(entry_.packed, packed.data());
  if (!entry_.take_compile_failures)
    return;
  if (std::string failures = entry_.take_compile_failures(); !failures.empty())
    user_error("graph '" + graph_->name() +
               "': a part of its kernel compiled when a call first needed it (an attention "
               "schedule for a shorter query length) failed to compile, and the call did "
               "not do its work: " +
               failures);
}

/// A CUDA kernel's arguments on device 0: the inputs copied there, the outputs allocated.
struct Kernel::DeviceArgs {
  cuda::Device device = cuda::Device::get(0);
  std::vector<cuda::Buffer> buffers;
  std::vector<std::vector<std::int64_t>> descs;

  DeviceArgs(const Graph &g, const TensorMap &inputs, const std::vector<const Tensor *> &outs) {
    for (NodeId id : g.arguments()) {
      const Tensor &t = inputs.at(g.node(id).name);
      on_device(t, cuda::Buffer(device, t)); // dense and row-major, as every Tensor
    }
    for (const Tensor *t : outs)
      on_device(*t, cuda::Buffer(device, t->nbytes()));
  }
  void on_device(const Tensor &t, cuda::Buffer b) {
    std::vector<std::int64_t> d = descriptor(t);
    d[0] = d[1] = static_cast<std::int64_t>(b.address()); // the same layout, on the device
    descs.push_back(std::move(d));
    buffers.push_back(std::move(b));
  }
};

void Kernel::call_on_device(DeviceArgs &args) const {
  cuda::take_host_error(); // nothing left from an earlier failed run
  call(args.descs);
  if (std::optional<std::string> e = cuda::take_host_error())
    user_error("graph '" + graph_->name() + "' on " + args.device.name() + ": " + *e);
  args.device.synchronize();
}

void Kernel::run_on_cuda(const TensorMap &inputs, const std::vector<const Tensor *> &outs) const {
  const Graph &g = *graph_;
  DeviceArgs args(g, inputs, outs);
  call_on_device(args);
  for (std::size_t i = 0; i < outs.size(); ++i)
    args.buffers[g.arguments().size() + i].download(const_cast<Tensor &>(*outs[i]));
}

std::vector<double> Kernel::time_on_device(const TensorMap &inputs, int calls) const {
  if (!entry_.on_cuda)
    user_error("Kernel::time_on_device: graph '" + graph_->name() +
               "' runs on the CPU; time run() instead");
  if (calls < 1)
    user_error("Kernel::time_on_device: calls must be at least 1, got " + std::to_string(calls));
  std::vector<const Tensor *> out_order;
  TensorMap outputs = checked_outputs(inputs, out_order);
  DeviceArgs args(*graph_, inputs, out_order);
  std::vector<double> ms;
  for (int i = 0; i < calls; ++i) {
    auto t = std::chrono::steady_clock::now();
    call_on_device(args);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
  }
  return ms;
}

TensorMap random_inputs(const Graph &g, const DimBindings &dims, std::uint64_t seed,
                        const RandomRanges &ranges) {
  DimBindings b = complete_dims(g, dims);
  for (const auto &[name, r] : ranges) {
    if (!g.find_argument(name))
      user_error("random_inputs: graph '" + g.name() + "' has no input or param '" + name +
                 "' to give a range");
    if (!(r.second > r.first))
      user_error("random_inputs: the range of '" + name + "' is empty: [" +
                 std::to_string(r.first) + ", " + std::to_string(r.second) + ")");
  }
  TensorMap out;
  std::uint64_t k = 0;
  for (NodeId id : g.arguments()) {
    const Node &n = g.node(id);
    Shape shape;
    for (const Dim &d : n.dims) {
      auto it = b.find(d.name);
      if (it == b.end())
        user_error("random_inputs: dim '" + d.name + "' of '" + n.name +
                   "' is dynamic; give its extent");
      shape.push_back(it->second);
    }
    double lo = -1, hi = 1;
    if (is_int(n.dtype)) {
      lo = 0;
      hi = 4;
      for (NodeId u : g.users(id)) {
        const Node &user = g.node(u);
        if (user.op == OpKind::Embedding && user.inputs[0] == id)
          hi = static_cast<double>(resolve(g.node(user.inputs[1]).dims, b)[0]);
      }
    }
    if (auto r = ranges.find(n.name); r != ranges.end())
      std::tie(lo, hi) = r->second;
    try {
      out.emplace(n.name, Tensor::random(n.dtype, shape, seed * 1000003 + (k++), lo, hi));
    } catch (const Error &e) {
      user_error("random_inputs: '" + n.name + "' of graph '" + g.name() + "': " + e.what());
    }
  }
  return out;
}

TensorMap random_inputs(const Graph &g, const DimBindings &dims, const RandomOptions &options) {
  TensorMap out = random_inputs(g, dims, options.seed, options.ranges);
  if (!options.scale_params)
    return out;
  for (NodeId id : g.arguments()) {
    const Node &n = g.node(id);
    if (n.op != OpKind::Param || !is_float(n.dtype) || options.ranges.count(n.name))
      continue;
    Tensor &t = out.at(n.name);
    if (t.rank() == 0 || t.shape().front() == 0)
      continue;
    double f = 1.0 / std::sqrt(static_cast<double>(t.shape().front()));
    for (std::int64_t i = 0; i < t.numel(); ++i)
      t.set(i, t.get(i) * f);
  }
  return out;
}

} // namespace qkv
