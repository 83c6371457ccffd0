// smallops_rope.cu: rotary position embedding fused with the KV append (decodebench.h,
// db_rope_kv_append).
//
// Grid (batch, head groups): each block serves kRopeHeadsPerBlock of one sequence's heads,
// counting q heads, then k heads, then v heads, so a batch-1 Llama-3-8B step (32 + 8 + 8 heads)
// runs 12 blocks. A block first computes the sequence's cos and sin for each of the r/2 pairs
// in double precision (the frequency with its scaling, the angle position * inv_freq reduced
// mod 2 pi), since fp32 loses the angle at long positions: at position 131072 one fp32 ulp of
// the angle is 0.008 rad. That is at most 128 double sin/cos per block, small next to the
// loads. Then every thread takes 16-byte chunks: a q or k chunk of the first half with its
// partner chunk r/2 later (rotated, stored in place for q, into the cache for k), a k chunk
// past r (copied), or a v chunk (copied). When r/2 is not a multiple of 8 (partial rotary
// such as head_dim 80 with rotary_dim 20) the rotated part goes element by element.
#include "attention_fp8.cuh"
#include "smallops_common.cuh"

namespace {

constexpr unsigned kRopeThreads = 128;
constexpr int kRopeHeadsPerBlock = 4;
constexpr int kMaxHalf = 128; /* head_dim 256 */

struct RopeArgs {
  uint16_t *q, *q_out; /* q_out: where the rotated q goes, packed; null: in place */
  long long q_stride, kv_stride; /* elements from one sequence's q (k_new, v_new) to the next's */
  const uint16_t *k_new, *v_new;
  uint16_t *k_cache, *v_cache; /* an fp8 cache: byte addresses, one byte an element */
  float k_scale, v_scale;       /* fp8 cache: the quantisation's divisors, per tensor */
  const float *k_scales, *v_scales; /* fp8 cache: per KV head (0 entries: the tensor's), or null */
  const int32_t *positions, *page_table;
  int q_heads, kv_heads, head_dim, rotary_dim;
  int paged, capacity, page_shift, num_pages, pages_per_seq;
  /* the frequencies */
  double theta, factor, low_freq_factor, high_freq_factor, original;
  int scaling;
};

/* The row (in head_dim elements) of token t of KV head h of sequence b in the cache, or -1 when
 * the token lies outside it: the layouts of db_kv_cache, as db_kv_append writes them. */
DB_DEVICE long long rope_cache_row(const RopeArgs &a, int b, int h, int t) {
  if (a.paged) {
    if (t >= (a.pages_per_seq << a.page_shift)) return -1;
    const int page = a.page_table[(long long)b * a.pages_per_seq + (t >> a.page_shift)];
    if (page < 0 || page >= a.num_pages) return -1;
    return (((long long)page * a.kv_heads + h) << a.page_shift) + (t & ((1 << a.page_shift) - 1));
  }
  if (t >= a.capacity) return -1;
  return ((long long)b * a.kv_heads + h) * a.capacity + t;
}

/* inv_freq of pair i at a sequence length of len tokens, as Hugging Face's rope_init functions
 * compute it (in double here). */
DB_DEVICE double rope_inv_freq(const RopeArgs &a, int i, int len) {
  const double d = (double)a.rotary_dim, e = 2.0 * i / d;
  double theta = a.theta;
  if (a.scaling == DB_ROPE_DYNAMIC_NTK && len > a.original)
    theta *= pow(a.factor * len / a.original - (a.factor - 1.0), d / (d - 2.0));
  const double inv = pow(theta, -e);
  switch (a.scaling) {
    case DB_ROPE_LINEAR: return inv / a.factor;
    case DB_ROPE_LLAMA3: {
      const double two_pi = 6.283185307179586;
      const double wavelen = two_pi / inv;
      const double low_wavelen = a.original / a.low_freq_factor, high_wavelen = a.original / a.high_freq_factor;
      if (wavelen < high_wavelen) return inv;
      if (wavelen > low_wavelen) return inv / a.factor;
      const double smooth = (a.original / wavelen - a.low_freq_factor) / (a.high_freq_factor - a.low_freq_factor);
      return (1.0 - smooth) * inv / a.factor + smooth * inv;
    }
    default: return inv;
  }
}

/* Pair (x1, x2) turned by the angle with (cos, sin). */
DB_DEVICE void rope_turn(float &x1, float &x2, float c, float s) {
  const float a = x1 * c - x2 * s, b = x2 * c + x1 * s;
  x1 = a;
  x2 = b;
}

/* Stores of eight or one element into a K or V cache row: 16-bit as they are, fp8 quantised
 * (attn_e4m3_pack8: x / scale, rounded to nearest even, saturated) from the values rounded to T,
 * which is what a 16-bit cache would have held. */
template <class T, bool Fp8>
struct RopeCacheRow {
  void *row; /* the token's row in the cache */
  float scale;
  DB_DEVICE void put8(int e0, const float (&x)[8]) const {
    if constexpr (Fp8) {
      float r[8];
      DB_UNROLL
      for (int e = 0; e < 8; ++e) r[e] = so_to_float<T>(so_from_float<T>(x[e]));
      *reinterpret_cast<uint2 *>(static_cast<unsigned char *>(row) + e0) = attn_e4m3_pack8(r, scale);
    } else {
      db_st_v4(reinterpret_cast<uint4 *>(static_cast<uint16_t *>(row) + e0), so_pack8<T>(x));
    }
  }
  DB_DEVICE void put1(int e, float x) const {
    if constexpr (Fp8)
      static_cast<unsigned char *>(row)[e] = (unsigned char)attn_e4m3_from_float(so_to_float<T>(so_from_float<T>(x)) / scale);
    else
      static_cast<uint16_t *>(row)[e] = so_from_float<T>(x);
  }
};

template <class T, bool Vec, bool Fp8>
__global__ void __launch_bounds__(kRopeThreads) rope_append_kernel(const RopeArgs a) {
  DB_SHARED(float, cos_s, kMaxHalf);
  DB_SHARED(float, sin_s, kMaxHalf);
  const int b = blockIdx.x, tid = threadIdx.x;
  const int pos = a.positions[b];
  if (pos < 0 || rope_cache_row(a, b, 0, pos) < 0) return; /* skipped: the block leaves together */
  const int half = a.rotary_dim / 2, D = a.head_dim;
  for (int i = tid; i < half; i += kRopeThreads) {
    const double angle = fmod((double)pos * rope_inv_freq(a, i, pos + 1), 6.283185307179586);
    cos_s[i] = (float)cos(angle);
    sin_s[i] = (float)sin(angle);
  }
  __syncthreads();

  const int heads = a.q_heads + 2 * a.kv_heads;
  const int h0 = blockIdx.y * kRopeHeadsPerBlock, h1 = db_min(heads, h0 + kRopeHeadsPerBlock);
  const int rot_units = Vec ? half / kVec : half;  /* per q or k head */
  const int tail_chunks = (D - a.rotary_dim) / kVec; /* Vec: rotary_dim is a multiple of 16 */
  for (int h = h0; h < h1; ++h) {
    const bool is_q = h < a.q_heads, is_v = h >= a.q_heads + a.kv_heads;
    const int kvh = is_q ? 0 : (is_v ? h - a.q_heads - a.kv_heads : h - a.q_heads);
    const uint16_t *src = is_q ? a.q + b * a.q_stride + (long long)h * D
                               : (is_v ? a.v_new : a.k_new) + b * a.kv_stride + (long long)kvh * D;
    uint16_t *dst = is_q ? (a.q_out ? a.q_out + ((long long)b * a.q_heads + h) * D : const_cast<uint16_t *>(src))
                         : (is_v ? a.v_cache : a.k_cache) + rope_cache_row(a, b, kvh, pos) * D;
    const bool moved = !is_q || dst != src; /* the part past the rotary dims goes with it */
    if constexpr (Fp8) {
      if (!is_q) { /* k or v into an fp8 cache: the same values, quantised at the store */
        const RopeCacheRow<T, true> out{
            static_cast<void *>(reinterpret_cast<unsigned char *>(is_v ? a.v_cache : a.k_cache) +
                                rope_cache_row(a, b, kvh, pos) * D),
            is_v ? attn_e4m3_head_scale(a.v_scales, kvh, a.v_scale) : attn_e4m3_head_scale(a.k_scales, kvh, a.k_scale)};
        const uint4 *s4 = reinterpret_cast<const uint4 *>(src);
        const int first = is_v ? 0 : a.rotary_dim; /* copied: all of v, k past the rotary part */
        if (Vec || is_v) {
          for (int c = first / kVec + tid; c < D / kVec; c += kRopeThreads) {
            float x[8];
            so_unpack8<T>(db_ld_stream_v4(s4 + c), x);
            out.put8(c * kVec, x);
          }
        } else {
          for (int i = first + tid; i < D; i += kRopeThreads) out.put1(i, so_to_float<T>(src[i]));
        }
        if (is_v) continue;
        for (int u = tid; u < rot_units; u += kRopeThreads) {
          if (Vec) {
            float x1[8], x2[8];
            so_unpack8<T>(db_ld_stream_v4(s4 + u), x1);
            so_unpack8<T>(db_ld_stream_v4(s4 + u + half / kVec), x2);
            DB_UNROLL
            for (int e = 0; e < 8; ++e) rope_turn(x1[e], x2[e], cos_s[u * kVec + e], sin_s[u * kVec + e]);
            out.put8(u * kVec, x1);
            out.put8(u * kVec + half, x2);
          } else {
            float x1 = so_to_float<T>(src[u]), x2 = so_to_float<T>(src[u + half]);
            rope_turn(x1, x2, cos_s[u], sin_s[u]);
            out.put1(u, x1);
            out.put1(u + half, x2);
          }
        }
        continue;
      }
    }
    if (is_v) {
      for (int c = tid; c < D / kVec; c += kRopeThreads)
        db_st_v4(reinterpret_cast<uint4 *>(dst) + c, db_ld_stream_v4(reinterpret_cast<const uint4 *>(src) + c));
      continue;
    }
    /* k past the rotary part is copied into the cache (q's, to q_out; in place it stays) */
    if (moved) {
      if (Vec) {
        for (int c = tid; c < tail_chunks; c += kRopeThreads) {
          const int off = a.rotary_dim / kVec + c;
          db_st_v4(reinterpret_cast<uint4 *>(dst) + off, db_ld_stream_v4(reinterpret_cast<const uint4 *>(src) + off));
        }
      } else {
        for (int i = a.rotary_dim + tid; i < D; i += kRopeThreads) dst[i] = src[i];
      }
    }
    for (int u = tid; u < rot_units; u += kRopeThreads) {
      if (Vec) {
        /* q is read with a coherent load: it is rotated in place */
        const uint4 *s4 = reinterpret_cast<const uint4 *>(src);
        const uint4 lo = is_q ? s4[u] : db_ld_stream_v4(s4 + u);
        const uint4 hi = is_q ? s4[u + half / kVec] : db_ld_stream_v4(s4 + u + half / kVec);
        float x1[8], x2[8];
        so_unpack8<T>(lo, x1);
        so_unpack8<T>(hi, x2);
        DB_UNROLL
        for (int e = 0; e < 8; ++e) rope_turn(x1[e], x2[e], cos_s[u * kVec + e], sin_s[u * kVec + e]);
        db_st_v4(reinterpret_cast<uint4 *>(dst) + u, so_pack8<T>(x1));
        db_st_v4(reinterpret_cast<uint4 *>(dst) + u + half / kVec, so_pack8<T>(x2));
      } else {
        float x1 = so_to_float<T>(src[u]), x2 = so_to_float<T>(src[u + half]);
        rope_turn(x1, x2, cos_s[u], sin_s[u]);
        dst[u] = so_from_float<T>(x1);
        dst[u + half] = so_from_float<T>(x2);
      }
    }
  }
}

int rope_validate(const char *fn, const db_rope_append_params &p) {
  const db_kv_cache &c = p.cache;
  if (c.dtype == DB_DTYPE_FP8_E4M3) {
    DB_CHECK(so_check_dtype(fn, c.act_dtype));
    const auto ok = [](float s) { return s > 0.0f && !std::isinf(s); };
    if (!ok(c.k_scale) || !ok(c.v_scale))
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: fp8 cache scales k_scale %g, v_scale %g must be finite and > 0",
                     fn, (double)c.k_scale, (double)c.v_scale);
    if ((c.k_scales | c.v_scales) % 4 != 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: per-head scales k_scales, v_scales must be 4-byte aligned (or 0)", fn);
  } else {
    DB_CHECK(so_check_dtype(fn, c.dtype));
    if (c.act_dtype != 0 && c.act_dtype != c.dtype)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: act_dtype %d (%s) of a %s cache unsupported: want 0 or %s", fn,
                     c.act_dtype, db_dtype_name(c.act_dtype), db_dtype_name(c.dtype), db_dtype_name(c.dtype));
  }
  DB_CHECK(so_check_batch(fn, "batch", p.batch));
  if (p.q_heads < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: q_heads %d must be >= 1", fn, p.q_heads);
  if (c.kv_heads < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: kv_heads %d must be >= 1", fn, c.kv_heads);
  switch (c.head_dim) {
    case 64: case 80: case 96: case 128: case 256: break;
    default:
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: head_dim %d unsupported (want 64, 80, 96, 128 or 256)", fn,
                     c.head_dim);
  }
  const db_rope &r = p.rope;
  if (r.rotary_dim < 0 || r.rotary_dim > c.head_dim || r.rotary_dim % 2 != 0)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                   "%s: rotary_dim %d unsupported (want an even number from 0 (none) to head_dim %d)", fn,
                   r.rotary_dim, c.head_dim);
  if (p.row_stride != 0 &&
      (p.row_stride < 0 || p.row_stride % kVec != 0 || p.row_stride < p.q_heads * c.head_dim ||
       p.row_stride < c.kv_heads * c.head_dim))
    return db_fail(DB_ERR_INVALID_ARGUMENT,
                   "%s: row_stride %d must be 0 (packed) or a multiple of %d of at least q_heads %d x head_dim %d",
                   fn, p.row_stride, kVec, p.q_heads, c.head_dim);
  if (p.q_out != 0) DB_CHECK(so_check_ptr(fn, "q_out", p.q_out, 16));
  if (!(r.theta > 1.0f) || !std::isfinite(r.theta))
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: rope theta %g must be finite and > 1", fn, (double)r.theta);
  switch (r.scaling) {
    case DB_ROPE_DEFAULT: break;
    case DB_ROPE_DYNAMIC_NTK:
      if (r.rotary_dim != 0 && r.rotary_dim < 4)
        return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: dynamic NTK scaling needs rotary_dim >= 4, got %d", fn,
                       r.rotary_dim);
      [[fallthrough]];
    case DB_ROPE_LINEAR:
    case DB_ROPE_LLAMA3:
      if (!(r.factor >= 1.0f) || !std::isfinite(r.factor))
        return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: rope scaling factor %g must be finite and >= 1", fn,
                       (double)r.factor);
      if (r.scaling != DB_ROPE_LINEAR && r.original_max_positions < 1)
        return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: original_max_positions %d must be >= 1", fn,
                       r.original_max_positions);
      if (r.scaling == DB_ROPE_LLAMA3 &&
          !(r.low_freq_factor > 0.0f && r.high_freq_factor > r.low_freq_factor && std::isfinite(r.high_freq_factor)))
        return db_fail(DB_ERR_INVALID_ARGUMENT,
                       "%s: Llama-3 rope needs 0 < low_freq_factor < high_freq_factor, got %g and %g", fn,
                       (double)r.low_freq_factor, (double)r.high_freq_factor);
      break;
    default:
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "%s: rope scaling %d unknown (want DEFAULT 0, LINEAR 1, DYNAMIC_NTK 2 or LLAMA3 3)", fn, r.scaling);
  }
  DB_CHECK(so_check_ptr(fn, "q", p.q, 16));
  DB_CHECK(so_check_ptr(fn, "k_new", p.k_new, 16));
  DB_CHECK(so_check_ptr(fn, "v_new", p.v_new, 16));
  DB_CHECK(so_check_ptr(fn, "positions", p.positions, 4));
  DB_CHECK(so_check_ptr(fn, "cache.k", c.k, 16));
  DB_CHECK(so_check_ptr(fn, "cache.v", c.v, 16));
  if (c.layout == DB_KV_CONTIGUOUS) {
    if (c.capacity < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: cache capacity %d must be >= 1", fn, c.capacity);
  } else if (c.layout == DB_KV_PAGED) {
    if (c.page_size < 16 || c.page_size > 256 || (c.page_size & (c.page_size - 1)) != 0)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: page_size %d unsupported (want a power of two from 16 to 256)",
                     fn, c.page_size);
    if (c.num_pages < 1 || c.pages_per_seq < 1)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: num_pages %d and pages_per_seq %d must be >= 1", fn, c.num_pages,
                     c.pages_per_seq);
    if ((int64_t)c.pages_per_seq * c.page_size > INT32_MAX)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: %d pages of %d tokens overflow a sequence", fn, c.pages_per_seq,
                     c.page_size);
    DB_CHECK(so_check_ptr(fn, "cache.page_table", c.page_table, 4));
  } else {
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: layout %d unknown (want DB_KV_CONTIGUOUS 0 or DB_KV_PAGED 1)", fn,
                   c.layout);
  }
  return DB_OK;
}

}  // namespace

