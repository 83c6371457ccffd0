// linear.cu: the decode linear layer Y[batch x n] = X[batch x k] * W^T, W row-major [n x k],
// bf16 or fp16 in and out, fp32 accumulation, outputs rounded to nearest even.
//
// A decode step reads every weight once and reuses it `batch` times, so at decode batch sizes the
// layer is bound by W's bytes; both variants stream W with 16-byte loads and several loads in
// flight per thread, and differ in how they spend the arithmetic:
//   GEMV (CUDA cores), small batches: each warp owns two rows of W, lanes stride K in 8-element
//     chunks, the batch's activations come from L1/L2, a shuffle reduction ends each row; split-K
//     over the grid (fp32 partials in the workspace, then a reduce kernel) when n is too small to
//     fill the card.
//   MMA (tensor cores, mma.sync m16n8k16), larger batches: Y^T = W * X^T, so W's rows are the
//     M=16 side and the batch the N=8 side; K is split over the warps of a block and reduced in
//     shared memory.
// All tuning numbers below: not yet measured on a card.
#include <cstdio>

#include "common.cuh"
#include "cublas.cuh"

namespace {

/* ---- GEMV ------------------------------------------------------------------------------------ */

// 4 warps x 2 rows per block. Per lane and loop trip: 2 rows x 4 chunks = 8 independent 16-byte
// loads of W (128 B) in flight, 16 KiB per block. ptxas (CUDA 11.8, sm_80 / sm_90): 56-62
// registers at a batch tile of 1, 64-80 at 2 and 4, 115-120 at 8, no spills; even at 120
// registers 4 blocks (16 warps, 64 KiB in flight) fit an SM. Split-K starts below 2 blocks per
// SM (kGemvBlocksPerSm: 32 KiB in flight per SM, under the ~48 KiB an H200 SM wants), where the
// extra reduce launch (a few microseconds) costs less than the idle bandwidth; n = 4096 (512
// blocks on 132 SMs) runs unsplit, n = 1024 splits in 3.
// Two rows per warp halve the activation loads per weight byte against one row per warp.
// Activations are not staged in shared memory: every warp of the SM rereads the same few KiB from
// L1, which costs no barrier and no occupancy (staging would, at batch x k x 2 B per block).
constexpr int kGemvWarps = 4;
constexpr int kGemvThreads = kGemvWarps * 32;
constexpr int kGemvRowsPerWarp = 2;
constexpr int kGemvRowsPerBlock = kGemvWarps * kGemvRowsPerWarp;
constexpr int kGemvUnroll = 4;
constexpr int kGemvBlocksPerSm = 2;
// A split covers at least one full sweep of a warp's lanes and unroll (1024 elements of k).
constexpr int kGemvMinChunksPerSplit = 32 * kGemvUnroll;
constexpr int kMaxSplitK = 64;
// AUTO: GEMV up to this batch, MMA above. The GEMV rereads the activations from L1 once per
// weight load and batch row, which at batch 8 is 8x the weight traffic against L1's ~7x HBM
// bandwidth on an H200; the tensor-core path keeps that traffic in registers. First guess, to be
// swept on a card (batch 1..16, both variants).
constexpr int kGemvMaxAutoBatch = 4;

template <class T>
DB_DEVICE float dot8(uint4 w, uint4 x, float acc) {
  const uint32_t wv[4] = {w.x, w.y, w.z, w.w}, xv[4] = {x.x, x.y, x.z, x.w};
  DB_UNROLL
  for (int i = 0; i < 4; ++i) {
    const float2 a = db_dtype<T>::unpack(wv[i]), b = db_dtype<T>::unpack(xv[i]);
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
  }
  return acc;
}

// partial == nullptr: Y rounded to T. Else this split's fp32 partials [batch][n].
template <class T>
DB_DEVICE void gemv_store(T *y, float *partial, size_t at, float v) {
  if (partial)
    partial[at] = v;
  else
    y[at] = db_dtype<T>::from_float(v);
}

// partial == nullptr: write Y. Else write fp32 partials [split][batch][n] for the reduce kernel.
template <class T, int BT>
__global__ __launch_bounds__(kGemvThreads) void linear_gemv_kernel(
    const uint4 *__restrict__ x, const uint4 *__restrict__ w, T *__restrict__ y,
    float *__restrict__ partial, int batch, int n, int k, int chunks_per_split) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row0 = (blockIdx.x * kGemvWarps + warp) * kGemvRowsPerWarp;
  if (row0 >= n) return;  // whole warps leave together; no block barrier below
  const bool has_row1 = row0 + 1 < n;
  const int chunks = k >> 3;
  const int c_begin = blockIdx.y * chunks_per_split;
  const int c_end = db_min(chunks, c_begin + chunks_per_split);
  const uint4 *w0 = w + (size_t)row0 * chunks;
  const uint4 *w1 = has_row1 ? w0 + chunks : w0;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  if (partial) partial += (size_t)blockIdx.y * batch * n;

