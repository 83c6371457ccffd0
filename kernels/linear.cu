// linear.cu: the decode linear layer Y[batch x n] = X[batch x k] * W^T, W row-major [n x k],
// bf16 or fp16 in and out, fp32 accumulation, outputs rounded to nearest even: validation, the
// plan (which kernel, grid, split-K), the split-K reduce, and the C API.
//
// A decode step reads every weight once and reuses it `batch` times: up to a batch of about 200
// on an H200 (its bf16 mma.sync rate over its DRAM bandwidth) the layer is bound by W's bytes,
// above it by the tensor cores. Three kernels, each in its own file:
//   GEMV  (linear_gemv.cu)  CUDA cores, batch 1..4: W streamed with 16-byte loads a trip ahead;
//   MMA   (linear_mma.cu)   skinny tensor-core kernel, batch 5..16: W as the mma's B operand
//                           straight from global memory, loads a step ahead;
//   TILED (linear_tiled.cu) shared-memory tiles, cp.async pipeline, ldmatrix, batch 17..1024.
// AUTO picks by batch at kGemvMaxAutoBatch and kMmaMaxAutoBatch: predictions from the kernels'
// machine code (kernels/README.md), to be swept on a card (bench linear --variant each, batch
// 1..64).
#include "cublas.cuh"
#include "linear_common.cuh"
#include "linear_quant.cuh"

namespace {

using namespace db_lin;

constexpr int kGemvMaxAutoBatch = 4;
constexpr int kMmaMaxAutoBatch = 16;

// GEMV split-K starts below this many blocks an SM (2 x 4 warps x 4 KiB = 32 KiB in flight an
// SM, under the ~40-48 KiB an H200 SM wants), where the reduce launch (a few microseconds)
// costs less than the idle bandwidth. A split covers at least one full sweep of a warp's lanes
// and unroll (1024 elements of k).
constexpr int kGemvBlocksPerSm = 2;
constexpr int kGemvMinChunksPerSplit = 32 * kGemvUnroll;
// MMA: warps an SM should hold (16 x 4 KiB of W in flight).
constexpr int kMmaWarpsPerSm = 16;

// Planning model of the tiled kernel (an H200-class part; relative costs are what matter):
// DRAM bytes per second an SM's share streams, mma.sync bf16 FLOP/s an SM, the time a block
// spends outside its k loop (prologue fill, epilogue) in k-tile trips, and a launch's cost.
constexpr double kTiledBytesPerSmSecond = 4.0e12 / 132;
constexpr double kTiledFlopsPerSmSecond = 5.0e12;
constexpr double kTiledFixedTrips = 1.5;
constexpr double kLaunchSeconds = 2.5e-6;
constexpr double kDramBytesPerSecond = 4.0e12;

// y[i] = round_to_T(sum over splits of partial[split][i]), in split order: deterministic.
template <class T>
__global__ void linear_splitk_reduce_kernel(const float *__restrict__ partial, T *__restrict__ y,
                                            int splits, uint64_t outputs) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < outputs; i += stride) {
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += partial[(uint64_t)s * outputs + i];
    y[i] = db_dtype<T>::from_float(sum);
  }
}
constexpr int kReduceThreads = 256;

