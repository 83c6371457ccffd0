// api.cu: decodebench.h's status strings, errors, devices, contexts, buffers, input fill and
// timers. The probes live in bandwidth.cu and the linear layers in linear.cu.
//
// Every entry point runs inside db_guard (no C++ exception crosses the seam), returns a status,
// and on failure leaves the detail in a thread-local message.
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "common.cuh"

/* ---- errors ----------------------------------------------------------------------------------- */

namespace {
thread_local char t_last_error[1024] = "";
}

int db_fail(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(t_last_error, sizeof t_last_error, fmt, ap);
  va_end(ap);
  return status;
}

int db_fail_cuda(cudaError_t error, const char *what) {
  // Reported here, so clear it: a later launch's cudaGetLastError must not blame its kernel for
  // this call (errors that poison the context stay sticky regardless).
  (void)cudaGetLastError();
  int status = DB_ERR_CUDA;
  switch (error) {
    case cudaErrorMemoryAllocation: status = DB_ERR_OUT_OF_MEMORY; break;
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorInsufficientDriver:
#if !DB_EMU
    case cudaErrorStubLibrary:
    case cudaErrorDevicesUnavailable:
#endif
      status = DB_ERR_NO_DEVICE;
      break;
    case cudaErrorLaunchFailure:
    case cudaErrorInvalidConfiguration:
#if !DB_EMU
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorLaunchOutOfResources:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDeviceFunction:
#endif
      status = DB_ERR_LAUNCH;
      break;
    default: break;
  }
  return db_fail(status, "%s: %s: %s", what, cudaGetErrorName(error), cudaGetErrorString(error));
}

int db_enter(db_context *ctx) {
  if (!ctx) return db_fail(DB_ERR_INVALID_ARGUMENT, "context is null");
  DB_CHECK_CUDA(cudaSetDevice(ctx->device));
  return DB_OK;
}

namespace {
/* The calls that wait for the device, touch host memory or change the allocations refuse while
 * the context captures a graph (graph.cu): a graph replays device work only, and CUDA would
 * invalidate the capture on them anyway. */
int refuse_capturing(const db_context *ctx, const char *function) {
  if (!ctx->capturing) return DB_OK;
  return db_fail(DB_ERR_INVALID_ARGUMENT,
                 "%s: not allowed while the context is capturing a graph (between db_graph_begin "
                 "and db_graph_end): only calls that launch device work can be captured",
                 function);
}
}  // namespace

extern "C" const char *db_status_string(int status) {
  switch (status) {
    case DB_OK: return "ok";
    case DB_ERR_INVALID_ARGUMENT: return "invalid argument";
    case DB_ERR_UNSUPPORTED_SHAPE: return "unsupported shape";
    case DB_ERR_NO_DEVICE: return "no usable device";
    case DB_ERR_OUT_OF_MEMORY: return "out of device memory";
    case DB_ERR_CUDA: return "CUDA runtime error";
    case DB_ERR_LAUNCH: return "kernel launch or execution failed";
    case DB_ERR_EMU_DEADLOCK: return "emulated kernel deadlocked at a barrier";
    case DB_ERR_INTERNAL: return "internal error in decodebench";
    case DB_ERR_WORKSPACE: return "workspace too small";
  }
  return "unknown status";
}

extern "C" int db_last_error_message(char *buf, size_t len) {
  if (!buf || len == 0) return DB_ERR_INVALID_ARGUMENT;
  std::snprintf(buf, len, "%s", t_last_error);
  return DB_OK;
}

extern "C" int db_abi_version(void) { return DB_ABI_VERSION; }

extern "C" const char *db_backend_name(void) { return DB_EMU ? "emu" : "cuda"; }

/* ---- devices ---------------------------------------------------------------------------------- */

extern "C" int db_device_count(int32_t *count) {
  return db_guard("db_device_count", [&]() -> int {
    if (!count) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_device_count: count is null");
    *count = 0;
    int n = 0;
    const cudaError_t error = cudaGetDeviceCount(&n);
    if (error != cudaSuccess) return db_fail_cuda(error, "cudaGetDeviceCount");
    *count = n;
    return DB_OK;
  });
}

namespace {
int check_device_index(int32_t device) {
  int n = 0;
  DB_CHECK_CUDA(cudaGetDeviceCount(&n));
  if (device < 0 || device >= n)
    return db_fail(DB_ERR_NO_DEVICE, "device %d is out of range (%d device(s))", device, n);
  return DB_OK;
}

/* An attribute the runtime may not report (clocks on some drivers): 0 and no sticky error. */
int32_t optional_attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return value;
}
}  // namespace

