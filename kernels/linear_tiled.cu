// linear_tiled.cu: the shared-memory-tiled tensor-core decode linear kernel for batch 17..1024,
// Y = X * W^T computed as Y^T = W * X^T with mma.sync m16n8k16 (W rows the M side, the batch
// the N side), fp32 accumulation.
//
// A block computes a tile of kTiledBM = 128 rows of W x BN batch rows (32, 64 or 128) over its
// share of K, in k tiles of kTiledBK = 64 elements:
//   - cp.async (16 bytes, L2 only) stages the W tile (128 rows x 128 contiguous bytes: four full
//     32-byte sectors a row) and the X tile into shared memory, STAGES deep: the tiles of the next
//     STAGES - 1 trips are in flight while a trip computes (2 x 16 KiB of W a block at 3 stages,
//     3 x 16 KiB at 4);
//   - rows are 8 chunks of 16 bytes, chunk c of row r stored at c ^ (r % 8), so that the 8 rows
//     an ldmatrix phase reads, and the 8 chunks a row's copies write, fall in 8 different bank
//     groups;
//   - ldmatrix.x4 loads the A (W) and B (X) fragments; every warp reuses the block's X tile.
// Every W byte is read from DRAM once a call: the blocks of one W tile (its batch tiles) run
// together (consecutive in the grid; in stream-K, G / batch_tiles apart in one wave) and the
// later ones read the tile from L2.
// No split, split-K or stream-K (the planner's choice, so that the launch fills whole waves of
// the card; see the kernel): split-K and stream-K blocks write fp32 partials [slot][batch][n],
// which linear.cu's reduces sum in slot order.
// Shared memory: 80 KiB (BN 32, 4 stages) or 96 KiB (BN 64, 4 stages; BN 128, 3 stages): within
// the opt-in limit of sm_86 / sm_89 (99 KiB) and two blocks an SM on sm_90 (228 KiB).
#include "linear_common.cuh"

namespace {

using namespace db_lin;

constexpr int kBM = kTiledBM, kBK = kTiledBK;
constexpr int kRowBytes = kBK * 2;  // 128: 8 chunks of 16 bytes

// Byte offset of (row, chunk) in a tile: chunks swizzled by the row's low three bits.
DB_DEVICE int tile_offset(int row, int chunk) { return (row * 8 + (chunk ^ (row & 7))) * 16; }

// Stages rows [row0, row0 + ROWS) of src (a [rows_valid][chunks] matrix of 16-byte chunks), k
// chunks [chunk0, chunk0 + 8), into tile. Rows past rows_valid copy the last row (their results
// are never stored); chunks past the end of K are zeros, in both operands, so they add nothing.
template <int ROWS, int THREADS>
DB_DEVICE void stage_rows(unsigned char *tile, const uint4 *src, int row0, int rows_valid,
                          int chunk0, int chunks, int tid) {
  static_assert(ROWS * 8 % THREADS == 0, "each thread copies the same number of chunks");
  DB_UNROLL
  for (int j = 0; j < ROWS * 8 / THREADS; ++j) {
    const int i = tid + j * THREADS, r = i >> 3, c = i & 7, gc = chunk0 + c;
    unsigned char *dst = tile + tile_offset(r, c);
    if (gc < chunks) {
      const int row = db_min(row0 + r, rows_valid - 1);
      db_cp_async_16(dst, src + (size_t)row * chunks + gc);
    } else {
      *reinterpret_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0);
    }
  }
}

template <int BN, int STAGES>
constexpr int tiled_smem_bytes() {
  return STAGES * (kBM + BN) * kRowBytes > BN * (kBM + 4) * 4 ? STAGES * (kBM + BN) * kRowBytes
                                                                 : BN * (kBM + 4) * 4;
}

