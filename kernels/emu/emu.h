/*
 * emu.h: the subset of CUDA that decodebench's kernels use, for g++ (host emulation).
 *
 * kernels/common.cuh includes this instead of the CUDA headers when the sources are compiled as
 * C++ (g++ -x c++ *.cu). A launch runs its grid one block at a time (several at once under the
 * interleave schedule); a block's threads run as cooperative fibers on the calling OS thread
 * (scheduler.cpp and the files beside it: scheduler.h), so:
 *   - static shared memory (DB_SHARED) is `static`; under interleave the scheduler saves and
 *     restores it when it switches blocks, so each resident block has its own;
 *   - __syncthreads and every warp collective (shuffles, votes, __syncwarp, mma.sync) block the
 *     calling fiber until its partners arrive; when every live thread of a block is blocked, the
 *     launch ends with a deadlock report naming the kernel and the barrier's file:line;
 *   - atomics are plain read-modify-write: fibers never preempt one another.
 * Fibers run in thread order until they block, which hides some missing synchronisation. Hazard
 * modes, read from the environment at each launch, make it show up as wrong values:
 *   DB_EMU_SCHEDULE=forward (default) | reverse | shuffle[:seed] | interleave[:seed]  the order in
 *       which the fibers resume at a block's start and after a barrier: thread order, reversed, or
 *       a seeded random permutation per barrier (the seed restarts every launch); in the last
 *       three, the lanes a warp collective releases run next, ahead of the other warps, in
 *       reverse or random order. interleave shuffles too, and also keeps up to four blocks
 *       resident (dispatched in grid order, as a GPU does, so a block may wait for an earlier
 *       one), switching between them at barriers, collectives, atomics, __nanosleep and 16-byte
 *       global accesses (a block can then see another's partial work, or none of it);
 *       and it runs the cross-block write check: device memory is write-protected, the bytes each
 *       block's run of fibers changes are recorded, and a byte two blocks of one launch both
 *       change with plain stores (not atomics) fails the launch, since on a GPU one of the two
 *       read-modify-writes can be lost. (The switch points are calls into the emulator, so a
 *       plain `*p += v` is never split between its load and its store: the write check, not the
 *       schedule, is what catches a missing atomic.)
 *   DB_EMU_HAZARDS=none (default) | all | cp_async,smem,warp  cp_async: copies land at
 *       cp.async.wait_group, not at issue (see g_defer_cp_async); smem: static and dynamic shared
 *       memory are filled with 0xff bytes at every block's start (by default only the dynamic
 *       one, once per launch); warp (not in all: it copies the block's shared memory at every
 *       ldmatrix): lanes of a warp run apart between barriers as far as ldmatrix can tell: its
 *       rows are read from the shared memory as it was when the warp's first lane arrived, so a
 *       row another lane stores after that (no __syncwarp or __syncthreads between the stores
 *       and the ldmatrix) is read stale. Without it the emulator's ldmatrix, a collective that
 *       waits for all 32 lanes, orders every lane's earlier stores before its reads and hides a
 *       missing __syncwarp.
 * Memory checks, in every mode: the 16-byte wrappers (common.cuh) check bounds against the live
 * allocations and alignment; device allocations have guard pages, and a fault in a kernel
 * (a plain access past a buffer, a stack overflow) becomes a launch error (DB_ERR_LAUNCH) naming
 * the kernel, block, thread and address, not a crash. DB_EMU_SM_COUNT (default 8) is the SM count
 * the device reports, so planners can be made to choose as on a 132-SM H200.
 * Launches are serialized by one process-wide mutex.
 */
#ifndef DECODEBENCH_EMU_H
#define DECODEBENCH_EMU_H

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

/* ---- execution-space keywords ----------------------------------------------------------------- */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
/* Static shared arrays are declared with common.cuh's DB_SHARED(type, name, count): `static`
 * storage that registers itself, so a block's start can poison it (DB_EMU_HAZARDS=smem). A bare
 * __shared__ could not be found (g++ drops a section attribute on a template's local statics). */
#define __shared__ static_assert(false, "declare static shared arrays with DB_SHARED(type, name, count)");
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

/* ---- vector types and built-in indices -------------------------------------------------------- */

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct __align__(8) uint2 {
  unsigned x, y;
};
struct __align__(16) uint4 {
  unsigned x, y, z, w;
};
struct __align__(8) float2 {
  float x, y;
};
struct __align__(16) float4 {
  float x, y, z, w;
};
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

constexpr int warpSize = 32;

/* Set by the scheduler before it resumes a fiber. */
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;