extern "C" int db_device_props_get(int32_t device, db_device_props *out) {
  return db_guard("db_device_props_get", [&]() -> int {
    if (!out) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_device_props_get: out is null");
    std::memset(out, 0, sizeof *out);
    DB_CHECK(check_device_index(device));
    DB_CHECK_CUDA(cudaSetDevice(device));
    // cudaDeviceProp only for the name: CUDA 13 dropped its clock fields, so every number comes
    // from cudaDeviceGetAttribute, which both 11.8 and 13 have.
    cudaDeviceProp prop;
    DB_CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
    std::snprintf(out->name, sizeof out->name, "%s", prop.name);
    int v = 0;
    DB_CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, device));
    out->cc_major = v;
    DB_CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMinor, device));
    out->cc_minor = v;
    DB_CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device));
    out->sm_count = v;
    DB_CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, device));
    out->max_threads_per_block = v;
    DB_CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, device));
    out->l2_bytes = v;
    DB_CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlock, device));
    out->smem_per_block_bytes = v;
    DB_CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    out->smem_per_block_optin_bytes = v;
    DB_CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    out->smem_per_sm_bytes = v;
    size_t free_bytes = 0, total_bytes = 0;
    DB_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    out->mem_total_bytes = total_bytes;
    out->mem_free_bytes = free_bytes;
    out->sm_clock_khz = optional_attribute(cudaDevAttrClockRate, device);
    out->mem_clock_khz = optional_attribute(cudaDevAttrMemoryClockRate, device);
    out->mem_bus_width_bits = optional_attribute(cudaDevAttrGlobalMemoryBusWidth, device);
    return DB_OK;
  });
}

/* ---- contexts --------------------------------------------------------------------------------- */

extern "C" int db_context_create(int32_t device, db_context **out) {
  return db_guard("db_context_create", [&]() -> int {
    if (!out) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_context_create: out is null");
    *out = nullptr;
    DB_CHECK(check_device_index(device));
    DB_CHECK_CUDA(cudaSetDevice(device));
    db_context ctx{};
    ctx.device = device;
    int v = 0;
    DB_CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device));
    ctx.sm_count = v;
    DB_CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerMultiProcessor, device));
    ctx.max_threads_per_sm = v;
    DB_CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, device));
    ctx.l2_bytes = v;
    DB_CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    ctx.smem_per_block_optin_bytes = v;
    DB_CHECK_CUDA(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
    *out = new db_context(ctx);
    return DB_OK;
  });
}

extern "C" int db_context_destroy(db_context *ctx) {
  return db_guard("db_context_destroy", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (ctx->capturing) {  // an unfinished capture dies with its context
      cudaGraph_t graph = nullptr;
      if (cudaStreamEndCapture(ctx->stream, &graph) == cudaSuccess && graph)
        (void)cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      ctx->capturing = false;
    }
    const cudaError_t sync = cudaStreamSynchronize(ctx->stream);
    const cudaError_t destroy = cudaStreamDestroy(ctx->stream);
    delete ctx;
    if (sync != cudaSuccess) return db_fail_cuda(sync, "cudaStreamSynchronize");
    if (destroy != cudaSuccess) return db_fail_cuda(destroy, "cudaStreamDestroy");
    return DB_OK;
  });
}

extern "C" int db_synchronize(db_context *ctx) {
  return db_guard("db_synchronize", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    DB_CHECK(refuse_capturing(ctx, "db_synchronize"));
    DB_CHECK_CUDA(cudaStreamSynchronize(ctx->stream));
    return DB_OK;
  });
}

/* ---- buffers and copies ----------------------------------------------------------------------- */

extern "C" int db_buffer_alloc(db_context *ctx, uint64_t bytes, uint64_t *dptr) {
  return db_guard("db_buffer_alloc", [&]() -> int {
    if (!dptr) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_buffer_alloc: dptr is null");
    *dptr = 0;
    DB_CHECK(db_enter(ctx));
    DB_CHECK(refuse_capturing(ctx, "db_buffer_alloc"));
    if (bytes == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_buffer_alloc: bytes=0");
    void *p = nullptr;
    const cudaError_t error = cudaMalloc(&p, (size_t)bytes);
    if (error != cudaSuccess) {
      char what[96];
      std::snprintf(what, sizeof what, "cudaMalloc(%llu bytes)", (unsigned long long)bytes);
      return db_fail_cuda(error, what);
    }
    *dptr = reinterpret_cast<uint64_t>(p);
    return DB_OK;
  });
}

extern "C" int db_buffer_free(db_context *ctx, uint64_t dptr) {
  return db_guard("db_buffer_free", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    DB_CHECK(refuse_capturing(ctx, "db_buffer_free"));
    if (dptr == 0) return DB_OK;  // like free(NULL)
    DB_CHECK_CUDA(cudaFree(reinterpret_cast<void *>(dptr)));
    return DB_OK;
  });
}

