// smallops_moe.cu: the mixture-of-experts small ops around the expert linears (decodebench.h,
// db_moe_route, db_moe_group, db_moe_combine).
//
// route: one warp per token; each lane holds experts lane, lane + 32, ... (at most 12), the top
//   k are chosen on the logits themselves (the softmax and the sigmoid are monotone, so the
//   choice is the same for the softmax modes and TOPK_SIGMOID, and exact ties go to the lower
//   expert) or, for SIGMOID_TOPK, on sigmoid(logit) + correction bias; then the k weights are
//   computed in fp32 from the winners' logits, read again. SIGMOID_TOPK's group limit: the
//   warp writes its biased scores to shared memory (4 warps x 384 floats, 6 KiB a block), lane
//   g scans group g for its two best, and groups_kept warp-wide argmaxes keep the best groups;
//   the experts of the others are taken out before the top k. The masked experts are out of
//   the choice altogether (the reference implementations of DeepSeek-V3 mask them to -inf;
//   Hugging Face's masks them to 0, which differs only where fewer than top_k kept experts score
//   above 0).
// group: one warp for the whole batch, deterministic: the slots go by in tiles of 32, each lane
//   finds with 32 shuffles how many lanes before it chose its expert (its rank) and how many did
//   in all; the first lane of each expert in the tile advances that expert's counter. Two passes
//   (count, then place after a prefix sum) give a stable grouping: within an expert the slots
//   ascend. A decode batch has at most DB_MAX_BATCH * top_k slots (8192 for top-8), 256 tiles,
//   a few microseconds; typical batches take a handful of tiles. The optional gather of the
//   token rows in expert order is a second, elementwise launch.
// combine: one thread per 16-byte chunk of a token's output reads its k expert rows, sums
//   weight * y in fp32 in slot order (so the result does not depend on the grouping's order)
//   and rounds once.
#include "smallops_common.cuh"

