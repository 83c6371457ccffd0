// linear_quant_gemv.cu: the CUDA-core decode linear kernel over quantized weights, batch 1..4
// (batch tiles of 4 in a loop beyond), Y[batch x n] = X[batch x k] * W^T with W in one of the
// formats of decodebench.h, fp32 accumulation.
//
// The layout of the dense GEMV (linear_gemv.cu): a warp owns two rows of W, its lanes stride the
// packed rows in 16-byte vectors, kQGemvUnroll vectors a row and trip (8 vectors a lane, 4 KiB
// a warp). One vector is 16 (8-bit formats) or 32 (4-bit) elements of K, so a 4-bit trip covers
// 4096 elements of a row pair: the Llama-3-8B rows of k 4096 are one trip.
// W is staged through shared memory by cp.async, two trips deep, every lane reading back only
// the 16-byte slots it copied itself (its own wait_group orders them, so there is no barrier):
// the next trip's 8 copies go out before this trip's FMAs and hold no registers. Loaded into
// registers instead, ptxas issued 4 of a trip's 8 W loads before the first wait (2 for mxfp4)
// whatever the register budget (sm_90, batch 1); staged, 16 copies (8 KiB a warp) are in flight
// at the first wait in every instantiation. 8 KiB of shared memory a warp, 32 KiB a block.
// The activations come from L1 (every warp of an SM rereads the same few KiB), loaded just
// before their FMAs.
//
// Decoding is exact and cheap (linear_quant.cuh): e4m3 and e2m1 by placing their bits in an fp32
// and one multiplication by a power of two, integers by the 2^23 trick (one OR, one
// subtraction), never an integer-to-float conversion (a quarter-rate unit on sm_90). Scales: a
// 4-bit vector lies in one group, so its 32 products are summed unscaled and the sum multiplied
// by the group's scale; the 8-bit formats' per-channel scale multiplies the row's total.
#include "linear_quant.cuh"

