#include "runtime/mpi_util.hpp"

#include <climits>

#include "runtime/wait.hpp"

namespace bb::mpi {

void check(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  throw MpiError(std::string(file) + ":" + std::to_string(line) + ": " + call +
                 " failed: " + std::string(text, static_cast<std::size_t>(len)));
}

int rank(MPI_Comm comm) {
  int r = 0;
  BB_CHECK_MPI(MPI_Comm_rank(comm, &r));
  return r;
}

int size(MPI_Comm comm) {
  int n = 0;
  BB_CHECK_MPI(MPI_Comm_size(comm, &n));
  return n;
}

void wait(MPI_Request& request, double timeout_s, std::string_view what, Backoff backoff) {
  wait_until(
      [&] {
        int done = 0;
        BB_CHECK_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
        return done != 0;
      },
      timeout_s,
      [&] {
        return "rank " + std::to_string(rank(MPI_COMM_WORLD)) + ": waiting " + std::string(what);
      },
      backoff);
}

void barrier(MPI_Comm comm, double timeout_s, Backoff backoff) {
  MPI_Request req;
  BB_CHECK_MPI(MPI_Ibarrier(comm, &req));
  wait(req, timeout_s, "barrier", backoff);
}

namespace {

int allreduce(int value, MPI_Op op, MPI_Comm comm, double timeout_s) {
  int out = 0;
  MPI_Request req;
  BB_CHECK_MPI(MPI_Iallreduce(&value, &out, 1, MPI_INT, op, comm, &req));
  wait(req, timeout_s, "allreduce");
  return out;
}

int checked_count(std::size_t n) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw MpiError("gather: " + std::to_string(n) + " elements exceed MPI's int count");
  return static_cast<int>(n);
}

template <class T>
std::vector<std::vector<T>> gather_impl(const std::vector<T>& mine, MPI_Datatype type, int root,
                                        MPI_Comm comm, double timeout_s) {
  const int me = rank(comm), n = size(comm);
  int count = checked_count(mine.size());
  std::vector<int> counts(me == root ? n : 0), displs(me == root ? n : 0);
  MPI_Request req;
  BB_CHECK_MPI(MPI_Igather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, root, comm, &req));
  wait(req, timeout_s, "gather of sizes to rank " + std::to_string(root));
  std::vector<T> all;
  if (me == root) {
    std::size_t total = 0;
    for (int r = 0; r < n; ++r) {
      displs[r] = checked_count(total);
      total += static_cast<std::size_t>(counts[r]);
    }
    checked_count(total);
    all.resize(total);
  }
  BB_CHECK_MPI(MPI_Igatherv(mine.data(), count, type, all.data(), counts.data(), displs.data(),
                            type, root, comm, &req));
  wait(req, timeout_s, "gather of results to rank " + std::to_string(root));
  std::vector<std::vector<T>> out;
  if (me != root) return out;
  out.resize(n);
  for (int r = 0; r < n; ++r)
    out[r].assign(all.begin() + displs[r], all.begin() + displs[r] + counts[r]);
  return out;
}

}  // namespace

int allreduce_max(int value, MPI_Comm comm, double timeout_s) {
  return allreduce(value, MPI_MAX, comm, timeout_s);
}

int allreduce_min(int value, MPI_Comm comm, double timeout_s) {
  return allreduce(value, MPI_MIN, comm, timeout_s);
}

void broadcast(int& value, int root, MPI_Comm comm, double timeout_s) {
  MPI_Request req;
  BB_CHECK_MPI(MPI_Ibcast(&value, 1, MPI_INT, root, comm, &req));
  wait(req, timeout_s, "broadcast from rank " + std::to_string(root));
}

void broadcast(std::vector<int>& values, int root, MPI_Comm comm, double timeout_s) {
  MPI_Request req;
  BB_CHECK_MPI(MPI_Ibcast(values.data(), checked_count(values.size()), MPI_INT, root, comm, &req));
  wait(req, timeout_s, "broadcast from rank " + std::to_string(root));
}

std::vector<std::vector<double>> gather(const std::vector<double>& mine, int root, MPI_Comm comm,
                                        double timeout_s) {
  return gather_impl(mine, MPI_DOUBLE, root, comm, timeout_s);
}

std::vector<std::vector<float>> gather(const std::vector<float>& mine, int root, MPI_Comm comm,
                                       double timeout_s) {
  return gather_impl(mine, MPI_FLOAT, root, comm, timeout_s);
}

std::vector<std::string> gather(const std::string& mine, int root, MPI_Comm comm,
                                double timeout_s) {
  const std::vector<char> chars(mine.begin(), mine.end());
  std::vector<std::string> out;
  for (const auto& v : gather_impl(chars, MPI_CHAR, root, comm, timeout_s))
    out.emplace_back(v.begin(), v.end());
  return out;
}

std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  BB_CHECK_MPI(MPI_Get_processor_name(name, &len));
  return std::string(name, static_cast<std::size_t>(len));
}

MPI_Comm duplicate(MPI_Comm comm, double timeout_s) {
  MPI_Comm out = MPI_COMM_NULL;
  MPI_Request req;
  BB_CHECK_MPI(MPI_Comm_idup(comm, &out, &req));
  wait(req, timeout_s, "communicator duplication");
  BB_CHECK_MPI(MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN));
  return out;
}

}  // namespace bb::mpi
