// linear_quant.cu: the decode linear layer over quantized weights (decodebench.h, "quantized
// weight formats"): validation, the plan, the entry points linear.cu hands a non-dense
// weight_format to, and db_fill_quantized.
//
// Two kernels: the CUDA-core GEMV (linear_quant_gemv.cu) for the bytes-bound batches 1..4, and
// a tensor-core kernel (linear_quant_mma.cu) above. Both size their grids to whole waves the
// way the dense planners do (plan_quant), splitting K only inside a block (the GEMV's warps of
// a row pair, the tensor-core kernel's 4 or 8 warps), their sums added in a fixed order: no
// reduce launch, no fp32 partials, bit-identical run to run.
#include <cmath>

#include "linear_quant.cuh"

namespace {

using namespace db_lin;

constexpr int kQuantGemvMaxAutoBatch = 4;

// The wave rule of the dense planners (linear.cu's kWholeWaves and wave_efficiency) and the
// static gate (cmd/kernels-check): `units` equal units shared by `blocks` blocks (each takes
// units b, b + blocks, ...) on `slots` resident blocks fill units / (ceil(units / blocks) x
// ceil(blocks / slots) x slots) of the card's block-time.
constexpr double kQWholeWaves = 0.9;
double quant_wave_fill(int64_t units, int64_t blocks, int64_t slots) {
  if (units <= 0 || blocks <= 0 || slots <= 0) return 0;
  auto ceil = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  return (double)units / ((double)ceil(units, blocks) * (double)ceil(blocks, slots) * (double)slots);
}

const char *format_name(int format) {
  switch (format) {
    case DB_WEIGHT_DENSE: return "dense";
    case DB_WEIGHT_FP8_E4M3: return "fp8 e4m3 (per-channel scales)";
    case DB_WEIGHT_FP8_E4M3_TENSOR: return "fp8 e4m3 (per-tensor scale)";
    case DB_WEIGHT_INT8: return "int8";
    case DB_WEIGHT_INT4: return "int4 (symmetric)";
    case DB_WEIGHT_INT4_ZP: return "int4 (zero points)";
    case DB_WEIGHT_MXFP4: return "mxfp4";
    case DB_WEIGHT_FP8_E4M3_BLOCK: return "fp8 e4m3 (128x128 block scales)";
  }
  return "unknown";
}

bool four_bit(int format) {
  return format == DB_WEIGHT_INT4 || format == DB_WEIGHT_INT4_ZP || format == DB_WEIGHT_MXFP4;
}

// Elements of K in one 16-byte W vector.
int vector_elements(int format) { return four_bit(format) ? 32 : 16; }

int check_ptr(const char *what, uint64_t dptr, uint64_t alignment) {
  if (dptr == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s is null", what);
  if (dptr % alignment != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s=0x%llx is not %llu-byte aligned", what,
                   (unsigned long long)dptr, (unsigned long long)alignment);
  return DB_OK;
}

// The group size a format uses (MXFP4's 0 reads as 32), after checking the shape the format
// needs: k a multiple of the row's 16-byte vectors and of the group, an even n for the zero
// points' row pairs. `who` is the caller's name for its messages.
int check_format_shape(const char *who, int format, int n, int k, int group_size, int *group) {
  if (format < DB_WEIGHT_FP8_E4M3 || format >= DB_NUM_WEIGHT_FORMATS)
    return db_fail(DB_ERR_INVALID_ARGUMENT,
                   "%s: weight_format=%d is not a quantized DB_WEIGHT_* (1..%d)", who, format,
                   DB_NUM_WEIGHT_FORMATS - 1);
  const char *name = format_name(format);
  if (n <= 0 || k <= 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: n=%d k=%d must be >= 1", who, n, k);
  const int vector = four_bit(format) ? 32 : 16;
  if (k % vector != 0)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                   "%s: %s weights need k a multiple of %d (rows of 16-byte vectors); k=%d", who,
                   name, vector, k);
  *group = 0;
  switch (format) {
    case DB_WEIGHT_INT4:
    case DB_WEIGHT_INT4_ZP:
      if (group_size != 32 && group_size != 64 && group_size != 128)
        return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                       "%s: %s weights take group_size 32, 64 or 128, not %d", who, name,
                       group_size);
      *group = group_size;
      break;
    case DB_WEIGHT_MXFP4:
      if (group_size != 0 && group_size != DB_MXFP4_GROUP)
        return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                       "%s: mxfp4 weights have one scale per %d along k, not group_size %d", who,
                       DB_MXFP4_GROUP, group_size);
      *group = DB_MXFP4_GROUP;
      break;
    case DB_WEIGHT_FP8_E4M3_BLOCK:
      if (group_size != 0 && group_size != DB_FP8_BLOCK)
        return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                       "%s: %s weights have one scale per %dx%d tile, not group_size %d (want 0 "
                       "or %d)",
                       who, name, DB_FP8_BLOCK, DB_FP8_BLOCK, group_size, DB_FP8_BLOCK);
      *group = DB_FP8_BLOCK;
      break;
    default:
      if (group_size != 0)
        return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                       "%s: %s weights have no groups along k (group_size=%d; want 0)", who,
                       name, group_size);
  }
  // FP8_E4M3_BLOCK takes a partial last tile (its checkpoints' scales are ceil(k / 128) a row).
  if (*group > 0 && format != DB_WEIGHT_FP8_E4M3_BLOCK && k % *group != 0)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                   "%s: k=%d is not a multiple of %s's group_size %d (the last group would not "
                   "fit k)",
                   who, k, name, *group);
  if (format == DB_WEIGHT_INT4_ZP && n % 2 != 0)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                   "%s: n=%d is odd; %s packs the zero points of row pairs in one byte", who, n,
                   name);
  return DB_OK;
}

