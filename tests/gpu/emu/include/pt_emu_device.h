/* tests/gpu/emu/include/pt_emu_device.h: the device side of the CUDA EMULATOR (C++17; included
 * by its cuda_runtime.h). With it the kernels (the .cu files of kernels/cuda) compile unchanged as
 * host C++:
 *   - qualifiers vanish (__device__, __host__, ...); __shared__ becomes a static in a section
 *     of its own, which the emulator fills with 0xff bytes (NaN as float, -1 as int) before each
 *     block, since a GPU's shared memory starts undefined; blocks never run interleaved, so one
 *     copy per kernel is enough;
 *   - threadIdx, blockIdx, blockDim, gridDim name the running emulated thread's values;
 *   - barriers, warp operations and atomics are the points where the emulator switches between
 *     the block's threads (fibers) in the order PT_EMU_ORDER picks, checking on the way that
 *     every thread reaches each barrier, that warp masks match the lanes calling, that shuffle
 *     offsets are in range (tests/gpu/emu/src/block.cpp, warp.cpp);
 *   - pt_emu_launch, what kernels/cuda/launch.cuh's PT_LAUNCH expands to, queues the kernel with
 *     its arguments converted to the parameter types, as a launch does.
 * Each switch point takes its caller's file and line (default arguments), for error messages.
 */
#ifndef PT_EMU_DEVICE_H
#define PT_EMU_DEVICE_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_runtime_api.h"

/* A kernel is an entry point: never "unused", even a static one a file does not launch. */
#define __global__ __attribute__((unused))
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static __attribute__((section("pt_emu_shared")))

namespace pt_emu {

struct thread_ids {
  uint3 thread, block;
  dim3 block_dim, grid_dim;
};
/* The running emulated thread's (set at every switch). */
extern const thread_ids *g_ids;

enum sync_kind : int { SYNC_PLAIN, SYNC_OR, SYNC_AND, SYNC_COUNT };
enum warp_kind : int { W_IDX, W_XOR, W_DOWN, W_UP, W_BALLOT, W_ANY, W_ALL, W_SYNCWARP };
int block_sync(sync_kind kind, int pred, const char *what, const char *file, int line);
uint64_t warp_op(warp_kind kind, unsigned mask, uint64_t bits, int param, int width,
                 const char *what, const char *file, int line);
void atomic_point(const char *what, const char *file, int line);
unsigned active_mask(const char *file, int line);

template <class T> inline uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "a warp value is 8 bytes at most");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof v);
  return b;
}
template <class T> inline T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

struct launch_site {
  const char *kernel, *file;
  int line;
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
};
void check_kernel_pointer(const launch_site &site, int arg, const void *p);
cudaError_t enqueue_launch(const launch_site &site, void (*body)(void *), void (*destroy)(void *),
                           void *call);

/* Pointer arguments must be device (or pinned host) memory, as on a GPU. */
template <class T> inline void check_arg(const launch_site &site, int i, const T &v) {
  if constexpr (std::is_pointer_v<T> && std::is_object_v<std::remove_pointer_t<T>>)
    check_kernel_pointer(site, i, static_cast<const void *>(v));
  (void)site, (void)i, (void)v;
}
template <class Tuple, size_t... I>
inline void check_args(const launch_site &site, const Tuple &t, std::index_sequence<I...>) {
  (check_arg(site, static_cast<int>(I), std::get<I>(t)), ...);
  (void)site, (void)t;
}

} // namespace pt_emu

#define threadIdx (::pt_emu::g_ids->thread)
#define blockIdx (::pt_emu::g_ids->block)
#define blockDim (::pt_emu::g_ids->block_dim)
#define gridDim (::pt_emu::g_ids->grid_dim)
constexpr int warpSize = 32;

#define PT_EMU_CALLER const char *pt_emu_file = __builtin_FILE(), int pt_emu_line = __builtin_LINE()
#define PT_EMU_WHERE pt_emu_file, pt_emu_line