namespace {

constexpr unsigned kRouteThreads = 128;
constexpr int kMaxPerLane = DB_MOE_MAX_EXPERTS / 32;
constexpr unsigned kElemThreads = 128;

DB_DEVICE float so_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* The warp's best (largest key, then lowest index) of each lane's (key, index). */
DB_DEVICE void moe_warp_best(uint32_t &key, int &index) {
  DB_UNROLL
  for (int offset = 16; offset > 0; offset >>= 1) {
    const uint32_t k2 = __shfl_xor_sync(0xffffffffu, key, offset);
    const int i2 = __shfl_xor_sync(0xffffffffu, index, offset);
    if (k2 > key || (k2 == key && i2 < index)) {
      key = k2;
      index = i2;
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kRouteThreads)
    moe_route_kernel(const uint16_t *logits, const float *correction_bias, int32_t *topk_ids, float *topk_weights,
                     int batch, int experts, int top_k, int mode, int renormalize, int groups, int groups_kept,
                     float scaling) {
  /* SIGMOID_TOPK with groups: each warp's biased scores, for the lane of a group to scan */
  DB_SHARED(float, choice, (kRouteThreads / 32) * DB_MOE_MAX_EXPERTS);
  const int token = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
  if (token >= batch) return; /* a whole warp leaves together: the grid is counted in warps */
  const uint16_t *row = logits + (long long)token * experts;
  const bool sigmoid_choice = mode == DB_MOE_SIGMOID_TOPK;
  /* v: what the choice ranks (the logit, or SIGMOID_TOPK's biased score) */
  float v[kMaxPerLane];
  bool taken[kMaxPerLane];
  float row_max = -INFINITY;
  DB_UNROLL
  for (int j = 0; j < kMaxPerLane; ++j) {
    const int e = lane + 32 * j;
    v[j] = e < experts ? so_to_float<T>(row[e]) : -INFINITY;
    taken[j] = e >= experts;
    row_max = fmaxf(row_max, v[j]);
    if (sigmoid_choice && e < experts) v[j] = so_sigmoid(v[j]) + (correction_bias ? correction_bias[e] : 0.0f);
  }
  float all_sum = 0.0f;
  if (mode == DB_MOE_SOFTMAX_TOPK) {
    DB_UNROLL
    for (int offset = 16; offset > 0; offset >>= 1)
      row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, offset));
    DB_UNROLL
    for (int j = 0; j < kMaxPerLane; ++j)
      if (lane + 32 * j < experts) all_sum += expf(v[j] - row_max);
    all_sum = db_warp_sum(all_sum);
  }
  if (sigmoid_choice && groups > 1) {
    /* group g (lane g) scores the sum of its two best biased scores; the groups_kept best
     * groups (ties to the lower group) stay, the other groups' experts are taken out */
    float *mine = choice + (threadIdx.x >> 5) * DB_MOE_MAX_EXPERTS;
    DB_UNROLL
    for (int j = 0; j < kMaxPerLane; ++j)
      if (lane + 32 * j < experts) mine[lane + 32 * j] = v[j];
    __syncwarp();
    const int size = experts / groups;
    float group_score = 0.0f;
    if (lane < groups) {
      float first = mine[lane * size], second = mine[lane * size + 1];
      if (so_order_key(second) > so_order_key(first)) {
        const float t = first;
        first = second;
        second = t;
      }
      for (int i = 2; i < size; ++i) {
        const float x = mine[lane * size + i];
        if (so_order_key(x) > so_order_key(first)) {
          second = first;
          first = x;
        } else if (so_order_key(x) > so_order_key(second)) {
          second = x;
        }
      }
      group_score = first + second;
    }
    __syncwarp();
    unsigned kept = 0;
    for (int g = 0; g < groups_kept; ++g) {
      uint32_t key = (lane < groups && !(kept >> lane & 1u)) ? so_order_key(group_score) : 0u;
      int index = lane < groups ? lane : 0x7fffffff;
      moe_warp_best(key, index);
      kept |= 1u << index;
    }
    DB_UNROLL
    for (int j = 0; j < kMaxPerLane; ++j) {
      const int e = lane + 32 * j;
      if (e < experts && !(kept >> (e / size) & 1u)) taken[j] = true;
    }
  }

  float my_weight = 0.0f, top_sum = 0.0f, top_max = 0.0f;
  int my_id = 0;
  for (int k = 0; k < top_k; ++k) {
    uint32_t key = 0;
    int index = 0x7fffffff, slot = -1;
    DB_UNROLL
    for (int j = 0; j < kMaxPerLane; ++j) {
      const uint32_t kj = so_order_key(v[j]);
      if (!taken[j] && (kj > key || (kj == key && lane + 32 * j < index))) {
        key = kj;
        index = lane + 32 * j;
        slot = j;
      }
    }
    uint32_t best_key = key;
    int best_index = index;
    moe_warp_best(best_key, best_index);
    if (best_index == index && slot >= 0) {
      DB_UNROLL
      for (int j = 0; j < kMaxPerLane; ++j)
        if (j == slot) taken[j] = true;
    }
    /* the winner's logit, read again (one address for the whole warp) */
    const float logit = so_to_float<T>(row[best_index]);
    if (k == 0) top_max = logit;
    /* softmax-then-top-k weighs by the whole row's softmax; top-k-then-softmax by the k alone
     * (its max is the first winner's logit); the sigmoid modes by the unbiased score, which
     * Llama 4 rounds to the dtype */
    float w;
    switch (mode) {
      case DB_MOE_SOFTMAX_TOPK: w = expf(logit - row_max); break;
      case DB_MOE_TOPK_SOFTMAX: w = expf(logit - top_max); break;
      case DB_MOE_SIGMOID_TOPK: w = so_sigmoid(logit); break;
      default: w = so_to_float<T>(so_from_float<T>(so_sigmoid(logit))); break;
    }
    top_sum += w;
    if (lane == k) {
      my_id = best_index;
      my_weight = w;
    }
  }
  if (lane < top_k) {
    float denom = 1.0f;
    if (mode == DB_MOE_SOFTMAX_TOPK) denom = renormalize ? top_sum : all_sum;
    if (mode == DB_MOE_TOPK_SOFTMAX) denom = top_sum;
    if (mode == DB_MOE_SIGMOID_TOPK && renormalize) denom = top_sum + 1e-20f;
    topk_ids[(long long)token * top_k + lane] = my_id;
    topk_weights[(long long)token * top_k + lane] = my_weight / denom * scaling;
  }
}

/* The lanes of this warp whose expert equals e before this lane (rank) and in all (count). */
DB_DEVICE void moe_tile_rank(int e, int lane, int &rank, int &count) {
  rank = 0;
  count = 0;
  for (int l = 0; l < 32; ++l) {
    const int other = __shfl_sync(0xffffffffu, e, l);
    if (other == e) {
      ++count;
      if (l < lane) ++rank;
    }
  }
}

__global__ void __launch_bounds__(32)
    moe_group_kernel(const int32_t *topk_ids, int32_t *counts_out, int32_t *offsets_out, int32_t *sorted_slots,
                     int32_t *slot_rows, int slots, int experts) {
  DB_SHARED(int, counter, DB_MOE_MAX_EXPERTS + 1);
  const int lane = threadIdx.x;
  for (int e = lane; e < experts; e += 32) counter[e] = 0;
  __syncwarp();
  for (int pass = 0; pass < 2; ++pass) {
    for (int s0 = 0; s0 < slots; s0 += 32) {
      const int s = s0 + lane;
      int e = s < slots ? topk_ids[s] : -1;
      if (e < 0 || e >= experts) e = -1; /* dropped */
      int rank, count;
      moe_tile_rank(e, lane, rank, count);
      const int base = e >= 0 ? counter[e] : 0;
      __syncwarp();
      if (e >= 0 && rank == 0) counter[e] = base + count;
      if (pass == 1 && s < slots) {
        const int row = e >= 0 ? base + rank : -1;
        slot_rows[s] = row;
        if (row >= 0) sorted_slots[row] = s;
      }
      __syncwarp();
    }
    if (pass == 0) {
      /* counts, then the exclusive prefix sum as each expert's first row */
      if (lane == 0) {
        int sum = 0;
        for (int e = 0; e < experts; ++e) {
          const int c = counter[e];
          counts_out[e] = c;
          offsets_out[e] = sum;
          counter[e] = sum;
          sum += c;
        }
        offsets_out[experts] = sum;
        counter[DB_MOE_MAX_EXPERTS] = sum;
      }
      __syncwarp();
    }
  }
  /* rows past the last expert's (slots whose expert was dropped) hold no slot */
  for (int r = counter[DB_MOE_MAX_EXPERTS] + lane; r < slots; r += 32) sorted_slots[r] = -1;
}

__global__ void __launch_bounds__(kElemThreads)
    moe_gather_kernel(const uint4 *x, const int32_t *sorted_slots, uint4 *x_sorted, int slots, int top_k, int chunks) {
  const long long total = (long long)slots * chunks;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const int r = (int)(i / chunks), c = (int)(i % chunks);
    const int s = sorted_slots[r];
    if (s >= 0) db_st_v4(x_sorted + i, db_ld_nc_v4(x + (long long)(s / top_k) * chunks + c));
  }
}