int plan_quant(const db_context *ctx, const db_linear_params *p, QuantPlan *plan) {
  if (p->dtype != DB_DTYPE_BF16 && p->dtype != DB_DTYPE_FP16)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: dtype=%d (%s) is not bf16 or fp16", p->dtype,
                   db_dtype_name(p->dtype));
  if (p->batch <= 0 || p->n <= 0 || p->k <= 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: batch=%d n=%d k=%d must all be >= 1",
                   p->batch, p->n, p->k);
  if (p->batch > DB_MAX_BATCH)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "linear: batch=%d is over the %d supported",
                   p->batch, DB_MAX_BATCH);
  int group = 0;
  DB_CHECK(check_format_shape("linear", p->weight_format, p->n, p->k, p->group_size, &group));
  const char *name = format_name(p->weight_format);
  if (p->split_k < 0 || p->split_k > 1)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                   "linear: split_k=%d with %s weights (the quantized kernels do not split k; "
                   "want 0 or 1)",
                   p->split_k, name);
  if ((uint64_t)p->n * (uint64_t)quant_row_bytes(p->weight_format, p->k) > (1ull << 40))
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "linear: n=%d k=%d is too large", p->n, p->k);
  DB_CHECK(check_ptr("linear: x", p->x, 16));
  DB_CHECK(check_ptr("linear: w", p->w, 16));
  DB_CHECK(check_ptr("linear: y", p->y, 2));
  DB_CHECK(check_ptr("linear: scales", p->scales, four_bit(p->weight_format) ? 1 : 4));
  if (p->weight_format == DB_WEIGHT_INT4 || p->weight_format == DB_WEIGHT_INT4_ZP)
    DB_CHECK(check_ptr("linear: scales", p->scales, 2));
  if (p->weight_format == DB_WEIGHT_INT4_ZP)
    DB_CHECK(check_ptr("linear: zeros", p->zeros, 1));
  else if (p->zeros != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: zeros=0x%llx given for %s weights (only "
                   "int4 with zero points has them)", (unsigned long long)p->zeros, name);

  int variant = p->variant;
  if (variant == DB_LINEAR_AUTO)
    variant = p->batch <= kQuantGemvMaxAutoBatch ? DB_LINEAR_GEMV : DB_LINEAR_TILED;
  *plan = QuantPlan{};
  plan->variant = variant;
  plan->group = group;
  switch (variant) {
    case DB_LINEAR_GEMV: {
      // Grid-stride over units of row pairs, as the dense GEMV: at most the blocks every SM
      // holds for certain, each the same number of units. A unit is 4 / k_warps row pairs (a
      // block's warps, k_warps of them sharing a pair's K); 2 warps a pair where one does not
      // fill kWholeWaves: 8B qkv's 3072 pairs are 768 units of 4, 1.45 rounds of 528 blocks
      // (0.73), and 1536 units of 2, 2.9 rounds (0.97). Each of a pair's warps needs one of the
      // row's 32-vector columns at least.
      plan->batch_tile = p->batch == 1 ? 1 : p->batch == 2 ? 2 : 4;
      const int64_t pairs = (p->n + 1) / 2;
      const int64_t columns = db_ceil_div((uint64_t)(p->k / vector_elements(p->weight_format)), 32);
      const int64_t slots = (int64_t)ctx->sm_count * kQGemvBlocksPerSm;
      double best = -1;
      for (int kw = 1; kw <= kQGemvMaxKWarps; kw *= 2) {
        if (kw > 1 && columns < kw) break;
        const int64_t units = (pairs + kQGemvWarps / kw - 1) / (kQGemvWarps / kw);
        const int64_t rounds = (units + slots - 1) / slots;
        const int64_t grid = (units + rounds - 1) / rounds;
        const double e = quant_wave_fill(units, grid, slots);
        if (e > best + 1e-9) {
          best = e;
          plan->k_warps = kw;
          plan->units = units;
          plan->grid = dim3((unsigned)grid);
        }
        if (best >= kQWholeWaves) break;
      }
      plan->threads = kQGemvThreads;
      plan->smem = kQGemvReservedSmem;
      return DB_OK;
    }
    case DB_LINEAR_TILED: {
      // Batch tiles of 16 up to batch 16: the X tile is what bounds the staging ring, and half
      // of it doubles the ring's depth (W bytes in flight) where the call is bound by W.
      const int bn = p->batch <= 16 ? 16 : kQMmaMaxBN;
      const int64_t tiles = (int64_t)db_ceil_div((uint64_t)p->n, kQMmaBM) *
                            (int64_t)db_ceil_div((uint64_t)p->batch, bn);
      if (tiles > 0x7fffffff) return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "linear: n=%d is too large", p->n);
      plan->batch_tile = bn;
      plan->grid = dim3((unsigned)tiles);
      plan->warps = kQMmaWarps;
      plan->units = tiles;
      // One block a tile, 2 blocks of 4 warps an SM; where that grid does not fill
      // kWholeWaves (8B qkv at batch 5-32: 384 tiles, 1.45 waves of 264, 0.73), the wide block
      // of 8 warps, one an SM, if it fills better (384 on 132: 0.97) and every warp has a k
      // tile: the same warps an SM and the same ring a warp, so the same bytes in flight.
      const int64_t ktiles = db_ceil_div((uint64_t)p->k, kQMmaBK);
      const double narrow = quant_wave_fill(tiles, tiles, (int64_t)ctx->sm_count * kQMmaBlocksPerSm);
      if (narrow < kQWholeWaves && ktiles >= kQMmaWideWarps) {
        const double wide = quant_wave_fill(tiles, tiles, (int64_t)ctx->sm_count * kQMmaWideBlocksPerSm);
        if (ctx->smem_per_block_optin_bytes >= kQMmaWideWarps * kQMmaWarpSmem && wide > narrow + 1e-9)
          plan->warps = kQMmaWideWarps;
      }
      plan->threads = plan->warps * 32;
      plan->smem = 0;  // set by the kernel's launch (linear_quant_mma.cu)
      return DB_OK;
    }
    case DB_LINEAR_MMA:
    case DB_LINEAR_CUBLAS:
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                     "linear: variant %s with %s weights: the quantized kernels are gemv and "
                     "tiled (auto picks gemv up to batch %d)",
                     variant == DB_LINEAR_MMA ? "mma" : "cublas", name, kQuantGemvMaxAutoBatch);
  }
  return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: variant=%d is not a DB_LINEAR_*", p->variant);
}