extern "C" int db_memset(db_context *ctx, uint64_t dptr, int32_t byte_value, uint64_t bytes) {
  return db_guard("db_memset", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (dptr == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_memset: dptr is null");
    if (byte_value < 0 || byte_value > 255)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_memset: byte_value=%d is not in 0..255",
                     byte_value);
    DB_CHECK_CUDA(
        cudaMemsetAsync(reinterpret_cast<void *>(dptr), byte_value, (size_t)bytes, ctx->stream));
    return DB_OK;
  });
}

// Both copies are synchronous: the caller's host memory may be gone (or reused) after return.
extern "C" int db_copy_to_host(db_context *ctx, void *host_dst, uint64_t src, uint64_t bytes) {
  return db_guard("db_copy_to_host", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    DB_CHECK(refuse_capturing(ctx, "db_copy_to_host"));
    if (!host_dst || src == 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_copy_to_host: null pointer");
    DB_CHECK_CUDA(cudaMemcpyAsync(host_dst, reinterpret_cast<const void *>(src), (size_t)bytes,
                                  cudaMemcpyDeviceToHost, ctx->stream));
    DB_CHECK_CUDA(cudaStreamSynchronize(ctx->stream));
    return DB_OK;
  });
}

extern "C" int db_copy_to_device(db_context *ctx, uint64_t dst, const void *host_src,
                                 uint64_t bytes) {
  return db_guard("db_copy_to_device", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    DB_CHECK(refuse_capturing(ctx, "db_copy_to_device"));
    if (!host_src || dst == 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_copy_to_device: null pointer");
    DB_CHECK_CUDA(cudaMemcpyAsync(reinterpret_cast<void *>(dst), host_src, (size_t)bytes,
                                  cudaMemcpyHostToDevice, ctx->stream));
    DB_CHECK_CUDA(cudaStreamSynchronize(ctx->stream));
    return DB_OK;
  });
}

/* ---- input fill ------------------------------------------------------------------------------- */

namespace {

// Element i = round_to_T(db_hash_uniform(seed, i) * scale): the product is an fp32 multiply (one
// rounding), then round-to-nearest-even to T. bench/ref does the same in Go.
template <class T>
__global__ void fill_hash_float_kernel(T *out, uint64_t count, uint64_t seed, float scale) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] = db_dtype<T>::from_float(db_hash_uniform(seed, i) * scale);
}

__global__ void fill_hash_f32_kernel(float *out, uint64_t count, uint64_t seed, float scale) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] = db_hash_uniform(seed, i) * scale;
}

__global__ void fill_hash_u32_kernel(uint32_t *out, uint64_t count, uint64_t seed) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] = (uint32_t)(db_hash64(seed, i) >> 32);
}

}  // namespace

extern "C" int db_fill_hash(db_context *ctx, uint64_t dptr, uint64_t count, int32_t dtype,
                            uint64_t seed, float scale) {
  return db_guard("db_fill_hash", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (dptr == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_fill_hash: dptr is null");
    if (count == 0) return DB_OK;
    const uint64_t elem_bytes = (dtype == DB_DTYPE_BF16 || dtype == DB_DTYPE_FP16) ? 2 : 4;
    if (dptr % elem_bytes != 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_fill_hash: dptr=0x%llx is not %llu-byte aligned",
                     (unsigned long long)dptr, (unsigned long long)elem_bytes);
    // Enough threads to stream the fill, a grid-stride loop for the rest; not a timed kernel.
    const unsigned threads = 256;
    const uint64_t max_blocks = (uint64_t)ctx->sm_count * 8;
    const dim3 grid((unsigned)std::min<uint64_t>(db_ceil_div(count, threads), max_blocks));
    switch (dtype) {
      case DB_DTYPE_F32:
        return DB_LAUNCH(fill_hash_f32_kernel, grid, threads, 0, ctx->stream,
                         reinterpret_cast<float *>(dptr), count, seed, scale);
      case DB_DTYPE_BF16:
        return DB_LAUNCH(fill_hash_float_kernel<__nv_bfloat16>, grid, threads, 0, ctx->stream,
                         reinterpret_cast<__nv_bfloat16 *>(dptr), count, seed, scale);
      case DB_DTYPE_FP16:
        return DB_LAUNCH(fill_hash_float_kernel<__half>, grid, threads, 0, ctx->stream,
                         reinterpret_cast<__half *>(dptr), count, seed, scale);
      case DB_DTYPE_U32:
        return DB_LAUNCH(fill_hash_u32_kernel, grid, threads, 0, ctx->stream,
                         reinterpret_cast<uint32_t *>(dptr), count, seed);
    }
    return db_fail(DB_ERR_INVALID_ARGUMENT, "db_fill_hash: dtype=%d is not a DB_DTYPE_*", dtype);
  });
}

