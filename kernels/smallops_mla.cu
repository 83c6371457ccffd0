// smallops_mla.cu: the small op of an MLA decode step between its projections and the attention
// (decodebench.h, db_mla_rope_append): kv_a_layernorm on the latent, rotary on the shared key
// and on every query head's rotary part, the latent row appended to the cache.
//
// Grid (batch, 1 + head blocks): block (b, 0) normalises sequence b's 512 latent elements (four
// a thread, an fp32 sum of squares reduced over the block) and rotates its k_pe, writing the
// 576-element cache row; block (b, 1 + j) rotates query heads 8j..8j+7 (256 pairs over 128
// threads). Every block first computes the 32 cos and sin of its sequence's position in double
// precision, as db_rope_kv_append does (an fp32 angle is off by 0.008 rad at position 131072).
// Loads are of single elements: q_pe sits at any stride in q_b_proj's output, and at DeepSeek-V3's
// shape the op moves about 17 KB a sequence, so the launch, not the bandwidth, is its cost.
#include "smallops_common.cuh"

namespace {

constexpr int kMlaThreads = 128;
constexpr int kMlaHeadsPerBlock = 8;
constexpr int kMlaHalf = DB_MLA_ROPE_DIM / 2;
constexpr int kMlaLatentPerThread = DB_MLA_LATENT_DIM / kMlaThreads;
static_assert(DB_MLA_LATENT_DIM % kMlaThreads == 0, "the latent splits evenly over the block");

struct MlaRopeArgs {
  const uint16_t *kv_a, *kv_norm, *q_pe;
  uint16_t *q_out, *cache;
  const int32_t *positions;
  long long kv_a_stride, q_row_stride, q_head_stride;
  int q_heads, capacity;
  float eps;
  double theta;
};

DB_DEVICE void mla_turn(float &x1, float &x2, float c, float s) {
  const float a = x1 * c - x2 * s, b = x2 * c + x1 * s;
  x1 = a;
  x2 = b;
}

template <class T>
__global__ void __launch_bounds__(kMlaThreads) mla_rope_append_kernel(const MlaRopeArgs a) {
  DB_SHARED(float, cos_s, kMlaHalf);
  DB_SHARED(float, sin_s, kMlaHalf);
  DB_SHARED(float, warp_sums, kMlaThreads / 32);
  const int b = blockIdx.x, tid = threadIdx.x;
  const int pos = a.positions[b];
  if (pos < 0 || pos >= a.capacity) return; /* skipped: the block leaves together */
  if (tid < kMlaHalf) {
    const double inv = pow(a.theta, -2.0 * tid / DB_MLA_ROPE_DIM);
    const double angle = fmod((double)pos * inv, 6.283185307179586);
    cos_s[tid] = (float)cos(angle);
    sin_s[tid] = (float)sin(angle);
  }
  __syncthreads();
  if (blockIdx.y == 0) {
    const uint16_t *src = a.kv_a + b * a.kv_a_stride;
    uint16_t *row = a.cache + ((long long)b * a.capacity + pos) * DB_MLA_QK_DIM;
    float c[kMlaLatentPerThread];
    float sumsq = 0.0f;
    DB_UNROLL
    for (int u = 0; u < kMlaLatentPerThread; ++u) {
      c[u] = so_to_float<T>(src[tid + u * kMlaThreads]);
      sumsq += c[u] * c[u];
    }
    sumsq = db_warp_sum(sumsq);
    if ((tid & 31) == 0) warp_sums[tid >> 5] = sumsq;
    __syncthreads();
    float total = 0.0f;
    DB_UNROLL
    for (int w = 0; w < kMlaThreads / 32; ++w) total += warp_sums[w];
    const float inv_rms = rsqrtf(total / (float)DB_MLA_LATENT_DIM + a.eps);
    DB_UNROLL
    for (int u = 0; u < kMlaLatentPerThread; ++u) {
      const int i = tid + u * kMlaThreads;
      row[i] = so_from_float<T>(c[u] * inv_rms * so_to_float<T>(a.kv_norm[i]));
    }
    if (tid < kMlaHalf) {
      float x1 = so_to_float<T>(src[DB_MLA_LATENT_DIM + tid]);
      float x2 = so_to_float<T>(src[DB_MLA_LATENT_DIM + kMlaHalf + tid]);
      mla_turn(x1, x2, cos_s[tid], sin_s[tid]);
      row[DB_MLA_LATENT_DIM + tid] = so_from_float<T>(x1);
      row[DB_MLA_LATENT_DIM + kMlaHalf + tid] = so_from_float<T>(x2);
    }
    return;
  }
  const int h0 = (blockIdx.y - 1) * kMlaHeadsPerBlock;
  for (int u = tid; u < kMlaHeadsPerBlock * kMlaHalf; u += kMlaThreads) {
    const int h = h0 + u / kMlaHalf, i = u % kMlaHalf;
    if (h >= a.q_heads) break;
    const uint16_t *src = a.q_pe + b * a.q_row_stride + h * a.q_head_stride;
    uint16_t *dst = a.q_out + ((long long)b * a.q_heads + h) * DB_MLA_QK_DIM + DB_MLA_LATENT_DIM;
    float x1 = so_to_float<T>(src[i]), x2 = so_to_float<T>(src[i + kMlaHalf]);
    mla_turn(x1, x2, cos_s[i], sin_s[i]);
    dst[i] = so_from_float<T>(x1);
    dst[i + kMlaHalf] = so_from_float<T>(x2);
  }
}

}  // namespace