int check_pointer(const char *name, uint64_t dptr, uint64_t alignment) {
  if (dptr == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: %s is null", name);
  if (dptr % alignment != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: %s=0x%llx is not %llu-byte aligned", name,
                   (unsigned long long)dptr, (unsigned long long)alignment);
  return DB_OK;
}

int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

int gemv_auto_split(const db_context *ctx, int64_t blocks, int k) {
  const int64_t target = (int64_t)ctx->sm_count * kGemvBlocksPerSm;
  if (blocks >= target) return 1;
  const int64_t wanted = ceil_div64(target, blocks);
  const int64_t most = std::max<int64_t>(1, (k / 8) / kGemvMinChunksPerSplit);
  return (int)std::min<int64_t>(std::min<int64_t>(wanted, most), kMaxSplitK);
}

void plan_gemv(const db_context *ctx, const db_linear_params *p, LinearPlan *plan) {
  const int batch_tile = p->batch == 1 ? 1 : p->batch == 2 ? 2 : p->batch <= 4 ? 4 : 8;
  plan->config = batch_tile == 1   ? kGemvB1
                 : batch_tile == 2 ? kGemvB2
                 : batch_tile == 4 ? kGemvB4
                                   : kGemvB8;
  const int64_t row_pairs = ceil_div64(p->n, kGemvRowsPerWarp);
  const int64_t blocks = ceil_div64(row_pairs, kGemvWarps);
  plan->split_k = p->split_k ? p->split_k : gemv_auto_split(ctx, blocks, p->k);
  plan->per_split = (int)ceil_div64(p->k / 8, plan->split_k);
  // Grid-stride: at most the blocks every SM is sure to hold, over all splits, and then as few
  // as give every warp the same number of row pairs (rounds), so that no round ends with a few
  // warps busy: 10240 rows (5120 pairs) on 528 resident blocks would be 2.42 rounds, the last
  // with 42% of the warps; 427 blocks do 3 rounds each (13 warps an SM, each with two trips of
  // W in flight, keep DRAM busy).
  const int64_t resident = std::max<int64_t>(
      1, ceil_div64((int64_t)ctx->sm_count * gemv_min_blocks(batch_tile), plan->split_k));
  const int64_t rounds = ceil_div64(blocks, resident);
  plan->grid = dim3((unsigned)ceil_div64(blocks, rounds), (unsigned)plan->split_k);
  plan->threads = kGemvThreads;
  plan->smem = 0;
}

void plan_mma(const db_context *ctx, const db_linear_params *p, LinearPlan *plan) {
  plan->config = kMmaN2;
  plan->split_k = 1;
  plan->groups = (int)ceil_div64(p->batch, kMmaBatchTile);
  const int64_t blocks = ceil_div64(p->n, kMmaRowsPerWarp) * plan->groups;
  const int64_t steps = ceil_div64(p->k, 64);
  // Split K over the warps of a block while the grid alone leaves SMs short of warps (a power of
  // two, at most 16, rounded down so that the blocks stay one wave where they fit one), but give
  // every warp at least two k-steps.
  const int64_t wanted = ceil_div64((int64_t)ctx->sm_count * kMmaWarpsPerSm, blocks);
  int warps = 1;
  while (warps < kMmaMaxWarps && 2 * warps <= wanted) warps *= 2;
  while (warps > 1 && steps < 2 * warps) warps /= 2;
  // Grid-stride over the units as the GEMV: at most the blocks every SM holds for certain
  // (__launch_bounds__(512, 1): 16 warps of at most 128 registers), each the same number of
  // units.
  const int64_t resident = (int64_t)ctx->sm_count * (kMmaMaxWarps / warps);
  const int64_t rounds = ceil_div64(blocks, resident);
  plan->grid = dim3((unsigned)ceil_div64(blocks, rounds));
  plan->threads = warps * 32;
  plan->smem = warps * kMmaTilesN * 4 * 32 * (int)sizeof(float);
}

int smem_per_sm(const db_context *ctx) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerMultiprocessor, ctx->device) !=
          cudaSuccess ||
      v <= 0) {
    (void)cudaGetLastError();
    v = 100 << 10;  // the smallest of sm_80..sm_90 (sm_86, sm_89)
  }
  return v;
}

// Blocks of the tiled kernel an SM holds: its shared memory (1 KiB of each block is the
// system's), __launch_bounds__(threads, 2), and the SM's threads.
int tiled_blocks_per_sm(const db_context *ctx, const TiledShape &shape) {
  const int by_smem = smem_per_sm(ctx) / (shape.smem + 1024);
  const int by_threads = std::max(1, ctx->max_threads_per_sm) / shape.threads;
  return std::max(1, std::min({2, by_smem, by_threads}));
}

