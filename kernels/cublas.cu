// cublas.cu: the cuBLASLt peer of the linear layer (DB_LINEAR_CUBLAS). It enters through
// db_linear like our kernels, so the same float64 reference verifies it and the same timer
// times it: a card run then shows our time beside cuBLAS's.
//
// libcublasLt is opened at run time with dlopen, never linked: the kernels library still loads
// on a machine without it (the variant then says why it cannot run). Only the few types and
// entry points used here are declared, by hand; where the toolkit's cublasLt.h is present they
// are checked against it at compile time.
//
// Y[batch x n] = X[batch x k] * W^T with W row-major [n x k] is, column-major,
//   Y^T[n x batch] = W[n x k] * X^T[k x batch]:
// A = W stored column-major as k x n (ld k) and transposed, B = X stored as k x batch (ld k),
// D = Y stored as n x batch (ld n): the "TN" GEMM, cuBLAS's fastest layout. bf16 or fp16 in and
// out, fp32 compute and scale, beta 0.
#include "cublas.cuh"

#if DB_EMU

int db_cublas_plan(const db_context *, const db_linear_params *, uint64_t *) {
  return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                 "linear: variant cublas runs cuBLASLt on a GPU; the emulator has none");
}
int db_cublas_linear(const db_context *ctx, const db_linear_params *p) {
  return db_cublas_plan(ctx, p, nullptr);
}

#else

#include <dlfcn.h>

#include <cstdio>
#include <map>
#include <type_traits>
#include <mutex>
#include <tuple>

namespace {

/* ---- the slice of cublasLt.h used here -------------------------------------------------------- */

using LtStatus = int;  // cublasStatus_t; 0 = CUBLAS_STATUS_SUCCESS
using LtHandle = void *;
using LtMatmulDesc = void *;
using LtLayout = void *;
using LtPreference = void *;
struct LtAlgo {
  uint64_t data[8];
};
struct LtHeuristicResult {
  LtAlgo algo;
  size_t workspaceSize;
  LtStatus state;
  float wavesCount;
  int reserved[4];
};
constexpr int kLtCompute32F = 68;         // CUBLAS_COMPUTE_32F
constexpr int kLtOpN = 0, kLtOpT = 1;     // CUBLAS_OP_N, CUBLAS_OP_T
constexpr int kLtDescTransA = 3;          // CUBLASLT_MATMUL_DESC_TRANSA
constexpr int kLtDescTransB = 4;          // CUBLASLT_MATMUL_DESC_TRANSB
constexpr int kLtPrefMaxWorkspace = 1;    // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES (uint64_t)
constexpr int kLtPrefMinAlignmentA = 5;   // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES; B, C, D follow

// DB_CUBLAS_NO_HEADER builds as a toolkit without cublasLt.h would (a check that this file needs
// none).
#if !defined(DB_CUBLAS_NO_HEADER) && __has_include(<cublasLt.h>)
}  // namespace
#include <cublasLt.h>
namespace {
static_assert(sizeof(LtAlgo) == sizeof(cublasLtMatmulAlgo_t), "cublasLtMatmulAlgo_t");
static_assert(sizeof(LtHeuristicResult) == sizeof(cublasLtMatmulHeuristicResult_t) &&
                  offsetof(LtHeuristicResult, workspaceSize) ==
                      offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize) &&
                  offsetof(LtHeuristicResult, state) == offsetof(cublasLtMatmulHeuristicResult_t, state),
              "cublasLtMatmulHeuristicResult_t");
static_assert(kLtCompute32F == CUBLAS_COMPUTE_32F && kLtOpN == CUBLAS_OP_N && kLtOpT == CUBLAS_OP_T,
              "cuBLAS enums");
static_assert(kLtDescTransA == CUBLASLT_MATMUL_DESC_TRANSA && kLtDescTransB == CUBLASLT_MATMUL_DESC_TRANSB &&
                  kLtPrefMaxWorkspace == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES &&
                  kLtPrefMinAlignmentA == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
                  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES == kLtPrefMinAlignmentA + 3,
              "cuBLASLt attributes");
#endif

// cuBLASLt's own advice for Hopper is a 32 MiB workspace; Ampere needs less, and the planner
// asks for this much everywhere so that the heuristics may pick any algorithm.
constexpr uint64_t kCublasWorkspaceBytes = 32ull << 20;

