// linear_gemv.cu: the CUDA-core decode linear kernel for batch 1..4 (any batch works: batch tiles
// of 8 in a loop), Y[batch x n] = X[batch x k] * W^T, fp32 accumulation.
//
// Each warp owns two rows of W; its lanes stride K in 16-byte chunks, kGemvUnroll chunks a row
// and trip, so a trip is 2 x 4 = 8 independent 16-byte loads of W a lane (4 KiB a warp). The
// loop carries them in registers one trip ahead (batch tiles 1, 2, 4), in two buffers that take
// turns: the next trip's eight loads are issued before this trip's FMAs, so they land while those
// FMAs run (sm_90, batch 1, one warp a pair: 12 loads in flight at each of the k loop's stalls;
// kernels/README.md).
// The activations come from L1 (every warp of an SM rereads the same few KiB): staging them in
// shared memory would cost a barrier and occupancy for no fewer L1 wavefronts.
//
// Blocks stride over units of row pairs, and the grid is at most the blocks the SMs hold
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor), so every block gets the same number of
// units give or take one. KW warps share a unit's pairs' K (the planner picks 1, 2 or 4 so that
// the units fill whole waves: Llama-3-8B's qkv, 3072 row pairs, is 1.45 rounds of the card's
// 2112 warps with a pair a warp, 2.9 with two warps a pair).
// Split-K over gridDim.y (fp32 partials, then linear.cu's reduce) where no warp count fills the
// card.
#include "linear_common.cuh"

namespace {

using namespace db_lin;

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

// One trip's loads: the W chunks c + 32 u (u < kGemvUnroll) of the warp's two rows, and with
// WithX the same chunks of the batch tile's activations; zeros past c_end (a row past n reads
// row0 again: has_row1 is false and its sums are never stored).
template <int BT, bool WithX>
struct GemvTrip {
  uint4 w0[kGemvUnroll], w1[kGemvUnroll];
  uint4 x[kGemvUnroll][WithX ? BT : 1];
};

template <int BT, bool WithX>
DB_DEVICE void gemv_load_trip(GemvTrip<BT, WithX> &trip, const uint4 *w0, const uint4 *w1,
                              const uint4 *const (&xb)[BT], const bool (&b_ok)[BT], int c,
                              int c_end) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
  DB_UNROLL
  for (int u = 0; u < kGemvUnroll; ++u) {
    const int cc = c + 32 * u;
    trip.w0[u] = cc < c_end ? db_ld_stream_v4(w0 + cc) : zero;
    trip.w1[u] = cc < c_end ? db_ld_stream_v4(w1 + cc) : zero;
  }
  if (WithX) {
    DB_UNROLL
    for (int u = 0; u < kGemvUnroll; ++u) {
      const int cc = c + 32 * u;
      DB_UNROLL
      for (int b = 0; b < BT; ++b)
        trip.x[u][WithX ? b : 0] = cc < c_end && b_ok[b] ? db_ld_nc_v4(xb[b] + cc) : zero;
    }
  }
}

// Without WithX the activations are loaded here, just before their FMAs, and a chunk past c_end
// ends the trip (its activation load would leave the row). With WithX the trip has no branch:
// gemv_load_trip left zeros in the chunks past c_end, whose FMAs add nothing. A branch there
// costs the carried loop its overlap: ptxas waits at such an early exit for the loads of the
// next trip's buffer (sm_90: after the first of four chunks, for 10 of the 12 issued just
// before it, so they would land before this trip's other FMAs instead of during them).
template <class T, int BT, bool WithX>
DB_DEVICE void gemv_fma_trip(float (&acc0)[BT], float (&acc1)[BT], const GemvTrip<BT, WithX> &trip,
                             const uint4 *const (&xb)[BT], const bool (&b_ok)[BT], int c,
                             int c_end) {
  DB_UNROLL
  for (int u = 0; u < kGemvUnroll; ++u) {
    const int cc = c + 32 * u;
    if (!WithX && cc >= c_end) break;
    DB_UNROLL
    for (int b = 0; b < BT; ++b) {
      if (!b_ok[b]) continue;
      const uint4 xv = WithX ? trip.x[u][WithX ? b : 0] : db_ld_nc_v4(xb[b] + cc);
      acc0[b] = dot8<T>(trip.w0[u], xv, acc0[b]);
      acc1[b] = dot8<T>(trip.w1[u], xv, acc1[b]);
    }
  }
}