int plan_tiled(const db_context *ctx, const db_linear_params *p, LinearPlan *plan) {
  plan->config = p->batch <= 32 ? kTiledN32 : p->batch <= 64 ? kTiledN64 : kTiledN128;
  const TiledShape shape = tiled_shape(plan->config);
  if (shape.smem > ctx->smem_per_block_optin_bytes)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                   "linear: the tiled kernel needs %d bytes of shared memory a block; the device "
                   "allows %lld",
                   shape.smem, (long long)ctx->smem_per_block_optin_bytes);
  plan->groups = (int)ceil_div64(p->batch, shape.bn);
  const int64_t tiles = ceil_div64(p->n, kTiledBM) * plan->groups;
  const int64_t ktiles = ceil_div64(p->k / 8, 8);
  if (p->split_k) {
    plan->split_k = p->split_k;
  } else {
    // The split count with the least predicted time: whole waves of blocks, each trip bound by
    // its DRAM bytes or its mma, plus the partials' traffic and the reduce launch.
    const int slots = ctx->sm_count * tiled_blocks_per_sm(ctx, shape);
    const int per_sm = slots / std::max(1, ctx->sm_count);
    const double trip =
        std::max(per_sm * (double)kTiledBM * kTiledBK * 2 / kTiledBytesPerSmSecond,
                 per_sm * 2.0 * kTiledBM * shape.bn * kTiledBK / kTiledFlopsPerSmSecond);
    const double outputs = (double)p->batch * p->n;
    double best = 0;
    plan->split_k = 1;
    for (int64_t s = 1; s <= std::min<int64_t>(kMaxSplitK, ktiles); ++s) {
      const int64_t per = ceil_div64(ktiles, s);
      if (ceil_div64(ktiles, per) != s) continue;  // s - 1 splits do the same with no empty one
      const int64_t waves = ceil_div64(tiles * s, slots);
      double t = (double)waves * ((double)per + kTiledFixedTrips) * trip;
      if (s > 1) t += (s * outputs * 4 * 2 + outputs * 2) / kDramBytesPerSecond + kLaunchSeconds;
      if (s == 1 || t < best * 0.98) {  // a split must buy at least 2%
        best = t;
        plan->split_k = (int)s;
      }
    }
  }
  plan->per_split = (int)ceil_div64(ktiles, plan->split_k);
  plan->grid = dim3((unsigned)(tiles * plan->split_k));
  plan->threads = shape.threads;
  plan->smem = shape.smem;
  return DB_OK;
}

int plan_linear(const db_context *ctx, const db_linear_params *p, LinearPlan *plan) {
  if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "linear params are null");
  if (p->dtype != DB_DTYPE_BF16 && p->dtype != DB_DTYPE_FP16)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: dtype=%d (%s) is not bf16 or fp16", p->dtype,
                   db_dtype_name(p->dtype));
  if (p->batch <= 0 || p->n <= 0 || p->k <= 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: batch=%d n=%d k=%d must all be >= 1",
                   p->batch, p->n, p->k);
  if (p->batch > DB_MAX_BATCH)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "linear: batch=%d is over the %d supported",
                   p->batch, DB_MAX_BATCH);
  if (p->k % 8 != 0)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                   "linear: k=%d is not a multiple of 8 (rows are read as 16-byte vectors)", p->k);
  if (db_ceil_div((uint64_t)p->n, kTiledBM) * kMaxSplitK * db_ceil_div(DB_MAX_BATCH, 32) >
      0x7fffffffu)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "linear: n=%d is too large", p->n);
  DB_CHECK(check_pointer("x", p->x, 16));
  DB_CHECK(check_pointer("w", p->w, 16));
  DB_CHECK(check_pointer("y", p->y, 2));
  if (p->variant == DB_LINEAR_CUBLAS) {  // the cuBLASLt peer: kernels/cublas.cu
    plan->variant = DB_LINEAR_CUBLAS, plan->split_k = 1;
    return db_cublas_plan(ctx, p, &plan->workspace_bytes);
  }
  if (p->variant < DB_LINEAR_AUTO || p->variant > DB_LINEAR_TILED)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: variant=%d is not a DB_LINEAR_*", p->variant);
  if (p->split_k < 0 || p->split_k > kMaxSplitK)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: split_k=%d is not in 0..%d", p->split_k,
                   kMaxSplitK);

  *plan = LinearPlan{};
  plan->variant = p->variant;
  if (plan->variant == DB_LINEAR_AUTO)
    plan->variant = p->batch <= kGemvMaxAutoBatch  ? DB_LINEAR_GEMV
                    : p->batch <= kMmaMaxAutoBatch ? DB_LINEAR_MMA
                                                   : DB_LINEAR_TILED;
  switch (plan->variant) {
    case DB_LINEAR_GEMV: plan_gemv(ctx, p, plan); break;
    case DB_LINEAR_MMA:
      if (p->split_k > 1)
        return db_fail(DB_ERR_INVALID_ARGUMENT,
                       "linear: split_k=%d does not apply to the mma variant (it splits K over "
                       "the warps of a block); gemv and tiled take it",
                       p->split_k);
      plan_mma(ctx, p, plan);
      break;
    default: DB_CHECK(plan_tiled(ctx, p, plan)); break;
  }
  if (plan->split_k > 1) {
    plan->reduce_outputs = (uint64_t)p->batch * (uint64_t)p->n;
    plan->workspace_bytes = (uint64_t)plan->split_k * plan->reduce_outputs * 4u;
    plan->reduce_grid = (unsigned)std::min<uint64_t>(
        db_ceil_div(plan->reduce_outputs, kReduceThreads), (uint64_t)ctx->sm_count * 8);
  }
  return DB_OK;
}

