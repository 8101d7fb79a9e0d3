// Backend and transport by kind (`run --backend cpu|cuda --transport mpi|nccl`; the names in
// runtime/kinds.hpp). The CUDA backend and the NCCL transport live in runtime/cuda/, built as the
// plugin libbb_cuda.so when CMake finds CUDA, and are loaded with dlopen at the first request
// (runtime/cuda_plugin.hpp); a missing plugin, a build without NCCL or a machine without a GPU
// is a configuration error (exit 2) with one line saying which.
#pragma once

#include <mpi.h>

#include <memory>

#include "runtime/backend.hpp"
#include "runtime/kinds.hpp"
#include "runtime/transport.hpp"

namespace bb {

// Throws ConfigError with one line, e.g. "--backend cuda: no CUDA device (...)". `local_rank`
// (the rank's index on its node) selects the GPU: device local_rank mod the node's device
// count, so ranks beyond the device count share GPUs round-robin (MPI transport only: NCCL
// refuses two ranks on one GPU); the CPU backend ignores it. `dtype`: activations, their
// gradients and messages (both backends take fp32 and bf16; master weights stay fp32).
std::unique_ptr<Backend> make_backend(BackendKind kind, int local_rank, Dtype dtype = Dtype::kF32);

// `comm` carries the pipeline's point-to-point traffic (the transport does not free it).
// Throws ConfigError for a transport this build lacks. The MPI transport stages device buffers
// through pinned host memory when the backend is CUDA. The NCCL transport's setup gives up after
// `timeout_s` (a peer that never joins).
std::unique_ptr<Transport> make_transport(TransportKind kind, MPI_Comm comm, Backend& backend,
                                          double timeout_s = 600);

}  // namespace bb