// Carry: the loop holds the next trip's loads in registers (batch tiles 1..4; at 8 the
// registers it would take push the kernel past 128 and the batch tile of 8 is a fallback for a
// forced GEMV at large batch, not a decode path).
//
// KW warps share a row pair (the planner's choice, so that shapes with few rows fill whole
// waves): warp w takes the trips w % KW, w % KW + KW, ... of the split's K (a trip is
// kGemvUnroll sweeps of the warp's 32 lanes), and the slices' sums meet in shared memory,
// added in slice order. KW is a template argument: computed at run time its arithmetic costs
// the carried loop the registers of half its loads in flight (sm_90, ptxas at 128).
template <class T, int BT, bool Carry, int KW>
__global__ __launch_bounds__(kGemvThreads, gemv_min_blocks(BT)) void linear_gemv_kernel(
    const uint4 *__restrict__ x, const uint4 *__restrict__ w, T *__restrict__ y,
    float *__restrict__ partial, int batch, int n, int k, int chunks_per_split) {
  constexpr int kStride = 32 * kGemvUnroll * KW;  // chunks between a warp's trips
  constexpr int kTrip = 32 * kGemvUnroll;         // chunks a trip covers
  constexpr int k_warps = KW, pairs_per_unit = kGemvWarps / KW;
  DB_SHARED(float, slice_sums, kGemvWarps * 2 * BT);  // [warp][row][batch]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int slice = warp % KW;
  const int chunks = k >> 3;
  const int split_begin = blockIdx.y * chunks_per_split;
  const int c_end = db_min(chunks, split_begin + chunks_per_split);
  const int c_begin = split_begin + slice * kTrip;
  const int row_pairs = (n + 1) >> 1;
  const int units = (row_pairs + pairs_per_unit - 1) / pairs_per_unit;
  if (partial) partial += (size_t)blockIdx.y * batch * n;

  // Blocks stride over units of pairs_per_unit row pairs (the same count for every warp of a
  // block, so the barriers below are block-uniform). A warp past the last pair recomputes it
  // and stores nothing: a bound that varied by unit would cost the carried loop registers
  // (sm_90: ptxas then keeps half as many loads in flight at the k loop's first stall).
  for (int unit = blockIdx.x; unit < units; unit += gridDim.x) {
    const int pair = db_min(unit * pairs_per_unit + warp / k_warps, row_pairs - 1);
    const bool has_pair = unit * pairs_per_unit + warp / k_warps < row_pairs;
    const int row0 = pair * kGemvRowsPerWarp;
    const bool has_row1 = row0 + 1 < n;
    const uint4 *w0 = w + (size_t)row0 * chunks;
    const uint4 *w1 = has_row1 ? w0 + chunks : w0;

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
      const int c0 = c_begin + lane;
      if (Carry) {
        // Two buffers in turn (no register moves, which would wait for the loads they copy):
        // a's trip computes while b's loads fly, then the other way round.
        // At batch 1 the activations ride along too (4 more loads a trip); at 2 and 4 they
        // would take the kernel past its register budget (ptxas spills), so they are loaded
        // just before their FMAs, from L1.
        constexpr bool kCarryX = BT == 1;
        GemvTrip<BT, kCarryX> a, b;
        gemv_load_trip(a, w0, w1, xb, b_ok, c0, c_end);
        for (int c = c0; c < c_end; c += 2 * kStride) {
          gemv_load_trip(b, w0, w1, xb, b_ok, c + kStride, c_end);
          gemv_fma_trip<T, BT, kCarryX>(acc0, acc1, a, xb, b_ok, c, c_end);
          if (c + kStride >= c_end) break;
          gemv_load_trip(a, w0, w1, xb, b_ok, c + 2 * kStride, c_end);
          gemv_fma_trip<T, BT, kCarryX>(acc0, acc1, b, xb, b_ok, c + kStride, c_end);
        }
      } else {
        for (int c = c0; c < c_end; c += kStride) {
          GemvTrip<BT, false> cur;
          gemv_load_trip(cur, w0, w1, xb, b_ok, c, c_end);
          gemv_fma_trip<T, BT, false>(acc0, acc1, cur, xb, b_ok, c, c_end);
        }
      }
      // Every lane ends with the totals; lane b stores row0's, lane BT + b row1's.
      DB_UNROLL
      for (int b = 0; b < BT; ++b) {
        acc0[b] = db_warp_sum(acc0[b]);
        acc1[b] = db_warp_sum(acc1[b]);
      }
      if (k_warps > 1) {
        if (slice > 0 && lane == 0) {
          DB_UNROLL
          for (int b = 0; b < BT; ++b) {
            slice_sums[(warp * 2 + 0) * BT + b] = acc0[b];
            slice_sums[(warp * 2 + 1) * BT + b] = acc1[b];
          }
        }
        __syncthreads();
        if (slice == 0) {
          for (int v = 1; v < k_warps; ++v) {
            DB_UNROLL
            for (int b = 0; b < BT; ++b) {
              acc0[b] += slice_sums[((warp + v) * 2 + 0) * BT + b];
              acc1[b] += slice_sums[((warp + v) * 2 + 1) * BT + b];
            }
          }
        }
        __syncthreads();  // slice_sums is the next batch tile's
      }
      if (slice != 0 || !has_pair) continue;
      DB_UNROLL
      for (int b = 0; b < BT; ++b) {
        if (!b_ok[b]) continue;
        const size_t at = (size_t)(b0 + b) * n + row0;
        if (lane == b) gemv_store(y, partial, at, acc0[b]);
        if (lane == BT + b && has_row1) gemv_store(y, partial, at + 1, acc1[b]);
      }
    }
  }
}

