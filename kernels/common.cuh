/*
 * common.cuh: what every .cu file in kernels/ shares, for both builds.
 *
 *   nvcc (__CUDACC__):  the CUDA headers; PTX through asm volatile.
 *   g++  (-x c++):      emu/emu.h, the host emulation of the same subset; every PTX wrapper below
 *                       has a host version that follows the PTX ISA's documented semantics.
 *
 * Sections: portability, the seam (statuses, errors, contexts, launches), dtypes, warp
 * reductions, PTX wrappers.
 */
#ifndef DECODEBENCH_COMMON_CUH
#define DECODEBENCH_COMMON_CUH

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "dbhash.h"
#include "decodebench.h"

/* ---- portability ------------------------------------------------------------------------------ */

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define DB_EMU 0
#define DB_UNROLL _Pragma("unroll")
#else
#include "emu/emu.h"
#define DB_EMU 1
#define DB_UNROLL /* g++ -O2 picks its own unrolling; emulation speed is set by the fibers */
#endif

#define DB_DEVICE __device__ __forceinline__

/* Dynamic shared memory: a pointer of `type` named `name`, 16-byte aligned. */
#if DB_EMU
#define DB_EXTERN_SHARED(type, name) type *name = reinterpret_cast<type *>(::db_emu::dynamic_smem())
#else
#define DB_EXTERN_SHARED(type, name)                                 \
  extern __shared__ __align__(16) unsigned char db_smem_##name[];    \
  type *name = reinterpret_cast<type *>(db_smem_##name)
#endif

/* Static shared memory: an array of `count` `type`s named `name`. (The emulation registers it
 * the first time a thread reaches it, so DB_EMU_HAZARDS=smem can poison it per block; a bare
 * __shared__ does not compile there.) */
#if DB_EMU
#define DB_SHARED(type, name, count)                                                     \
  static type name[count];                                                               \
  static const bool db_shared_registered_##name [[maybe_unused]] =                       \
      ::db_emu::register_static_smem(name, sizeof name)
#else
#define DB_SHARED(type, name, count) __shared__ type name[count]
#endif

/* ---- the seam: statuses, errors, contexts ----------------------------------------------------- */

/* A context: one device, one non-blocking stream, and the device numbers the launch heuristics
 * read (cached at creation so a launch makes no attribute queries). */
struct db_context {
  int32_t device;
  cudaStream_t stream;
  int32_t sm_count;
  int32_t max_threads_per_sm;
  int64_t l2_bytes;
  int64_t smem_per_block_optin_bytes;
  /* Between db_graph_begin and db_graph_end (graph.cu): launches are captured, not run, and the
   * calls that wait for the device or touch host memory refuse (api.cu). */
  bool capturing;
};

/* Records the calling thread's failure detail (printf-style) and returns status. Never throws. */
int db_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Maps a CUDA error to a status (OOM, NO_DEVICE, LAUNCH or CUDA) with `what` and the error name. */
int db_fail_cuda(cudaError_t error, const char *what);
/* Validates ctx and makes its device current on the calling thread. */
int db_enter(db_context *ctx);

#define DB_CHECK(expr)                       \
  do {                                       \
    const int db_status_ = (expr);           \
    if (db_status_ != DB_OK) return db_status_; \
  } while (0)

#define DB_CHECK_CUDA(call)                                      \
  do {                                                           \
    const cudaError_t db_error_ = (call);                        \
    if (db_error_ != cudaSuccess) return db_fail_cuda(db_error_, #call); \
  } while (0)

/* Runs an API function's body so that no C++ exception crosses the C seam. */
template <class F>
int db_guard(const char *function, F &&body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return db_fail(DB_ERR_OUT_OF_MEMORY, "%s: out of host memory", function);
  } catch (const std::exception &e) {
    return db_fail(DB_ERR_INTERNAL, "%s: unexpected exception: %s", function, e.what());
  } catch (...) {
    return db_fail(DB_ERR_INTERNAL, "%s: unexpected exception", function);
  }
}

/* Launches kernel<<<grid, block, smem, stream>>>(args...) (or its emulation) and returns a status;
 * the message names the kernel. Template kernels go in parentheses: DB_LAUNCH((k<T, 4>), ...). */
#define DB_LAUNCH(kernel, grid, block, smem, stream, ...) \
  db_launch(#kernel, kernel, grid, block, smem, stream, __VA_ARGS__)

/* "(k<T, 4>)" -> "k<T, 4>": the parentheses DB_LAUNCH needs around a template kernel. */
inline std::string db_kernel_label(const char *name) {
  std::string label = name;
  if (label.size() >= 2 && label.front() == '(' && label.back() == ')')
    label = label.substr(1, label.size() - 2);
  return label;
}

template <class... P, class... A>
int db_launch(const char *name, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
              cudaStream_t stream, A &&...args) {
#if DB_EMU
  std::string message;
  const std::string label = db_kernel_label(name);
  /* A capturing stream (a graph, graph.cu) records the launch with copies of its arguments. */
  const db_emu::LaunchResult result =
      db_emu::capturing(stream)
          ? db_emu::record_launch(stream, label.c_str(), kernel, grid, block, smem, message,
                                  std::forward<A>(args)...)
          : db_emu::launch(label.c_str(), kernel, grid, block, smem, message,
                           std::forward<A>(args)...);
  switch (result) {
    case db_emu::LAUNCH_OK: return DB_OK;
    case db_emu::LAUNCH_DEADLOCK: return db_fail(DB_ERR_EMU_DEADLOCK, "%s", message.c_str());
    case db_emu::LAUNCH_FAILED: break;
  }
  return db_fail(DB_ERR_LAUNCH, "%s", message.c_str());
#else
  kernel<<<grid, block, smem, stream>>>(std::forward<A>(args)...);
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess)
    return db_fail(DB_ERR_LAUNCH,
                   "launch of %s (grid %u,%u,%u, block %u,%u,%u, %zu bytes of dynamic shared "
                   "memory): %s: %s",
                   db_kernel_label(name).c_str(), grid.x, grid.y, grid.z, block.x, block.y,
                   block.z, smem, cudaGetErrorName(error), cudaGetErrorString(error));
  return DB_OK;
#endif
}

inline const char *db_dtype_name(int32_t dtype) {
  switch (dtype) {
    case DB_DTYPE_F32: return "f32";
    case DB_DTYPE_BF16: return "bf16";
    case DB_DTYPE_FP16: return "fp16";
    case DB_DTYPE_U32: return "u32";
    case DB_DTYPE_FP8_E4M3: return "fp8_e4m3";
  }
  return "unknown";
}

inline uint64_t db_ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* min for kernels: CUDA's ::min overloads are device-only, std::min is host-only before C++20. */
template <class T>
DB_HD T db_min(T a, T b) {
  return b < a ? b : a;
}

/* ---- dtypes: 16-bit floats as packed pairs in 32-bit words ------------------------------------ */

template <class T>
struct db_dtype;

template <>
struct db_dtype<__nv_bfloat16> {
  /* bf16 is the top half of an fp32: unpacking is a shift and a mask, no conversion unit */
  static DB_DEVICE float2 unpack(uint32_t pair) {
    return make_float2(__uint_as_float(pair << 16), __uint_as_float(pair & 0xffff0000u));
  }
  static DB_DEVICE __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
  static DB_DEVICE uint32_t pack(float lo, float hi) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
           (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16;
  }
};

template <>
struct db_dtype<__half> {
  static DB_DEVICE float2 unpack(uint32_t pair) {
    return make_float2(__half2float(__ushort_as_half((unsigned short)(pair & 0xffffu))),
                       __half2float(__ushort_as_half((unsigned short)(pair >> 16))));
  }
  static DB_DEVICE __half from_float(float v) { return __float2half_rn(v); }
  static DB_DEVICE uint32_t pack(float lo, float hi) {
    return (uint32_t)__half_as_ushort(__float2half_rn(lo)) |
           (uint32_t)__half_as_ushort(__float2half_rn(hi)) << 16;
  }
};

/* ---- warp reductions (butterfly: every lane ends with the total) ------------------------------ */

template <class T>
DB_DEVICE T db_warp_sum(T v) {
  DB_UNROLL
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/* ---- PTX wrappers ----------------------------------------------------------------------------- */

/* The emulation checks every 16-byte access below (emu.h, "memory checks"): a global address
 * inside one live allocation, a shared one inside the block's shared memory, both 16-byte
 * aligned; a violation is a launch error naming the call site. Under DB_EMU_SCHEDULE=interleave
 * the global ones are also points where another block's threads may run. */

/* 16-byte load of data read once (weights, probe inputs): through the non-coherent path, without
 * allocating in L1 so the reused activations stay there. PTX: ld.global.nc.L1::no_allocate.v4.u32
 * (sm_70+, PTX ISA 7.4). */
#if DB_EMU
inline uint4 db_ld_stream_v4(const uint4 *p, DB_EMU_CALLER) {
  db_emu::check_global(p, 16, "db_ld_stream_v4", file, line);
  if (db_emu::g_interleave) db_emu::interleave_point();
  return *p;
}
#else
DB_DEVICE uint4 db_ld_stream_v4(const uint4 *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
#endif

/* 16-byte load of read-only data that other warps reuse (activations): ld.global.nc.v4.u32. */
#if DB_EMU
inline uint4 db_ld_nc_v4(const uint4 *p, DB_EMU_CALLER) {
  db_emu::check_global(p, 16, "db_ld_nc_v4", file, line);
  if (db_emu::g_interleave) db_emu::interleave_point();
  return *p;
}
#else
DB_DEVICE uint4 db_ld_nc_v4(const uint4 *p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
#endif

/* 16-byte global store (st.global.v4 from a plain store of a uint4). */
#if DB_EMU
inline void db_st_v4(uint4 *p, uint4 v, DB_EMU_CALLER) {
  db_emu::check_global(p, 16, "db_st_v4", file, line);
  if (db_emu::g_interleave) db_emu::interleave_point();
  *p = v;
}
#else
DB_DEVICE void db_st_v4(uint4 *p, uint4 v) { *p = v; }
#endif

/* 16-byte asynchronous global -> shared copy, cached in L2 only (cp.async.cg.shared.global, sm_80+),
 * with its group commit and wait. The emulation copies at once by default (commit and wait do
 * nothing); with DB_EMU_HAZARDS=cp_async it defers each copy to the wait_group that covers it,
 * as on hardware. Kernels still need the __syncthreads that makes other threads' copies visible. */
#if DB_EMU
inline void db_cp_async_16(void *smem, const void *gmem, DB_EMU_CALLER) {
  db_emu::check_shared(smem, 16, "db_cp_async_16 (shared destination)", file, line);
  db_emu::check_global(gmem, 16, "db_cp_async_16 (global source)", file, line);
  if (db_emu::g_interleave) db_emu::interleave_point();
  if (db_emu::g_defer_cp_async)
    db_emu::cp_async_issue(smem, gmem, 16);
  else
    std::memcpy(smem, gmem, 16);
}
inline void db_cp_async_commit() {
  if (db_emu::g_defer_cp_async) db_emu::cp_async_commit();
}
template <int N>
inline void db_cp_async_wait() {
  if (db_emu::g_defer_cp_async) db_emu::cp_async_wait(N);
}
#else
DB_DEVICE void db_cp_async_16(void *smem, const void *gmem) {
  const unsigned smem_addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr), "l"(gmem) : "memory");
}
DB_DEVICE void db_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
/* Waits until at most N of this thread's committed groups are still in flight. */
template <int N>
DB_DEVICE void db_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
#endif

/*
 * acc += A * B with mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32, one warp.
 * Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"), with
 * g = lane >> 2 (groupID) and t = lane % 4 (threadID_in_group); each 32-bit register holds two
 * 16-bit elements, the lower index in the lower half:
 *   A 16x16, a[0..3] = elements a0..a7:  row = g + 8 * ((i >> 1) & 1),  col = 2t + (i & 1) + 8 * (i >> 2)
 *   B 16x8,  b[0..1] = elements b0..b3:  row = 2t + (i & 1) + 8 * (i >> 1),  col = g
 *   C/D 16x8 f32, acc[0..3]:             row = g + 8 * (i >> 1),  col = 2t + (i & 1)
 */
#if DB_EMU
namespace db_emu_ptx {
struct MmaOperands {
  uint32_t a[4];
  uint32_t b[2];
  float c[4];
};
inline float element_to_float(uint16_t bits, bool bf16) {
  return bf16 ? __bfloat162float(__ushort_as_bfloat16(bits)) : __half2float(__ushort_as_half(bits));
}
/* The last lane to arrive computes D = A * B + C for the whole warp from every lane's fragments.
 * Products of 16-bit floats are exact in double and the sum is rounded once to fp32; a tensor
 * core's fp32 accumulation order is unspecified, so results agree to fp32 rounding. */
template <bool Bf16>
void mma_m16n8k16_complete(void *const *in, void *const *out, unsigned mask) {
  if (mask != 0xffffffffu) db_emu::fail_launch("mma.sync.aligned needs all 32 lanes of the warp");
  double A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const MmaOperands &f = *static_cast<const MmaOperands *>(in[lane]);
    const int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 8; ++i) {
      const uint16_t bits = (uint16_t)(f.a[i >> 1] >> (16 * (i & 1)));
      A[g + 8 * ((i >> 1) & 1)][2 * t + (i & 1) + 8 * (i >> 2)] = element_to_float(bits, Bf16);
    }
    for (int i = 0; i < 4; ++i) {
      const uint16_t bits = (uint16_t)(f.b[i >> 1] >> (16 * (i & 1)));
      B[2 * t + (i & 1) + 8 * (i >> 1)][g] = element_to_float(bits, Bf16);
    }
    for (int i = 0; i < 4; ++i) C[g + 8 * (i >> 1)][2 * t + (i & 1)] = f.c[i];
  }
  for (int lane = 0; lane < 32; ++lane) {
    float *d = static_cast<float *>(out[lane]);
    const int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
      double sum = C[row][col];
      for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
      d[i] = (float)sum;
    }
  }
}
template <bool Bf16>
inline void mma_m16n8k16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                         const char *what, const char *file, int line) {
  MmaOperands in{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}, {acc[0], acc[1], acc[2], acc[3]}};
  float d[4];
  db_emu::warp_collective(0xffffffffu, what, &mma_m16n8k16_complete<Bf16>, &in, d, file, line);
  for (int i = 0; i < 4; ++i) acc[i] = d[i];
}
}  // namespace db_emu_ptx

