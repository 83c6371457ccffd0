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
#include <memory>
#include <string>
#include <mutex>
#include <vector>

#include "emu.h"

namespace db_emu {
namespace {
// One captured operation of a graph (emu.h, "CUDA graphs by stream capture").
struct GraphRecord {
  enum Kind { Kernel, Memset, Copy } kind;
  std::string name;  // the kernel's, or "cudaMemsetAsync" / "cudaMemcpyAsync"
  const void *kernel_id = nullptr;
  dim3 grid, block;
  size_t smem = 0;
  std::unique_ptr<KernelBody> body;  // the kernel and copies of its arguments
  void *dst = nullptr;
  const void *src = nullptr;
  int value = 0;
  size_t bytes = 0;
};
using Records = std::vector<std::shared_ptr<const GraphRecord>>;
}  // namespace
}  // namespace db_emu

struct db_emu_stream {
  int device = 0;
  bool capturing = false;
  bool invalidated = false;  // a call failed during the capture
  std::string invalidated_by;
  db_emu::Records records;
};
// A graph and its instantiation share the records: a graph destroyed after its instantiation
// leaves the executable whole, as CUDA has it.
struct db_emu_graph {
  db_emu::Records records;
};
struct db_emu_graph_exec {
  db_emu::Records records;
};
struct db_emu_event {
  std::chrono::steady_clock::time_point when;
  bool recorded;
};

