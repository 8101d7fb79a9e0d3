// MPI at the edge: error checking with file:line, and waits that never block inside MPI
// (machine notes: MPICH busy-polls, so every wait is MPI_Test + backoff, collectives included).
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/wait.hpp"

namespace bb::mpi {

// An MPI call returned an error (communicators use MPI_ERRORS_RETURN).
struct MpiError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws MpiError "file:line: <call> failed: <MPI's error string>" when rc != MPI_SUCCESS.
void check(int rc, const char* call, const char* file, int line);

int rank(MPI_Comm comm);
int size(MPI_Comm comm);

// Polls the request with MPI_Test and backoff until it completes. Throws TimeoutError
// ("rank R: waiting <what>") after timeout_s seconds (<= 0: no deadline).
void wait(MPI_Request& request, double timeout_s, std::string_view what,
          Backoff backoff = Backoff{});

// Non-blocking collectives waited with backoff.
void barrier(MPI_Comm comm, double timeout_s, Backoff backoff = Backoff{});
int allreduce_max(int value, MPI_Comm comm, double timeout_s);
int allreduce_min(int value, MPI_Comm comm, double timeout_s);
void broadcast(int& value, int root, MPI_Comm comm, double timeout_s);
// Every rank passes a vector of the same size; afterwards all hold root's values.
void broadcast(std::vector<int>& values, int root, MPI_Comm comm, double timeout_s);

// Gathers every rank's vector to `root` (Igather of the counts, then Igatherv). On root the
// result has one vector per rank; elsewhere it is empty.
std::vector<std::vector<double>> gather(const std::vector<double>& mine, int root, MPI_Comm comm,
                                        double timeout_s);
std::vector<std::vector<float>> gather(const std::vector<float>& mine, int root, MPI_Comm comm,
                                       double timeout_s);
std::vector<std::string> gather(const std::string& mine, int root, MPI_Comm comm, double timeout_s);

// This process's host name (MPI_Get_processor_name).
std::string processor_name();

// MPI_Comm_idup, waited with backoff; the new communicator returns errors to the caller.
MPI_Comm duplicate(MPI_Comm comm, double timeout_s);

}  // namespace bb::mpi

#define BB_CHECK_MPI(call) ::bb::mpi::check((call), #call, __FILE__, __LINE__)