/* ---- barriers ---------------------------------------------------------------------------- */
inline void __syncthreads(PT_EMU_CALLER) {
  ::pt_emu::block_sync(::pt_emu::SYNC_PLAIN, 0, "__syncthreads", PT_EMU_WHERE);
}
inline int __syncthreads_or(int pred, PT_EMU_CALLER) {
  return ::pt_emu::block_sync(::pt_emu::SYNC_OR, pred, "__syncthreads_or", PT_EMU_WHERE);
}
inline int __syncthreads_and(int pred, PT_EMU_CALLER) {
  return ::pt_emu::block_sync(::pt_emu::SYNC_AND, pred, "__syncthreads_and", PT_EMU_WHERE);
}
inline int __syncthreads_count(int pred, PT_EMU_CALLER) {
  return ::pt_emu::block_sync(::pt_emu::SYNC_COUNT, pred, "__syncthreads_count", PT_EMU_WHERE);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, PT_EMU_CALLER) {
  ::pt_emu::warp_op(::pt_emu::W_SYNCWARP, mask, 0, 0, 32, "__syncwarp", PT_EMU_WHERE);
}
inline void __threadfence(void) {}
inline void __threadfence_block(void) {}

/* ---- warp operations ----------------------------------------------------------------------- */
template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = warpSize, PT_EMU_CALLER) {
  return ::pt_emu::from_bits<T>(::pt_emu::warp_op(::pt_emu::W_IDX, mask, ::pt_emu::to_bits(v), src,
                                                  width, "__shfl_sync", PT_EMU_WHERE));
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize,
                                            PT_EMU_CALLER) {
  return ::pt_emu::from_bits<T>(::pt_emu::warp_op(::pt_emu::W_XOR, mask, ::pt_emu::to_bits(v),
                                                  lane_mask, width, "__shfl_xor_sync", PT_EMU_WHERE));
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize,
                                             PT_EMU_CALLER) {
  return ::pt_emu::from_bits<T>(::pt_emu::warp_op(::pt_emu::W_DOWN, mask, ::pt_emu::to_bits(v),
                                                  static_cast<int>(delta), width,
                                                  "__shfl_down_sync", PT_EMU_WHERE));
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize,
                                           PT_EMU_CALLER) {
  return ::pt_emu::from_bits<T>(::pt_emu::warp_op(::pt_emu::W_UP, mask, ::pt_emu::to_bits(v),
                                                  static_cast<int>(delta), width,
                                                  "__shfl_up_sync", PT_EMU_WHERE));
}
inline unsigned __ballot_sync(unsigned mask, int pred, PT_EMU_CALLER) {
  return static_cast<unsigned>(
      ::pt_emu::warp_op(::pt_emu::W_BALLOT, mask, pred != 0, 0, 32, "__ballot_sync", PT_EMU_WHERE));
}
inline int __any_sync(unsigned mask, int pred, PT_EMU_CALLER) {
  return static_cast<int>(
      ::pt_emu::warp_op(::pt_emu::W_ANY, mask, pred != 0, 0, 32, "__any_sync", PT_EMU_WHERE));
}
inline int __all_sync(unsigned mask, int pred, PT_EMU_CALLER) {
  return static_cast<int>(
      ::pt_emu::warp_op(::pt_emu::W_ALL, mask, pred != 0, 0, 32, "__all_sync", PT_EMU_WHERE));
}
/* The lanes of the caller's warp that have not returned (the emulator has no divergence). */
inline unsigned __activemask(PT_EMU_CALLER) { return ::pt_emu::active_mask(PT_EMU_WHERE); }