inline void db_mma_m16n8k16_bf16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                 DB_EMU_CALLER) {
  db_emu_ptx::mma_m16n8k16<true>(acc, a, b, "mma.sync.m16n8k16.bf16", file, line);
}
inline void db_mma_m16n8k16_f16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                DB_EMU_CALLER) {
  db_emu_ptx::mma_m16n8k16<false>(acc, a, b, "mma.sync.m16n8k16.f16", file, line);
}
#else
DB_DEVICE void db_mma_m16n8k16_bf16(float (&acc)[4], const uint32_t (&a)[4],
                                    const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
DB_DEVICE void db_mma_m16n8k16_f16(float (&acc)[4], const uint32_t (&a)[4],
                                   const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

/* ---- ldmatrix (shared memory -> mma fragments) -------------------------------------------------
 * ldmatrix.sync.aligned.m8n8.x4.shared.b16 (sm_75+): four 8x8 matrices of 16-bit elements, one
 * warp. Lane 8i + r gives the address of row r of matrix i (16 contiguous bytes, 16-byte
 * aligned); every lane l then receives, in its register i, the 32-bit word holding elements
 * 2 (l % 4) and 2 (l % 4) + 1 of row l / 4 of matrix i (PTX ISA, "Warp-level matrix load
 * instruction: ldmatrix"): for A of mma.m16n8k16 the four matrices are (rows 0-7, k 0-7),
 * (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15); for B (stored n-major, k
 * contiguous) two n8 tiles' (k 0-7), (k 8-15).
 * The emulation gathers every lane's row address and hands out the words as the hardware does;
 * a row address that is not 16-byte aligned ends the launch with an error naming it. */
#if DB_EMU
#include <cstdio>
namespace db_emu_ptx {
inline void ldmatrix_x4_complete(void *const *in, void *const *out, unsigned mask) {
  if (mask != 0xffffffffu) db_emu::fail_launch("ldmatrix.sync.aligned needs all 32 lanes of the warp");
  for (int lane = 0; lane < 32; ++lane) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(*static_cast<const void *const *>(in[lane]));
    if (at % 16 != 0) {
      char message[128];
      std::snprintf(message, sizeof message,
                    "ldmatrix.x4: lane %d's row address %p is not 16-byte aligned", lane,
                    reinterpret_cast<const void *>(at));
      db_emu::fail_launch(message);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    uint32_t *d = static_cast<uint32_t *>(out[lane]);
    for (int i = 0; i < 4; ++i) {
      const unsigned char *row = static_cast<const unsigned char *>(
          db_emu::warp_smem_view(*static_cast<const void *const *>(in[8 * i + lane / 4])));
      std::memcpy(&d[i], row + 4 * (lane % 4), 4);
    }
  }
}
}  // namespace db_emu_ptx
inline void db_ldmatrix_x4(uint32_t (&r)[4], const void *smem_row, DB_EMU_CALLER) {
  db_emu::check_shared(smem_row, 16, "ldmatrix.x4 row", file, line);
  db_emu::warp_smem_snapshot();
  const void *in = smem_row;
  uint32_t d[4];
  db_emu::warp_collective(0xffffffffu, "ldmatrix.sync.aligned.m8n8.x4", &db_emu_ptx::ldmatrix_x4_complete,
                          &in, d, file, line);
  for (int i = 0; i < 4; ++i) r[i] = d[i];
}
#else
DB_DEVICE void db_ldmatrix_x4(uint32_t (&r)[4], const void *smem_row) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
#endif

/* The mma for a dtype, so kernels templated on T call one name. */
template <class T>
DB_DEVICE void db_mma_m16n8k16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);
template <>
DB_DEVICE void db_mma_m16n8k16<__nv_bfloat16>(float (&acc)[4], const uint32_t (&a)[4],
                                              const uint32_t (&b)[2]) {
  db_mma_m16n8k16_bf16(acc, a, b);
}
template <>
DB_DEVICE void db_mma_m16n8k16<__half>(float (&acc)[4], const uint32_t (&a)[4],
                                       const uint32_t (&b)[2]) {
  db_mma_m16n8k16_f16(acc, a, b);
}

/* ---- keeping values in loops ------------------------------------------------------------------ */

/* db_opaque(x): x, through a move the compiler cannot see through, so that values computed from
 * it inside a loop are not hoisted out of it (register pressure), nor folded. */
#if DB_EMU
inline unsigned db_opaque(unsigned x) { return x; }
#else
DB_DEVICE unsigned db_opaque(unsigned x) {
  asm volatile("mov.b32 %0, %0;" : "+r"(x));
  return x;
}
#endif

/* ---- loads through L2 only (ld.global.cg): data other blocks of the same launch wrote --------- */

/* A block that reads what blocks on other SMs wrote in this launch (after the fence and atomic
 * that order them) must not hit a stale line in its own SM's L1: ld.global.cg caches in L2 only.
 * The emulation's 16-byte version goes through db_ld_nc_v4, so it gets the same checks. */
#if DB_EMU
inline float db_ld_cg(const float *p) { return *p; }
inline float2 db_ld_cg(const float2 *p) { return *p; }
inline float4 db_ld_cg(const float4 *p) {
  const uint4 u = db_ld_nc_v4(reinterpret_cast<const uint4 *>(p));
  float4 f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
#else
DB_DEVICE float db_ld_cg(const float *p) { return __ldcg(p); }
DB_DEVICE float2 db_ld_cg(const float2 *p) { return __ldcg(p); }
DB_DEVICE float4 db_ld_cg(const float4 *p) { return __ldcg(p); }
#endif

/* ---- dispatch: run-time sizes to template parameters, loud on the rest ------------------------ */

/*
 * DB_DISPATCH_HEAD_DIM(fn, head_dim, D, expr) evaluates the int expression expr with
 * `constexpr int D` set to head_dim, for the head dims the attention kernels are compiled for;
 * any other value returns DB_ERR_UNSUPPORTED_SHAPE with a message naming fn and the value.
 * DB_DISPATCH_HEADS_PER_BLOCK(fn, gp, GP, expr) does the same for the heads one attention block
 * serves. Both are expressions of type int (a status), in the manner of FlashInfer's
 * DISPATCH_HEAD_DIM: the one place each list of compiled values is written.
 */
#define DB_DISPATCH_CASE_(VAR, VALUE, ...) \
  case VALUE: {                            \
    [[maybe_unused]] constexpr int VAR = VALUE; \
    return __VA_ARGS__;                    \
  }
#define DB_DISPATCH_HEAD_DIM(fn, head_dim, D, ...)                                               \
  [&]() -> int {                                                                                 \
    switch (head_dim) {                                                                          \
      DB_DISPATCH_CASE_(D, 64, __VA_ARGS__)                                                      \
      DB_DISPATCH_CASE_(D, 80, __VA_ARGS__)                                                      \
      DB_DISPATCH_CASE_(D, 96, __VA_ARGS__)                                                      \
      DB_DISPATCH_CASE_(D, 128, __VA_ARGS__)                                                     \
      DB_DISPATCH_CASE_(D, 256, __VA_ARGS__)                                                     \
      default:                                                                                   \
        return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: head_dim %d unsupported (want 64, 80, 96, " \
                       "128 or 256)", fn, (int)(head_dim));                                      \
    }                                                                                            \
  }()
#define DB_DISPATCH_HEADS_PER_BLOCK(fn, gp, GP, ...)                                          \
  [&]() -> int {                                                                              \
    switch (gp) {                                                                             \
      DB_DISPATCH_CASE_(GP, 1, __VA_ARGS__)                                                   \
      DB_DISPATCH_CASE_(GP, 2, __VA_ARGS__)                                                   \
      DB_DISPATCH_CASE_(GP, 4, __VA_ARGS__)                                                   \
      DB_DISPATCH_CASE_(GP, 8, __VA_ARGS__)                                                   \
      DB_DISPATCH_CASE_(GP, 16, __VA_ARGS__)                                                  \
      default:                                                                                \
        return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: %d heads per block unsupported (want 1, " \
                       "2, 4, 8 or 16)", fn, (int)(gp));                                      \
    }                                                                                         \
  }()

/* ---- occupancy: resident blocks per SM of one kernel instantiation ---------------------------- */

/* sm_90 (H100, H200) limits per SM, from the CUDA occupancy calculator's tables. */
constexpr int kSm90RegistersPerSm = 65536;
constexpr int kSm90RegisterAllocUnit = 256;        /* registers, per warp */
constexpr int64_t kSm90SmemPerSm = 228 * 1024;     /* bytes, the largest carveout */
constexpr int64_t kSm90SmemReservedPerBlock = 1024; /* bytes the runtime keeps per block */
constexpr int kSm90ThreadsPerSm = 2048;
constexpr int kSm90BlocksPerSm = 32;

/* Blocks of `threads` threads with `registers` registers a thread and `smem` bytes of shared
 * memory that one sm_90 SM keeps resident at once: the least of the register, shared-memory,
 * thread and block limits. */
inline int db_sm90_blocks_per_sm(int threads, int registers, int64_t smem) {
  const int warps = (threads + 31) / 32;
  const int per_warp = (registers * 32 + kSm90RegisterAllocUnit - 1) / kSm90RegisterAllocUnit *
                       kSm90RegisterAllocUnit;
  int blocks = kSm90BlocksPerSm;
  blocks = std::min(blocks, kSm90ThreadsPerSm / (warps * 32));
  if (per_warp > 0) blocks = std::min(blocks, kSm90RegistersPerSm / (per_warp * warps));
  blocks = std::min<int64_t>(blocks, kSm90SmemPerSm / (smem + kSm90SmemReservedPerBlock));
  return blocks;
}

/* Resident blocks per SM of `kernel` launched with `threads` threads and `smem` bytes of dynamic
 * shared memory: on CUDA cudaOccupancyMaxActiveBlocksPerMultiprocessor for this device (its
 * dynamic shared memory limit must already allow smem); under emulation the sm_90 answer from
 * the kernel's sm_90 register count (ptxas's, which the caller knows), as the card would give. */
template <class... P>
int db_occupancy(void (*kernel)(P...), int threads, size_t smem, int sm90_registers, const char *name,
                 int *blocks_per_sm) {
#if DB_EMU
  (void)kernel;
  (void)name;
  *blocks_per_sm = db_sm90_blocks_per_sm(threads, sm90_registers, (int64_t)smem);
#else
  (void)sm90_registers;
  const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, kernel, threads, smem);
  if (e != cudaSuccess) return db_fail_cuda(e, name);
#endif
  if (*blocks_per_sm < 1)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: no block of %d threads and %zu bytes of shared memory fits an SM",
                   name, threads, smem);
  return DB_OK;
}

#endif /* DECODEBENCH_COMMON_CUH */