/* ---- bf16 and fp16 ---------------------------------------------------------------------------- */
/* Own types with the CUDA names (cuda_bf16.h of CUDA 11.8 leaves some conversions device-only for
 * g++). Storage only; conversions are the documented round-to-nearest-even ones. */

struct __nv_bfloat16 {
  unsigned short raw_;
};
struct __align__(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
struct __half {
  unsigned short raw_;
};
struct __align__(4) __half2 {
  __half x, y;
};

inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline int __float_as_int(float f) { return (int)__float_as_uint(f); }
inline float __int_as_float(int i) { return __uint_as_float((unsigned)i); }

inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.raw_; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16{u}; }
inline unsigned short __half_as_ushort(__half h) { return h.raw_; }
inline __half __ushort_as_half(unsigned short u) { return __half{u}; }

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{0x7fff}; /* canonical NaN, as CUDA */
  u += 0x7fffu + ((u >> 16) & 1u);
  return __nv_bfloat16{(unsigned short)(u >> 16)};
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return __uint_as_float((unsigned)h.raw_ << 16); }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
inline float2 __bfloat1622float2(__nv_bfloat162 h) {
  return float2{__bfloat162float(h.x), __bfloat162float(h.y)};
}

inline __half __float2half_rn(float f) {
  const unsigned u = __float_as_uint(f);
  const unsigned short sign = (unsigned short)((u >> 16) & 0x8000u);
  const unsigned a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return __half{0x7fff};                     /* NaN, as CUDA */
  if (a >= 0x477ff000u) return __half{(unsigned short)(sign | 0x7c00u)}; /* >= 65520: inf */
  if (a < 0x38800000u) { /* below 2^-14: subnormal half, value = integer * 2^-24 */
    const float scaled = __uint_as_float(a) * 16777216.0f; /* exact: power-of-two scaling */
    return __half{(unsigned short)(sign | (unsigned short)std::lrintf(scaled))}; /* RNE */
  }
  unsigned h = (a - 0x38000000u) >> 13; /* rebias exponent 127 -> 15, keep 10 mantissa bits */
  const unsigned rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h; /* carry may bump the exponent */
  return __half{(unsigned short)(sign | h)};
}
inline __half __float2half(float f) { return __float2half_rn(f); }
inline float __half2float(__half h) {
  const unsigned sign = (unsigned)(h.raw_ & 0x8000u) << 16;
  const unsigned exp = (h.raw_ >> 10) & 0x1fu;
  const unsigned man = h.raw_ & 0x3ffu;
  if (exp == 0) { /* zero or subnormal: man * 2^-24 */
    const float v = (float)man * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return __uint_as_float(sign | 0x7f800000u | (man << 13));
  return __uint_as_float(sign | ((exp + 112u) << 23) | (man << 13));
}
inline __half2 __floats2half2_rn(float a, float b) {
  return __half2{__float2half_rn(a), __float2half_rn(b)};
}
inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }

/* ---- math intrinsics -------------------------------------------------------------------------- */

inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
template <class T>
inline T __ldg(const T *p) {
  return *p;
}
inline void __threadfence() {}
inline void __threadfence_block() {}

/* ---- atomics: fibers never preempt each other, so a read-modify-write is atomic ---------------- */
/* Under DB_EMU_SCHEDULE=interleave each atomic also marks its bytes as synchronisation, so the
 * cross-block write check (faults.cpp) does not count them as a race. */

namespace db_emu {
extern bool g_track_writes;
extern bool g_interleave;
void note_atomic(const void *p, size_t bytes);
/* Interleave: an atomic (before its read-modify-write, which stays whole) and __nanosleep are
 * points where the running thread may give way (__nanosleep always does), so a block that spins
 * on a flag another resident block sets lets that block run. */
void atomic_point();
void yield_block();
inline void before_atomic(const void *p, size_t bytes) {
  if (g_interleave) atomic_point();
  if (g_track_writes) note_atomic(p, bytes);
}
}  // namespace db_emu

inline void __nanosleep(unsigned) {
  if (db_emu::g_interleave) db_emu::yield_block();
}

template <class T>
inline T atomicAdd(T *p, T v) {
  db_emu::before_atomic(p, sizeof(T));
  T old = *p;
  *p = old + v;
  return old;
}
template <class T>
inline T atomicMax(T *p, T v) {
  db_emu::before_atomic(p, sizeof(T));
  T old = *p;
  *p = old < v ? v : old;
  return old;
}
template <class T>
inline T atomicMin(T *p, T v) {
  db_emu::before_atomic(p, sizeof(T));
  T old = *p;
  *p = v < old ? v : old;
  return old;
}
template <class T>
inline T atomicExch(T *p, T v) {
  db_emu::before_atomic(p, sizeof(T));
  T old = *p;
  *p = v;
  return old;
}
template <class T>
inline T atomicCAS(T *p, T compare, T v) {
  db_emu::before_atomic(p, sizeof(T));
  T old = *p;
  if (old == compare) *p = v;
  return old;
}