int run_quant(const db_context *ctx, const db_linear_params *p, const QuantPlan &plan,
              const LaunchSink *sink) {
  if (plan.variant == DB_LINEAR_GEMV) return quant_gemv_run(ctx, p, plan, sink);
  return quant_mma_run(ctx, p, plan, sink);
}

/* ---- db_fill_quantized --------------------------------------------------------------------- */

constexpr unsigned kFillThreads = 256;

DB_DEVICE float fill_uniform(uint64_t seed, uint64_t i) { return db_hash_uniform(seed, i); }

// Bytes of W: 8-bit formats one element a byte, 4-bit formats two (element 2j low).
__global__ void fill_quant_w_kernel(uint8_t *w, uint64_t bytes, uint64_t seed, int format) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  const bool fp8 = format == DB_WEIGHT_FP8_E4M3 || format == DB_WEIGHT_FP8_E4M3_TENSOR ||
                   format == DB_WEIGHT_FP8_E4M3_BLOCK;
  const bool packed = format == DB_WEIGHT_INT4 || format == DB_WEIGHT_INT4_ZP ||
                      format == DB_WEIGHT_MXFP4;
  for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < bytes; j += stride) {
    uint32_t byte;
    if (packed) {
      const uint32_t lo = (uint32_t)(db_hash64(seed, 2 * j) >> 60);
      const uint32_t hi = (uint32_t)(db_hash64(seed, 2 * j + 1) >> 60);
      byte = lo | hi << 4;
    } else {
      byte = (uint32_t)(db_hash64(seed, j) >> 56);
      if (fp8 && (byte & 0x7Fu) == 0x7Fu) byte ^= 1u;  // NaN -> +-448
    }
    w[j] = (uint8_t)byte;
  }
}

