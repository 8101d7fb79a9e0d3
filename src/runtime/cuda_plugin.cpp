#include "runtime/cuda_plugin.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <stdexcept>

#include "common/error.hpp"

namespace bb::cuda_plugin {
namespace {

struct Entries {
  decltype(&bb_cuda_make_backend) make_backend = nullptr;
  decltype(&bb_cuda_make_nccl_transport) make_nccl_transport = nullptr;
  decltype(&bb_cuda_device_of) device_of = nullptr;
  decltype(&bb_cuda_runtime_bytes) runtime_bytes = nullptr;
  decltype(&bb_cuda_device_name) device_name = nullptr;
  decltype(&bb_cuda_versions) versions = nullptr;
  decltype(&bb_cuda_memory) memory = nullptr;
};

template <class F>
bool resolve(void* handle, const char* name, F* out, std::string* why) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  if (*out == nullptr && why != nullptr) *why = std::string("no entry point ") + name;
  return *out != nullptr;
}

bool resolve_all(void* handle, Entries* e, std::string* why) {
  return resolve(handle, "bb_cuda_make_backend", &e->make_backend, why) &&
         resolve(handle, "bb_cuda_make_nccl_transport", &e->make_nccl_transport, why) &&
         resolve(handle, "bb_cuda_device_of", &e->device_of, why) &&
         resolve(handle, "bb_cuda_runtime_bytes", &e->runtime_bytes, why) &&
         resolve(handle, "bb_cuda_device_name", &e->device_name, why) &&
         resolve(handle, "bb_cuda_versions", &e->versions, why) &&
         resolve(handle, "bb_cuda_memory", &e->memory, why);
}

std::string executable_dir() {
  std::array<char, 4096> buf{};
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return "";
  std::string path(buf.data(), static_cast<std::size_t>(n));
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

bool is_file(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

struct Plugin {
  Entries entries;
  bool loaded = false;
  std::string why;  // when not loaded
};

Plugin load() {
  Plugin p;
  std::string path;
  if (const char* env = std::getenv("BB_CUDA_PLUGIN"); env != nullptr && *env != '\0') {
    path = env;
  } else {
    const std::string dir = executable_dir();
    for (const std::string& candidate : {dir + "/" + kFileName, dir + "/lib/" + kFileName})
      if (!dir.empty() && is_file(candidate)) {
        path = candidate;
        break;
      }
    if (path.empty()) path = kFileName;  // the loader's search path
  }
  std::string why;
  void* handle = open(path, &why);
  if (handle == nullptr) {
    p.why = path == kFileName ? std::string(kFileName) +
                                    " is neither beside the executable nor on the library "
                                    "path (a build without CUDA?): " +
                                    why
                              : why;
    return p;
  }
  if (!resolve_all(handle, &p.entries, &p.why)) return p;
  p.loaded = true;
  return p;
}

const Plugin& plugin() {
  static const Plugin p = load();
  return p;
}

// The plugin's status as an exception: 2 → ConfigError, else std::runtime_error. A message
// that names its option already ("--transport nccl: ...") keeps its own prefix.
[[noreturn]] void raise(int status, const std::string& prefix, const char* message) {
  const std::string text = std::string(message).rfind("--", 0) == 0 ? message : prefix + message;
  if (status == 2) throw ConfigError(text);
  throw std::runtime_error(text);
}

}  // namespace

void* open(const std::string& path, std::string* why) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    if (why != nullptr) *why = e != nullptr ? e : "dlopen of " + path + " failed";
    return nullptr;
  }
  decltype(&bb_cuda_plugin_abi) abi = nullptr;
  std::string missing;
  if (!resolve(handle, "bb_cuda_plugin_abi", &abi, &missing)) {
    if (why != nullptr) *why = path + " is not a bubblebench CUDA plugin (" + missing + ")";
    dlclose(handle);
    return nullptr;
  }
  if (const int got = abi(); got != kCudaPluginAbi) {
    if (why != nullptr)
      *why = path + " is from another bubblebench build (plugin ABI " + std::to_string(got) +
             ", this binary needs " + std::to_string(kCudaPluginAbi) + ")";
    dlclose(handle);
    return nullptr;
  }
  return handle;
}

bool available(std::string* why) {
  const Plugin& p = plugin();
  if (!p.loaded && why != nullptr) *why = "the CUDA plugin: " + p.why;
  return p.loaded;
}

std::unique_ptr<Backend> make_backend(int local_rank, bool bf16) {
  std::string why;
  if (!available(&why)) throw ConfigError("--backend cuda: " + why);
  std::array<char, 512> err{};
  Backend* out = nullptr;
  const int status =
      plugin().entries.make_backend(local_rank, bf16 ? 1 : 0, &out, err.data(), err.size());
  if (status != 0 || out == nullptr) raise(status, "--backend cuda: ", err.data());
  return std::unique_ptr<Backend>(out);
}

std::unique_ptr<Transport> make_nccl_transport(MPI_Comm comm, Backend& backend, double timeout_s) {
  std::string why;
  if (!available(&why)) throw ConfigError("--transport nccl: " + why);
  std::array<char, 512> err{};
  Transport* out = nullptr;
  const int status =
      plugin().entries.make_nccl_transport(comm, &backend, timeout_s, &out, err.data(), err.size());
  if (status != 0 || out == nullptr) raise(status, "--transport nccl: ", err.data());
  return std::unique_ptr<Transport>(out);
}

int device_of(Backend& backend) {
  if (backend.kind() != BackendKind::kCuda) return -1;  // only the plugin makes "cuda" backends
  const Plugin& p = plugin();
  return p.loaded ? p.entries.device_of(&backend) : -1;
}

std::size_t runtime_bytes(Backend& backend) {
  if (backend.kind() != BackendKind::kCuda) return 0;
  const Plugin& p = plugin();
  return p.loaded ? p.entries.runtime_bytes(&backend) : 0;
}

std::string device_name(Backend& backend) {
  if (backend.kind() != BackendKind::kCuda) return "";
  const Plugin& p = plugin();
  if (!p.loaded) return "";
  std::array<char, 256> name{};
  p.entries.device_name(&backend, name.data(), name.size());
  return name.data();
}

std::optional<bb_cuda_memory_info> device_memory(Backend& backend, MemoryRead read) {
  if (backend.kind() != BackendKind::kCuda) return std::nullopt;
  const Plugin& p = plugin();
  bb_cuda_memory_info m{};
  if (!p.loaded || p.entries.memory(&backend, static_cast<int>(read), &m) != 0) return std::nullopt;
  return m;
}

Versions versions() {
  Versions v;
  if (!available()) return v;
  std::array<char, 64> runtime{}, driver{}, nccl{};
  plugin().entries.versions(runtime.data(), driver.data(), nccl.data(), runtime.size());
  v.runtime = runtime.data();
  v.driver = driver.data();
  v.nccl = nccl.data();
  return v;
}

}  // namespace bb::cuda_plugin