/* ---- atomics: a switch point, then the read-modify-write (fibers share one OS thread) ------- */
namespace pt_emu {
template <class T, class F> inline T rmw(T *p, F f, const char *what, const char *file, int line) {
  atomic_point(what, file, line);
  T old = *p;
  *p = f(old);
  return old;
}
} // namespace pt_emu
#define PT_EMU_ATOMIC(name, T, expr)                                                       \
  inline T name(T *p, T v, PT_EMU_CALLER) {                                                \
    return ::pt_emu::rmw(p, [v](T o) { return static_cast<T>(expr); }, #name, PT_EMU_WHERE); \
  }
PT_EMU_ATOMIC(atomicAdd, int, o + v)
PT_EMU_ATOMIC(atomicAdd, unsigned, o + v)
PT_EMU_ATOMIC(atomicAdd, unsigned long long, o + v)
PT_EMU_ATOMIC(atomicAdd, float, o + v)
PT_EMU_ATOMIC(atomicAdd, double, o + v)
PT_EMU_ATOMIC(atomicSub, int, o - v)
PT_EMU_ATOMIC(atomicSub, unsigned, o - v)
PT_EMU_ATOMIC(atomicExch, int, v)
PT_EMU_ATOMIC(atomicExch, unsigned, v)
PT_EMU_ATOMIC(atomicExch, float, v)
PT_EMU_ATOMIC(atomicMax, int, o > v ? o : v)
PT_EMU_ATOMIC(atomicMax, unsigned, o > v ? o : v)
PT_EMU_ATOMIC(atomicMin, int, o < v ? o : v)
PT_EMU_ATOMIC(atomicMin, unsigned, o < v ? o : v)
PT_EMU_ATOMIC(atomicOr, int, o | v)
PT_EMU_ATOMIC(atomicOr, unsigned, o | v)
PT_EMU_ATOMIC(atomicAnd, int, o & v)
PT_EMU_ATOMIC(atomicAnd, unsigned, o & v)
#undef PT_EMU_ATOMIC
#define PT_EMU_ATOMIC_CAS(T)                                                                  \
  inline T atomicCAS(T *p, T cmp, T v, PT_EMU_CALLER) {                                       \
    return ::pt_emu::rmw(p, [cmp, v](T o) { return o == cmp ? v : o; }, "atomicCAS", PT_EMU_WHERE); \
  }
PT_EMU_ATOMIC_CAS(int)
PT_EMU_ATOMIC_CAS(unsigned)
PT_EMU_ATOMIC_CAS(unsigned long long)
#undef PT_EMU_ATOMIC_CAS

/* ---- intrinsics and math ------------------------------------------------------------------- */
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __float_as_uint(float x) { return ::pt_emu::from_bits<unsigned>(::pt_emu::to_bits(x)); }
inline float __uint_as_float(unsigned x) { return ::pt_emu::from_bits<float>(::pt_emu::to_bits(x)); }
inline int __float_as_int(float x) { return ::pt_emu::from_bits<int>(::pt_emu::to_bits(x)); }
inline float __int_as_float(int x) { return ::pt_emu::from_bits<float>(::pt_emu::to_bits(x)); }
inline long long __double_as_longlong(double x) {
  return ::pt_emu::from_bits<long long>(::pt_emu::to_bits(x));
}
inline double __longlong_as_double(long long x) {
  return ::pt_emu::from_bits<double>(::pt_emu::to_bits(x));
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
/* One IEEE operation each, rounded to nearest and never fused with a neighbour (as nvcc keeps
 * them): the volatile store forces the rounding whatever -ffp-contract the compiler uses. */
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
template <class T> inline T __ldg(const T *p) { return *p; }

/* ---- the launch (kernels/cuda/launch.cuh) --------------------------------------------------- */
template <typename... P, typename... A>
inline cudaError_t pt_emu_launch(const char *name, const char *file, int line, void (*kernel)(P...),
                                 dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                 A &&...args) {
  static_assert(sizeof...(P) == sizeof...(A), "PT_LAUNCH: wrong number of kernel arguments");
  using args_t = std::tuple<std::decay_t<P>...>;
  struct call {
    void (*fn)(P...);
    args_t args;
  };
  const ::pt_emu::launch_site site{name, file, line, grid, block, smem, stream};
  call *c = new call{kernel, args_t(std::forward<A>(args)...)};
  ::pt_emu::check_args(site, c->args, std::index_sequence_for<P...>{});
  return ::pt_emu::enqueue_launch(
      site, [](void *p) { std::apply(static_cast<call *>(p)->fn, static_cast<call *>(p)->args); },
      [](void *p) { delete static_cast<call *>(p); }, c);
}

#undef PT_EMU_WHERE

#endif
