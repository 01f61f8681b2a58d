// Tensor parallelism over MPI: the collectives a tensor-parallel model takes
// (qkv::TensorParallel, <qkv/models/llama.hpp>), made from a Comm.
//
//   qkv::dist::Comm comm(&argc, &argv);
//   qkv::LlamaOptions o;
//   o.tp = qkv::dist::tensor_parallel(comm);
//   qkv::LlamaModel model = qkv::LlamaModel::load(dir, o); // under mpirun -np N
#pragma once

#include <memory>

#include <qkv/dist/comm.hpp>
#include <qkv/models/llama.hpp>

namespace qkv::dist {

/// Rank and size from `comm`, all-reduce and all-gather through it (with its deadlines).
/// `comm` must outlive every model given the result.
std::shared_ptr<const TensorParallel> tensor_parallel(Comm &comm);

} // namespace qkv::dist
