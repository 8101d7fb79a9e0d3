#include "runtime/factory.hpp"

#include "common/error.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/cuda_plugin.hpp"
#include "runtime/mpi_transport.hpp"

namespace bb {

std::unique_ptr<Backend> make_backend(const std::string& name, int local_rank,
                                      const std::string& dtype) {
  std::string why;
  if (!backend_supports_dtype(name, dtype, &why)) throw ConfigError(why);
  if (name == "cpu") return std::make_unique<CpuBackend>();
  if (name == "cuda") return cuda_plugin::make_backend(local_rank, dtype == "bf16");
  throw ConfigError("--backend " + name + ": unknown (cpu or cuda)");
}

std::unique_ptr<Transport> make_transport(const std::string& name, MPI_Comm comm, Backend& backend,
                                          double timeout_s) {
  if (name == "mpi") return std::make_unique<MpiTransport>(comm, &backend);
  if (name == "nccl") {
    if (backend.name() == "cpu") throw ConfigError("--transport nccl: needs --backend cuda");
    return cuda_plugin::make_nccl_transport(comm, backend, timeout_s);
  }
  throw ConfigError("--transport " + name + ": unknown (mpi or nccl)");
}

std::string default_transport(const std::string& backend) {
  return backend == "cuda" ? "nccl" : "mpi";
}

bool backend_supports_dtype(const std::string& backend, const std::string& dtype,
                            std::string* why) {
  if (dtype == "fp32") return true;
  if (dtype != "bf16") {
    if (why != nullptr) *why = "--dtype " + dtype + ": unknown (fp32 or bf16)";
    return false;
  }
  // bf16 activations, gradients and messages; fp32 master weights and accumulation. The CPU
  // rounds to bf16 around OpenBLAS's fp32 GEMM (runtime/cpu_backend.hpp).
  (void)backend;
  return true;
}

}  // namespace bb
