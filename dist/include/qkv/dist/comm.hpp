// qkv::dist: qkv over more than one process, through MPI (docs/distributed.md).
//
// Comm is this process's place among the ranks of MPI_COMM_WORLD: it starts MPI (unless
// the program already did) and ends it, moves tensors between ranks, and makes a rank that
// dies or stalls an error on every rank instead of a hang: every wait has a deadline
// (`timeout_s`), after which the waiting rank says what it waited for, from which rank,
// and ends the job (MPI_Abort), so that no rank waits forever. A rank that dies ends the
// job through mpirun, which names it.
//
// The header needs no MPI headers; only qkv_dist links MPI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <qkv/runtime/tensor.hpp>

namespace qkv::dist {

/// What the ranks sent and how long they waited, since the Comm was made.
struct CommStats {
  std::int64_t bytes_sent = 0;
  std::int64_t messages = 0;
  std::int64_t all_reduces = 0;
  double wait_s = 0; // time spent in waits (transfers not hidden behind compute)
};

/// An exchange in flight: started by Comm::exchange, finished by Comm::wait.
class Exchange {
public:
  Exchange() = default;
  Exchange(Exchange &&) noexcept;
  Exchange &operator=(Exchange &&) noexcept;
  Exchange(const Exchange &) = delete;
  ~Exchange();
  bool pending() const { return !requests_.empty(); }

private:
  friend class Comm;
  std::vector<std::uint64_t> requests_; // MPI_Request handles, stored opaquely
  std::string what_;
  int from_ = -1, to_ = -1;
};

class Comm {
public:
  /// Joins MPI_COMM_WORLD, calling MPI_Init_thread (funneled: only the calling thread
  /// uses MPI) unless MPI is already initialised. argc/argv may be null.
  explicit Comm(int *argc = nullptr, char ***argv = nullptr);
  /// MPI_Finalize, if this Comm initialised MPI.
  ~Comm();
  Comm(const Comm &) = delete;
  Comm &operator=(const Comm &) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// The ranks on this machine (sharing its memory), this one included: how many share
  /// its cores.
  int local_size() const { return local_size_; }
  /// Seconds any wait may take before the job ends (default 60, or $QKV_DIST_TIMEOUT).
  double timeout_s = 60;

  /// Starts sending each of `send` to rank `to` and receiving each of `recv` (already
  /// sized: the caller knows the peer's shapes) from rank `from`. `what` names the
  /// transfer in a timeout message ("k and v shard of rank 2").
  Exchange exchange(const std::vector<const Tensor *> &send, int to,
                    const std::vector<Tensor *> &recv, int from, std::string what);
  /// Waits for `x` to finish, at most timeout_s; then ends the job, saying what it was.
  void wait(Exchange &x);
  /// In-place sum over the ranks of an f32 tensor, every rank the same shape.
  void all_reduce_sum(Tensor &t, const std::string &what);
  /// Every rank's `mine` (the same count on every rank), rank by rank.
  std::vector<std::int64_t> all_gather(const std::vector<std::int64_t> &mine,
                                       const std::string &what);
  /// Every rank's t (f32, (..., n_r): the same leading dims on every rank, n_r its own)
  /// joined along the last axis in rank order. Leading dims that differ are an error on
  /// every rank.
  Tensor all_gather_last(const Tensor &t, const std::string &what);
  /// Returns once every rank has called it (`what` names the point in a timeout).
  void barrier(const std::string &what);
  /// The same data on every rank as on rank `root` (sizes already equal).
  void broadcast(std::vector<std::int64_t> &data, int root, const std::string &what);
  /// Ends every rank of the job: prints "qkv::dist: rank R: why" and calls MPI_Abort.
  [[noreturn]] void abort(const std::string &why, int code = 3) const;

  const CommStats &stats() const { return stats_; }

private:
  bool owns_mpi_ = false;
  int rank_ = 0, size_ = 1, local_size_ = 1;
  CommStats stats_;
  void wait_requests(std::vector<std::uint64_t> &requests, const std::string &what, int peer);
};

} // namespace qkv::dist
