// runtime.cpp: the CUDA runtime subset api.cu uses, on the host. One emulated device; streams
// run everything at once; events read the host clock (emulated timings are never performance
// numbers).
//
// Device memory: every cudaMalloc is its own anonymous mapping, reserved lazily (MAP_NORESERVE:
// a sparse multi-GiB buffer costs only the pages a kernel touches), with a PROT_NONE guard page
// on each side. The buffer starts 256-byte aligned (as cudaMalloc's) and is placed so that its
// size rounded up to 256 bytes ends exactly at the upper guard: a plain access past the end
// faults at once, and the scheduler's SIGSEGV handler turns the fault into a launch error. The
// table of live allocations (base, requested size) is what the 16-byte wrappers check against.
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "emu.h"

struct db_emu_stream {
  int device;
};
struct db_emu_event {
  std::chrono::steady_clock::time_point when;
  bool recorded;
};

namespace db_emu {
namespace {

// Plausible numbers for a small Ampere-class part: the kernels' launch heuristics read them.
// The SM count is DB_EMU_SM_COUNT (default kSmCount) so that a test can plan as a 132-SM H200.
constexpr int kSmCount = 8;
constexpr int kL2Bytes = 4 << 20;
constexpr int kSmemPerBlock = 48 << 10;
constexpr int kSmemPerBlockOptin = 99 << 10;
constexpr int kSmemPerSm = 100 << 10;
constexpr size_t kMemTotal = size_t(16) << 30;  // allocations past it fail, as on a card

struct Mapping {
  size_t bytes;    // as asked for
  size_t rounded;  // to 256 bytes: what is counted against the device's memory
  void *map;       // the whole mapping, guards included
  size_t map_bytes;
};

std::mutex g_mutex;  // guards everything below
std::map<uintptr_t, Mapping> g_allocations;  // base -> mapping
size_t g_allocated = 0;
std::map<const void *, size_t> g_max_dynamic_smem;
thread_local cudaError_t t_last_error = cudaSuccess;

cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

// Whether [p, p+bytes) lies inside one live allocation.
bool is_device_range(const void *p, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  auto it = g_allocations.upper_bound(at);
  if (it == g_allocations.begin()) return false;
  --it;
  return at >= it->first && at + bytes <= it->first + it->second.rounded && at + bytes >= at;
}

size_t page_bytes() {
  static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return page;
}

}  // namespace

int sm_count() {
  // Read at every query, so a test can set it before it creates a context (contexts cache it).
  const char *v = std::getenv("DB_EMU_SM_COUNT");
  if (!v || !*v) return kSmCount;
  char *end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end || n < 1 || n > 1024) {
    // The attribute query fails (cudaErrorInvalidValue); this line says why.
    std::fprintf(stderr, "decodebench emulator: DB_EMU_SM_COUNT=%s: want an integer in 1..1024\n", v);
    return -1;
  }
  return (int)n;
}

std::vector<Allocation> allocations() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<Allocation> out;
  out.reserve(g_allocations.size());
  for (const auto &[base, m] : g_allocations) out.push_back(Allocation{base, m.bytes, m.rounded});
  return out;
}

cudaError_t set_max_dynamic_smem(const void *kernel_id, int bytes) {
  if (bytes < 0 || bytes > kSmemPerBlockOptin) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_max_dynamic_smem[kernel_id] = (size_t)bytes;
  return cudaSuccess;
}

size_t max_dynamic_smem(const void *kernel_id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_max_dynamic_smem.find(kernel_id);
  return it == g_max_dynamic_smem.end() ? (size_t)kSmemPerBlock : it->second;
}

}  // namespace db_emu

using db_emu::fail;

const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorUnknown: return "cudaErrorUnknown";
  }
  return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory (emulated device)";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    default: return "emulated runtime error";
  }
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = db_emu::t_last_error;
  db_emu::t_last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return db_emu::t_last_error; }