// Scales: f32 (8-bit formats), fp16 (int4) or e8m0 bytes (mxfp4); zeros: bytes.
__global__ void fill_quant_side_kernel(void *out, uint64_t count, uint64_t seed, int kind,
                                       float scale, int e8m0_base) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < count; j += stride) {
    switch (kind) {
      case 0: static_cast<float *>(out)[j] = fill_uniform(seed, j) * scale; break;
      case 1:
        static_cast<__half *>(out)[j] = __float2half_rn(fill_uniform(seed, j) * scale);
        break;
      case 2:
        static_cast<uint8_t *>(out)[j] = (uint8_t)(e8m0_base + (int)(db_hash64(seed, j) >> 62));
        break;
      default: static_cast<uint8_t *>(out)[j] = (uint8_t)(db_hash64(seed, j) >> 56); break;
    }
  }
}

int fill_launch_grid(const db_context *ctx, uint64_t count, dim3 *grid) {
  *grid = dim3((unsigned)std::min<uint64_t>(db_ceil_div(count, kFillThreads),
                                            (uint64_t)ctx->sm_count * 8));
  return DB_OK;
}

}  // namespace

namespace db_lin {

int quant_check_shape(const char *who, int format, int n, int k, int group_size, int *group) {
  return check_format_shape(who, format, n, k, group_size, group);
}

const char *quant_format_name(int format) { return format_name(format); }

int quant_linear_plan(db_context *ctx, db_linear_params *p, uint64_t *workspace_bytes) {
  QuantPlan plan{};
  DB_CHECK(plan_quant(ctx, p, &plan));
  p->variant = plan.variant;
  p->split_k = 1;
  if (workspace_bytes) *workspace_bytes = 0;
  return DB_OK;
}

int quant_linear(db_context *ctx, const db_linear_params *p) {
  QuantPlan plan{};
  DB_CHECK(plan_quant(ctx, p, &plan));
  return run_quant(ctx, p, plan, nullptr);
}

int quant_linear_launches(db_context *ctx, const db_linear_params *p, db_launch_info *out,
                          int32_t max, int32_t *count) {
  QuantPlan plan{};
  DB_CHECK(plan_quant(ctx, p, &plan));
  const LaunchSink sink{out, max, count};
  return run_quant(ctx, p, plan, &sink);
}

}  // namespace db_lin