extern "C" int db_rope_kv_append(db_context *ctx, const db_rope_append_params *p) {
  return db_guard("db_rope_kv_append", [&]() -> int {
    const char *fn = "db_rope_kv_append";
    DB_CHECK(db_enter(ctx));
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
    DB_CHECK(rope_validate(fn, *p));
    const db_kv_cache &c = p->cache;
    RopeArgs a;
    a.q = reinterpret_cast<uint16_t *>(p->q);
    a.q_out = reinterpret_cast<uint16_t *>(p->q_out);
    a.q_stride = p->row_stride != 0 ? p->row_stride : (long long)p->q_heads * c.head_dim;
    a.kv_stride = p->row_stride != 0 ? p->row_stride : (long long)c.kv_heads * c.head_dim;
    a.k_new = reinterpret_cast<const uint16_t *>(p->k_new);
    a.v_new = reinterpret_cast<const uint16_t *>(p->v_new);
    a.k_cache = reinterpret_cast<uint16_t *>(c.k);
    a.v_cache = reinterpret_cast<uint16_t *>(c.v);
    a.positions = reinterpret_cast<const int32_t *>(p->positions);
    a.page_table = reinterpret_cast<const int32_t *>(c.page_table);
    a.q_heads = p->q_heads;
    a.kv_heads = c.kv_heads;
    a.head_dim = c.head_dim;
    a.rotary_dim = p->rope.rotary_dim;
    a.paged = c.layout == DB_KV_PAGED;
    a.capacity = c.capacity;
    a.page_shift = 0;
    while (a.paged && (1 << a.page_shift) < c.page_size) ++a.page_shift;
    a.num_pages = c.num_pages;
    a.pages_per_seq = c.pages_per_seq;
    a.k_scale = c.k_scale;
    a.v_scale = c.v_scale;
    a.k_scales = reinterpret_cast<const float *>(c.k_scales);
    a.v_scales = reinterpret_cast<const float *>(c.v_scales);
    a.theta = p->rope.theta;
    a.factor = p->rope.scaling == DB_ROPE_DEFAULT ? 1.0 : p->rope.factor;
    a.low_freq_factor = p->rope.low_freq_factor;
    a.high_freq_factor = p->rope.high_freq_factor;
    a.original = p->rope.original_max_positions;
    a.scaling = p->rope.scaling;
    const int heads = p->q_heads + 2 * c.kv_heads;
    const dim3 grid((unsigned)p->batch, (unsigned)db_ceil_div(heads, kRopeHeadsPerBlock));
    const bool vec = (a.rotary_dim / 2) % kVec == 0;
    const bool fp8 = c.dtype == DB_DTYPE_FP8_E4M3;
    const bool bf16 = (fp8 ? c.act_dtype : c.dtype) == DB_DTYPE_BF16;
    const dim3 block(kRopeThreads);
#define DB_ROPE_LAUNCH(T, V, F) DB_LAUNCH((rope_append_kernel<T, V, F>), grid, block, 0, ctx->stream, a)
    if (fp8) {
      if (vec) return bf16 ? DB_ROPE_LAUNCH(__nv_bfloat16, true, true) : DB_ROPE_LAUNCH(__half, true, true);
      return bf16 ? DB_ROPE_LAUNCH(__nv_bfloat16, false, true) : DB_ROPE_LAUNCH(__half, false, true);
    }
    if (vec) return bf16 ? DB_ROPE_LAUNCH(__nv_bfloat16, true, false) : DB_ROPE_LAUNCH(__half, true, false);
    return bf16 ? DB_ROPE_LAUNCH(__nv_bfloat16, false, false) : DB_ROPE_LAUNCH(__half, false, false);
#undef DB_ROPE_LAUNCH
  });
}
