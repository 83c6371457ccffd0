// linear_mma.cu: the skinny tensor-core decode linear kernel for batch 5..16 (any batch works:
// batch groups of 16 are units of their own), Y = X * W^T with mma.sync m16n8k16, fp32
// accumulation.
//
// Operands: A = X (16 batch rows x 16 k), B = W^T (16 k x 8 W rows), so the weights are the B
// operand and one 16-byte load of a W row feeds two mma as their {b0, b1} registers with no
// moves. A warp owns kMmaTilesN = 2 n8 tiles (16 rows of W) and one group of 16 batch rows; the
// warps of a block share those rows and split K between them, step by step (a step is 64 k),
// and sum their tiles in shared memory at the end in a fixed order.
//
// k-permutation (a dot product does not care about the order of k): in a step, lane
// (g = lane >> 2, t = lane % 4) loads elements 16t .. 16t + 15 of its W row g of every n8 tile
// and of batch rows g and g + 8 - two 16-byte loads, one whole 32-byte sector a row, so a warp
// reads four full sectors (128 contiguous bytes) of each of its 16 rows. mma j (0..3) of the
// step takes the elements 16t + 4j + {0, 1} as fragment k 2t, 2t + 1 and 16t + 4j + {2, 3} as
// k 2t + 8, 2t + 9, on A and B alike: 32-bit registers 2j and 2j + 1 of each 16-element load.
//
// The loop carries the next step's loads (4 of W and 4 of X a lane; 2 KiB of W a warp) in
// registers, in two buffers that take turns: they are issued before this step's mma, so two
// steps' weights are in flight while a warp waits, and the moves that assemble the A fragments
// read activations loaded a step earlier. Two n8 tiles a warp, not four: four with both
// buffers need more than the 128 registers that __launch_bounds__(512, 1) allows (ptxas spills);
// registers and occupancy are in kernels/README.md.
#include "linear_common.cuh"

namespace {

using namespace db_lin;

constexpr int kMmaMaxThreads = kMmaMaxWarps * 32;

template <class T, int NT>
__global__ __launch_bounds__(kMmaMaxThreads, 1) void linear_mma_kernel(
    const uint4 *__restrict__ x, const uint4 *__restrict__ w, T *__restrict__ y, int batch, int n,
    int k, int batch_groups) {
  constexpr int E = NT * 4;            // accumulators a lane
  DB_EXTERN_SHARED(float, warp_sums);  // [warps][E][32 lanes]: conflict-free stores and loads
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int chunks = k >> 3;            // 16-byte chunks a row
  const int steps = (chunks + 7) >> 3;  // 64-element k-steps
  const int units = (n + 8 * NT - 1) / (8 * NT) * batch_groups;

  // Blocks stride over the (row tile, batch group) units: the planner sizes the grid to the
  // blocks every SM holds and gives each the same number of units.
  for (int unit = blockIdx.x; unit < units; unit += gridDim.x) {
    const int group = unit % batch_groups, tile = unit / batch_groups;
    const int row_base = tile * 8 * NT, batch_base = group * kMmaBatchTile;

    // This lane's W rows (row g of each n8 tile) and batch rows g, g + 8; a row past the end loads
    // zeros and is never stored.
    const uint4 *w_row[NT];
    bool w_ok[NT];
    DB_UNROLL
    for (int nt = 0; nt < NT; ++nt) {
      const int row = row_base + nt * 8 + g;
      w_ok[nt] = row < n;
      w_row[nt] = w + (size_t)(w_ok[nt] ? row : 0) * chunks + 2 * t;
    }
    const uint4 *x_row[2];
    bool x_ok[2];
    DB_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int b = batch_base + g + 8 * h;
      x_ok[h] = b < batch;
      x_row[h] = x + (size_t)(x_ok[h] ? b : 0) * chunks + 2 * t;
    }

    float acc[NT][4];
    DB_UNROLL
    for (int nt = 0; nt < NT; ++nt) {
      DB_UNROLL
      for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
    }

    const uint4 zero = make_uint4(0, 0, 0, 0);
    // The step's first chunk is 8 s; the lane's are 8 s + 2t and 8 s + 2t + 1.
    auto load_w = [&](uint4 (&lo)[NT], uint4 (&hi)[NT], int s) {
      const int c = s * 8;
      const bool ok0 = s < steps && c + 2 * t < chunks, ok1 = s < steps && c + 2 * t + 1 < chunks;
      DB_UNROLL
      for (int nt = 0; nt < NT; ++nt) {
        lo[nt] = ok0 && w_ok[nt] ? db_ld_stream_v4(w_row[nt] + c) : zero;
        hi[nt] = ok1 && w_ok[nt] ? db_ld_stream_v4(w_row[nt] + c + 1) : zero;
      }
    };

    // A step's activations: batch rows g and g + 8 (L1: every warp of the block reads them).
    struct MmaX {
      uint4 lo[2], hi[2];
    };
    auto load_x = [&](MmaX &xv, int s) {
      const int c = s * 8;
      const bool ok0 = s < steps && c + 2 * t < chunks, ok1 = s < steps && c + 2 * t + 1 < chunks;
      DB_UNROLL
      for (int h = 0; h < 2; ++h) {
        xv.lo[h] = ok0 && x_ok[h] ? db_ld_nc_v4(x_row[h] + c) : zero;
        xv.hi[h] = ok1 && x_ok[h] ? db_ld_nc_v4(x_row[h] + c + 1) : zero;
      }
    };
    auto step = [&](const uint4 (&wlo)[NT], const uint4 (&whi)[NT], const MmaX &xv) {
      DB_UNROLL
      for (int j = 0; j < 4; ++j) {
        const uint4 &x0 = j < 2 ? xv.lo[0] : xv.hi[0], &x1 = j < 2 ? xv.lo[1] : xv.hi[1];
        // a0a1: batch row g, k 2t; a2a3: row g + 8; a4a5 / a6a7: the same rows at k 2t + 8
        const uint32_t a[4] = {j & 1 ? x0.z : x0.x, j & 1 ? x1.z : x1.x, j & 1 ? x0.w : x0.y,
                               j & 1 ? x1.w : x1.y};
        DB_UNROLL
        for (int nt = 0; nt < NT; ++nt) {
          const uint4 &wv = j < 2 ? wlo[nt] : whi[nt];
          const uint32_t b[2] = {j & 1 ? wv.z : wv.x, j & 1 ? wv.w : wv.y};
          db_mma_m16n8k16<T>(acc[nt], a, b);
        }
      }
    };

    // Two buffers of W and X in turn, so that no register move waits for a load: the next step's
    // weights and activations are issued before this step's mma (the moves that assemble the A
    // fragments from two batch rows read activations loaded a step earlier).
    uint4 alo[NT], ahi[NT], blo[NT], bhi[NT];
    MmaX ax, bx;
    load_w(alo, ahi, warp);
    load_x(ax, warp);
    for (int s = warp; s < steps; s += 2 * warps) {
      load_w(blo, bhi, s + warps);
      load_x(bx, s + warps);
      step(alo, ahi, ax);
      if (s + warps >= steps) break;
      load_w(alo, ahi, s + 2 * warps);
      load_x(ax, s + 2 * warps);
      step(blo, bhi, bx);
    }

    // Sum the warps' tiles in warp order; each thread then finishes some of the tile's outputs.
    DB_UNROLL
    for (int e = 0; e < E; ++e) warp_sums[(warp * E + e) * 32 + lane] = acc[e >> 2][e & 3];
    __syncthreads();
    for (int idx = threadIdx.x; idx < E * 32; idx += blockDim.x) {
      const int e = idx >> 5, l = idx & 31;
      float sum = 0.0f;
      for (int v = 0; v < warps; ++v) sum += warp_sums[(v * E + e) * 32 + l];
      const int i = e & 3, nt = e >> 2;
      // C fragment: row (batch) g + 8 (i >> 1), column (W row) 2t + (i & 1)
      const int b = batch_base + (l >> 2) + 8 * (i >> 1);
      const int row = row_base + nt * 8 + 2 * (l & 3) + (i & 1);
      if (row < n && b < batch) y[(size_t)b * n + row] = db_dtype<T>::from_float(sum);
    }
    __syncthreads();  // warp_sums is the next unit's
  }
}