cudaError_t cudaGetDeviceCount(int *count) {
  if (!count) return fail(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}
cudaError_t cudaGetDevice(int *device) {
  if (!device) return fail(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
  if (!value) return fail(cudaErrorInvalidValue);
  if (device != 0) return fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = db_emu::kSmemPerBlock; break;
    case cudaDevAttrClockRate: *value = 0; break;  // no real clock to report
    case cudaDevAttrMultiProcessorCount:
      *value = db_emu::sm_count();
      if (*value < 1) return fail(cudaErrorInvalidValue);
      break;
    case cudaDevAttrMemoryClockRate: *value = 0; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = 0; break;
    case cudaDevAttrL2CacheSize: *value = db_emu::kL2Bytes; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = 2048; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 8; break;  // emulates the sm_80 subset
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = db_emu::kSmemPerSm; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = db_emu::kSmemPerBlockOptin; break;
    default: return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
  if (!prop) return fail(cudaErrorInvalidValue);
  if (device != 0) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "%s", "decodebench host emulation");
  prop->totalGlobalMem = db_emu::kMemTotal;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  if (!free_bytes || !total_bytes) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(db_emu::g_mutex);
  *total_bytes = db_emu::kMemTotal;
  *free_bytes = db_emu::kMemTotal - db_emu::g_allocated;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  const size_t page = db_emu::page_bytes();
  const size_t rounded = (bytes + 255) & ~size_t(255);
  if (rounded < bytes || rounded > db_emu::kMemTotal) return fail(cudaErrorMemoryAllocation);
  const size_t data = (rounded + page - 1) & ~(page - 1);
  const size_t map_bytes = data + 2 * page;
  {
    std::lock_guard<std::mutex> lock(db_emu::g_mutex);
    if (rounded > db_emu::kMemTotal - db_emu::g_allocated) return fail(cudaErrorMemoryAllocation);
    db_emu::g_allocated += rounded;
  }
  void *map = mmap(nullptr, map_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  char *at = static_cast<char *>(map);
  if (map == MAP_FAILED || mprotect(at + page, data, PROT_READ | PROT_WRITE) != 0) {
    if (map != MAP_FAILED) munmap(map, map_bytes);
    std::lock_guard<std::mutex> lock(db_emu::g_mutex);
    db_emu::g_allocated -= rounded;
    return fail(cudaErrorMemoryAllocation);
  }
  char *base = at + page + (data - rounded);
  std::lock_guard<std::mutex> lock(db_emu::g_mutex);
  db_emu::g_allocations[reinterpret_cast<uintptr_t>(base)] =
      db_emu::Mapping{bytes, rounded, map, map_bytes};
  *ptr = base;
  return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
  if (!ptr) return cudaSuccess;
  // Not while a kernel runs: a launch may have write-protected the buffer (interleave schedule).
  std::lock_guard<std::mutex> launch(db_emu::launch_mutex());
  db_emu::Mapping m{};
  {
    std::lock_guard<std::mutex> lock(db_emu::g_mutex);
    auto it = db_emu::g_allocations.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == db_emu::g_allocations.end()) return fail(cudaErrorInvalidValue);
    m = it->second;
    db_emu::g_allocated -= m.rounded;
    db_emu::g_allocations.erase(it);
  }
  munmap(m.map, m.map_bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t) {
  if (bytes == 0) return cudaSuccess;
  std::lock_guard<std::mutex> launch(db_emu::launch_mutex());  // streams run in order
  if (!db_emu::is_device_range(ptr, bytes)) return fail(cudaErrorInvalidValue);
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> launch(db_emu::launch_mutex());  // streams run in order
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((dst_device && !db_emu::is_device_range(dst, bytes)) ||
      (src_device && !db_emu::is_device_range(src, bytes)))
    return fail(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned) {
  if (!stream) return fail(cudaErrorInvalidValue);
  *stream = new db_emu_stream{0};
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return fail(cudaErrorInvalidResourceHandle);
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  if (!event) return fail(cudaErrorInvalidValue);
  *event = new db_emu_event{{}, false};
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  event->when = std::chrono::steady_clock::now();
  event->recorded = true;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return event ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t stop) {
  if (!ms) return fail(cudaErrorInvalidValue);
  if (!start || !stop || !start->recorded || !stop->recorded)
    return fail(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(stop->when - start->when).count();
  return cudaSuccess;
}