template <class T>
int reduce_run(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
               const LaunchSink *sink) {
  if (sink) {
    char name[128];
    std::snprintf(name, sizeof name, "(anonymous namespace)::linear_splitk_reduce_kernel<%s>",
                  dtype_cxx_name<T>());
    return sink_add(*sink, name, dim3(plan.reduce_grid), kReduceThreads, 0);
  }
  return DB_LAUNCH((linear_splitk_reduce_kernel<T>), dim3(plan.reduce_grid), dim3(kReduceThreads),
                   0, ctx->stream, reinterpret_cast<const float *>(p->workspace),
                   reinterpret_cast<T *>(p->y), plan.split_k, plan.reduce_outputs);
}

// Runs (sink == nullptr) or describes the launches of a plan: the kernel, then the reduce.
int run_plan(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
             const LaunchSink *sink) {
  switch (plan.variant) {
    case DB_LINEAR_GEMV: DB_CHECK(gemv_run(ctx, p, plan, sink)); break;
    case DB_LINEAR_MMA: DB_CHECK(mma_run(ctx, p, plan, sink)); break;
    case DB_LINEAR_TILED: DB_CHECK(tiled_run(ctx, p, plan, sink)); break;
    default: return db_fail(DB_ERR_INTERNAL, "linear: plan variant %d", plan.variant);
  }
  if (plan.split_k <= 1) return DB_OK;
  if (p->dtype == DB_DTYPE_BF16) return reduce_run<__nv_bfloat16>(ctx, p, plan, sink);
  return reduce_run<__half>(ctx, p, plan, sink);
}

}  // namespace

extern "C" int db_linear_plan(db_context *ctx, db_linear_params *p, uint64_t *workspace_bytes) {
  return db_guard("db_linear_plan", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    // Quantized weight formats are planned and run by kernels/linear_quant.cu.
    if (p && p->weight_format != DB_WEIGHT_DENSE) return quant_linear_plan(ctx, p, workspace_bytes);
    LinearPlan plan{};
    DB_CHECK(plan_linear(ctx, p, &plan));
    p->variant = plan.variant;
    p->split_k = plan.split_k;
    if (workspace_bytes) *workspace_bytes = plan.workspace_bytes;
    return DB_OK;
  });
}

extern "C" int db_linear_launches(db_context *ctx, const db_linear_params *p, db_launch_info *out,
                                  int32_t max, int32_t *count) {
  return db_guard("db_linear_launches", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (!out || !count || max < 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_linear_launches: out, max=%d or count is invalid",
                     max);
    *count = 0;
    // Quantized weight formats are planned and run by kernels/linear_quant.cu.
    if (p && p->weight_format != DB_WEIGHT_DENSE) return quant_linear_launches(ctx, p, out, max, count);
    LinearPlan plan{};
    DB_CHECK(plan_linear(ctx, p, &plan));
    if (plan.variant == DB_LINEAR_CUBLAS) return DB_OK;  // cuBLAS's launches are not ours to list
    const LaunchSink sink{out, max, count};
    return run_plan(ctx, p, plan, &sink);
  });
}

extern "C" int db_linear(db_context *ctx, const db_linear_params *p) {
  return db_guard("db_linear", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    // Quantized weight formats are planned and run by kernels/linear_quant.cu.
    if (p && p->weight_format != DB_WEIGHT_DENSE) return quant_linear(ctx, p);
    LinearPlan plan{};
    DB_CHECK(plan_linear(ctx, p, &plan));
    if (plan.workspace_bytes > 0) {
      if (p->workspace == 0 || p->workspace_bytes < plan.workspace_bytes)
        return db_fail(DB_ERR_WORKSPACE,
                       "linear: split_k=%d needs %llu bytes of workspace, got %llu at 0x%llx",
                       plan.split_k, (unsigned long long)plan.workspace_bytes,
                       (unsigned long long)p->workspace_bytes, (unsigned long long)p->workspace);
      DB_CHECK(check_pointer("workspace", p->workspace, 16));
    }
    if (plan.variant == DB_LINEAR_CUBLAS) return db_cublas_linear(ctx, p);
    return run_plan(ctx, p, plan, nullptr);
  });
}