extern "C" int db_fill_quantized(db_context *ctx, const db_quant_fill_params *p) {
  return db_guard("db_fill_quantized", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_fill_quantized: params are null");
    int group = 0;
    DB_CHECK(check_format_shape("db_fill_quantized", p->weight_format, p->n, p->k,
                                p->group_size, &group));
    const int f = p->weight_format;
    const char *name = format_name(f);
    if (!std::isfinite(p->scale) || p->scale == 0.0f)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "db_fill_quantized: scale=%g would give %s scales that are NaN, infinite or "
                     "zero; want a finite, non-zero scale",
                     (double)p->scale, name);
    int e8m0_base = 0;
    if ((f == DB_WEIGHT_INT4 || f == DB_WEIGHT_INT4_ZP) && std::fabs(p->scale) > 65504.0f)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "db_fill_quantized: scale=%g is over fp16's 65504: %s's fp16 scales would "
                     "be infinite",
                     (double)p->scale, name);
    if (f == DB_WEIGHT_MXFP4) {
      e8m0_base = 127 + std::ilogb(p->scale) - 2;
      if (e8m0_base < 0 || e8m0_base + 3 > 254)
        return db_fail(DB_ERR_INVALID_ARGUMENT,
                       "db_fill_quantized: scale=%g puts mxfp4's e8m0 exponents at %d..%d, "
                       "outside 0..254 (255 is NaN)",
                       (double)p->scale, e8m0_base, e8m0_base + 3);
    }
    DB_CHECK(check_ptr("db_fill_quantized: w", p->w, 16));
    DB_CHECK(check_ptr("db_fill_quantized: scales", p->scales,
                        f == DB_WEIGHT_MXFP4 ? 1 : four_bit(f) ? 2 : 4));
    if (f == DB_WEIGHT_INT4_ZP)
      DB_CHECK(check_ptr("db_fill_quantized: zeros", p->zeros, 1));
    else if (p->zeros != 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "db_fill_quantized: zeros given for %s weights (only int4 with zero points "
                     "has them)",
                     name);

    const uint64_t n = (uint64_t)p->n;
    const uint64_t w_bytes = n * (uint64_t)quant_row_bytes(f, p->k);
    const uint64_t groups = group > 0 ? (uint64_t)quant_groups(f, p->k, group) : 1;
    const uint64_t scale_count = f == DB_WEIGHT_FP8_E4M3_TENSOR ? 1
                                 : f == DB_WEIGHT_FP8_E4M3_BLOCK
                                     ? db_ceil_div(n, (uint64_t)DB_FP8_BLOCK) * groups
                                     : n * groups;
    const int scale_kind = f == DB_WEIGHT_MXFP4 ? 2 : four_bit(f) ? 1 : 0;
    dim3 grid;
    DB_CHECK(fill_launch_grid(ctx, w_bytes, &grid));
    DB_CHECK(DB_LAUNCH(fill_quant_w_kernel, grid, kFillThreads, 0, ctx->stream,
                       reinterpret_cast<uint8_t *>(p->w), w_bytes, p->seed, f));
    DB_CHECK(fill_launch_grid(ctx, scale_count, &grid));
    DB_CHECK(DB_LAUNCH(fill_quant_side_kernel, grid, kFillThreads, 0, ctx->stream,
                       reinterpret_cast<void *>(p->scales), scale_count, db_hash64(p->seed, 1),
                       scale_kind, p->scale, e8m0_base));
    if (f == DB_WEIGHT_INT4_ZP) {
      const uint64_t zero_bytes = n / 2 * groups;
      DB_CHECK(fill_launch_grid(ctx, zero_bytes, &grid));
      DB_CHECK(DB_LAUNCH(fill_quant_side_kernel, grid, kFillThreads, 0, ctx->stream,
                         reinterpret_cast<void *>(p->zeros), zero_bytes, db_hash64(p->seed, 2), 3,
                         p->scale, 0));
    }
    return DB_OK;
  });
}