  for (int b0 = 0; b0 < batch; b0 += BT) {
    bool b_ok[BT];
    const uint4 *xb[BT];
    float acc0[BT], acc1[BT];
    DB_UNROLL
    for (int b = 0; b < BT; ++b) {
      b_ok[b] = b0 + b < batch;
      xb[b] = x + (size_t)(b_ok[b] ? b0 + b : b0) * chunks;
      acc0[b] = 0.0f;
      acc1[b] = 0.0f;
    }
    for (int c = c_begin + lane; c < c_end; c += 32 * kGemvUnroll) {
      uint4 wv0[kGemvUnroll], wv1[kGemvUnroll];
      DB_UNROLL
      for (int u = 0; u < kGemvUnroll; ++u) {
        const int cc = c + 32 * u;
        wv0[u] = cc < c_end ? db_ld_stream_v4(w0 + cc) : zero;
        wv1[u] = cc < c_end && has_row1 ? db_ld_stream_v4(w1 + cc) : zero;
      }
      DB_UNROLL
      for (int u = 0; u < kGemvUnroll; ++u) {
        const int cc = c + 32 * u;
        if (cc >= c_end) break;
        DB_UNROLL
        for (int b = 0; b < BT; ++b) {
          if (!b_ok[b]) continue;
          const uint4 xv = db_ld_nc_v4(xb[b] + cc);
          acc0[b] = dot8<T>(wv0[u], xv, acc0[b]);
          acc1[b] = dot8<T>(wv1[u], xv, acc1[b]);
        }
      }
    }
    // Every lane ends with the totals; lane b stores row0's, lane BT + b row1's.
    DB_UNROLL
    for (int b = 0; b < BT; ++b) {
      acc0[b] = db_warp_sum(acc0[b]);
      acc1[b] = db_warp_sum(acc1[b]);
    }
    DB_UNROLL
    for (int b = 0; b < BT; ++b) {
      if (!b_ok[b]) continue;
      const size_t at = (size_t)(b0 + b) * n + row0;
      if (lane == b) gemv_store(y, partial, at, acc0[b]);
      if (lane == BT + b && has_row1) gemv_store(y, partial, at + 1, acc1[b]);
    }
  }
}

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

/* ---- MMA ------------------------------------------------------------------------------------- */

// A warp computes 32 rows of W (two m16 tiles) x NB batch tiles of 8, over its share of K, in
// 64-element k-steps. Per k-step, lane (g = lane >> 2, t = lane % 4) loads 16 consecutive elements
// (two uint4) of rows g and g+8 of each m16 tile and of batch row g of each batch tile, at
// k = 64 s + 16 t .. 64 s + 16 t + 15, straight from global memory into registers. A dot product
// does not care about the order of k, so mma j (0..3) of the step feeds the elements
// 16t + 4j + {0,1} in as fragment columns 2t, 2t+1 and 16t + 4j + {2,3} as columns 2t+8, 2t+9,
// on A and B alike: 32-bit register 2j and 2j+1 of each 16-element load. No shared memory, no
// ldmatrix, and every global load is 16 bytes; a k-step reads one full 128-byte line per row.
//
// U k-steps are loaded before any mma: per warp U x 32 rows x 128 B = 8 KiB in flight at U = 2.
// Registers: W U*32, X U*NB*8, accumulators NB*8; ptxas (CUDA 11.8, sm_80 / sm_90), no spills:
// NB=1 U=2 56 / 80, NB=2 U=2 71 / 110, NB=4 U=1 102 / 112 (U=2 at NB=4 would need ~170: too few
// warps per SM to cover the latency).
constexpr int kMmaRowsPerWarp = 32;
constexpr int kMmaMaxWarps = 8;
// Warps per SM the K split aims for: 8 x 8 KiB = 64 KiB in flight per SM.
constexpr int kMmaWarpsPerSm = 8;

