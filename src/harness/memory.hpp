// Memory checked up front (issue 23: `run --hidden 65536` used to die with std::bad_alloc):
// before the sweep, every rank estimates what it needs for each configuration, rank 0 adds up
// the ranks that share a host and refuses, in one line, a sweep whose largest configuration
// cannot fit in what that host has available.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "harness/settings.hpp"
#include "harness/sweep.hpp"
#include "sim/memory.hpp"

namespace bb::harness {

// The memory model's inputs (sim/memory.hpp) for configuration C under O: each chunk's bytes
// from the runtime's own layouts (chunk_buffers: what its Buffers allocate; on CUDA each as the
// caching allocator's block, cuda_block_bytes), on CUDA with bf16 the weights' bf16 copies
// (half of them), one message buffer, the send buffers' release (--hold-sends) and the
// transport's eager limit (MPI: kMpiEagerBytes; NCCL: none). The runtime's own bytes (CUDA
// context, NCCL) are measured, per rank: the callers add them.
MemoryConfig memory_config(const RunConfig& c, const RunSettings& o);
// MPI's eager limit: sends of at most this many bytes complete when posted. MPICH 4.0.2 ch4:ucx
// between ranks of one host, measured (docs/memory.md): messages of 8 KiB complete when posted,
// of 12 KiB and more only after the receiver took them.
inline constexpr double kMpiEagerBytes = 8 * 1024;

// Bytes one rank holds while a configuration runs: the memory model's peak (memory_config,
// the order and times of a simulation with unit costs), by term (docs/memory.md):
//   weights, gradients   the parameters of the rank's chunks and their gradients (DualPipe:
//                        with the partner copy's gradients received from another rank);
//   optimizer            Adam's two moments (twice the weights), SGD none;
//   bf16 copies          CUDA with --dtype bf16: the weights rounded to bf16 (half of them);
//   activations          each chunk's pools at their high-water: per micro-batch its input
//                        copy, saved tensors and the loss's (the model's sizes, recompute too);
//   buffers              the message pool at its high-water (sends until complete, receives
//                        until consumed);
//   workspace            each chunk's scratch, loss and work area;
//   reference            rank 0 with --check: the whole model's parameters and gradients, and
//                        one micro-batch's activations through every chunk.
// Nothing but the message buffers in synthetic mode (accounting only).
struct MemoryNeed {
  double weights = 0, gradients = 0, optimizer = 0, activations = 0, buffers = 0, reference = 0;
  double workspace = 0, bf16_copies = 0;
  double total() const {
    return weights + gradients + optimizer + activations + buffers + workspace + bf16_copies +
           reference;
  }
};

MemoryNeed memory_need(const RunConfig& c, const RunSettings& o, int rank);

// What this process can still take, and where the figure comes from: /proc/meminfo's
// MemAvailable, lowered to the memory cgroup's limit less its usage (cgroup v2 memory.max /
// memory.current, or v1 memory.limit_in_bytes / memory.usage_in_bytes). nullopt: unknown.
struct MemoryAvailable {
  double bytes = 0;
  std::string source;  // "MemAvailable" or "the cgroup limit"
};
std::optional<MemoryAvailable> memory_available();

// "1.5 GiB", "640 MiB", "12 KiB", "100 B".
std::string bytes_text(double bytes);

// Collective over `comm`: every rank's need per configuration and its host go to rank 0
// (non-blocking gathers), which sums the needs of ranks on one host, configuration by
// configuration, against that host's available memory. Returns, on rank 0, the one-line reason
// for the first host and configuration that cannot fit ("" everywhere else, and when all fit
// or the available memory is unknown).
// The cpu backend is checked against the host's memory, before the backend exists (backend
// null). A cuda backend is checked once it exists (pass it; with null this returns "" for
// cuda): ranks on one GPU of one host add up against the least free memory they saw on it
// (cudaMemGetInfo after their CUDA context and cuBLAS were made).
std::string memory_refusal(const std::vector<RunConfig>& configs, const RunSettings& o,
                           MPI_Comm comm, double timeout_s, Backend* backend = nullptr);

}  // namespace bb::harness
