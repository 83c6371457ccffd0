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
// 1..64); at batch 5..16 it takes the tiled kernel where the MMA's units cannot fill the card.
// Every planner sizes its grid to the blocks the SMs hold and shares the work so that the
// launch fills at least kWholeWaves of the card where any plan can (wave_efficiency).
#include "cublas.cuh"
#include "linear_common.cuh"
#include "linear_quant.cuh"

namespace {

using namespace db_lin;

constexpr int kGemvMaxAutoBatch = 4;
constexpr int kMmaMaxAutoBatch = 16;

// GEMV: the least K a block split covers: one 16-byte chunk a lane (256 elements of k). Splits
// that short leave a warp few loads in flight, but they are what makes whole waves of a shape
// with few rows and a short K (Qwen2.5-0.5B's gate_up, n = 9728, k = 896: 4864 row pairs are
// 2.3 rounds of the card's 2112 warps).
constexpr int kGemvMinChunksPerSlice = 32;

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

// Stream-K: the tiles no one block covered whole (those it stored itself) get y = round_to_T(sum
// of their segments' partials, in slot (k) order). Block j looks at the boundary between
// stream-K blocks j and j + 1: the tile it falls inside, when it is the first boundary there,
// is this block's to finish. Tiles are numbered as the tiled kernel's stream-K order: batch
// tile outermost, then W tile.
template <class T>
__global__ void linear_streamk_reduce_kernel(const float *__restrict__ partial, T *__restrict__ y,
                                             int batch, int n, int bn, int ktiles,
                                             int64_t iters, int blocks) {
  const int64_t start = ((int64_t)blockIdx.x + 1) * iters / blocks;  // block j + 1's first
  const int64_t tile = start / ktiles, first_it = tile * ktiles;
  if (start == first_it) return;  // on a tile edge: nothing split here
  if (((int64_t)blockIdx.x * iters / blocks) > first_it && blockIdx.x > 0) return;  // not the first
  const int64_t first = streamk_owner(first_it, iters, blocks);
  const int segments = (int)(streamk_owner(first_it + ktiles - 1, iters, blocks) - first + 1);
  const int m_tiles = (n + kTiledBM - 1) / kTiledBM;
  const int m0 = (int)(tile % m_tiles) * kTiledBM, b0 = (int)(tile / m_tiles) * bn;
  const uint64_t outputs = (uint64_t)batch * n;
  for (int idx = threadIdx.x; idx < bn * kTiledBM; idx += blockDim.x) {
    const int b = b0 + idx / kTiledBM, r = m0 + idx % kTiledBM;
    if (b >= batch || r >= n) continue;
    const uint64_t i = (uint64_t)b * n + r;
    float sum = 0.0f;
    for (int s = 0; s < segments; ++s) sum += partial[(uint64_t)s * outputs + i];
    y[i] = db_dtype<T>::from_float(sum);
  }
}

int reduce_blocks_per_sm(const db_context *ctx, int *blocks_per_sm) {
  static std::atomic<int> split_cache[64];
  return cached_occupancy(linear_splitk_reduce_kernel<__nv_bfloat16>, split_cache, ctx->device,
                          kReduceThreads, 0, kReduceSm90Registers, "linear_splitk_reduce_kernel",
                          blocks_per_sm);
}

int check_pointer(const char *name, uint64_t dptr, uint64_t alignment) {
  if (dptr == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: %s is null", name);
  if (dptr % alignment != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: %s=0x%llx is not %llu-byte aligned", name,
                   (unsigned long long)dptr, (unsigned long long)alignment);
  return DB_OK;
}

int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

// How well a launch fills the card: `units` equal units of work shared by `blocks` blocks
// (each takes units b, b + blocks, ...) on `slots` resident blocks, over the time of whole
// rounds and waves: units / (ceil(units / blocks) x ceil(blocks / slots) x slots). 1 is whole
// waves; the planners take a plan under kWholeWaves only where no plan reaches it (the gate's
// wave rule, cmd/kernels-check, holds the same figure).
double wave_efficiency(int64_t units, int64_t blocks, int64_t slots) {
  if (units <= 0 || blocks <= 0 || slots <= 0) return 0;
  return (double)units /
         ((double)ceil_div64(units, blocks) * (double)ceil_div64(blocks, slots) * (double)slots);
}
constexpr double kWholeWaves = 0.9;
// Under this many weight bytes a call is latency-bound (at ~4.8 TB/s 8 MiB stream in 1.7 us,
// less than a launch costs), so how it fills the SMs does not set its time: the planners keep
// the kernel the batch picks. The gate's wave rule exempts the same calls.
constexpr double kSmallWeightBytes = 8 << 20;

// The most segments (blocks) one tile of ktiles iterations has in a stream-K launch of blocks
// blocks over iters: every block holds at least floor(iters / blocks) iterations, so at most
// ceil((ktiles - 1) / that) block starts fall inside a tile after its first block's.
int64_t streamk_segments(int64_t ktiles, int64_t iters, int64_t blocks) {
  const int64_t per = std::max<int64_t>(1, iters / blocks);
  return std::min<int64_t>(blocks, 1 + ceil_div64(ktiles - 1, per));
}

// GEMV: among (K split over blocks, warps of a block sharing a row pair's K), the first in
// the order (no split first: a split costs the reduce launch; then fewer warps a pair) that
// fills kWholeWaves of the card, else the one that fills it best. The grid is at most the
// blocks the SMs hold (cudaOccupancyMaxActiveBlocksPerMultiprocessor), every block striding
// over units of row pairs: 10240 rows (5120 pairs, 1280 units of 4 warps a pair) on 528
// resident blocks would be 2.42 rounds (0.81 of the card); with 2 warps a pair, 2560 units
// take 4.85 rounds (0.97).
int plan_gemv(const db_context *ctx, const db_linear_params *p, LinearPlan *plan) {
  const int batch_tile = p->batch == 1 ? 1 : p->batch == 2 ? 2 : p->batch <= 4 ? 4 : 8;
  plan->config = batch_tile == 1   ? kGemvB1
                 : batch_tile == 2 ? kGemvB2
                 : batch_tile == 4 ? kGemvB4
                                   : kGemvB8;
  int per_sm = 0;
  DB_CHECK(gemv_blocks_per_sm(ctx, plan->config, &per_sm));
  const int64_t slots = (int64_t)ctx->sm_count * per_sm;
  const int64_t row_pairs = ceil_div64(p->n, kGemvRowsPerWarp);
  const int64_t chunks = p->k / 8;
  double best = -1;
  const int max_split = p->split_k ? p->split_k : kMaxSplitK;
  for (int split = p->split_k ? p->split_k : 1; split <= max_split; ++split) {
    const int64_t per = ceil_div64(chunks, split);
    if (!p->split_k && split > 1 && (per < kGemvMinChunksPerSlice || ceil_div64(chunks, per) != split))
      continue;  // too short a split, or split - 1 do the same with no empty one
    const int64_t trips = ceil_div64(per, 32 * kGemvUnroll);
    for (int kw = 1; kw <= kGemvWarps; kw *= 2) {
      if (kw > 1 && (batch_tile == 8 || trips < kw)) break;  // every warp of a pair has a trip
      const int64_t units = ceil_div64(row_pairs, kGemvWarps / kw);
      const int64_t grid = std::max<int64_t>(1, std::min(units, slots / split));
      const double e = wave_efficiency(units * split, grid * split, slots);
      if (e > best + 1e-9) {
        best = e;
        plan->split_k = split, plan->k_warps = kw, plan->units = units * split;
        plan->grid = dim3((unsigned)grid, (unsigned)split);
      }
      if (best >= kWholeWaves) break;
    }
    if (best >= kWholeWaves || per <= kGemvMinChunksPerSlice) break;
  }
  plan->per_split = (int)ceil_div64(chunks, plan->split_k);
  plan->threads = kGemvThreads;
  plan->smem = 0;
  return DB_OK;
}

// MMA: the block size (warps splitting K, each at least two k-steps) whose grid fills the card
// best (fewer warps on a tie), the grid at most the blocks the SMs hold, every block striding
// over the (16 rows of W, 16 batch rows) units. Returns the plan's wave efficiency.
int plan_mma(const db_context *ctx, const db_linear_params *p, LinearPlan *plan, double *eff) {
  plan->config = kMmaN2;
  plan->split_k = 1;
  plan->groups = (int)ceil_div64(p->batch, kMmaBatchTile);
  const int64_t units = ceil_div64(p->n, kMmaRowsPerWarp) * plan->groups;
  const int64_t steps = ceil_div64(p->k, 64);
  double best = -1;
  for (int warps = 1; warps <= kMmaMaxWarps; warps *= 2) {
    if (warps > 1 && steps < 2 * warps) break;
    int per_sm = 0;
    DB_CHECK(mma_blocks_per_sm(ctx, warps, &per_sm));
    const int64_t slots = (int64_t)ctx->sm_count * per_sm;
    const int64_t grid = std::min(units, slots);
    const double e = wave_efficiency(units, grid, slots);
    if (e > best + 1e-9) {
      best = e;
      plan->grid = dim3((unsigned)grid);
      plan->threads = warps * 32;
      plan->smem = warps * kMmaTilesN * 4 * 32 * (int)sizeof(float);
      plan->units = units;
    }
  }
  *eff = best;
  return DB_OK;
}

// Time of a tiled launch in the planning model: waves of `blocks` on `slots`, each block
// `trips` k tiles plus its fixed cost for `segments` segments, plus the partials' traffic.
double tiled_time(int64_t blocks, int64_t slots, double trips, double segments, double trip,
                  double partial_bytes) {
  double t = (double)ceil_div64(blocks, slots) * (trips + kTiledFixedTrips * segments) * trip;
  if (partial_bytes > 0) t += partial_bytes / kDramBytesPerSecond + kLaunchSeconds;
  return t;
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
  int per_sm = 0;
  DB_CHECK(tiled_blocks_per_sm(ctx, plan->config, &per_sm));
  const int64_t slots = (int64_t)ctx->sm_count * per_sm;
  plan->threads = shape.threads;
  plan->smem = shape.smem;
  plan->split_k = 1;
  if (p->split_k) {  // forced: split-K, p->split_k blocks a tile
    plan->split_k = p->split_k;
  } else {
    // Whole waves by construction: among the ways of sharing the work that fill at least
    // kWholeWaves of the card's block slots (no split, split-K, stream-K over one wave), the
    // one with the least predicted time: each trip bound by its DRAM bytes or its mma, plus the
    // partials' traffic and the reduce launch.
    const double trip =
        std::max(per_sm * (double)kTiledBM * kTiledBK * 2 / kTiledBytesPerSmSecond,
                 per_sm * 2.0 * kTiledBM * shape.bn * kTiledBK / kTiledFlopsPerSmSecond);
    const double outputs = (double)p->batch * p->n;
    const double tile_bytes = (double)kTiledBM * shape.bn * 4;
    double best = -1;
    int64_t best_streamk = 0;
    if (wave_efficiency(tiles, tiles, slots) >= kWholeWaves)
      best = tiled_time(tiles, slots, (double)ktiles, 1, trip, 0);
    for (int64_t sp = 2; sp <= std::min<int64_t>(kMaxSplitK, ktiles); ++sp) {
      const int64_t per = ceil_div64(ktiles, sp);
      if (ceil_div64(ktiles, per) != sp) continue;  // sp - 1 splits do the same with no empty one
      if (wave_efficiency(tiles * sp, tiles * sp, slots) < kWholeWaves) continue;
      const double t =
          tiled_time(tiles * sp, slots, (double)per, 1, trip, sp * outputs * 8 + outputs * 2);
      if (best < 0 || t < best) best = t, plan->split_k = (int)sp;
    }
    // Stream-K: a multiple of the batch tiles (see the kernel), at most one k tile a block, and
    // few enough blocks that no tile has more than kMaxSplitK segments.
    const int64_t iters = tiles * ktiles;
    int64_t g = std::min(slots, iters) / plan->groups * plan->groups;
    while (g > plan->groups && streamk_segments(ktiles, iters, g) > kMaxSplitK) g -= plan->groups;
    if (g >= plan->groups && wave_efficiency(g, g, slots) >= kWholeWaves) {
      const int64_t per = ceil_div64(iters, g);
      const double segments = (double)ceil_div64(per, ktiles) + 1;
      const double t = tiled_time(g, slots, (double)per, segments, trip,
                                  2.0 * (double)(g - 1) * tile_bytes * 2 + outputs * 2);
      if (best < 0 || t < best) best = t, best_streamk = g;
    }
    if (best_streamk) {
      plan->streamk = (int)best_streamk;
      plan->split_k = (int)streamk_segments(ktiles, iters, best_streamk);
      plan->per_split = (int)ktiles;
      plan->grid = dim3((unsigned)best_streamk);
      plan->units = best_streamk;
      plan->fill = wave_efficiency(best_streamk, best_streamk, slots);
      return DB_OK;
    }
    if (best < 0) {  // nothing fills the card (a small shape): the most blocks split-K makes
      plan->split_k = (int)std::min<int64_t>(kMaxSplitK, ktiles);
      plan->split_k = (int)ceil_div64(ktiles, ceil_div64(ktiles, plan->split_k));
    }
  }
  plan->per_split = (int)ceil_div64(ktiles, plan->split_k);
  plan->grid = dim3((unsigned)(tiles * plan->split_k));
  plan->units = tiles * plan->split_k;
  plan->fill = wave_efficiency(plan->units, plan->units, slots);
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
  const bool automatic = plan->variant == DB_LINEAR_AUTO;
  if (automatic)
    plan->variant = p->batch <= kGemvMaxAutoBatch  ? DB_LINEAR_GEMV
                    : p->batch <= kMmaMaxAutoBatch ? DB_LINEAR_MMA
                                                   : DB_LINEAR_TILED;
  switch (plan->variant) {
    case DB_LINEAR_GEMV: DB_CHECK(plan_gemv(ctx, p, plan)); break;
    case DB_LINEAR_MMA: {
      if (p->split_k > 1)
        return db_fail(DB_ERR_INVALID_ARGUMENT,
                       "linear: split_k=%d does not apply to the mma variant (it splits K over "
                       "the warps of a block); gemv and tiled take it",
                       p->split_k);
      double fill = 0;
      DB_CHECK(plan_mma(ctx, p, plan, &fill));
      // Too few units of 16 W rows to fill the card (2880 rows: 180 units on 132 SMs):
      // stream-K in the tiled kernel shares K between blocks instead (its batch tile of 32
      // wastes mma work, which batch 5..16 has to spare).
      if (automatic && fill < kWholeWaves && 2.0 * p->n * p->k >= kSmallWeightBytes) {
        LinearPlan tiled = *plan;
        tiled.variant = DB_LINEAR_TILED;
        if (plan_tiled(ctx, p, &tiled) == DB_OK && tiled.fill >= kWholeWaves) *plan = tiled;
      }
      break;
    }
    default: DB_CHECK(plan_tiled(ctx, p, plan)); break;
  }
  if (plan->split_k > 1) {
    plan->reduce_outputs = (uint64_t)p->batch * (uint64_t)p->n;
    plan->workspace_bytes = (uint64_t)plan->split_k * plan->reduce_outputs * 4u;
    if (plan->streamk) {  // a block for each boundary between stream-K blocks
      plan->reduce_units = std::max(1, plan->streamk - 1);
      plan->reduce_grid = (unsigned)plan->reduce_units;
    } else {
      int per_sm = 0;
      DB_CHECK(reduce_blocks_per_sm(ctx, &per_sm));
      plan->reduce_units = (int64_t)db_ceil_div(plan->reduce_outputs, kReduceThreads);
      plan->reduce_grid = (unsigned)std::min<int64_t>(plan->reduce_units,
                                                      (int64_t)ctx->sm_count * per_sm);
    }
  }
  return DB_OK;
}

template <class T>
int reduce_run(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
               const LaunchSink *sink) {
  if (sink) {
    char name[128];
    std::snprintf(name, sizeof name, "(anonymous namespace)::linear_%s_reduce_kernel<%s>",
                  plan.streamk ? "streamk" : "splitk", dtype_cxx_name<T>());
    return sink_add(*sink, name, dim3(plan.reduce_grid), kReduceThreads, 0, plan.reduce_units);
  }
  const float *partial = reinterpret_cast<const float *>(p->workspace);
  if (plan.streamk) {
    const int64_t ktiles = ceil_div64(p->k / 8, 8);
    const int64_t iters = ceil_div64(p->n, kTiledBM) * plan.groups * ktiles;
    return DB_LAUNCH((linear_streamk_reduce_kernel<T>), dim3(plan.reduce_grid),
                     dim3(kReduceThreads), 0, ctx->stream, partial, reinterpret_cast<T *>(p->y),
                     p->batch, p->n, tiled_shape(plan.config).bn, (int)ktiles, iters,
                     plan.streamk);
  }
  return DB_LAUNCH((linear_splitk_reduce_kernel<T>), dim3(plan.reduce_grid), dim3(kReduceThreads),
                   0, ctx->stream, partial, reinterpret_cast<T *>(p->y), plan.split_k,
                   plan.reduce_outputs);
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
    p->split_k = plan.streamk ? 0 : plan.split_k;  // 0 passed back plans the same stream-K
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