template <class T>
int mma_launch(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
               const LaunchSink *sink) {
  if (sink) {
    char name[128];
    std::snprintf(name, sizeof name, "(anonymous namespace)::linear_mma_kernel<%s, %d>",
                  dtype_cxx_name<T>(), kMmaTilesN);
    return sink_add(*sink, name, plan.grid, plan.threads, plan.smem + plan.static_smem, plan.units);
  }
  return DB_LAUNCH((linear_mma_kernel<T, kMmaTilesN>), plan.grid, dim3(plan.threads),
                   (size_t)plan.smem, ctx->stream, reinterpret_cast<const uint4 *>(p->x),
                   reinterpret_cast<const uint4 *>(p->w), reinterpret_cast<T *>(p->y), p->batch,
                   p->n, p->k, plan.groups);
}

}  // namespace

namespace db_lin {

int mma_blocks_per_sm(const db_context *ctx, int warps, int *blocks_per_sm) {
  static std::atomic<int> cache[5][64];
  int i = 0;
  while (i < 4 && (1 << i) < warps) ++i;
  if ((1 << i) != warps)
    return db_fail(DB_ERR_INTERNAL, "linear: mma block of %d warps is not a power of two <= 16",
                   warps);
  return cached_occupancy(linear_mma_kernel<__nv_bfloat16, kMmaTilesN>, cache[i], ctx->device,
                          warps * 32, (size_t)warps * kMmaTilesN * 4 * 32 * sizeof(float),
                          kMmaSm90Registers, "linear_mma_kernel", blocks_per_sm);
}

int mma_run(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
            const LaunchSink *sink) {
  if (plan.config != kMmaN2)
    return db_fail(DB_ERR_INTERNAL, "linear: no MMA kernel for config %d", plan.config);
  if (p->dtype == DB_DTYPE_BF16) return mma_launch<__nv_bfloat16>(ctx, p, plan, sink);
  return mma_launch<__half>(ctx, p, plan, sink);
}

}  // namespace db_lin