template <class T>
__global__ void __launch_bounds__(kElemThreads)
    moe_gather_weighted_kernel(const uint4 *x, const int32_t *sorted_slots, const float *row_weights, uint4 *x_sorted,
                               int slots, int top_k, int chunks) {
  const long long total = (long long)slots * chunks;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const int r = (int)(i / chunks), c = (int)(i % chunks);
    const int s = sorted_slots[r];
    if (s < 0) continue;
    const float w = row_weights[s];
    float e[8];
    so_unpack8<T>(db_ld_nc_v4(x + (long long)(s / top_k) * chunks + c), e);
    DB_UNROLL
    for (int j = 0; j < 8; ++j) e[j] *= w;
    db_st_v4(x_sorted + i, so_pack8<T>(e));
  }
}

template <class T>
__global__ void __launch_bounds__(kElemThreads)
    moe_combine_kernel(const uint4 *y_sorted, const int32_t *slot_rows, const float *weights, uint4 *out, int batch,
                       int top_k, int chunks) {
  const long long total = (long long)batch * chunks;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const int t = (int)(i / chunks), c = (int)(i % chunks);
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < top_k; ++j) {
      const int row = slot_rows[(long long)t * top_k + j];
      if (row < 0) continue;
      const float w = weights ? weights[(long long)t * top_k + j] : 1.0f;
      float y[8];
      so_unpack8<T>(db_ld_stream_v4(y_sorted + (long long)row * chunks + c), y);
      DB_UNROLL
      for (int e = 0; e < 8; ++e) acc[e] = fmaf(w, y[e], acc[e]);
    }
    db_st_v4(out + i, so_pack8<T>(acc));
  }
}

int moe_check_topk(const char *fn, int32_t top_k, int32_t experts) {
  if (experts < 1 || experts > DB_MOE_MAX_EXPERTS)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: experts %d out of range 1..%d", fn, experts, DB_MOE_MAX_EXPERTS);
  if (top_k < 1 || top_k > experts || top_k > DB_MOE_MAX_TOP_K)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: top_k %d out of range 1..%d (experts %d, at most %d)", fn, top_k,
                   std::min(experts, DB_MOE_MAX_TOP_K), experts, DB_MOE_MAX_TOP_K);
  return DB_OK;
}

}  // namespace

