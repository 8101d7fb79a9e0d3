// Host staging behind the Backend (runtime/backend.hpp): the CPU backend's HostStaging, which
// the MPI transport uses for every message under BB_HOST_STAGING=always (the staged path without
// a GPU; tests/mpi/run_staged.sh runs it end to end). The CUDA one: test_cuda_backend.cpp.
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/cpu_backend.hpp"

namespace bb {
namespace {

std::vector<float> iota_vector(std::size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(HostStaging, CpuMemoryIsHostMemory) {
  CpuBackend cpu;
  EXPECT_TRUE(cpu.device_is_host());
  const std::unique_ptr<HostStaging> staging = cpu.make_host_staging();
  ASSERT_NE(staging, nullptr);
  EXPECT_EQ(staging->held_bytes(), 0u);
  EXPECT_EQ(staging->in_use_bytes(), 0u);
}

TEST(HostStaging, CpuSendIsACopyReadyAtOnce) {
  CpuBackend cpu;
  const auto staging = cpu.make_host_staging();
  std::vector<float> src = iota_vector(1000, 1.0f);
  HostStaging::Ticket t = staging->stage_send(src.data(), src.size());
  ASSERT_TRUE(t.valid());
  src.assign(src.size(), -7.0f);  // the caller may reuse its buffer once staged
  const auto* host = static_cast<const float*>(staging->send_ready(t));
  ASSERT_NE(host, nullptr);  // CPU calls are synchronous: the copy is done
  EXPECT_NE(host, src.data());
  for (std::size_t i = 0; i < 1000; ++i) ASSERT_EQ(host[i], static_cast<float>(i + 1)) << i;
  EXPECT_EQ(staging->send_ready(t), host);  // asking again gives the same buffer
  EXPECT_GE(staging->in_use_bytes(), 1000 * sizeof(float));
  staging->release(t);
  EXPECT_FALSE(t.valid());
  EXPECT_EQ(staging->in_use_bytes(), 0u);
}

TEST(HostStaging, CpuReceiveIsDeliveredToTheDestination) {
  CpuBackend cpu;
  const auto staging = cpu.make_host_staging();
  const std::vector<float> data = iota_vector(513, 10.0f);
  std::vector<float> dst(513, 0.0f);
  HostStaging::Ticket r = staging->stage_recv(dst.data(), dst.size());
  auto* buf = static_cast<float*>(staging->recv_buffer(r));
  ASSERT_NE(buf, nullptr);
  EXPECT_NE(buf, dst.data());
  std::copy(data.begin(), data.end(), buf);  // "the network" writes the host buffer
  EXPECT_EQ(dst[0], 0.0f);                   // nothing reaches dst before deliver()
  staging->deliver(r);
  EXPECT_FALSE(r.valid());
  EXPECT_EQ(dst, data);
  EXPECT_EQ(staging->in_use_bytes(), 0u);
}

TEST(HostStaging, CpuBuffersAreReusedAndDistinctWhileLent) {
  CpuBackend cpu;
  const auto staging = cpu.make_host_staging();
  const std::size_t n = 4096;
  std::vector<float> a = iota_vector(n, 0.0f), b = iota_vector(n, 5.0f), dst(n);
  std::size_t held_after_first = 0;
  for (int round = 0; round < 5; ++round) {
    // Two sends and a receive outstanding at once: three different buffers.
    HostStaging::Ticket s1 = staging->stage_send(a.data(), n);
    HostStaging::Ticket s2 = staging->stage_send(b.data(), n - 100);  // within a quarter: reuse
    HostStaging::Ticket r = staging->stage_recv(dst.data(), n);
    const auto* h1 = static_cast<const float*>(staging->send_ready(s1));
    const auto* h2 = static_cast<const float*>(staging->send_ready(s2));
    auto* hr = static_cast<float*>(staging->recv_buffer(r));
    EXPECT_NE(h1, h2);
    EXPECT_NE(static_cast<const float*>(hr), h1);
    EXPECT_NE(static_cast<const float*>(hr), h2);
    EXPECT_EQ(h1[n - 1], a[n - 1]);
    EXPECT_EQ(h2[n - 101], b[n - 101]);
    std::copy(h2, h2 + n - 100, hr);
    staging->release(s1);
    staging->release(s2);
    staging->deliver(r);
    EXPECT_EQ(dst[n - 101], b[n - 101]);
    if (round == 0) held_after_first = staging->held_bytes();
    EXPECT_EQ(staging->held_bytes(), held_after_first) << "round " << round;
    EXPECT_EQ(staging->in_use_bytes(), 0u);
  }
  EXPECT_GE(held_after_first, 3 * (n - 100) * sizeof(float));
  EXPECT_LE(held_after_first, 3 * n * sizeof(float));
}

TEST(HostStaging, CpuEmptyMessages) {
  CpuBackend cpu;
  const auto staging = cpu.make_host_staging();
  HostStaging::Ticket s = staging->stage_send(nullptr, 0);
  EXPECT_NE(staging->send_ready(s), nullptr);
  staging->release(s);
  HostStaging::Ticket r = staging->stage_recv(nullptr, 0);
  EXPECT_NE(staging->recv_buffer(r), nullptr);
  staging->deliver(r);
  EXPECT_EQ(staging->in_use_bytes(), 0u);
}

TEST(HostStaging, CpuWrongTicketsThrow) {
  CpuBackend cpu;
  const auto staging = cpu.make_host_staging();
  std::vector<float> x(8, 1.0f);
  HostStaging::Ticket s = staging->stage_send(x.data(), x.size());
  HostStaging::Ticket r = staging->stage_recv(x.data(), x.size());
  HostStaging::Ticket s_copy = s, r_copy = r;
  EXPECT_THROW(staging->deliver(s_copy), std::logic_error);  // a send is not delivered
  EXPECT_THROW(staging->recv_buffer(s), std::logic_error);   // nor received into
  EXPECT_THROW(staging->release(r_copy), std::logic_error);  // a receive is not released
  EXPECT_THROW(staging->send_ready(r), std::logic_error);    // nor sent
  staging->release(s);
  EXPECT_THROW(staging->release(s_copy), std::logic_error);  // released already
  staging->deliver(r);
  EXPECT_THROW(staging->deliver(r_copy), std::logic_error);  // delivered already
  HostStaging::Ticket none;
  EXPECT_THROW(staging->send_ready(none), std::logic_error);
}

}  // namespace
}  // namespace bb