template <class T, int BT, bool Carry, int KW>
int gemv_launch(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
                const LaunchSink *sink) {
  if (sink) {
    char name[128];
    std::snprintf(name, sizeof name, "(anonymous namespace)::linear_gemv_kernel<%s, %d, %s, %d>",
                  dtype_cxx_name<T>(), BT, Carry ? "true" : "false", KW);
    return sink_add(*sink, name, plan.grid, plan.threads, plan.smem + plan.static_smem, plan.units);
  }
  float *partial = plan.split_k > 1 ? reinterpret_cast<float *>(p->workspace) : nullptr;
  return DB_LAUNCH((linear_gemv_kernel<T, BT, Carry, KW>), plan.grid, dim3(plan.threads), 0,
                   ctx->stream, reinterpret_cast<const uint4 *>(p->x),
                   reinterpret_cast<const uint4 *>(p->w), reinterpret_cast<T *>(p->y), partial,
                   p->batch, p->n, p->k, plan.per_split);
}

// The instantiations: (config, batch tile, carried loads); each with 1, 2 and 4 warps a row
// pair except the batch tile of 8 (a fallback, never planned by AUTO), which has 1.
#define DB_GEMV_CONFIGS(X) \
  X(kGemvB1, 1, true)      \
  X(kGemvB2, 2, true)      \
  X(kGemvB4, 4, true)

template <class T, int BT, bool Carry>
int gemv_dispatch_kw(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
                     const LaunchSink *sink) {
  switch (plan.k_warps) {
    case 1: return gemv_launch<T, BT, Carry, 1>(ctx, p, plan, sink);
    case 2: return gemv_launch<T, BT, Carry, 2>(ctx, p, plan, sink);
    case 4: return gemv_launch<T, BT, Carry, 4>(ctx, p, plan, sink);
  }
  return db_fail(DB_ERR_INTERNAL, "linear: no GEMV kernel for %d warps a row pair", plan.k_warps);
}

template <class T>
int gemv_dispatch(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
                  const LaunchSink *sink) {
  switch (plan.config) {
#define DB_GEMV_CASE(id, bt, carry) \
  case id: return gemv_dispatch_kw<T, bt, carry>(ctx, p, plan, sink);
    DB_GEMV_CONFIGS(DB_GEMV_CASE)
#undef DB_GEMV_CASE
    case kGemvB8:
      if (plan.k_warps != 1) break;
      return gemv_launch<T, 8, false, 1>(ctx, p, plan, sink);
  }
  return db_fail(DB_ERR_INTERNAL, "linear: no GEMV kernel for config %d, %d warps a row pair",
                 plan.config, plan.k_warps);
}

}  // namespace

namespace db_lin {

int gemv_blocks_per_sm(const db_context *ctx, int config, int *blocks_per_sm) {
  // The warps a pair do not change the registers ptxas gives (within a few; the gate holds
  // the table to each instantiation's own figure).
  static std::atomic<int> cache[4][64];
  switch (config) {
#define DB_GEMV_OCC(id, bt, carry)                                                                 \
  case id:                                                                                         \
    return cached_occupancy(linear_gemv_kernel<__nv_bfloat16, bt, carry, 1>, cache[id],          \
                            ctx->device, kGemvThreads, 0, gemv_sm90_registers(bt),                 \
                            "linear_gemv_kernel", blocks_per_sm);
    DB_GEMV_CONFIGS(DB_GEMV_OCC)
    DB_GEMV_OCC(kGemvB8, 8, false)
#undef DB_GEMV_OCC
  }
  return db_fail(DB_ERR_INTERNAL, "linear: no GEMV kernel for config %d", config);
}

int gemv_run(const db_context *ctx, const db_linear_params *p, const LinearPlan &plan,
             const LaunchSink *sink) {
  if (p->dtype == DB_DTYPE_BF16) return gemv_dispatch<__nv_bfloat16>(ctx, p, plan, sink);
  return gemv_dispatch<__half>(ctx, p, plan, sink);
}

}  // namespace db_lin