extern "C" int db_moe_route(db_context *ctx, const db_moe_route_params *p) {
  return db_guard("db_moe_route", [&]() -> int {
    const char *fn = "db_moe_route";
    DB_CHECK(db_enter(ctx));
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
    DB_CHECK(so_check_dtype(fn, p->dtype));
    DB_CHECK(so_check_batch(fn, "batch", p->batch));
    DB_CHECK(moe_check_topk(fn, p->top_k, p->experts));
    if (p->mode < DB_MOE_SOFTMAX_TOPK || p->mode > DB_MOE_TOPK_SIGMOID)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "%s: mode %d unknown (want SOFTMAX_TOPK 0, TOPK_SOFTMAX 1, SIGMOID_TOPK 2 or TOPK_SIGMOID 3)", fn,
                     p->mode);
    if (p->renormalize != 0 && p->renormalize != 1)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: renormalize %d must be 0 or 1", fn, p->renormalize);
    if (!(p->scaling >= 0.0f && p->scaling <= 3.0e38f))
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: scaling %g must be finite and >= 0 (0 means 1)", fn,
                     (double)p->scaling);
    const bool sigmoid_choice = p->mode == DB_MOE_SIGMOID_TOPK;
    if (!sigmoid_choice && (p->correction_bias != 0 || p->groups > 1))
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: correction_bias and groups are for SIGMOID_TOPK (mode %d)", fn,
                     p->mode);
    const int groups = p->groups > 1 ? p->groups : 1, kept = p->groups > 1 ? p->groups_kept : 1;
    if (p->groups < 0 || p->groups > DB_MOE_MAX_GROUPS || p->experts % groups != 0 ||
        (groups > 1 && p->experts / groups < 2))
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                     "%s: groups %d unsupported for %d experts (want 0 or 1, or 2..%d dividing the experts into "
                     "groups of 2 or more)",
                     fn, p->groups, p->experts, DB_MOE_MAX_GROUPS);
    if (groups > 1 && (kept < 1 || kept > groups || kept * (p->experts / groups) < p->top_k))
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                     "%s: groups_kept %d out of range (want 1..%d groups holding at least top_k %d of their %d experts "
                     "each)",
                     fn, p->groups_kept, groups, p->top_k, p->experts / groups);
    DB_CHECK(so_check_ptr(fn, "logits", p->logits, 2));
    DB_CHECK(so_check_ptr(fn, "topk_ids", p->topk_ids, 4));
    DB_CHECK(so_check_ptr(fn, "topk_weights", p->topk_weights, 4));
    if (p->correction_bias != 0) DB_CHECK(so_check_ptr(fn, "correction_bias", p->correction_bias, 4));
    const unsigned blocks = (unsigned)db_ceil_div((uint64_t)p->batch * 32, kRouteThreads);
    auto logits = reinterpret_cast<const uint16_t *>(p->logits);
    auto bias = reinterpret_cast<const float *>(p->correction_bias);
    auto ids = reinterpret_cast<int32_t *>(p->topk_ids);
    auto weights = reinterpret_cast<float *>(p->topk_weights);
    const float scaling = p->scaling == 0.0f ? 1.0f : p->scaling;
    if (p->dtype == DB_DTYPE_BF16)
      return DB_LAUNCH((moe_route_kernel<__nv_bfloat16>), dim3(blocks), dim3(kRouteThreads), 0, ctx->stream, logits,
                       bias, ids, weights, p->batch, p->experts, p->top_k, p->mode, p->renormalize, groups, kept,
                       scaling);
    return DB_LAUNCH((moe_route_kernel<__half>), dim3(blocks), dim3(kRouteThreads), 0, ctx->stream, logits, bias, ids,
                     weights, p->batch, p->experts, p->top_k, p->mode, p->renormalize, groups, kept, scaling);
  });
}