/* ---- timers ----------------------------------------------------------------------------------- */

struct db_timer {
  db_context *ctx;
  cudaEvent_t start, stop;
  bool started, stopped;
};

extern "C" int db_timer_create(db_context *ctx, db_timer **out) {
  return db_guard("db_timer_create", [&]() -> int {
    if (!out) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_timer_create: out is null");
    *out = nullptr;
    DB_CHECK(db_enter(ctx));
    DB_CHECK(refuse_capturing(ctx, "db_timer_create"));
    cudaEvent_t start = nullptr, stop = nullptr;
    DB_CHECK_CUDA(cudaEventCreate(&start));
    const cudaError_t error = cudaEventCreate(&stop);
    if (error != cudaSuccess) {
      (void)cudaEventDestroy(start);
      return db_fail_cuda(error, "cudaEventCreate");
    }
    *out = new db_timer{ctx, start, stop, false, false};
    return DB_OK;
  });
}

extern "C" int db_timer_destroy(db_timer *t) {
  return db_guard("db_timer_destroy", [&]() -> int {
    if (!t) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_timer_destroy: timer is null");
    DB_CHECK(db_enter(t->ctx));
    const cudaError_t a = cudaEventDestroy(t->start);
    const cudaError_t b = cudaEventDestroy(t->stop);
    delete t;
    if (a != cudaSuccess) return db_fail_cuda(a, "cudaEventDestroy");
    if (b != cudaSuccess) return db_fail_cuda(b, "cudaEventDestroy");
    return DB_OK;
  });
}

extern "C" int db_timer_start(db_timer *t) {
  return db_guard("db_timer_start", [&]() -> int {
    if (!t) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_timer_start: timer is null");
    DB_CHECK(db_enter(t->ctx));
    DB_CHECK(refuse_capturing(t->ctx, "db_timer_start"));
    DB_CHECK_CUDA(cudaEventRecord(t->start, t->ctx->stream));
    t->started = true;
    t->stopped = false;
    return DB_OK;
  });
}

extern "C" int db_timer_stop(db_timer *t) {
  return db_guard("db_timer_stop", [&]() -> int {
    if (!t) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_timer_stop: timer is null");
    if (!t->started)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_timer_stop: the timer was not started");
    DB_CHECK(db_enter(t->ctx));
    DB_CHECK(refuse_capturing(t->ctx, "db_timer_stop"));
    DB_CHECK_CUDA(cudaEventRecord(t->stop, t->ctx->stream));
    t->stopped = true;
    return DB_OK;
  });
}

extern "C" int db_timer_elapsed_ms(db_timer *t, float *ms) {
  return db_guard("db_timer_elapsed_ms", [&]() -> int {
    if (!t || !ms) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_timer_elapsed_ms: null pointer");
    if (!t->stopped)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "db_timer_elapsed_ms: the timer was not started and stopped");
    DB_CHECK(db_enter(t->ctx));
    DB_CHECK(refuse_capturing(t->ctx, "db_timer_elapsed_ms"));
    DB_CHECK_CUDA(cudaEventSynchronize(t->stop));
    DB_CHECK_CUDA(cudaEventElapsedTime(ms, t->start, t->stop));
    return DB_OK;
  });
}

/* ---- launch baseline -------------------------------------------------------------------------- */

namespace {
// Does nothing: what is left of its time is the launch itself.
__global__ void empty_kernel() {}
constexpr int32_t kMaxEmptyLaunches = 1000000;
}  // namespace

extern "C" int db_empty_kernel(db_context *ctx, int32_t launches) {
  return db_guard("db_empty_kernel", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (launches < 1 || launches > kMaxEmptyLaunches)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_empty_kernel: launches=%d is not in 1..%d",
                     launches, kMaxEmptyLaunches);
    for (int32_t i = 0; i < launches; ++i)
      DB_CHECK(db_launch("empty_kernel", empty_kernel, dim3(1), dim3(32), 0, ctx->stream));
    return DB_OK;
  });
}
