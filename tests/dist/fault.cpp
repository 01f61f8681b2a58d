// qkv-dist-fault --die | --stall: a ring attention in which the last rank dies (SIGKILL)
// or stalls before it joins. The job must end on every rank with a message (mpirun's for a
// death, qkv::dist's deadline for a stall, QKV_DIST_TIMEOUT seconds), never hang.
#include <qkv/dist/ring.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

int main(int argc, char **argv) {
  qkv::dist::Comm comm(&argc, &argv);
  bool die = argc > 1 && std::strcmp(argv[1], "--die") == 0;
  bool last = comm.rank() == comm.size() - 1;
  if (last && die)
    std::raise(SIGKILL);
  if (last)
    std::this_thread::sleep_for(std::chrono::seconds(120));
  qkv::Tensor q = qkv::Tensor::random(qkv::DType::F32, {1, 2, 64, 16}, 1);
  qkv::dist::ring_attention(comm, q, q, q);
  std::printf("rank %d: finished, which it must not\n", comm.rank());
  return 0;
}