/* ---- the fiber scheduler's interface (scheduler.h: fibers, scheduler, hazards, faults) -------- */

namespace db_emu {

/* A warp collective's completion: called once, by the last lane to arrive, with every lane's
 * in/out pointers (null for lanes outside mask). */
using CollectiveFn = void (*)(void *const *in, void *const *out, unsigned mask);

/* Blocks the calling lane until every existing lane of its warp named in mask has arrived at a
 * collective with the same fn and mask, then fn computes every lane's out from every lane's in. */
void warp_collective(unsigned mask, const char *what, CollectiveFn fn, void *in, void *out,
                     const char *file, int line);
void block_barrier(const char *file, int line);
/* Ends the running launch with DB_ERR_LAUNCH and this message (a kernel bug the emulator saw). */
[[noreturn]] void fail_launch(const std::string &message);
/* The launch's dynamic shared memory (its smem argument's size, 16-byte aligned). */
void *dynamic_smem();
/* DB_EMU_HAZARDS=warp: warp_smem_snapshot, called by a lane before it joins an ldmatrix, copies
 * the block's shared memory for its warp when it is the warp's first lane there;
 * warp_smem_view maps a shared address into that copy (the address itself in other modes). */
void warp_smem_snapshot();
const void *warp_smem_view(const void *p);

/* ---- memory checks (every mode) ----
 * The 16-byte wrappers of common.cuh check each access: a global address must lie inside one
 * live cudaMalloc allocation (its requested size) and a shared one inside the running block's
 * dynamic shared memory or one static shared array, both aligned to the access size. A violation
 * ends the launch with DB_ERR_LAUNCH naming the kernel, block, thread, call site, address and the
 * buffer it fell outside. g_global_lo/hi cache the allocation the last check hit. */
extern uintptr_t g_global_lo, g_global_hi;
void check_global_slow(const void *p, size_t bytes, const char *what, const char *file, int line);
inline void check_global(const void *p, size_t bytes, const char *what, const char *file,
                         int line) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if ((a & (bytes - 1)) == 0 && a >= g_global_lo && a + bytes <= g_global_hi) return;
  check_global_slow(p, bytes, what, file, line);
}
void check_shared(const void *p, size_t bytes, const char *what, const char *file, int line);

/* Interleave schedule: the 16-byte global wrappers are also points where the running fiber may
 * give way to another block's (or its own block's) fibers, chosen by the seeded generator. */
void interleave_point();

/* Deferred cp.async (DB_EMU_HAZARDS=cp_async; set for the running launch): a copy is recorded in
 * the calling thread's open group and its destination filled with 0xff bytes; commit closes the
 * group; wait(N) performs every committed group but the newest N. A barrier performs nothing. */
extern bool g_defer_cp_async;
/* Called once per static shared array (DB_SHARED), when the first thread reaches it: remembers
 * it for the per-block poisoning, and poisons it now if that is on. Returns true. */
bool register_static_smem(void *p, size_t bytes);
void cp_async_issue(void *dst, const void *src, size_t bytes);
void cp_async_commit();
void cp_async_wait(int newest_pending);
inline unsigned lane_id() {
  return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u;
}

struct KernelBody {
  virtual void run() = 0;
  virtual ~KernelBody() = default;
};

/* A kernel bound to copies of its arguments (each parameter's own type, by value, as a launch
 * passes them), so a launch recorded in a graph can run after the caller's locals are gone. */
template <class... P>
struct BoundKernel final : KernelBody {
  void (*fn)(P...);
  std::tuple<std::decay_t<P>...> params;
  template <class... A>
  explicit BoundKernel(void (*f)(P...), A &&...a) : fn(f), params(std::forward<A>(a)...) {}
  void run() override { std::apply(fn, params); }
};

/* Result of one emulated launch. */
enum LaunchResult { LAUNCH_OK = 0, LAUNCH_DEADLOCK = 1, LAUNCH_FAILED = 2 };
/* Runs every block of grid (serialized with every other launch in the process). */
LaunchResult run_grid(const char *name, const void *kernel_id, dim3 grid, dim3 block, size_t smem,
                      KernelBody &body, std::string &message);

