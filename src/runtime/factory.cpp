#include "runtime/factory.hpp"

#include "common/error.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/cuda_plugin.hpp"
#include "runtime/mpi_transport.hpp"

namespace bb {

std::unique_ptr<Backend> make_backend(BackendKind kind, int local_rank, Dtype dtype) {
  if (kind == BackendKind::kCpu) return std::make_unique<CpuBackend>();
  // The CUDA backend makes every GEMM of a bf16 run a bf16 GEMM anyway (bf16 activations);
  // the flag also rounds GEMMs of fp32 operands.
  return cuda_plugin::make_backend(local_rank, dtype == Dtype::kBF16);
}

std::unique_ptr<Transport> make_transport(TransportKind kind, MPI_Comm comm, Backend& backend,
                                          double timeout_s) {
  if (kind == TransportKind::kMpi) return std::make_unique<MpiTransport>(comm, &backend);
  if (backend.kind() == BackendKind::kCpu)
    throw ConfigError("--transport nccl: needs --backend cuda");
  return cuda_plugin::make_nccl_transport(comm, backend, timeout_s);
}

}  // namespace bb