// WARPS_M x WARPS_N warps; a warp computes (kBM / WARPS_M) W rows x (BN / WARPS_N) batch rows.
// Two ways to share the work (the planner's choice):
//   streamk == 0: block = (W tile, K split, batch tile), batch tiles fastest; one segment each;
//     with splits > 1 its fp32 partials go to partial[split] (split-K);
//   streamk == G: the G blocks (one wave) split the iterations (tile, k tile), ordered batch
//     tile, W tile, k tile, into G equal contiguous ranges. A block runs each tile its range
//     touches as one segment; a tile it covers whole is stored to y, a part of one goes to
//     partial[slot], slot = the block's place among the tile's blocks, which linear.cu's
//     stream-K reduce sums in slot (k) order. The batch tile is outermost so that blocks b and
//     b + G / batch_tiles (G is a multiple of batch_tiles) read the same W tiles at the same
//     time: DRAM still supplies each W byte once.
template <class T, int BN, int WARPS_M, int WARPS_N, int STAGES>
__global__ __launch_bounds__(WARPS_M *WARPS_N * 32, 2) void linear_tiled_kernel(
    const uint4 *__restrict__ x, const uint4 *__restrict__ w, T *__restrict__ y,
    float *__restrict__ partial, int batch, int n, int k, int batch_tiles, int splits,
    int tiles_per_split, int streamk) {
  constexpr int kThreads = WARPS_M * WARPS_N * 32;
  constexpr int WTM = kBM / WARPS_M, WTN = BN / WARPS_N;
  constexpr int MI = WTM / 16, NI = WTN / 8;
  static_assert(MI >= 1 && NI >= 2 && NI % 2 == 0, "warp tile: m16 tiles, pairs of n8 tiles");
  constexpr int kStageBytes = (kBM + BN) * kRowBytes;
  DB_EXTERN_SHARED(unsigned char, smem);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
  const int chunks = k >> 3;
  const int ktiles = (chunks + 7) >> 3;
  const size_t outputs = (size_t)batch * n;

  // One segment: k tiles [kt0, kt0 + nk) of the tile (mt, bt), stored to y (out == nullptr)
  // or as fp32 to out.
  auto segment = [&](int mt, int bt, int kt0, int nk, float *out_partial) {
    const int m0 = mt * kBM, b0 = bt * BN;
    auto stage = [&](int slot, int kt) {
      unsigned char *ws = smem + slot * kStageBytes;
      stage_rows<kBM, kThreads>(ws, w, m0, n, kt * 8, chunks, tid);
      stage_rows<BN, kThreads>(ws + kBM * kRowBytes, x, b0, batch, kt * 8, chunks, tid);
    };

    float acc[MI][NI][4];
    DB_UNROLL
    for (int mi = 0; mi < MI; ++mi) {
      DB_UNROLL
      for (int ni = 0; ni < NI; ++ni) {
        DB_UNROLL
        for (int i = 0; i < 4; ++i) acc[mi][ni][i] = 0.0f;
      }
    }

    __syncthreads();  // the previous segment's threads are done with the shared memory
    // Prologue: the first STAGES - 1 tiles in flight (one commit group each, empty past the
    // end, so that the wait below always counts STAGES - 2 younger groups).
    DB_UNROLL
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < nk) stage(s, kt0 + s);
      db_cp_async_commit();
    }

    for (int it = 0; it < nk; ++it) {
      db_cp_async_wait<STAGES - 2>();  // this thread's copies of tile it have landed
      __syncthreads();                 // everyone's have, and everyone is done with tile it - 1
      const int ahead = it + STAGES - 1;
      if (ahead < nk) stage(ahead % STAGES, kt0 + ahead);
      db_cp_async_commit();

      const unsigned char *ws = smem + (it % STAGES) * kStageBytes;
      const unsigned char *xs = ws + kBM * kRowBytes;
      DB_UNROLL
      for (int kk = 0; kk < kBK / 16; ++kk) {
        uint32_t a[MI][4], b[NI][2];
        DB_UNROLL
        for (int mi = 0; mi < MI; ++mi) {
          // matrices (rows 0-7, k lo), (rows 8-15, k lo), (rows 0-7, k hi), (rows 8-15, k hi)
          const int r = wm * WTM + mi * 16 + (lane & 15);
          db_ldmatrix_x4(a[mi], ws + tile_offset(r, 2 * kk + (lane >> 4)));
        }
        DB_UNROLL
        for (int ni = 0; ni < NI; ni += 2) {
          // matrices (tile ni, k lo), (ni, k hi), (ni + 1, k lo), (ni + 1, k hi)
          const int q = lane >> 3;
          const int r = wn * WTN + (ni + (q >> 1)) * 8 + (lane & 7);
          uint32_t v[4];
          db_ldmatrix_x4(v, xs + tile_offset(r, 2 * kk + (q & 1)));
          b[ni][0] = v[0];
          b[ni][1] = v[1];
          b[ni + 1][0] = v[2];
          b[ni + 1][1] = v[3];
        }
        DB_UNROLL
        for (int mi = 0; mi < MI; ++mi) {
          DB_UNROLL
          for (int ni = 0; ni < NI; ++ni) db_mma_m16n8k16<T>(acc[mi][ni], a[mi], b[ni]);
        }
      }
    }
    db_cp_async_wait<0>();
    __syncthreads();  // the pipeline's shared memory becomes the output tile

    // Output tile [BN][kBM + 4] fp32 (the padding spreads a fragment's stores over the banks),
    // then stores along W rows, which are contiguous in Y [batch][n].
    float *out = reinterpret_cast<float *>(smem);
    const int g = lane >> 2, t = lane & 3;
    DB_UNROLL
    for (int mi = 0; mi < MI; ++mi) {
      DB_UNROLL
      for (int ni = 0; ni < NI; ++ni) {
        DB_UNROLL
        for (int i = 0; i < 4; ++i) {
          const int row = wm * WTM + mi * 16 + g + 8 * (i >> 1);
          const int col = wn * WTN + ni * 8 + 2 * t + (i & 1);
          out[col * (kBM + 4) + row] = acc[mi][ni][i];
        }
      }
    }
    __syncthreads();
    for (int idx = tid; idx < BN * kBM; idx += kThreads) {
      const int col = idx / kBM, row = idx % kBM;
      const int gb = b0 + col, gr = m0 + row;
      if (gb >= batch || gr >= n) continue;
      const float v = out[col * (kBM + 4) + row];
      const size_t at = (size_t)gb * n + gr;
      if (out_partial)
        out_partial[at] = v;
      else
        y[at] = db_dtype<T>::from_float(v);
    }
  };

  if (streamk == 0) {
    const int bt = blockIdx.x % batch_tiles, rest = blockIdx.x / batch_tiles;
    const int split = rest % splits, mt = rest / splits;
    const int kt0 = split * tiles_per_split;
    const int nk = db_min(ktiles, kt0 + tiles_per_split) - kt0;  // <= 0: an empty split
    segment(mt, bt, kt0, nk, partial ? partial + (size_t)split * outputs : nullptr);
    return;
  }
  const int m_tiles = (n + kBM - 1) / kBM;
  const int64_t iters = (int64_t)m_tiles * batch_tiles * ktiles;
  const int64_t end = ((int64_t)blockIdx.x + 1) * iters / streamk;
  for (int64_t it = (int64_t)blockIdx.x * iters / streamk; it < end;) {
    const int64_t tile = it / ktiles;
    const int kt0 = (int)(it - tile * ktiles);
    const int nk = (int)db_min<int64_t>(ktiles - kt0, end - it);
    const int bt = (int)(tile / m_tiles), mt = (int)(tile % m_tiles);
    float *out_partial = nullptr;
    if (nk < ktiles) {
      const int64_t slot = blockIdx.x - streamk_owner(tile * ktiles, iters, streamk);
      out_partial = partial + (size_t)slot * outputs;
    }
    segment(mt, bt, kt0, nk, out_partial);
    it += nk;
  }
}