/* The checks a launch makes before it runs anything (a valid grid and block, dynamic shared
 * memory within the kernel's limit); LAUNCH_FAILED with the message naming the kernel. A graph
 * makes them when it records the launch, and the replay makes them again. */
LaunchResult check_launch(const char *name, const void *kernel_id, dim3 grid, dim3 block,
                          size_t smem, std::string &message);

template <class... P, class... A>
LaunchResult launch(const char *name, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                    std::string &message, A &&...args) {
  BoundKernel<P...> body(kernel, std::forward<A>(args)...);
  return run_grid(name, reinterpret_cast<const void *>(kernel), grid, block, smem, body, message);
}

/* ---- shuffles and votes --------------------------------------------------------------------- */

enum ShuffleKind { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR };
struct ShuffleIn {
  uint64_t bits;
  int param;
  int width;
  int lane;
};
template <ShuffleKind Kind>
void shuffle_complete(void *const *in, void *const *out, unsigned mask) {
  for (int lane = 0; lane < 32; ++lane) {
    if (!(mask >> lane & 1u)) continue;
    const ShuffleIn &me = *static_cast<const ShuffleIn *>(in[lane]);
    const int w = me.width, base = lane & ~(w - 1), pos = lane & (w - 1);
    int src = lane; /* out of range: the caller's own value, as CUDA documents */
    if (Kind == SHFL_IDX) src = base + (me.param & (w - 1));
    if (Kind == SHFL_UP && pos >= me.param) src = lane - me.param;
    if (Kind == SHFL_DOWN && pos + me.param < w) src = lane + me.param;
    if (Kind == SHFL_XOR && (lane ^ me.param) < base + w) src = lane ^ me.param;
    /* A lane outside mask (or past a partial warp's end) has no defined value on a GPU; the
     * emulator returns the caller's own. */
    if (src < 0 || src > 31 || !(mask >> src & 1u)) src = lane;
    *static_cast<uint64_t *>(out[lane]) = static_cast<const ShuffleIn *>(in[src])->bits;
  }
}
template <ShuffleKind Kind, class T>
T shuffle(unsigned mask, T var, int param, int width, const char *what, const char *file, int line) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffle of a type over 8 bytes");
  if (width < 1 || width > 32 || (width & (width - 1)))
    fail_launch(std::string(what) + ": width must be a power of two in 1..32");
  ShuffleIn in{0, param, width, (int)lane_id()};
  std::memcpy(&in.bits, &var, sizeof(T));
  uint64_t out = 0;
  warp_collective(mask, what, &shuffle_complete<Kind>, &in, &out, file, line);
  T result;
  std::memcpy(&result, &out, sizeof(T));
  return result;
}

/* Votes of the lanes that took part: low 32 bits the ballot, high 32 bits the lanes that took part
 * (mask less the lanes a partial warp lacks). */
uint64_t vote(unsigned mask, int predicate, const char *what, const char *file, int line);

}  // namespace db_emu

#define DB_EMU_CALLER const char *file = __builtin_FILE(), int line = __builtin_LINE()

inline void __syncthreads(DB_EMU_CALLER) { db_emu::block_barrier(file, line); }
inline void __syncwarp(unsigned mask = 0xffffffffu, DB_EMU_CALLER) {
  (void)db_emu::vote(mask, 1, "__syncwarp", file, line);
}
template <class T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32, DB_EMU_CALLER) {
  return db_emu::shuffle<db_emu::SHFL_IDX>(mask, var, src_lane, width, "__shfl_sync", file, line);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32, DB_EMU_CALLER) {
  return db_emu::shuffle<db_emu::SHFL_UP>(mask, var, (int)delta, width, "__shfl_up_sync", file, line);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32, DB_EMU_CALLER) {
  return db_emu::shuffle<db_emu::SHFL_DOWN>(mask, var, (int)delta, width, "__shfl_down_sync", file,
                                            line);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32, DB_EMU_CALLER) {
  return db_emu::shuffle<db_emu::SHFL_XOR>(mask, var, lane_mask, width, "__shfl_xor_sync", file,
                                           line);
}
inline unsigned __ballot_sync(unsigned mask, int predicate, DB_EMU_CALLER) {
  return (unsigned)db_emu::vote(mask, predicate, "__ballot_sync", file, line);
}
inline int __any_sync(unsigned mask, int predicate, DB_EMU_CALLER) {
  return (unsigned)db_emu::vote(mask, predicate, "__any_sync", file, line) != 0;
}
inline int __all_sync(unsigned mask, int predicate, DB_EMU_CALLER) {
  const uint64_t v = db_emu::vote(mask, predicate, "__all_sync", file, line);
  return (unsigned)v == (unsigned)(v >> 32);
}