struct LtApi {
  LtStatus (*create)(LtHandle *);
  LtStatus (*matmul_desc_create)(LtMatmulDesc *, int, cudaDataType_t);
  LtStatus (*matmul_desc_set)(LtMatmulDesc, int, const void *, size_t);
  LtStatus (*layout_create)(LtLayout *, cudaDataType_t, uint64_t, uint64_t, int64_t);
  LtStatus (*preference_create)(LtPreference *);
  LtStatus (*preference_set)(LtPreference, int, const void *, size_t);
  LtStatus (*preference_destroy)(LtPreference);
  LtStatus (*heuristic)(LtHandle, LtMatmulDesc, LtLayout, LtLayout, LtLayout, LtLayout, LtPreference,
                        int, LtHeuristicResult *, int *);
  LtStatus (*matmul)(LtHandle, LtMatmulDesc, const void *, const void *, LtLayout, const void *,
                     LtLayout, const void *, const void *, LtLayout, void *, LtLayout,
                     const LtAlgo *, void *, size_t, cudaStream_t);
  const char *(*status_string)(LtStatus);  // optional (cuBLAS 11.4 and later)
  const char *library = nullptr;            // the name that opened
  char error[512] = "";                     // why it could not be opened, when library is null
};

// The cuBLASLt sonames of CUDA 13, 12 and 11, then the development link.
constexpr const char *kLtNames[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11",
                                    "libcublasLt.so"};

const LtApi &lt_api() {
  static LtApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    void *h = nullptr;
    const char *name = nullptr;
    std::string tried;
    for (const char *n : kLtNames) {
      h = dlopen(n, RTLD_NOW | RTLD_LOCAL);
      if (h) {
        name = n;
        break;
      }
      const char *e = dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(e ? e : n);
    }
    if (!h) {
      std::snprintf(api.error, sizeof api.error, "cannot open libcublasLt (%s)", tried.c_str());
      return;
    }
    bool ok = true;
    auto resolve = [&](auto &fn, const char *symbol, bool required) {
      void *s = dlsym(h, symbol);
      if (!s && required && ok) {
        std::snprintf(api.error, sizeof api.error, "%s lacks %s", name, symbol);
        ok = false;
      }
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(s);
    };
    resolve(api.create, "cublasLtCreate", true);
    resolve(api.matmul_desc_create, "cublasLtMatmulDescCreate", true);
    resolve(api.matmul_desc_set, "cublasLtMatmulDescSetAttribute", true);
    resolve(api.layout_create, "cublasLtMatrixLayoutCreate", true);
    resolve(api.preference_create, "cublasLtMatmulPreferenceCreate", true);
    resolve(api.preference_set, "cublasLtMatmulPreferenceSetAttribute", true);
    resolve(api.preference_destroy, "cublasLtMatmulPreferenceDestroy", true);
    resolve(api.heuristic, "cublasLtMatmulAlgoGetHeuristic", true);
    resolve(api.matmul, "cublasLtMatmul", true);
    resolve(api.status_string, "cublasLtGetStatusString", false);
    // Never closed: handles and cached descriptors live as long as the process.
    if (ok) api.library = name;
  });
  return api;
}

int lt_fail(const LtApi &api, LtStatus status, const char *what, const db_linear_params *p) {
  return db_fail(DB_ERR_CUDA, "linear: cublas: %s failed: status %d (%s) at batch=%d n=%d k=%d", what, status,
                 api.status_string ? api.status_string(status) : "no status text", p->batch, p->n, p->k);
}

// The largest power of two up to 256 that divides a device address: what the heuristics may
// assume of it.
uint32_t alignment_of(uint64_t address) {
  uint32_t a = 256;
  while (a > 2 && address % a != 0) a >>= 1;
  return a;
}

// One shape's descriptors and algorithm, chosen once and kept.
struct LtPlan {
  LtMatmulDesc desc;
  LtLayout a, b, d;
  LtAlgo algo;
  uint64_t workspace_bytes;
};

using LtKey = std::tuple<int, int, int, int, int, uint32_t, uint32_t, uint32_t>;  // device, dtype, batch, n, k, alignments

std::mutex g_lt_mutex;
std::map<int, LtHandle> g_lt_handles;  // by device
std::map<LtKey, LtPlan> g_lt_plans;