extern "C" int db_moe_group(db_context *ctx, const db_moe_group_params *p) {
  return db_guard("db_moe_group", [&]() -> int {
    const char *fn = "db_moe_group";
    DB_CHECK(db_enter(ctx));
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
    DB_CHECK(so_check_batch(fn, "batch", p->batch));
    DB_CHECK(moe_check_topk(fn, p->top_k, p->experts));
    DB_CHECK(so_check_ptr(fn, "topk_ids", p->topk_ids, 4));
    DB_CHECK(so_check_ptr(fn, "expert_counts", p->expert_counts, 4));
    DB_CHECK(so_check_ptr(fn, "expert_offsets", p->expert_offsets, 4));
    DB_CHECK(so_check_ptr(fn, "sorted_slots", p->sorted_slots, 4));
    DB_CHECK(so_check_ptr(fn, "slot_rows", p->slot_rows, 4));
    if (p->x != 0) {
      DB_CHECK(so_check_dtype(fn, p->dtype));
      DB_CHECK(so_check_row(fn, "hidden", p->hidden));
      DB_CHECK(so_check_ptr(fn, "x", p->x, 16));
      DB_CHECK(so_check_ptr(fn, "x_sorted", p->x_sorted, 16));
    }
    const int slots = p->batch * p->top_k;
    auto sorted = reinterpret_cast<int32_t *>(p->sorted_slots);
    DB_CHECK(DB_LAUNCH(moe_group_kernel, dim3(1), dim3(32), 0, ctx->stream,
                       reinterpret_cast<const int32_t *>(p->topk_ids), reinterpret_cast<int32_t *>(p->expert_counts),
                       reinterpret_cast<int32_t *>(p->expert_offsets), sorted,
                       reinterpret_cast<int32_t *>(p->slot_rows), slots, p->experts));
    if (p->x == 0) return DB_OK;
    const int chunks = p->hidden / kVec;
    const unsigned blocks = so_blocks((uint64_t)slots * chunks, kElemThreads);
    auto x = reinterpret_cast<const uint4 *>(p->x);
    auto xs = reinterpret_cast<uint4 *>(p->x_sorted);
    if (p->row_weights == 0)
      return DB_LAUNCH(moe_gather_kernel, dim3(blocks), dim3(kElemThreads), 0, ctx->stream, x, (const int32_t *)sorted,
                       xs, slots, p->top_k, chunks);
    DB_CHECK(so_check_ptr(fn, "row_weights", p->row_weights, 4));
    auto rw = reinterpret_cast<const float *>(p->row_weights);
    if (p->dtype == DB_DTYPE_BF16)
      return DB_LAUNCH((moe_gather_weighted_kernel<__nv_bfloat16>), dim3(blocks), dim3(kElemThreads), 0, ctx->stream,
                       x, (const int32_t *)sorted, rw, xs, slots, p->top_k, chunks);
    return DB_LAUNCH((moe_gather_weighted_kernel<__half>), dim3(blocks), dim3(kElemThreads), 0, ctx->stream, x,
                     (const int32_t *)sorted, rw, xs, slots, p->top_k, chunks);
  });
}

extern "C" int db_moe_combine(db_context *ctx, const db_moe_combine_params *p) {
  return db_guard("db_moe_combine", [&]() -> int {
    const char *fn = "db_moe_combine";
    DB_CHECK(db_enter(ctx));
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
    DB_CHECK(so_check_dtype(fn, p->dtype));
    DB_CHECK(so_check_batch(fn, "batch", p->batch));
    if (p->top_k < 1 || p->top_k > DB_MOE_MAX_TOP_K)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: top_k %d out of range 1..%d", fn, p->top_k, DB_MOE_MAX_TOP_K);
    DB_CHECK(so_check_row(fn, "hidden", p->hidden));
    DB_CHECK(so_check_ptr(fn, "y_sorted", p->y_sorted, 16));
    DB_CHECK(so_check_ptr(fn, "slot_rows", p->slot_rows, 4));
    if (p->topk_weights != 0) DB_CHECK(so_check_ptr(fn, "topk_weights", p->topk_weights, 4));
    DB_CHECK(so_check_ptr(fn, "out", p->out, 16));
    const int chunks = p->hidden / kVec;
    const unsigned blocks = so_blocks((uint64_t)p->batch * chunks, kElemThreads);
    auto y = reinterpret_cast<const uint4 *>(p->y_sorted);
    auto rows = reinterpret_cast<const int32_t *>(p->slot_rows);
    auto w = reinterpret_cast<const float *>(p->topk_weights);
    auto out = reinterpret_cast<uint4 *>(p->out);
    if (p->dtype == DB_DTYPE_BF16)
      return DB_LAUNCH((moe_combine_kernel<__nv_bfloat16>), dim3(blocks), dim3(kElemThreads), 0, ctx->stream, y, rows,
                       w, out, p->batch, p->top_k, chunks);
    return DB_LAUNCH((moe_combine_kernel<__half>), dim3(blocks), dim3(kElemThreads), 0, ctx->stream, y, rows, w, out,
                     p->batch, p->top_k, chunks);
  });
}