template <class T, int NB, int U>
__global__ __launch_bounds__(kMmaMaxWarps * 32) void linear_mma_kernel(
    const uint4 *__restrict__ x, const uint4 *__restrict__ w, T *__restrict__ y, int batch, int n,
    int k, int batch_groups) {
  constexpr int MT = kMmaRowsPerWarp / 16;
  constexpr int E = MT * NB * 4;  // accumulators per lane
  DB_EXTERN_SHARED(float, warp_sums);  // [warps][E][32 lanes]: conflict-free stores and loads
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int group = blockIdx.x % batch_groups, tile = blockIdx.x / batch_groups;
  const int row_base = tile * kMmaRowsPerWarp, batch_base = group * NB * 8;
  const int chunks = k >> 3;          // 16-byte chunks per row
  const int steps = (chunks + 7) >> 3;  // 64-element k-steps

  // This lane's rows of W (m16 tile mt, half h: row g or g + 8) and of X; a row past the end
  // loads zeros and is never stored.
  const uint4 *w_row[MT][2];
  bool w_ok[MT][2];
  DB_UNROLL
  for (int mt = 0; mt < MT; ++mt) {
    DB_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int row = row_base + mt * 16 + h * 8 + g;
      w_ok[mt][h] = row < n;
      w_row[mt][h] = w + (size_t)(w_ok[mt][h] ? row : 0) * chunks + 2 * t;
    }
  }
  const uint4 *x_row[NB];
  bool x_ok[NB];
  DB_UNROLL
  for (int nb = 0; nb < NB; ++nb) {
    const int b = batch_base + nb * 8 + g;
    x_ok[nb] = b < batch;
    x_row[nb] = x + (size_t)(x_ok[nb] ? b : 0) * chunks + 2 * t;
  }

  float acc[MT][NB][4];
  DB_UNROLL
  for (int mt = 0; mt < MT; ++mt) {
    DB_UNROLL
    for (int nb = 0; nb < NB; ++nb) {
      DB_UNROLL
      for (int i = 0; i < 4; ++i) acc[mt][nb][i] = 0.0f;
    }
  }

  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int s0 = warp * U; s0 < steps; s0 += warps * U) {
    uint32_t wa[U][MT][2][8];
    uint32_t xb[U][NB][8];
    DB_UNROLL
    for (int u = 0; u < U; ++u) {
      const int c = (s0 + u) * 8;  // the step's first chunk; the lane's are c + 2t and c + 2t + 1
      const bool ok0 = s0 + u < steps && c + 2 * t < chunks;
      const bool ok1 = s0 + u < steps && c + 2 * t + 1 < chunks;
      DB_UNROLL
      for (int mt = 0; mt < MT; ++mt) {
        DB_UNROLL
        for (int h = 0; h < 2; ++h) {
          const uint4 lo = ok0 && w_ok[mt][h] ? db_ld_stream_v4(w_row[mt][h] + c) : zero;
          const uint4 hi = ok1 && w_ok[mt][h] ? db_ld_stream_v4(w_row[mt][h] + c + 1) : zero;
          uint32_t *r = wa[u][mt][h];
          r[0] = lo.x, r[1] = lo.y, r[2] = lo.z, r[3] = lo.w;
          r[4] = hi.x, r[5] = hi.y, r[6] = hi.z, r[7] = hi.w;
        }
      }
      DB_UNROLL
      for (int nb = 0; nb < NB; ++nb) {
        const uint4 lo = ok0 && x_ok[nb] ? db_ld_nc_v4(x_row[nb] + c) : zero;
        const uint4 hi = ok1 && x_ok[nb] ? db_ld_nc_v4(x_row[nb] + c + 1) : zero;
        uint32_t *r = xb[u][nb];
        r[0] = lo.x, r[1] = lo.y, r[2] = lo.z, r[3] = lo.w;
        r[4] = hi.x, r[5] = hi.y, r[6] = hi.z, r[7] = hi.w;
      }
    }
    DB_UNROLL
    for (int u = 0; u < U; ++u) {
      DB_UNROLL
      for (int j = 0; j < 4; ++j) {
        DB_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
          // a0a1: row g, k 4j+{0,1}; a2a3: row g+8, same k; a4a5 / a6a7: k 4j+{2,3}
          const uint32_t a[4] = {wa[u][mt][0][2 * j], wa[u][mt][1][2 * j], wa[u][mt][0][2 * j + 1],
                                 wa[u][mt][1][2 * j + 1]};
          DB_UNROLL
          for (int nb = 0; nb < NB; ++nb) {
            const uint32_t b[2] = {xb[u][nb][2 * j], xb[u][nb][2 * j + 1]};
            db_mma_m16n8k16<T>(acc[mt][nb], a, b);
          }
        }
      }
    }
  }

  // Sum the warps' partial tiles; each thread then finishes some of the tile's outputs.
  DB_UNROLL
  for (int mt = 0; mt < MT; ++mt) {
    DB_UNROLL
    for (int nb = 0; nb < NB; ++nb) {
      DB_UNROLL
      for (int i = 0; i < 4; ++i)
        warp_sums[(warp * E + (mt * NB + nb) * 4 + i) * 32 + lane] = acc[mt][nb][i];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < E * 32; idx += blockDim.x) {
    const int e = idx >> 5, l = idx & 31;
    float sum = 0.0f;
    for (int v = 0; v < warps; ++v) sum += warp_sums[(v * E + e) * 32 + l];
    const int i = e & 3, nb = (e >> 2) % NB, mt = (e >> 2) / NB;
    const int row = row_base + mt * 16 + (l >> 2) + 8 * (i >> 1);  // C fragment layout
    const int b = batch_base + nb * 8 + 2 * (l & 3) + (i & 1);
    if (row < n && b < batch) y[(size_t)b * n + row] = db_dtype<T>::from_float(sum);
  }
}