template <class T, int BN, int WARPS_M, int WARPS_N, int STAGES>
int tiled_launch(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
                 const LaunchSink *sink) {
  constexpr int kSmem = tiled_smem_bytes<BN, STAGES>();
  if (plan.smem != kSmem || plan.threads != WARPS_M * WARPS_N * 32)
    return db_fail(DB_ERR_INTERNAL,
                   "linear: tiled plan (%d threads, %d bytes) does not match its kernel",
                   plan.threads, plan.smem);
  if (sink) {
    char name[128];
    std::snprintf(name, sizeof name,
                  "(anonymous namespace)::linear_tiled_kernel<%s, %d, %d, %d, %d>",
                  dtype_cxx_name<T>(), BN, WARPS_M, WARPS_N, STAGES);
    return sink_add(*sink, name, plan.grid, plan.threads, plan.smem + plan.static_smem, plan.units);
  }
  static std::atomic<uint64_t> smem_set{0};
  DB_CHECK(allow_smem(linear_tiled_kernel<T, BN, WARPS_M, WARPS_N, STAGES>, smem_set,
                      ctx->device, kSmem,
                      "cudaFuncSetAttribute(linear_tiled_kernel, MaxDynamicSharedMemorySize)"));
  float *partial = plan.split_k > 1 ? reinterpret_cast<float *>(p->workspace) : nullptr;
  return DB_LAUNCH((linear_tiled_kernel<T, BN, WARPS_M, WARPS_N, STAGES>), plan.grid,
                   dim3(plan.threads), (size_t)kSmem, ctx->stream,
                   reinterpret_cast<const uint4 *>(p->x), reinterpret_cast<const uint4 *>(p->w),
                   reinterpret_cast<T *>(p->y), partial, p->batch, p->n, p->k, plan.groups,
                   plan.streamk ? 1 : plan.split_k, plan.per_split, plan.streamk);
}

