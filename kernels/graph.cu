// graph.cu: CUDA graphs of a context's stream (db_graph_*) and the device-side counter add a
// replayed step advances its positions and lengths with (db_add_i32).
//
// Capture is CUDA stream capture on the context's stream, the same code for both libraries: the
// emulator (emu/runtime.cpp) implements the capture calls by recording every launch db_launch
// makes on a capturing stream (kernel, grid, block, shared memory, copies of the arguments) and
// every memset, and replays the records in order.
//
// Mode: cudaStreamCaptureModeThreadLocal. The launch helpers call cudaFuncSetAttribute and the
// occupancy queries while they launch, and plans issue cudaMemsetAsync on the stream: none of
// those is an "unsafe" call in any mode (they neither wait for the device nor allocate), and an
// async memset on the capturing stream becomes a memset node. What ThreadLocal adds over Relaxed
// is that CUDA still refuses, and invalidates the capture for, a cudaMalloc, cudaFree or
// synchronous copy that this thread makes while it captures (one that api.cu's own refusals
// missed), instead of letting it run outside the graph; over Global, that another thread (another
// context, another device) may allocate while this one captures. Begin and end must then come
// from one OS thread, which cgo's device thread guarantees.
#include <cstdio>
#include <mutex>
#include <set>

#include "common.cuh"

struct db_graph {
  db_context *ctx;
  cudaGraphExec_t exec;
};

namespace {

// The graphs db_graph_end made and db_graph_destroy has not freed: a destroyed (or never made)
// graph handed back is an error, not a use of freed memory.
std::mutex g_graphs_mutex;
std::set<const db_graph *> g_graphs;

bool graph_live(const db_graph *g) {
  std::lock_guard<std::mutex> lock(g_graphs_mutex);
  return g_graphs.count(g) != 0;
}

int check_graph(const char *function, db_context *ctx, const db_graph *g) {
  if (!g) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: graph is null", function);
  if (!graph_live(g))
    return db_fail(DB_ERR_INVALID_ARGUMENT,
                   "%s: graph %p is not a live graph (destroyed, or not made by db_graph_end)",
                   function, static_cast<const void *>(g));
  if (g->ctx != ctx)
    return db_fail(DB_ERR_INVALID_ARGUMENT,
                   "%s: graph %p was captured on another context; launch it on that one", function,
                   static_cast<const void *>(g));
  return DB_OK;
}

__global__ void add_i32_kernel(int32_t *p, int32_t count, int32_t delta) {
  const int32_t stride = (int32_t)(gridDim.x * blockDim.x);
  for (int32_t i = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x); i < count; i += stride)
    p[i] += delta;
}

}  // namespace

extern "C" int db_graph_begin(db_context *ctx) {
  return db_guard("db_graph_begin", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (ctx->capturing)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "db_graph_begin: the context is already capturing a graph (end it with "
                     "db_graph_end first)");
    DB_CHECK_CUDA(cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal));
    ctx->capturing = true;
    return DB_OK;
  });
}

extern "C" int db_graph_end(db_context *ctx, db_graph **out) {
  return db_guard("db_graph_end", [&]() -> int {
    if (!out) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_graph_end: out is null");
    *out = nullptr;
    DB_CHECK(db_enter(ctx));
    if (!ctx->capturing)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "db_graph_end: the context is not capturing a graph (db_graph_begin first)");
    // The capture ends here whatever follows: a failed end leaves the context usable.
    ctx->capturing = false;
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(ctx->stream, &graph);
    if (ended != cudaSuccess) {
      if (graph) (void)cudaGraphDestroy(graph);
      if (ended == cudaErrorStreamCaptureInvalidated)
        return db_fail_cuda(ended,
                            "cudaStreamEndCapture (a call made during the capture failed on the "
                            "device side and invalidated it; its error was reported then)");
      return db_fail_cuda(ended, "cudaStreamEndCapture");
    }
    cudaGraphExec_t exec = nullptr;
#if !DB_EMU && defined(CUDART_VERSION) && CUDART_VERSION >= 12000
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    const char *log = "";
#else
    char log[512] = "";
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, nullptr, log, sizeof log);
#endif
    // The executable holds all it needs: the graph itself is not kept.
    (void)cudaGraphDestroy(graph);
    if (made != cudaSuccess) {
      const int status = db_fail_cuda(made, "cudaGraphInstantiate");
      if (log[0]) {
        char detail[1024];
        db_last_error_message(detail, sizeof detail);
        return db_fail(status, "%s (%s)", detail, log);
      }
      return status;
    }
    db_graph *g = new db_graph{ctx, exec};
    {
      std::lock_guard<std::mutex> lock(g_graphs_mutex);
      g_graphs.insert(g);
    }
    *out = g;
    return DB_OK;
  });
}

extern "C" int db_graph_launch(db_context *ctx, db_graph *g) {
  return db_guard("db_graph_launch", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    DB_CHECK(check_graph("db_graph_launch", ctx, g));
    if (ctx->capturing)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "db_graph_launch: the context is capturing a graph; a graph is not launched "
                     "into another");
#if DB_EMU
    std::string message;
    switch (db_emu::graph_launch(g->exec, message)) {
      case db_emu::LAUNCH_OK: return DB_OK;
      case db_emu::LAUNCH_DEADLOCK: return db_fail(DB_ERR_EMU_DEADLOCK, "%s", message.c_str());
      case db_emu::LAUNCH_FAILED: break;
    }
    return db_fail(DB_ERR_LAUNCH, "%s", message.c_str());
#else
    const cudaError_t error = cudaGraphLaunch(g->exec, ctx->stream);
    if (error != cudaSuccess) return db_fail_cuda(error, "cudaGraphLaunch");
    return DB_OK;
#endif
  });
}

extern "C" int db_graph_destroy(db_context *ctx, db_graph *g) {
  return db_guard("db_graph_destroy", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    DB_CHECK(check_graph("db_graph_destroy", ctx, g));
    {
      std::lock_guard<std::mutex> lock(g_graphs_mutex);
      g_graphs.erase(g);
    }
    // A replay still in flight keeps what it needs: CUDA defers the release of an executable
    // graph until its launches are done.
    const cudaError_t error = cudaGraphExecDestroy(g->exec);
    delete g;
    if (error != cudaSuccess) return db_fail_cuda(error, "cudaGraphExecDestroy");
    return DB_OK;
  });
}

extern "C" int db_add_i32(db_context *ctx, uint64_t dptr, int32_t count, int32_t delta) {
  return db_guard("db_add_i32", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (dptr == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_add_i32: dptr is null");
    if (dptr % 4 != 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_add_i32: dptr=0x%llx is not 4-byte aligned",
                     (unsigned long long)dptr);
    if (count < 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_add_i32: count=%d is negative (want >= 0)", count);
    if (count == 0) return DB_OK;
    // A step's counters are a batch long (<= DB_MAX_BATCH): one block in most calls.
    const unsigned threads = 256;
    const dim3 grid((unsigned)std::min<uint64_t>(db_ceil_div((uint64_t)count, threads),
                                                 (uint64_t)ctx->sm_count * 4));
    return DB_LAUNCH(add_i32_kernel, grid, dim3(threads), 0, ctx->stream,
                     reinterpret_cast<int32_t *>(dptr), count, delta);
  });
}