/* ---- planning and dispatch ------------------------------------------------------------------- */

struct LinearPlan {
  int variant;
  int split_k;
  uint64_t workspace_bytes;
};

int gemv_auto_split(const db_context *ctx, int n, int k) {
  const int64_t blocks = (int64_t)db_ceil_div((uint64_t)n, kGemvRowsPerBlock);
  const int64_t target = (int64_t)ctx->sm_count * kGemvBlocksPerSm;
  if (blocks >= target) return 1;
  const int64_t wanted = (target + blocks - 1) / blocks;
  const int64_t most = std::max<int64_t>(1, (k / 8) / kGemvMinChunksPerSplit);
  return (int)std::min<int64_t>(std::min<int64_t>(wanted, most), kMaxSplitK);
}

int check_pointer(const char *name, uint64_t dptr, uint64_t alignment) {
  if (dptr == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: %s is null", name);
  if (dptr % alignment != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: %s=0x%llx is not %llu-byte aligned", name,
                   (unsigned long long)dptr, (unsigned long long)alignment);
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
  if (p->batch > 256)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "linear: batch=%d is over the 256 supported",
                   p->batch);
  if (p->k % 8 != 0)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                   "linear: k=%d is not a multiple of 8 (rows are read as 16-byte vectors)", p->k);
  if (db_ceil_div((uint64_t)p->n, kMmaRowsPerWarp) * 32 > 0x7fffffffu)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "linear: n=%d is too large", p->n);
  DB_CHECK(check_pointer("x", p->x, 16));
  DB_CHECK(check_pointer("w", p->w, 16));
  DB_CHECK(check_pointer("y", p->y, 2));
  if (p->variant == DB_LINEAR_CUBLAS) {  // the cuBLASLt peer: kernels/cublas.cu
    plan->variant = DB_LINEAR_CUBLAS, plan->split_k = 1;
    return db_cublas_plan(ctx, p, &plan->workspace_bytes);
  }
  if (p->variant < DB_LINEAR_AUTO || p->variant > DB_LINEAR_MMA)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: variant=%d is not a DB_LINEAR_*", p->variant);
  if (p->split_k < 0 || p->split_k > kMaxSplitK)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "linear: split_k=%d is not in 0..%d", p->split_k,
                   kMaxSplitK);

  plan->variant = p->variant;
  if (plan->variant == DB_LINEAR_AUTO)
    plan->variant = p->batch <= kGemvMaxAutoBatch ? DB_LINEAR_GEMV : DB_LINEAR_MMA;
  if (plan->variant == DB_LINEAR_MMA) {
    if (p->split_k > 1)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "linear: split_k=%d applies to the GEMV variant only (MMA splits K inside a "
                     "block)",
                     p->split_k);
    plan->split_k = 1;
  } else {
    plan->split_k = p->split_k ? p->split_k : gemv_auto_split(ctx, p->n, p->k);
  }
  plan->workspace_bytes =
      plan->split_k > 1 ? (uint64_t)plan->split_k * (uint64_t)p->batch * (uint64_t)p->n * 4u : 0;
  return DB_OK;
}