// Finds or makes the plan of p; g_lt_mutex must be held.
int lt_plan_locked(const LtApi &api, const db_context *ctx, const db_linear_params *p, const LtPlan **out) {
  const LtKey key{ctx->device, p->dtype, p->batch, p->n, p->k, alignment_of(p->w), alignment_of(p->x),
                  alignment_of(p->y)};
  if (auto it = g_lt_plans.find(key); it != g_lt_plans.end()) {
    *out = &it->second;
    return DB_OK;
  }
  LtHandle &handle = g_lt_handles[ctx->device];
  if (!handle) {
    if (LtStatus s = api.create(&handle)) {
      handle = nullptr;
      return lt_fail(api, s, "cublasLtCreate", p);
    }
  }
  const cudaDataType_t type = p->dtype == DB_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
  LtPlan plan{};
  if (LtStatus s = api.matmul_desc_create(&plan.desc, kLtCompute32F, CUDA_R_32F))
    return lt_fail(api, s, "cublasLtMatmulDescCreate", p);
  const int32_t trans_a = kLtOpT, trans_b = kLtOpN;
  if (LtStatus s = api.matmul_desc_set(plan.desc, kLtDescTransA, &trans_a, sizeof trans_a))
    return lt_fail(api, s, "setting TRANSA", p);
  if (LtStatus s = api.matmul_desc_set(plan.desc, kLtDescTransB, &trans_b, sizeof trans_b))
    return lt_fail(api, s, "setting TRANSB", p);
  if (LtStatus s = api.layout_create(&plan.a, type, (uint64_t)p->k, (uint64_t)p->n, p->k))
    return lt_fail(api, s, "cublasLtMatrixLayoutCreate(W)", p);
  if (LtStatus s = api.layout_create(&plan.b, type, (uint64_t)p->k, (uint64_t)p->batch, p->k))
    return lt_fail(api, s, "cublasLtMatrixLayoutCreate(X)", p);
  if (LtStatus s = api.layout_create(&plan.d, type, (uint64_t)p->n, (uint64_t)p->batch, p->n))
    return lt_fail(api, s, "cublasLtMatrixLayoutCreate(Y)", p);
  LtPreference pref = nullptr;
  if (LtStatus s = api.preference_create(&pref)) return lt_fail(api, s, "cublasLtMatmulPreferenceCreate", p);
  const uint64_t max_workspace = kCublasWorkspaceBytes;
  const uint32_t align[4] = {alignment_of(p->w), alignment_of(p->x), alignment_of(p->y), alignment_of(p->y)};
  LtStatus s = api.preference_set(pref, kLtPrefMaxWorkspace, &max_workspace, sizeof max_workspace);
  for (int i = 0; i < 4 && s == 0; ++i)
    s = api.preference_set(pref, kLtPrefMinAlignmentA + i, &align[i], sizeof align[i]);
  LtHeuristicResult result{};
  int found = 0;
  if (s == 0) s = api.heuristic(handle, plan.desc, plan.a, plan.b, plan.d, plan.d, pref, 1, &result, &found);
  api.preference_destroy(pref);
  if (s != 0) return lt_fail(api, s, "cublasLtMatmulAlgoGetHeuristic", p);
  if (found < 1 || result.state != 0)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "linear: cublas: cuBLASLt (%s) has no algorithm for batch=%d n=%d k=%d %s",
                   api.library, p->batch, p->n, p->k, db_dtype_name(p->dtype));
  plan.algo = result.algo;
  plan.workspace_bytes = kCublasWorkspaceBytes;
  *out = &(g_lt_plans[key] = plan);
  return DB_OK;
}

int lt_plan(const db_context *ctx, const db_linear_params *p, const LtPlan **out) {
  const LtApi &api = lt_api();
  if (!api.library) return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "linear: variant cublas: %s", api.error);
  if (p->split_k < 0 || p->split_k > 1)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: split_k=%d applies to the GEMV variant only", p->split_k);
  std::lock_guard<std::mutex> lock(g_lt_mutex);
  return lt_plan_locked(api, ctx, p, out);
}

}  // namespace

int db_cublas_plan(const db_context *ctx, const db_linear_params *p, uint64_t *workspace_bytes) {
  const LtPlan *plan = nullptr;
  DB_CHECK(lt_plan(ctx, p, &plan));
  if (workspace_bytes) *workspace_bytes = plan->workspace_bytes;
  return DB_OK;
}

int db_cublas_linear(const db_context *ctx, const db_linear_params *p) {
  const LtPlan *plan = nullptr;
  DB_CHECK(lt_plan(ctx, p, &plan));
  const LtApi &api = lt_api();
  const float alpha = 1.0f, beta = 0.0f;
  LtHandle handle;
  {
    std::lock_guard<std::mutex> lock(g_lt_mutex);
    handle = g_lt_handles[ctx->device];
  }
  const void *w = reinterpret_cast<const void *>(p->w), *x = reinterpret_cast<const void *>(p->x);
  void *y = reinterpret_cast<void *>(p->y);
  if (LtStatus s = api.matmul(handle, plan->desc, &alpha, w, plan->a, x, plan->b, &beta, y, plan->d, y, plan->d,
                              &plan->algo, reinterpret_cast<void *>(p->workspace), plan->workspace_bytes,
                              ctx->stream))
    return lt_fail(api, s, "cublasLtMatmul", p);
  // A launch error inside cuBLAS shows here, named, rather than in the next kernel of ours.
  DB_CHECK_CUDA(cudaGetLastError());
  return DB_OK;
}

#endif