extern "C" int db_mla_rope_append(db_context *ctx, const db_mla_rope_append_params *p) {
  return db_guard("db_mla_rope_append", [&]() -> int {
    const char *fn = "db_mla_rope_append";
    DB_CHECK(db_enter(ctx));
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
    const db_kv_cache &c = p->cache;
    if (c.dtype != DB_DTYPE_BF16 && c.dtype != DB_DTYPE_FP16)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: cache dtype %d (%s) unsupported: want bf16 or fp16", fn,
                     c.dtype, db_dtype_name(c.dtype));
    if (c.layout != DB_KV_CONTIGUOUS)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                     "%s: cache layout %d unsupported: want DB_KV_CONTIGUOUS 0 (a paged latent cache takes "
                     "db_mla_kv_append)",
                     fn, c.layout);
    if (c.kv_heads != 1 || c.head_dim != DB_MLA_QK_DIM)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                     "%s: cache.kv_heads %d, head_dim %d: the latent cache has 1 head of %d (want 1, %d)", fn,
                     c.kv_heads, c.head_dim, DB_MLA_QK_DIM, DB_MLA_QK_DIM);
    if (c.capacity < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: cache capacity %d must be >= 1", fn, c.capacity);
    if (c.v != 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: cache.v must be 0 (the latent rows are in cache.k)", fn);
    if (!c.k || !p->kv_a || !p->kv_norm || !p->q_pe || !p->q_out || !p->positions)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "%s: cache.k, kv_a, kv_norm, q_pe, q_out and positions must be device addresses", fn);
    if ((c.k | p->kv_a | p->kv_norm | p->q_pe | p->q_out) % 2 != 0 || p->positions % 4 != 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: the 16-bit buffers must be 2-byte aligned, positions 4-byte", fn);
    if (p->batch < 1 || p->batch > DB_MAX_BATCH)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: batch %d out of range 1..%d (DB_MAX_BATCH)", fn, p->batch,
                     DB_MAX_BATCH);
    if (p->q_heads < 1 || p->q_heads > DB_MLA_MAX_HEADS)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: q_heads %d out of range 1..%d (DB_MLA_MAX_HEADS)", fn,
                     p->q_heads, DB_MLA_MAX_HEADS);
    if (!(p->eps > 0.0f)) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: eps %g must be > 0", fn, (double)p->eps);
    if (p->rope.scaling != DB_ROPE_DEFAULT || p->rope.rotary_dim != DB_MLA_ROPE_DIM || !(p->rope.theta > 0.0f))
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                     "%s: rope scaling %d, rotary_dim %d, theta %g: want DB_ROPE_DEFAULT 0, %d and a theta > 0", fn,
                     p->rope.scaling, p->rope.rotary_dim, (double)p->rope.theta, DB_MLA_ROPE_DIM);
    const int kv_stride = p->kv_a_row_stride ? p->kv_a_row_stride : DB_MLA_QK_DIM;
    if (kv_stride < DB_MLA_QK_DIM)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: kv_a_row_stride %d must be 0 or at least %d", fn,
                     p->kv_a_row_stride, DB_MLA_QK_DIM);
    if (p->q_pe_head_stride < DB_MLA_ROPE_DIM || p->q_pe_row_stride < 1)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "%s: q_pe_head_stride %d must be at least %d and q_pe_row_stride %d at least 1", fn,
                     p->q_pe_head_stride, DB_MLA_ROPE_DIM, p->q_pe_row_stride);
    MlaRopeArgs a;
    a.kv_a = reinterpret_cast<const uint16_t *>(p->kv_a);
    a.kv_norm = reinterpret_cast<const uint16_t *>(p->kv_norm);
    a.q_pe = reinterpret_cast<const uint16_t *>(p->q_pe);
    a.q_out = reinterpret_cast<uint16_t *>(p->q_out);
    a.cache = reinterpret_cast<uint16_t *>(c.k);
    a.positions = reinterpret_cast<const int32_t *>(p->positions);
    a.kv_a_stride = kv_stride;
    a.q_row_stride = p->q_pe_row_stride;
    a.q_head_stride = p->q_pe_head_stride;
    a.q_heads = p->q_heads;
    a.capacity = c.capacity;
    a.eps = p->eps;
    a.theta = p->rope.theta;
    const dim3 grid((unsigned)p->batch, 1u + (unsigned)db_ceil_div((uint64_t)p->q_heads, kMlaHeadsPerBlock));
    if (c.dtype == DB_DTYPE_BF16)
      return DB_LAUNCH((mla_rope_append_kernel<__nv_bfloat16>), grid, dim3(kMlaThreads), 0, ctx->stream, a);
    return DB_LAUNCH((mla_rope_append_kernel<__half>), grid, dim3(kMlaThreads), 0, ctx->stream, a);
  });
}
