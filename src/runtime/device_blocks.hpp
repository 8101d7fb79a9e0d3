// The block a CUDA backend's caching allocator sets aside for a request (cuda_backend.cpp):
// up to 1 MiB rounded up to 512 bytes, beyond that to a multiple of 2 MiB. Written once, for
// the allocator and for the memory model that counts its buffers (harness/memory.cpp).
#pragma once

#include <cstddef>

namespace bb {

inline constexpr std::size_t kCudaSmallBlockLimit = std::size_t{1} << 20;  // 1 MiB
inline constexpr std::size_t kCudaSmallBlockRound = 512;
inline constexpr std::size_t kCudaLargeBlockRound = std::size_t{2} << 20;  // 2 MiB

constexpr std::size_t cuda_block_bytes(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  const std::size_t to =
      bytes <= kCudaSmallBlockLimit ? kCudaSmallBlockRound : kCudaLargeBlockRound;
  return (bytes + to - 1) / to * to;
}

}  // namespace bb
