// Backend and transport by name (`run --backend cpu|cuda --transport mpi|nccl`). The CUDA
// backend and the NCCL transport live in runtime/cuda/, built as the plugin libbb_cuda.so when
// CMake finds CUDA, and are loaded with dlopen at the first request (runtime/cuda_plugin.hpp);
// a missing plugin, a build without NCCL or a machine without a GPU is a configuration error
// (exit 2) with one line saying which.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "runtime/backend.hpp"
#include "runtime/transport.hpp"

namespace bb {

// Throws ConfigError with one line, e.g. "--backend cuda: no CUDA device (...)". `local_rank`
// (the rank's index on its node) selects the GPU: device local_rank mod the node's device
// count, so ranks beyond the device count share GPUs round-robin (MPI transport only: NCCL
// refuses two ranks on one GPU); the CPU backend ignores it. `dtype`: fp32, or bf16 (the
// activations, their gradients and messages in bf16; fp32 master weights and accumulation).
std::unique_ptr<Backend> make_backend(const std::string& name, int local_rank,
                                      const std::string& dtype = "fp32");

// `comm` carries the pipeline's point-to-point traffic (the transport does not free it).
// Throws ConfigError for an unknown name or a transport this build lacks. The MPI transport
// stages device buffers through pinned host memory when the backend is CUDA. The NCCL
// transport's setup gives up after `timeout_s` (a peer that never joins).
std::unique_ptr<Transport> make_transport(const std::string& name, MPI_Comm comm, Backend& backend,
                                          double timeout_s = 600);

// The transport that goes with a backend when none is asked for: mpi for cpu, nccl for cuda.
std::string default_transport(const std::string& backend);

// Whether the backend computes in `dtype` (fp32 | bf16); when not, `why` says so in one line.
bool backend_supports_dtype(const std::string& backend, const std::string& dtype, std::string* why);

}  // namespace bb
