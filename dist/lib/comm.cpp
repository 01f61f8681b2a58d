// Comm: MPI_COMM_WORLD with deadlines (comm.hpp).
#include <qkv/dist/comm.hpp>

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

#include <qkv/dsl/error.hpp>

namespace qkv::dist {
namespace {

static_assert(sizeof(MPI_Request) <= sizeof(std::uint64_t), "MPI_Request must fit 64 bits");

std::uint64_t to_handle(MPI_Request r) {
  std::uint64_t h = 0;
  std::memcpy(&h, &r, sizeof r);
  return h;
}

MPI_Request from_handle(std::uint64_t h) {
  MPI_Request r;
  std::memcpy(&r, &h, sizeof r);
  return r;
}

/// Elements of an f32 tensor as MPI counts (an int): larger tensors are an error.
int count_of(const Tensor &t, const std::string &what) {
  if (t.dtype() != DType::F32)
    user_error("qkv::dist: " + what + " must be f32, not " + std::string(dtype_name(t.dtype())));
  if (t.numel() > std::numeric_limits<int>::max())
    user_error("qkv::dist: " + what + " holds " + std::to_string(t.numel()) +
               " elements, more than one MPI message carries (2^31 - 1)");
  return static_cast<int>(t.numel());
}

/// How long a wait polls without yielding the core.
constexpr double kSpinSeconds = 0.05;

double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

} // namespace

Exchange::Exchange(Exchange &&o) noexcept
    : requests_(std::move(o.requests_)), what_(std::move(o.what_)), from_(o.from_), to_(o.to_) {
  o.requests_.clear();
}

Exchange &Exchange::operator=(Exchange &&o) noexcept {
  std::swap(requests_, o.requests_);
  std::swap(what_, o.what_);
  std::swap(from_, o.from_);
  std::swap(to_, o.to_);
  return *this;
}

Exchange::~Exchange() {
  // An exchange dropped unfinished (an exception between start and wait): its buffers
  // may be freed while MPI still writes them, so nothing can go on.
  if (!requests_.empty()) {
    std::fprintf(stderr, "qkv::dist: the exchange '%s' was dropped unfinished\n", what_.c_str());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
}

Comm::Comm(int *argc, char ***argv) {
  int ready = 0;
  MPI_Initialized(&ready);
  if (!ready) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    owns_mpi_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &local_size_);
  MPI_Comm_free(&local);
  if (const char *t = std::getenv("QKV_DIST_TIMEOUT"))
    timeout_s = std::atof(t);
}

Comm::~Comm() {
  int done = 0;
  MPI_Finalized(&done);
  if (owns_mpi_ && !done)
    MPI_Finalize();
}

void Comm::abort(const std::string &why, int code) const {
  std::fprintf(stderr, "qkv::dist: rank %d of %d: %s\n", rank_, size_, why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort(); // MPI_Abort does not return
}

void Comm::wait_requests(std::vector<std::uint64_t> &handles, const std::string &what, int peer) {
  std::vector<MPI_Request> reqs;
  for (std::uint64_t h : handles)
    reqs.push_back(from_handle(h));
  double start = now_s();
  for (;;) {
    int done = 0;
    MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
    if (done)
      break;
    double waited = now_s() - start;
    // Poll hard at first, as MPI_Wait does: a yield hands the core to whatever else runs
    // (a build, another job) for a whole time slice, several ms per message. After
    // kSpinSeconds the peer is clearly busy elsewhere: then yield.
    if (waited < kSpinSeconds)
      continue;
    if (waited > timeout_s) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f", waited);
      abort("no end to " + what + (peer >= 0 ? " with rank " + std::to_string(peer) : "") +
            " after " + buf +
            " s (timeout_s, $QKV_DIST_TIMEOUT): a rank died, stalled, or "
            "called with other shapes; ending every rank");
    }
    std::this_thread::yield();
  }
  stats_.wait_s += now_s() - start;
  handles.clear();
}

Exchange Comm::exchange(const std::vector<const Tensor *> &send, int to,
                        const std::vector<Tensor *> &recv, int from, std::string what) {
  Exchange x;
  x.what_ = std::move(what);
  x.from_ = from;
  x.to_ = to;
  int tag = 0;
  for (Tensor *t : recv) {
    MPI_Request r;
    MPI_Irecv(t->data_as<float>(), count_of(*t, x.what_), MPI_FLOAT, from, tag++, MPI_COMM_WORLD,
              &r);
    x.requests_.push_back(to_handle(r));
  }
  tag = 0;
  for (const Tensor *t : send) {
    MPI_Request r;
    int n = count_of(*t, x.what_);
    MPI_Isend(t->data_as<float>(), n, MPI_FLOAT, to, tag++, MPI_COMM_WORLD, &r);
    x.requests_.push_back(to_handle(r));
    stats_.bytes_sent += static_cast<std::int64_t>(n) * 4;
    ++stats_.messages;
  }
  return x;
}

void Comm::wait(Exchange &x) { wait_requests(x.requests_, x.what_, x.from_); }

void Comm::all_reduce_sum(Tensor &t, const std::string &what) {
  int n = count_of(t, what);
  MPI_Request r;
  MPI_Iallreduce(MPI_IN_PLACE, t.data_as<float>(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
  std::vector<std::uint64_t> h{to_handle(r)};
  stats_.bytes_sent += static_cast<std::int64_t>(n) * 4;
  ++stats_.all_reduces;
  wait_requests(h, "the all-reduce of " + what, -1);
}

std::vector<std::int64_t> Comm::all_gather(const std::vector<std::int64_t> &mine,
                                           const std::string &what) {
  std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(size_));
  MPI_Request r;
  MPI_Iallgather(mine.data(), static_cast<int>(mine.size()), MPI_INT64_T, all.data(),
                 static_cast<int>(mine.size()), MPI_INT64_T, MPI_COMM_WORLD, &r);
  std::vector<std::uint64_t> h{to_handle(r)};
  wait_requests(h, "the all-gather of " + what, -1);
  return all;
}

Tensor Comm::all_gather_last(const Tensor &t, const std::string &what) {
  count_of(t, what);
  const Shape &s = t.shape();
  user_check(!s.empty(), "qkv::dist: " + what + " must have at least one dim");
  std::int64_t width = s.back(), rows = width == 0 ? 0 : t.numel() / width;
  std::vector<std::int64_t> all = all_gather({rows, width}, "the shapes of " + what);
  std::vector<int> counts, offsets;
  std::int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    if (all[2 * static_cast<std::size_t>(r)] != rows)
      user_error("qkv::dist: " + what + ": rank " + std::to_string(r) + " has " +
                 std::to_string(all[2 * static_cast<std::size_t>(r)]) + " rows, rank " +
                 std::to_string(rank_) + " " + std::to_string(rows));
    counts.push_back(static_cast<int>(rows * all[2 * static_cast<std::size_t>(r) + 1]));
    offsets.push_back(static_cast<int>(rows * total));
    total += all[2 * static_cast<std::size_t>(r) + 1];
  }
  Tensor flat(DType::F32, {rows * total});
  MPI_Request req;
  MPI_Iallgatherv(t.data_as<float>(), count_of(t, what), MPI_FLOAT, flat.data_as<float>(),
                  counts.data(), offsets.data(), MPI_FLOAT, MPI_COMM_WORLD, &req);
  std::vector<std::uint64_t> h{to_handle(req)};
  stats_.bytes_sent += t.numel() * 4;
  wait_requests(h, "the all-gather of " + what, -1);
  // Rank blocks (rows, n_r) one after another -> rows of every rank's columns.
  Shape shape = s;
  shape.back() = total;
  Tensor out(DType::F32, shape);
  float *o = out.data_as<float>();
  const float *f = flat.data_as<float>();
  std::int64_t col = 0;
  for (int r = 0; r < size_; ++r) {
    std::int64_t w = all[2 * static_cast<std::size_t>(r) + 1];
    for (std::int64_t i = 0; i < rows; ++i)
      std::memcpy(o + i * total + col, f + offsets[r] + i * w, static_cast<std::size_t>(w) * 4);
    col += w;
  }
  return out;
}

void Comm::barrier(const std::string &what) {
  MPI_Request r;
  MPI_Ibarrier(MPI_COMM_WORLD, &r);
  std::vector<std::uint64_t> h{to_handle(r)};
  wait_requests(h, "the barrier at " + what, -1);
}

void Comm::broadcast(std::vector<std::int64_t> &data, int root, const std::string &what) {
  MPI_Request r;
  MPI_Ibcast(data.data(), static_cast<int>(data.size()), MPI_INT64_T, root, MPI_COMM_WORLD, &r);
  std::vector<std::uint64_t> h{to_handle(r)};
  wait_requests(h, "the broadcast of " + what, root);
}

} // namespace qkv::dist
