#include "runtime/factory.hpp"

#include "common/error.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/mpi_transport.hpp"

#if defined(BB_HAVE_CUDA)
#include "runtime/cuda/cuda_backend.hpp"
#include "runtime/cuda/nccl_transport.hpp"
#endif

namespace bb {

std::unique_ptr<Backend> make_backend(const std::string& name, int local_rank,
                                      const std::string& dtype) {
  std::string why;
  if (!backend_supports_dtype(name, dtype, &why)) throw ConfigError(why);
  if (name == "cpu") return std::make_unique<CpuBackend>();
  if (name == "cuda") {
#if defined(BB_HAVE_CUDA)
    const int devices = cuda::device_count();
    if (devices == 0) throw ConfigError("--backend cuda: " + cuda::no_device_reason());
    if (local_rank < 0) throw ConfigError("--backend cuda: negative node-local rank");
    cuda::CudaBackendOptions options;
    if (dtype == "bf16") options.gemm_dtype = cuda::GemmDtype::kBf16;
    return cuda::make_cuda_backend(local_rank % devices, options);
#else
    (void)local_rank;
    throw ConfigError("--backend cuda: built without CUDA");
#endif
  }
  throw ConfigError("--backend " + name + ": unknown (cpu or cuda)");
}

std::unique_ptr<Transport> make_transport(const std::string& name, MPI_Comm comm,
                                          Backend& backend) {
  if (name == "mpi") return std::make_unique<MpiTransport>(comm, &backend);
  if (name == "nccl") {
#if defined(BB_HAVE_NCCL)
    if (backend.name() == "cpu") throw ConfigError("--transport nccl: needs --backend cuda");
    return cuda::make_nccl_transport(comm, backend);
#else
    throw ConfigError("--transport nccl: built without NCCL");
#endif
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
#if defined(BB_HAVE_CUDA)
  if (backend == "cuda") return true;  // bf16 GEMM operands, fp32 accumulation
#endif
  if (why != nullptr) *why = "--dtype bf16: backend " + backend + " computes in fp32 only";
  return false;
}

}  // namespace bb