namespace db_emu {
namespace {

// Plausible numbers for a small part: the kernels' launch heuristics read them. The SM count is
// DB_EMU_SM_COUNT (default kSmCount) so that a test can plan as a 132-SM H200; shared memory is
// sm_90's (227 KiB a block opted in, 228 an SM), as the occupancy answers are (db_occupancy), so
// that a kernel the planners give sm_90's larger blocks runs here too.
constexpr int kSmCount = 8;
constexpr int kL2Bytes = 4 << 20;
constexpr int kSmemPerBlock = 48 << 10;
constexpr int kSmemPerBlockOptin = 227 << 10;
constexpr int kSmemPerSm = 228 << 10;
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
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
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
    case cudaErrorIllegalState: return "operation not permitted in the stream's capture state";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnmatched: return "the capture was not initiated in this stream";
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

namespace db_emu {
namespace {
// A call on a capturing stream failed: the capture is invalidated (its end fails), as CUDA has it.
cudaError_t invalidate(cudaStream_t stream, cudaError_t e, const std::string &what) {
  if (stream && stream->capturing && !stream->invalidated) {
    stream->invalidated = true;
    stream->invalidated_by = what;
  }
  return fail(e);
}
}  // namespace
}  // namespace db_emu

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (stream && stream->capturing) {
    if (!db_emu::is_device_range(ptr, bytes))
      return db_emu::invalidate(stream, cudaErrorInvalidValue, "cudaMemsetAsync outside an allocation");
    auto r = std::make_shared<db_emu::GraphRecord>();
    r->kind = db_emu::GraphRecord::Memset;
    r->name = "cudaMemsetAsync";
    r->dst = ptr;
    r->value = value;
    r->bytes = bytes;
    stream->records.push_back(std::move(r));
    return cudaSuccess;
  }
  std::lock_guard<std::mutex> launch(db_emu::launch_mutex());  // streams run in order
  if (!db_emu::is_device_range(ptr, bytes)) return fail(cudaErrorInvalidValue);
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return db_emu::invalidate(stream, cudaErrorInvalidValue, "cudaMemcpyAsync of a null pointer");
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (stream && stream->capturing) {
    // A host buffer may be gone by the replay: only device-to-device copies are recorded.
    if (kind != cudaMemcpyDeviceToDevice)
      return db_emu::invalidate(stream, cudaErrorStreamCaptureUnsupported,
                                "cudaMemcpyAsync to or from the host");
    if (!db_emu::is_device_range(dst, bytes) || !db_emu::is_device_range(src, bytes))
      return db_emu::invalidate(stream, cudaErrorInvalidValue, "cudaMemcpyAsync outside an allocation");
    auto r = std::make_shared<db_emu::GraphRecord>();
    r->kind = db_emu::GraphRecord::Copy;
    r->name = "cudaMemcpyAsync";
    r->dst = dst;
    r->src = src;
    r->bytes = bytes;
    stream->records.push_back(std::move(r));
    return cudaSuccess;
  }
  std::lock_guard<std::mutex> launch(db_emu::launch_mutex());  // streams run in order
  if ((dst_device && !db_emu::is_device_range(dst, bytes)) ||
      (src_device && !db_emu::is_device_range(src, bytes)))
    return fail(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned) {
  if (!stream) return fail(cudaErrorInvalidValue);
  *stream = new db_emu_stream();
  (*stream)->device = 0;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return fail(cudaErrorInvalidResourceHandle);
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (stream && stream->capturing)
    return db_emu::invalidate(stream, cudaErrorStreamCaptureUnsupported, "cudaStreamSynchronize");
  return cudaSuccess;
}

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
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  // The host clock cannot time a replay: events are not recorded into a graph.
  if (stream && stream->capturing)
    return db_emu::invalidate(stream, cudaErrorStreamCaptureUnsupported, "cudaEventRecord");
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

/* ---- graphs ------------------------------------------------------------------------------------ */

namespace db_emu {

bool capturing(cudaStream_t stream) { return stream && stream->capturing; }

LaunchResult record_kernel(cudaStream_t stream, const char *name, const void *kernel_id, dim3 grid,
                           dim3 block, size_t smem, std::unique_ptr<KernelBody> body,
                           std::string &message) {
  if (!capturing(stream)) {
    message = "recording a launch of " + std::string(name) + ": the stream is not capturing";
    return LAUNCH_FAILED;
  }
  if (check_launch(name, kernel_id, grid, block, smem, message) != LAUNCH_OK) {
    invalidate(stream, cudaErrorInvalidConfiguration, message);
    return LAUNCH_FAILED;
  }
  auto r = std::make_shared<GraphRecord>();
  r->kind = GraphRecord::Kernel;
  r->name = name;
  r->kernel_id = kernel_id;
  r->grid = grid;
  r->block = block;
  r->smem = smem;
  r->body = std::move(body);
  stream->records.push_back(std::move(r));
  return LAUNCH_OK;
}

LaunchResult graph_launch(cudaGraphExec_t exec, std::string &message) {
  if (!exec) {
    message = "graph launch: the executable graph is null";
    return LAUNCH_FAILED;
  }
  const size_t n = exec->records.size();
  for (size_t i = 0; i < n; ++i) {
    const GraphRecord &r = *exec->records[i];
    const std::string where = "graph replay, record " + std::to_string(i + 1) + " of " +
                              std::to_string(n) + " (" + r.name + "): ";
    if (r.kind == GraphRecord::Kernel) {
      std::string detail;
      const LaunchResult result =
          run_grid(r.name.c_str(), r.kernel_id, r.grid, r.block, r.smem, *r.body, detail);
      if (result != LAUNCH_OK) {
        message = where + detail;
        return result;
      }
      continue;
    }
    std::lock_guard<std::mutex> launch(launch_mutex());
    // The buffers were live at the capture; a graph replayed after one is freed must not write
    // into whatever the address holds now.
    if (!is_device_range(r.dst, r.bytes) ||
        (r.kind == GraphRecord::Copy && !is_device_range(r.src, r.bytes))) {
      message = where + "its " + std::to_string(r.bytes) +
                " bytes are no longer inside a live allocation (freed after the capture)";
      return LAUNCH_FAILED;
    }
    if (r.kind == GraphRecord::Memset)
      std::memset(r.dst, r.value, r.bytes);
    else
      std::memmove(r.dst, r.src, r.bytes);
  }
  return LAUNCH_OK;
}

int graph_records(cudaGraphExec_t exec) { return exec ? (int)exec->records.size() : -1; }

}  // namespace db_emu

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (!stream) return fail(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot capture
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return fail(cudaErrorInvalidValue);
  if (stream->capturing) return fail(cudaErrorIllegalState);
  stream->capturing = true;
  stream->invalidated = false;
  stream->invalidated_by.clear();
  stream->records.clear();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  if (!stream || !graph) return fail(cudaErrorInvalidValue);
  *graph = nullptr;
  if (!stream->capturing) return fail(cudaErrorIllegalState);
  stream->capturing = false;
  db_emu::Records records = std::move(stream->records);
  stream->records.clear();
  if (stream->invalidated) return fail(cudaErrorStreamCaptureInvalidated);
  *graph = new db_emu_graph{std::move(records)};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status) {
  if (!status) return fail(cudaErrorInvalidValue);
  *status = !stream || !stream->capturing ? cudaStreamCaptureStatusNone
            : stream->invalidated          ? cudaStreamCaptureStatusInvalidated
                                           : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, cudaGraphNode_t *error_node,
                                 char *log, size_t log_bytes) {
  if (error_node) *error_node = nullptr;
  if (log && log_bytes) log[0] = 0;
  if (!exec || !graph) return fail(cudaErrorInvalidValue);
  *exec = new db_emu_graph_exec{graph->records};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return fail(cudaErrorInvalidResourceHandle);
  if (stream && stream->capturing)
    return db_emu::invalidate(stream, cudaErrorStreamCaptureUnsupported, "cudaGraphLaunch");
  std::string message;
  return db_emu::graph_launch(exec, message) == db_emu::LAUNCH_OK ? cudaSuccess
                                                                   : fail(cudaErrorLaunchFailure);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (!graph) return fail(cudaErrorInvalidResourceHandle);
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (!exec) return fail(cudaErrorInvalidResourceHandle);
  delete exec;
  return cudaSuccess;
}
