// The CUDA backend and the NCCL transport as a plugin: `libbb_cuda.so` (src/runtime/cuda/,
// built when CMake finds CUDA) is loaded with dlopen the first time something asks for CUDA
// (`run --backend cuda`, `--transport nccl`, the CUDA versions of a results file's root
// attributes), so commands that never touch a GPU (`sim`, `model`, `validate`, `show`, `run`
// on the CPU) neither link nor load cuBLAS, cuBLASLt, NCCL or the CUDA runtime.
//
// Where the plugin is looked for, first found wins: $BB_CUDA_PLUGIN (a path; then nowhere
// else), the folder of the running executable, its lib/ folder (tools/pack-gpu.sh's layout),
// then the dynamic loader's own search (LD_LIBRARY_PATH, the system's folders). It is never
// unloaded (objects it made may live until the process ends).
//
// This header names no CUDA type: the main binary includes it; the plugin implements the C
// entry points below (src/runtime/cuda/plugin.cpp).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "runtime/backend.hpp"
#include "runtime/transport.hpp"

// --- The plugin's C entry points (resolved with dlsym by name) --------------------------------
// The status codes: 0 success, 2 a configuration error (no device, a negative rank, NCCL not
// in the build, NCCL with a CPU backend), 1 any other failure; `err` (err_len bytes) gets a
// one-line, NUL-terminated message when the status is not 0.
extern "C" {
// kCudaPluginAbi of the build that made the plugin; the loader refuses another value.
int bb_cuda_plugin_abi(void);
// A CudaBackend on GPU local_rank mod the node's device count; bf16 != 0: bf16 GEMM operands.
int bb_cuda_make_backend(int local_rank, int bf16, bb::Backend** out, char* err,
                         std::size_t err_len);
// An NCCL transport over `comm` (collective) for a backend this plugin made; its setup fails
// after timeout_s seconds instead of waiting for a peer that never comes.
int bb_cuda_make_nccl_transport(MPI_Comm comm, bb::Backend* backend, double timeout_s,
                                bb::Transport** out, char* err, std::size_t err_len);
// The device of a backend this plugin made; -1 for any other backend.
int bb_cuda_device_of(bb::Backend* backend);
// What a backend this plugin made measured (CudaBackend::runtime_bytes: the context and
// cuBLAS) and its device's name (into name, len bytes, NUL-terminated); 0 and "" for any other
// backend.
std::size_t bb_cuda_runtime_bytes(bb::Backend* backend);
void bb_cuda_device_name(bb::Backend* backend, char* name, std::size_t len);
// CUDA runtime ("13.0"), driver ("13.0" or "none") and NCCL ("2.28.9" or "none") versions.
void bb_cuda_versions(char* runtime, char* driver, char* nccl, std::size_t len);
// Device memory of a backend this plugin made (CudaBackend::memory_stats, which samples
// cudaMemGetInfo). `flags`: bit 1 (2) first returns the allocator's cached blocks to the driver
// (synchronises), bit 0 (1) then sets its peaks to the current values. Returns 0, or 1 (and
// leaves *out alone) for any other backend.
struct bb_cuda_memory_info {
  std::size_t allocated, peak_allocated;  // the caching allocator's cudaMalloc'd bytes (blocks,
                                          // cache, workspaces, bf16 copies) now and at most
  std::size_t device_free, device_total;  // cudaMemGetInfo now
  std::size_t device_peak_used;  // largest (total − free) sampled: every process on the device
  std::size_t context, cublas;   // measured when the backend was made
};
int bb_cuda_memory(bb::Backend* backend, int flags, bb_cuda_memory_info* out);
}

namespace bb::cuda_plugin {

// Raised whenever an entry point or its meaning changes.
// 2: bb_cuda_runtime_bytes, bb_cuda_device_name; 3: bf16 tensors (TensorPtr kernels), the NCCL
// setup's timeout.
inline constexpr int kCudaPluginAbi = 3;
inline constexpr const char* kFileName = "libbb_cuda.so";

// Whether the plugin is loaded (loading it at the first call); when not, `why` gets one line
// saying where it was looked for and what failed.
bool available(std::string* why = nullptr);

// Throw ConfigError ("--backend cuda: ...", "--transport nccl: ...") when the plugin is
// missing or says so (no device, ...), std::runtime_error for a CUDA failure.
std::unique_ptr<Backend> make_backend(int local_rank, bool bf16);
std::unique_ptr<Transport> make_nccl_transport(MPI_Comm comm, Backend& backend, double timeout_s);

// -1 without the plugin or for a backend it did not make. Never loads the plugin: a backend
// it made means it is loaded.
int device_of(Backend& backend);
// The same for what the run record reports (harness/metrics.hpp): the memory the CUDA context
// and cuBLAS take beside the allocator, and the device's name; 0 and "" for a CPU backend.
std::size_t runtime_bytes(Backend& backend);
std::string device_name(Backend& backend);

// Device memory of a CUDA backend (bb_cuda_memory above); nullopt for a CPU backend. kRestart
// empties the allocator's cache and restarts its peaks (a configuration's timed steps after
// --check's reference: their peak is theirs alone).
enum class MemoryRead { kRead = 0, kRestart = 3 };
std::optional<bb_cuda_memory_info> device_memory(Backend& backend,
                                                 MemoryRead read = MemoryRead::kRead);

struct Versions {
  std::string runtime = "none", driver = "none", nccl = "none";
};
// "none" each without the plugin.
Versions versions();

// Opens the plugin at `path` (for tests and the search above): its handle, or null with `why`
// set (the loader's message, or which entry point is missing, or an ABI mismatch).
void* open(const std::string& path, std::string* why);

}  // namespace bb::cuda_plugin
