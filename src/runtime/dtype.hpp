// Element types of the tensors a Backend stores (docs/runtime.md, "Data types").
//
// Activations, activation gradients and the messages that carry them have the run's dtype
// (`--dtype fp32|bf16`); parameters, their gradients and the optimizer's state are always
// fp32 (bf16 runs keep fp32 master weights). A kernel argument that may be either is a
// TensorPtr: a device pointer with its dtype, built implicitly from a float* (fp32) or a bf16*.
// Offsets into a TensorPtr count elements of its dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "common/enum_names.hpp"

namespace bb {

enum class Dtype : std::uint8_t { kF32 = 0, kBF16 = 1 };

constexpr std::size_t dtype_size(Dtype d) {
  return d == Dtype::kBF16 ? 2 : 4;
}
// Its names (name_of, enum_of): "fp32", "bf16".
constexpr EnumNames<Dtype, 2> enum_names(Dtype) {
  return {{"fp32", "bf16"}};
}
constexpr std::string_view dtype_name(Dtype d) {
  return name_of(d);
}

// bfloat16 as stored: the upper 16 bits of an IEEE-754 binary32 (device_math.hpp converts).
struct bf16 {
  std::uint16_t bits;
};
static_assert(sizeof(bf16) == 2 && std::is_trivially_copyable_v<bf16>);

// A device pointer to elements of `dtype()`. Null by default. BasicTensorPtr<true> (a
// ConstTensorPtr) also converts from a TensorPtr.
template <bool kConst>
class BasicTensorPtr {
 public:
  using Void = std::conditional_t<kConst, const void, void>;
  using Float = std::conditional_t<kConst, const float, float>;
  using Bf16 = std::conditional_t<kConst, const bf16, bf16>;
  using Byte = std::conditional_t<kConst, const unsigned char, unsigned char>;

  constexpr BasicTensorPtr() = default;
  constexpr BasicTensorPtr(std::nullptr_t) {}  // NOLINT(google-explicit-constructor)
  constexpr BasicTensorPtr(Float* p) : p_(p), dtype_(Dtype::kF32) {}  // NOLINT
  constexpr BasicTensorPtr(Bf16* p) : p_(p), dtype_(Dtype::kBF16) {}  // NOLINT
  constexpr BasicTensorPtr(Void* p, Dtype dtype) : p_(p), dtype_(dtype) {}
  template <bool C = kConst, class = std::enable_if_t<C>>
  constexpr BasicTensorPtr(const BasicTensorPtr<false>& other)  // NOLINT
      : p_(other.get()), dtype_(other.dtype()) {}

  constexpr Void* get() const { return p_; }
  constexpr Dtype dtype() const { return dtype_; }
  constexpr explicit operator bool() const { return p_ != nullptr; }
  constexpr bool operator==(const BasicTensorPtr& o) const { return p_ == o.p_; }

  // `n` elements further on.
  constexpr BasicTensorPtr operator+(std::size_t n) const {
    return {static_cast<Byte*>(p_) + n * dtype_size(dtype_), dtype_};
  }
  constexpr std::size_t bytes(std::size_t count) const { return count * dtype_size(dtype_); }

  // The pointer as float* / bf16*; throws std::logic_error when it has the other dtype.
  Float* f32() const { return typed<Float>(Dtype::kF32); }
  Bf16* bf() const { return typed<Bf16>(Dtype::kBF16); }

 private:
  template <class T>
  T* typed(Dtype want) const {
    if (dtype_ != want && p_ != nullptr)
      throw std::logic_error("TensorPtr: a " + std::string(dtype_name(dtype_)) +
                             " tensor used as " + std::string(dtype_name(want)));
    return static_cast<T*>(p_);
  }

  Void* p_ = nullptr;
  Dtype dtype_ = Dtype::kF32;
};

using TensorPtr = BasicTensorPtr<false>;
using ConstTensorPtr = BasicTensorPtr<true>;

// Calls f(T{}) with T the element type of `dtype` (float or bf16): both backends write a kernel
// once, as a template over T, and dispatch on the tensors' dtype here.
template <class F>
decltype(auto) visit_dtype(Dtype dtype, F&& f) {
  if (dtype == Dtype::kBF16) return f(bf16{});
  return f(float{});
}
// The kernels' TensorPtr arguments share one dtype (backend.hpp): std::invalid_argument naming
// the kernel otherwise (a GPU kernel dispatched on the first tensor alone would write past a
// smaller one).
inline void require_same_dtype(const char* kernel, ConstTensorPtr a, ConstTensorPtr b,
                               ConstTensorPtr c = nullptr) {
  if (a.dtype() != b.dtype() || (c && c.dtype() != a.dtype()))
    throw std::invalid_argument(std::string(kernel) + ": tensors of different dtypes");
}

// A batched GEMM's operands (Backend::gemm_batched): A and B of one dtype, and a bf16 C only
// with bf16 A and B (cuBLAS's batched GEMMs take no other mix).
inline void require_batch_dtypes(const char* kernel, ConstTensorPtr a, ConstTensorPtr b,
                                 ConstTensorPtr c) {
  if (a.dtype() != b.dtype() || (c.dtype() == Dtype::kBF16 && a.dtype() != Dtype::kBF16))
    throw std::invalid_argument(std::string(kernel) +
                                ": A and B of one dtype, and bf16 C only with bf16 A and B");
}

// A tensor's elements as T* (T: its element type, as visit_dtype gave it).
template <class T>
const T* elements(ConstTensorPtr p) {
  return static_cast<const T*>(p.get());
}
template <class T>
T* elements(TensorPtr p) {
  return static_cast<T*>(p.get());
}

// Token ids (int32) kept in an activation buffer: the embedding chunk's input and the
// cross-entropy's targets use the first `tokens` ids' bytes of a buffer of at least as many
// bytes (an activation of T·h elements holds T ids whenever h·dtype_size >= 4).
inline std::int32_t* token_ids(TensorPtr p) {
  return static_cast<std::int32_t*>(p.get());
}
inline const std::int32_t* token_ids(ConstTensorPtr p) {
  return static_cast<const std::int32_t*>(p.get());
}

}  // namespace bb
