// tensor_parallel: qkv::TensorParallel over a Comm (tensor_parallel.hpp).
#include <qkv/dist/tensor_parallel.hpp>

namespace qkv::dist {

std::shared_ptr<const TensorParallel> tensor_parallel(Comm &comm) {
  auto tp = std::make_shared<TensorParallel>();
  tp->rank = comm.rank();
  tp->ranks = comm.size();
  tp->all_reduce_sum = [&comm](Tensor &t, const std::string &what) {
    comm.all_reduce_sum(t, what);
  };
  tp->all_gather_last = [&comm](const Tensor &t, const std::string &what) {
    return comm.all_gather_last(t, what);
  };
  return tp;
}

} // namespace qkv::dist