namespace {

using namespace db_lin;

// The 16 (8-bit) or 32 (4-bit) products of one W vector with the activations xb[0 .. 16 or 32),
// unscaled: sum_j value_j * x_j for fp8 and mxfp4 (values decoded exactly), sum_j (u_j - zero) *
// x_j for the integers.
template <class T, int F>
DB_DEVICE float vector_dot(const uint4 w, const uint4 *xb, float zero) {
  const uint32_t wv[4] = {w.x, w.y, w.z, w.w};
  float sum = 0.0f;
  if (QuantFormat<F>::kFourBit) {
    const float magic = 8388608.0f + zero;
    DB_UNROLL
    for (int q = 0; q < 4; ++q) {  // 8 elements a word: x vector q holds them
      const uint4 xv = db_ld_nc_v4(xb + q);
      const uint32_t xw[4] = {xv.x, xv.y, xv.z, xv.w};
      DB_UNROLL
      for (int h = 0; h < 4; ++h) {
        const float2 x2 = db_dtype<T>::unpack(xw[h]);
        const uint32_t lo = (wv[q] >> (8 * h)) & 0xFu, hi = (wv[q] >> (8 * h + 4)) & 0xFu;
        float a, b;
        if (F == DB_WEIGHT_MXFP4) {
          a = q_e2m1(lo);
          b = q_e2m1(hi);
        } else {
          a = q_uint_minus(lo, magic);
          b = q_uint_minus(hi, magic);
        }
        sum = fmaf(a, x2.x, sum);
        sum = fmaf(b, x2.y, sum);
      }
    }
  } else {
    DB_UNROLL
    for (int q = 0; q < 2; ++q) {  // 8 elements a x vector: two words of W
      const uint4 xv = db_ld_nc_v4(xb + q);
      const uint32_t xw[4] = {xv.x, xv.y, xv.z, xv.w};
      DB_UNROLL
      for (int h = 0; h < 4; ++h) {
        const float2 x2 = db_dtype<T>::unpack(xw[h]);
        const uint32_t word = wv[2 * q + (h >> 1)];
        const uint32_t b0 = (word >> (16 * (h & 1))) & 0xFFu, b1 = (word >> (16 * (h & 1) + 8)) & 0xFFu;
        float a, b;
        if (F == DB_WEIGHT_INT8) {
          // two's complement q + 128 = byte ^ 0x80, so 2^23 + q + 128 - (2^23 + 128) = q
          a = q_uint_minus(b0 ^ 0x80u, 8388608.0f + 128.0f);
          b = q_uint_minus(b1 ^ 0x80u, 8388608.0f + 128.0f);
        } else {
          a = q_e4m3(b0);
          b = q_e4m3(b1);
        }
        sum = fmaf(a, x2.x, sum);
        sum = fmaf(b, x2.y, sum);
      }
    }
  }
  return sum;
}

// The scale of row `row`'s vector `v` (grouped formats), or of the row (the others).
template <int F>
DB_DEVICE float vector_scale(const void *scales, int row, int v, int groups, int vectors_per_group) {
  if (F == DB_WEIGHT_MXFP4)
    return q_e8m0(static_cast<const uint8_t *>(scales)[(size_t)row * groups + v]);
  if (F == DB_WEIGHT_INT4 || F == DB_WEIGHT_INT4_ZP)
    return q_fp16(static_cast<const uint16_t *>(scales)[(size_t)row * groups + v / vectors_per_group]);
  if (F == DB_WEIGHT_FP8_E4M3_TENSOR) return static_cast<const float *>(scales)[0];
  if (F == DB_WEIGHT_FP8_E4M3_BLOCK)
    return static_cast<const float *>(scales)[(size_t)(row / DB_FP8_BLOCK) * groups + v / vectors_per_group];
  return static_cast<const float *>(scales)[row];
}

template <int F>
DB_DEVICE float vector_zero(const uint8_t *zeros, int row, int v, int groups, int vectors_per_group) {
  if (F == DB_WEIGHT_INT4) return 8.0f;
  if (F != DB_WEIGHT_INT4_ZP) return 0.0f;
  const uint32_t byte = zeros[(size_t)(row >> 1) * groups + v / vectors_per_group];
  return (float)((byte >> (4 * (row & 1))) & 0xFu);
}

// The kernel's body for KW warps a row pair (the two kernels below). A block's kQGemvWarps / KW
// pair slots take the row pairs of units blockIdx.x, blockIdx.x + gridDim.x, ...; warp kw of a
// pair takes the 32-vector columns kw, kw + KW, ... of its rows (a trip: kQGemvUnroll of them),
// and the pair's KW sums are added in shared memory in kw order (deterministic). With KW > 1
// every warp of a block runs the same units (a slot past the last pair recomputes a real pair
// and stores nothing), since the sums need the block's barriers.
template <class T, int F, int BT, int KW>
DB_DEVICE void quant_gemv_body(const uint4 *__restrict__ x, const uint4 *__restrict__ w,
                               const void *__restrict__ scales, const uint8_t *__restrict__ zeros,
                               T *__restrict__ y, int batch, int n, int k, int group) {
  using Fmt = QuantFormat<F>;
  constexpr int kStep = 32 * KW;                     // vectors from one of a lane's columns to the next
  constexpr int kStride = kStep * kQGemvUnroll;      // vectors a lane's trip advances
  constexpr int kPairs = kQGemvWarps / KW;           // row pairs a block's unit
  static_assert(kQGemvWarps % KW == 0, "KW divides the block's warps");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = warp % KW;
  const int vectors = k / Fmt::kPerVector;           // 16-byte vectors a W row
  const int x_vectors = k >> 3;                      // 16-byte vectors an X row
  const int groups = Fmt::kGrouped ? quant_groups(F, k, group) : 1;  // scales a row
  const int vectors_per_group = Fmt::kGrouped ? group / Fmt::kPerVector : 1;
  const int row_pairs = (n + 1) >> 1;
  const int pair_end = KW == 1 ? row_pairs : (row_pairs + kPairs - 1) / kPairs * kPairs;
  DB_SHARED(uint4, stage, kQGemvWarps * kQGemvStageVectors);
  DB_SHARED(float, pair_sums, KW == 1 ? 1 : kQGemvWarps * 2 * BT);

  for (int pair_slot = blockIdx.x * kPairs + warp / KW; pair_slot < pair_end;
       pair_slot += gridDim.x * kPairs) {
    const bool active = KW == 1 || pair_slot < row_pairs;
    const int pair = active ? pair_slot : row_pairs - 1;
    const int row0 = pair * 2;
    const bool has_row1 = row0 + 1 < n;
    const int row1 = has_row1 ? row0 + 1 : row0;
    const uint4 *w0 = w + (size_t)row0 * vectors;
    const uint4 *w1 = w + (size_t)row1 * vectors;

    for (int b0 = 0; b0 < batch; b0 += BT) {
      bool b_ok[BT];
      const uint4 *xb[BT];
      float acc0[BT], acc1[BT];
      DB_UNROLL
      for (int b = 0; b < BT; ++b) {
        b_ok[b] = b0 + b < batch;
        xb[b] = x + (size_t)(b_ok[b] ? b0 + b : b0) * x_vectors;
        acc0[b] = 0.0f;
        acc1[b] = 0.0f;
      }
      // W goes through shared memory by cp.async, two trips deep, each lane reading back only
      // the vectors it copied (so no barrier): the next trip's 8 copies are issued before this
      // trip's FMAs and take no registers, so ptxas cannot trade them for register pressure
      // (with W loaded into registers it issued 4 of a trip's 8 before the first wait).
      uint4 *const slots = stage + (size_t)warp * kQGemvStageVectors;
      auto issue = [&](int slot, int c) {
        DB_UNROLL
        for (int u = 0; u < kQGemvUnroll; ++u) {
          const int v = c + kStep * u;
          uint4 *d0 = slots + (slot * 2 * kQGemvUnroll + 2 * u) * 32 + lane, *d1 = d0 + 32;
          if (v < vectors) {
            db_cp_async_16(d0, w0 + v);
            db_cp_async_16(d1, w1 + v);
          } else {
            *d0 = make_uint4(0, 0, 0, 0);
            *d1 = make_uint4(0, 0, 0, 0);
          }
        }
        db_cp_async_commit();
      };
      issue(0, lane + 32 * kw);
      int slot = 0;
      for (int c = lane + 32 * kw; c < vectors; c += kStride, slot ^= 1) {
        if (c + kStride < vectors) issue(slot ^ 1, c + kStride);
        else db_cp_async_commit();  // an empty group: the wait below always leaves one
        db_cp_async_wait<1>();
        uint4 wa[kQGemvUnroll], wb[kQGemvUnroll];
        DB_UNROLL
        for (int u = 0; u < kQGemvUnroll; ++u) {
          const uint4 *d0 = slots + (slot * 2 * kQGemvUnroll + 2 * u) * 32 + lane;
          wa[u] = d0[0];
          wb[u] = d0[32];
        }
        // No branch in the trip: a vector past the row's end has a zero W slot, read as zero
        // through a zero scale, and rereads the last vector's activations.
        DB_UNROLL
        for (int u = 0; u < kQGemvUnroll; ++u) {
          const int v = db_min(c + kStep * u, vectors - 1);
          const bool valid = c + kStep * u < vectors;
          const float z0 = vector_zero<F>(zeros, row0, v, groups, vectors_per_group);
          const float z1 = vector_zero<F>(zeros, row1, v, groups, vectors_per_group);
          float s0 = 1.0f, s1 = 1.0f;
          if (Fmt::kGrouped) {
            s0 = valid ? vector_scale<F>(scales, row0, v, groups, vectors_per_group) : 0.0f;
            s1 = valid ? vector_scale<F>(scales, row1, v, groups, vectors_per_group) : 0.0f;
          }
          DB_UNROLL
          for (int b = 0; b < BT; ++b) {
            if (!b_ok[b]) continue;
            const uint4 *xv = xb[b] + (size_t)v * (Fmt::kPerVector / 8);
            const float d0 = vector_dot<T, F>(wa[u], xv, z0);
            const float d1 = vector_dot<T, F>(wb[u], xv, z1);
            if (Fmt::kGrouped) {
              acc0[b] = fmaf(d0, s0, acc0[b]);
              acc1[b] = fmaf(d1, s1, acc1[b]);
            } else {  // a zero W vector decodes to zeros in the 8-bit formats
              acc0[b] += d0;
              acc1[b] += d1;
            }
          }
        }
      }
      db_cp_async_wait<0>();  // this warp's slots are free for its next row pair
      DB_UNROLL
      for (int b = 0; b < BT; ++b) {
        acc0[b] = db_warp_sum(acc0[b]);
        acc1[b] = db_warp_sum(acc1[b]);
      }
      if (KW > 1) {
        // The pair's KW sums, added in kw order by its warp 0.
        float *const own = pair_sums + (size_t)warp * 2 * BT;
        if (lane == 0) {
          DB_UNROLL
          for (int b = 0; b < BT; ++b) own[b] = acc0[b], own[BT + b] = acc1[b];
        }
        __syncthreads();
        if (kw == 0) {
          DB_UNROLL
          for (int b = 0; b < BT; ++b) {
            acc0[b] = own[b];
            acc1[b] = own[BT + b];
            DB_UNROLL
            for (int q = 1; q < KW; ++q) {
              acc0[b] += own[q * 2 * BT + b];
              acc1[b] += own[q * 2 * BT + BT + b];
            }
          }
        }
        __syncthreads();  // read before the next batch tile's or unit's sums
      }
      const float r0 = Fmt::kGrouped ? 1.0f : vector_scale<F>(scales, row0, 0, 1, 1);
      const float r1 = Fmt::kGrouped ? 1.0f : vector_scale<F>(scales, row1, 0, 1, 1);
      if (!active || kw != 0) continue;
      DB_UNROLL
      for (int b = 0; b < BT; ++b) {
        if (!b_ok[b]) continue;
        const size_t at = (size_t)(b0 + b) * n + row0;
        if (lane == b) y[at] = db_dtype<T>::from_float(acc0[b] * r0);
        if (lane == BT + b && has_row1) y[at + 1] = db_dtype<T>::from_float(acc1[b] * r1);
      }
    }
  }
}

template <class T, int F, int BT>
__global__ __launch_bounds__(kQGemvThreads, kQGemvBlocksPerSm) void linear_quant_gemv_kernel(
    const uint4 *__restrict__ x, const uint4 *__restrict__ w, const void *__restrict__ scales,
    const uint8_t *__restrict__ zeros, T *__restrict__ y, int batch, int n, int k, int group) {
  quant_gemv_body<T, F, BT, 1>(x, w, scales, zeros, y, batch, n, k, group);
}

// Two warps a row pair: where one a pair does not fill whole waves (quant_linear's plan).
template <class T, int F, int BT>
__global__ __launch_bounds__(kQGemvThreads, kQGemvBlocksPerSm) void linear_quant_gemv_split_kernel(
    const uint4 *__restrict__ x, const uint4 *__restrict__ w, const void *__restrict__ scales,
    const uint8_t *__restrict__ zeros, T *__restrict__ y, int batch, int n, int k, int group) {
  quant_gemv_body<T, F, BT, 2>(x, w, scales, zeros, y, batch, n, k, group);
}

template <class T, int F, int BT>
int quant_gemv_launch(const db_context *ctx, const db_linear_params *p, const QuantPlan &plan,
                      const LaunchSink *sink) {
  const bool split = plan.k_warps == 2;
  if (!split && plan.k_warps != 1)
    return db_fail(DB_ERR_INTERNAL, "linear: no quantized GEMV for %d warps a row pair", plan.k_warps);
  const char *kernel = split ? "linear_quant_gemv_split_kernel" : "linear_quant_gemv_kernel";
  if (sink) {
    char name[128];
    std::snprintf(name, sizeof name, "(anonymous namespace)::%s<%s, %d, %d>", kernel,
                  dtype_cxx_name<T>(), F, BT);
    return sink_add(*sink, name, plan.grid, plan.threads, plan.smem, plan.units);
  }
  return db_launch(kernel, split ? linear_quant_gemv_split_kernel<T, F, BT> : linear_quant_gemv_kernel<T, F, BT>,
                   plan.grid, dim3(plan.threads), (size_t)plan.smem, ctx->stream,
                   reinterpret_cast<const uint4 *>(p->x), reinterpret_cast<const uint4 *>(p->w),
                   reinterpret_cast<const void *>(p->scales),
                   reinterpret_cast<const uint8_t *>(p->zeros), reinterpret_cast<T *>(p->y),
                   p->batch, p->n, p->k, plan.group);
}

template <class T, int F>
int quant_gemv_tile(const db_context *ctx, const db_linear_params *p, const QuantPlan &plan,
                    const LaunchSink *sink) {
  switch (plan.batch_tile) {
    case 1: return quant_gemv_launch<T, F, 1>(ctx, p, plan, sink);
    case 2: return quant_gemv_launch<T, F, 2>(ctx, p, plan, sink);
    case 4: return quant_gemv_launch<T, F, 4>(ctx, p, plan, sink);
  }
  return db_fail(DB_ERR_INTERNAL, "linear: no quantized GEMV for batch tile %d", plan.batch_tile);
}

template <class T>
int quant_gemv_dtype(const db_context *ctx, const db_linear_params *p, const QuantPlan &plan,
                     const LaunchSink *sink) {
  return DB_DISPATCH_WEIGHT_FORMAT(p->weight_format, F, quant_gemv_tile<T, F>(ctx, p, plan, sink));
}

}  // namespace

namespace db_lin {

int quant_gemv_run(const db_context *ctx, const db_linear_params *p, const QuantPlan &plan,
                   const LaunchSink *sink) {
  if (p->dtype == DB_DTYPE_BF16) return quant_gemv_dtype<__nv_bfloat16>(ctx, p, plan, sink);
  return quant_gemv_dtype<__half>(ctx, p, plan, sink);
}

}  // namespace db_lin