// The instantiations: (batch tile, warps along W rows, warps along the batch, stages).
#define DB_TILED_CONFIGS(X) \
  X(kTiledN32, 32, 4, 1, 4) \
  X(kTiledN64, 64, 4, 2, 4) \
  X(kTiledN128, 128, 2, 4, 3)

template <class T>
int tiled_dispatch(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
                   const LaunchSink *sink) {
  switch (plan.config) {
#define DB_TILED_CASE(id, bn, wm, wn, st) \
  case id: return tiled_launch<T, bn, wm, wn, st>(ctx, p, plan, sink);
    DB_TILED_CONFIGS(DB_TILED_CASE)
#undef DB_TILED_CASE
  }
  return db_fail(DB_ERR_INTERNAL, "linear: no tiled kernel for config %d", plan.config);
}

}  // namespace

namespace db_lin {

TiledShape tiled_shape(int config) {
  switch (config) {
#define DB_TILED_SHAPE(id, bn, wm, wn, st) \
  case id: return TiledShape{bn, wm * wn * 32, st, tiled_smem_bytes<bn, st>()};
    DB_TILED_CONFIGS(DB_TILED_SHAPE)
#undef DB_TILED_SHAPE
  }
  return TiledShape{0, 0, 0, 0};
}

template <class T, int BN, int WARPS_M, int WARPS_N, int STAGES>
int tiled_occupancy(const db_context *ctx, int *blocks_per_sm) {
  constexpr int kSmem = tiled_smem_bytes<BN, STAGES>();
  auto kernel = linear_tiled_kernel<T, BN, WARPS_M, WARPS_N, STAGES>;
  static std::atomic<uint64_t> smem_set{0};
  DB_CHECK(allow_smem(kernel, smem_set, ctx->device, kSmem,
                      "cudaFuncSetAttribute(linear_tiled_kernel, MaxDynamicSharedMemorySize)"));
  static std::atomic<int> cache[64];
  return cached_occupancy(kernel, cache, ctx->device, WARPS_M * WARPS_N * 32, kSmem,
                          tiled_sm90_registers(BN), "linear_tiled_kernel", blocks_per_sm);
}

int tiled_blocks_per_sm(const db_context *ctx, int config, int *blocks_per_sm) {
  switch (config) {
#define DB_TILED_OCC(id, bn, wm, wn, st) \
  case id: return tiled_occupancy<__nv_bfloat16, bn, wm, wn, st>(ctx, blocks_per_sm);
    DB_TILED_CONFIGS(DB_TILED_OCC)
#undef DB_TILED_OCC
  }
  return db_fail(DB_ERR_INTERNAL, "linear: no tiled kernel for config %d", config);
}

int tiled_run(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
              const LaunchSink *sink) {
  if (p->dtype == DB_DTYPE_BF16) return tiled_dispatch<__nv_bfloat16>(ctx, p, plan, sink);
  return tiled_dispatch<__half>(ctx, p, plan, sink);
}

}  // namespace db_lin