template <class T, int BT>
int launch_gemv(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan) {
  const int chunks = p->k / 8;
  const int per_split = (int)db_ceil_div((uint64_t)chunks, (uint64_t)plan.split_k);
  const dim3 grid((unsigned)db_ceil_div((uint64_t)p->n, kGemvRowsPerBlock), (unsigned)plan.split_k);
  const uint4 *x = reinterpret_cast<const uint4 *>(p->x);
  const uint4 *w = reinterpret_cast<const uint4 *>(p->w);
  T *y = reinterpret_cast<T *>(p->y);
  float *partial = plan.split_k > 1 ? reinterpret_cast<float *>(p->workspace) : nullptr;
  DB_CHECK(DB_LAUNCH((linear_gemv_kernel<T, BT>), grid, dim3(kGemvThreads), 0, ctx->stream, x, w,
                     y, partial, p->batch, p->n, p->k, per_split));
  if (plan.split_k == 1) return DB_OK;
  const uint64_t outputs = (uint64_t)p->batch * (uint64_t)p->n;
  const dim3 reduce_grid((unsigned)std::min<uint64_t>(db_ceil_div(outputs, 256),
                                                      (uint64_t)ctx->sm_count * 8));
  return DB_LAUNCH((linear_splitk_reduce_kernel<T>), reduce_grid, dim3(256), 0, ctx->stream,
                   static_cast<const float *>(partial), y, plan.split_k, outputs);
}

template <class T, int NB, int U>
int launch_mma(const db_context *ctx, const db_linear_params *p) {
  const uint64_t batch_groups = db_ceil_div((uint64_t)p->batch, NB * 8);
  const uint64_t blocks = db_ceil_div((uint64_t)p->n, kMmaRowsPerWarp) * batch_groups;
  // Split K over more warps of a block while the grid alone leaves SMs short of warps, but give
  // every warp at least one round of U k-steps.
  const uint64_t steps = db_ceil_div((uint64_t)p->k, 64);
  const uint64_t wanted = db_ceil_div((uint64_t)ctx->sm_count * kMmaWarpsPerSm, blocks);
  const uint64_t warps = std::max<uint64_t>(
      1, std::min<uint64_t>({wanted, (uint64_t)kMmaMaxWarps, db_ceil_div(steps, U)}));
  const size_t smem = warps * (2 * NB * 4) * 32 * sizeof(float);
  return DB_LAUNCH((linear_mma_kernel<T, NB, U>), dim3((unsigned)blocks), dim3((unsigned)warps * 32),
                   smem, ctx->stream, reinterpret_cast<const uint4 *>(p->x),
                   reinterpret_cast<const uint4 *>(p->w), reinterpret_cast<T *>(p->y), p->batch,
                   p->n, p->k, (int)batch_groups);
}

template <class T>
int launch_linear(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan) {
  if (plan.variant == DB_LINEAR_GEMV) {
    if (p->batch == 1) return launch_gemv<T, 1>(ctx, p, plan);
    if (p->batch == 2) return launch_gemv<T, 2>(ctx, p, plan);
    if (p->batch <= 4) return launch_gemv<T, 4>(ctx, p, plan);
    return launch_gemv<T, 8>(ctx, p, plan);  // batch tiles of 8 in a loop
  }
  if (p->batch <= 8) return launch_mma<T, 1, 2>(ctx, p);
  if (p->batch <= 16) return launch_mma<T, 2, 2>(ctx, p);
  return launch_mma<T, 4, 1>(ctx, p);  // batch groups of 32 on the grid
}

}  // namespace

extern "C" int db_linear_plan(db_context *ctx, db_linear_params *p, uint64_t *workspace_bytes) {
  return db_guard("db_linear_plan", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    LinearPlan plan{};
    DB_CHECK(plan_linear(ctx, p, &plan));
    p->variant = plan.variant;
    p->split_k = plan.split_k;
    if (workspace_bytes) *workspace_bytes = plan.workspace_bytes;
    return DB_OK;
  });
}

extern "C" int db_linear(db_context *ctx, const db_linear_params *p) {
  return db_guard("db_linear", [&]() -> int {
    DB_CHECK(db_enter(ctx));
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
    if (p->dtype == DB_DTYPE_BF16) return launch_linear<__nv_bfloat16>(ctx, p, plan);
    return launch_linear<__half>(ctx, p, plan);
  });
}