/* ---- the CUDA runtime subset (runtime.cpp) ------------------------------------------------------ */

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorLaunchFailure = 4,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureUnmatched = 903,
  cudaErrorUnknown = 999
};
using cudaError = cudaError_t;
struct db_emu_stream;
struct db_emu_event;
using cudaStream_t = db_emu_stream *;
using cudaEvent_t = db_emu_event *;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrClockRate = 13,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrMemoryClockRate = 36,
  cudaDevAttrGlobalMemoryBusWidth = 37,
  cudaDevAttrL2CacheSize = 38,
  cudaDevAttrMaxThreadsPerMultiProcessor = 39,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
constexpr unsigned cudaStreamNonBlocking = 0x01;

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
};

const char *cudaGetErrorName(cudaError_t e);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t stop);

/* ---- CUDA graphs by stream capture (runtime.cpp) -------------------------------------------------
 * Between cudaStreamBeginCapture and cudaStreamEndCapture a stream records, instead of running:
 * every kernel launch made through common.cuh's db_launch (kernel, grid, block, dynamic shared
 * memory and a copy of every argument), every cudaMemsetAsync and every device-to-device
 * cudaMemcpyAsync on it. A launch replays the records in order, each exactly as the call would
 * have run it then: a kernel through run_grid (the schedule and hazard modes read at each
 * record, bounds checks, guard pages), a memset or copy after checking that its range is still
 * a live allocation. On the stream while it captures, a host copy, cudaStreamSynchronize and
 * cudaEventRecord fail with cudaErrorStreamCaptureUnsupported, and any failed call invalidates the
 * capture (cudaStreamEndCapture then fails with cudaErrorStreamCaptureInvalidated), as CUDA has
 * it. The capture mode is accepted and not enforced across threads. */
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2
};
struct db_emu_graph;
struct db_emu_graph_exec;
using cudaGraph_t = db_emu_graph *;
using cudaGraphExec_t = db_emu_graph_exec *;
using cudaGraphNode_t = void *;
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status);
/* CUDA 11.8's signature; the log gets the reason of a failure. */
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, cudaGraphNode_t *error_node,
                                 char *log, size_t log_bytes);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

namespace db_emu {
/* Whether the stream is capturing (an invalidated capture included: its launches are dropped). */
bool capturing(cudaStream_t stream);
/* Appends a kernel launch to the stream's capture after check_launch; on failure the capture is
 * invalidated and message says why. */
LaunchResult record_kernel(cudaStream_t stream, const char *name, const void *kernel_id, dim3 grid,
                           dim3 block, size_t smem, std::unique_ptr<KernelBody> body,
                           std::string &message);
template <class... P, class... A>
LaunchResult record_launch(cudaStream_t stream, const char *name, void (*kernel)(P...), dim3 grid,
                           dim3 block, size_t smem, std::string &message, A &&...args) {
  return record_kernel(stream, name, reinterpret_cast<const void *>(kernel), grid, block, smem,
                       std::make_unique<BoundKernel<P...>>(kernel, std::forward<A>(args)...),
                       message);
}
/* Replays an instantiated graph's records in order; the first failure stops it, and message
 * names the record (its index, and the kernel) and what failed. */
LaunchResult graph_launch(cudaGraphExec_t exec, std::string &message);
/* How many records an instantiated graph holds (for tests), -1 for a null one. */
int graph_records(cudaGraphExec_t exec);
}  // namespace db_emu

namespace db_emu {
cudaError_t set_max_dynamic_smem(const void *kernel_id, int bytes);
size_t max_dynamic_smem(const void *kernel_id);
/* DB_EMU_SM_COUNT (default 8), read at each call; -1 when it is not an integer in 1..1024. */
int sm_count();
/* A live device allocation: base (256-byte aligned), the size asked for, and that size rounded up
 * to 256 bytes (the part of the mapping before its upper guard page). */
struct Allocation {
  uintptr_t base;
  size_t bytes;
  size_t rounded;
};
std::vector<Allocation> allocations();  // sorted by base
/* Held by a launch for its whole run, and by the runtime's copies, memsets and frees. */
std::mutex &launch_mutex();
}  // namespace db_emu

template <class... P>
inline cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
  return db_emu::set_max_dynamic_smem(reinterpret_cast<const void *>(kernel), value);
}

#endif /* DECODEBENCH_EMU_H */
