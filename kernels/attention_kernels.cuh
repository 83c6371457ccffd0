/*
 * attention_kernels.cuh: the device side of decode attention: the split-KV decode kernel, the
 * log-sum-exp combine of its splits and the KV append, with their compile-time layouts and
 * argument structs. attention.cu validates, plans, dispatches and launches them.
 *
 * Included by attention.cu only: like every kernel in kernels/, these live in an anonymous
 * namespace, so a second .cu file that included this header would compile its own copy.
 *
 * The decode kernel: one block of 128 threads per (sequence, KV head, head chunk, split). A head
 * chunk is the whole query group of the KV head when the group has at most 16 heads (every GQA
 * model we know of: 1 for multi-head, 4 to 8 for Llama / Mistral / Qwen, 7 for Qwen2.5-7B), so
 * each K and V element is read from memory once per step; larger groups (multi-query with many
 * heads) run in chunks of 16 heads that read the same tiles, mostly from L2. Per tile of T tokens:
 *
 *   1. cp.async copies the next tile's K and V rows into shared memory (16-byte copies, two
 *      stages, so one tile is in flight while the block computes on the other);
 *   2. scores: thread (token, part) dots its token's K row with every head's query, over a slice
 *      of the head dim; the slices are summed in the softmax step;
 *   3. online softmax: one warp per head keeps the running max m and sum l (log2 domain: the
 *      query is pre-multiplied by scale * log2(e), so exponentials are exp2f), rescales by
 *      alpha = exp2(m_old - m_new) and writes the tile's probabilities;
 *   4. P.V: thread (16-byte chunk of the head dim, head slice, token lane) accumulates
 *      p * v for up to 8 heads in fp32 registers, converting each V chunk once for all of them.
 *
 * Shared memory rows are padded by 16 bytes so that the eight lanes of each quarter-warp phase of
 * an LDS.128 land on distinct banks for every supported head dim (row strides of 36, 44, 52, 68
 * and 132 words).
 *
 * Split-KV: when batch * kv_heads * head_chunks blocks cannot fill the card, each sequence's
 * context is cut into num_splits chunks of split_tokens (a multiple of T) and every split writes
 * its unnormalised fp32 accumulator with its (m, l) to the workspace; attention_combine_kernel
 * merges them: out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s with M the largest m of a
 * split that saw a token. Splits past a sequence's length see no token and contribute nothing.
 *
 * Tile sizes are chosen on paper, not yet timed on a GPU: T = 64 tokens for
 * head dim 64, 32 for 80-128, 16 for 256, so one stage of K and V is 11-18 KiB and a block takes
 * 23-58 KiB of shared memory. With 156-188 registers for 8 or 16 heads (3 or 2 blocks per SM)
 * and 63-126 for fewer, an H100/H200 SM keeps about 35-70 KiB of KV in flight. The fp32
 * CUDA-core math does 2 * group FMAs per K or V element: for group 8 that is about as long as
 * the element's share of HBM time on an H200, so group 8 is at the edge of memory-bound; the
 * tensor-core variant (attention_mma_kernels.cuh, DB_ATTENTION_MMA) is the alternative, chosen
 * per call; AUTO picks this kernel until a card has timed both.
 */
#ifndef DECODEBENCH_ATTENTION_KERNELS_CUH
#define DECODEBENCH_ATTENTION_KERNELS_CUH

#include <cmath>

#include "common.cuh"

namespace {

constexpr int kAttnThreads = 128;
constexpr int kCombineThreads = 64;
constexpr int kMaxSplits = 1024;       /* db_attention_params.num_splits */

DB_DEVICE int imin(int a, int b) { return a < b ? a : b; }
DB_DEVICE int imax(int a, int b) { return a > b ? a : b; }

DB_DEVICE float attn_warp_max(float v) {
  DB_UNROLL
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/* Eight 16-bit elements (16 bytes, 16-byte aligned) widened to fp32. */
template <class E>
DB_DEVICE void attn_unpack8(const uint4 raw, float (&out)[8]) {
  const float2 a = db_dtype<E>::unpack(raw.x), b = db_dtype<E>::unpack(raw.y);
  const float2 c = db_dtype<E>::unpack(raw.z), d = db_dtype<E>::unpack(raw.w);
  out[0] = a.x, out[1] = a.y, out[2] = b.x, out[3] = b.y;
  out[4] = c.x, out[5] = c.y, out[6] = d.x, out[7] = d.y;
}

/* ---- the decode kernel ------------------------------------------------------------------------ */

/* Compile-time layout of one (element type, head dim D, heads per block GP) instantiation. */
template <int D, int GP>
struct AttnConfig {
  static constexpr int kThreads = kAttnThreads;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kChunks = D / 8;  /* 16-byte chunks per K or V row */
  static constexpr int kTile = D <= 64 ? 64 : (D <= 128 ? 32 : 16);
  static constexpr int kRow = D + 8;     /* shared row stride in elements: +16 bytes, see top */
  /* scores: thread (token, part); part p sums chunks p, p + kParts, ... */
  static constexpr int kParts = kThreads / kTile;
  /* softmax: warp w owns heads w, w + kWarps, ... */
  static constexpr int kHeadsPerWarp = (GP + kWarps - 1) / kWarps;
  static constexpr int kTokensPerLane = (kTile + 31) / 32;
  /* P.V: thread (chunk, head slice, token lane) holds kHeadsPerThread x 8 accumulators */
  static constexpr int kHeadsPerThread = GP < 8 ? GP : 8;
  static constexpr int kHeadSlices = GP / kHeadsPerThread;
  static constexpr int kTokenLanes = kThreads / (kChunks * kHeadSlices);
  static constexpr int kPvThreads = kTokenLanes * kChunks * kHeadSlices;

  /* Shared memory (bytes; every region starts 16-byte aligned). */
  static constexpr size_t kTileElems = (size_t)kTile * kRow;   /* one of K or V, one stage */
  static constexpr size_t kKVBytes = 2 /*stages*/ * 2 /*K, V*/ * kTileElems * 2;
  static constexpr size_t kReduceBytes = (size_t)kTokenLanes * GP * D * 4; /* epilogue, reuses KV */
  static constexpr size_t kBigBytes = kKVBytes > kReduceBytes ? kKVBytes : kReduceBytes;
  static constexpr size_t kQOffset = kBigBytes;                                 /* [GP][D] f32 */
  static constexpr size_t kScoreOffset = kQOffset + (size_t)GP * D * 4;        /* [kParts][GP][kTile] */
  static constexpr size_t kProbOffset = kScoreOffset + (size_t)kParts * GP * kTile * 4; /* [kTile][GP] */
  static constexpr size_t kStatOffset = kProbOffset + (size_t)kTile * GP * 4;  /* alpha, m, l [GP] */
  static constexpr size_t kSmemBytes = kStatOffset + (size_t)3 * GP * 4;

  static_assert(D % 8 == 0, "head dim must be a whole number of 16-byte chunks");
  static_assert(kThreads % kTile == 0, "the score step maps threads onto whole tiles");
  static_assert(kTokenLanes >= 1, "P.V needs at least one thread per (chunk, head slice)");
  static_assert(GP % kHeadsPerThread == 0, "heads per block split evenly into slices");
  static_assert((kRow * 2) % 16 == 0 && (kScoreOffset % 16) == 0 && (kProbOffset % 16) == 0 &&
                    (kStatOffset % 16) == 0,
                "16-byte aligned shared regions");
};

/* Everything a decode launch needs; passed by value. */
struct AttnArgs {
  const uint4 *q;           /* [batch, q_heads, D] */
  void *out;                /* [batch, q_heads, D] */
  const int32_t *context_lens;
  const int32_t *page_table;
  const unsigned char *k, *v; /* byte addresses of the caches */
  float *ws_acc;            /* [batch * q_heads][num_splits][D] */
  float2 *ws_ml;            /* [batch * q_heads][num_splits]: (m in log2 units, l) */
  int32_t q_heads, kv_heads, group, head_chunks;
  int32_t max_context, num_splits, split_tokens;
  int32_t paged, capacity, page_shift, num_pages, pages_per_seq;
  float q_scale;            /* softmax scale * log2(e) */
};

/* The one definition of the two cache layouts, for the attention kernels and the append: the
 * row (in head_dim elements) of token t of KV head h, seq_head = b * kv_heads + h, or -1 for a
 * page id outside the cache (that row is never touched). table is sequence b's row of the page
 * table (paged only). Args is AttnArgs or AppendArgs. */
template <class Args>
DB_DEVICE long long kv_cache_row(const Args &a, const int32_t *table, int seq_head, int h, int t) {
  if (a.paged) {
    const int page = table[t >> a.page_shift];
    if (page < 0 || page >= a.num_pages) return -1;
    return (((long long)page * a.kv_heads + h) << a.page_shift) + (t & ((1 << a.page_shift) - 1));
  }
  return (long long)seq_head * a.capacity + t;
}

/* Minimum blocks per SM: without one, ptxas (nvcc 11.8, sm_80/sm_90) capped some
 * instantiations at 64 or 128 registers and spilled. 3 (a 168-register cap) holds every
 * instantiation of up to 8 heads without a spill, so 3 blocks fit an SM by registers; 16 heads
 * need up to 188 and spill under 168, so they get 2. Minimum 4 (128 registers) spills 24-124
 * bytes in every 8- and 16-head instantiation. */
template <int GP>
constexpr int attn_min_blocks() { return GP >= 16 ? 2 : 3; }

template <class E, int D, int GP>
__global__ void __launch_bounds__(kAttnThreads, attn_min_blocks<GP>())
    attention_decode_kernel(const AttnArgs a) {
  using C = AttnConfig<D, GP>;
  DB_EXTERN_SHARED(unsigned char, smem);
  E *kv_s = reinterpret_cast<E *>(smem);                       /* [stage][K, V][kTile][kRow] */
  float *red_s = reinterpret_cast<float *>(smem);              /* epilogue: [lanes][GP][D] */
  float *q_s = reinterpret_cast<float *>(smem + C::kQOffset);
  float *score_s = reinterpret_cast<float *>(smem + C::kScoreOffset);
  float *prob_s = reinterpret_cast<float *>(smem + C::kProbOffset);
  float *alpha_s = reinterpret_cast<float *>(smem + C::kStatOffset);
  float *m_s = alpha_s + GP;
  float *l_s = m_s + GP;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int split = blockIdx.y;
  const int head_chunk = blockIdx.x % a.head_chunks;
  const int seq_head = blockIdx.x / a.head_chunks; /* b * kv_heads + h */
  const int h = seq_head % a.kv_heads, b = seq_head / a.kv_heads;
  const int heads = imin(GP, a.group - head_chunk * GP); /* real heads in this block */
  const int hq0 = h * a.group + head_chunk * GP;         /* its first query head */

  /* A length outside 0..max_context is the caller's bug; clamping keeps reads inside the cache. */
  const int len = imax(0, imin(a.context_lens[b], a.max_context));
  const int t_begin = split * a.split_tokens;
  const int t_end = imin(t_begin + a.split_tokens, len);
  const int ntiles = t_end > t_begin ? (t_end - t_begin + C::kTile - 1) / C::kTile : 0;

  /* Queries to shared memory as fp32, pre-scaled; the padding heads of a partial chunk get 0. */
  for (int i = tid; i < GP * C::kChunks; i += C::kThreads) {
    const int g = i / C::kChunks, c = i % C::kChunks;
    float x[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (g < heads) {
      attn_unpack8<E>(db_ld_nc_v4(a.q + ((size_t)b * a.q_heads + hq0 + g) * C::kChunks + c), x);
      DB_UNROLL
      for (int e = 0; e < 8; ++e) x[e] *= a.q_scale;
    }
    float4 *dst = reinterpret_cast<float4 *>(q_s + g * D + c * 8);
    dst[0] = make_float4(x[0], x[1], x[2], x[3]);
    dst[1] = make_float4(x[4], x[5], x[6], x[7]);
  }

  /* Byte offset of token t's row of this KV head in either layout. A page id outside the cache
   * gives -1: the row is not read (the output is then garbage, never a fault). */
  const int32_t *table = a.paged ? a.page_table + (size_t)b * a.pages_per_seq : nullptr;
  auto row_bytes = [&](int t) -> long long {
    const long long row = kv_cache_row(a, table, seq_head, h, t);
    return row < 0 ? -1 : row * (D * 2);
  };
  auto load_tile = [&](int tile_start, int stage) {
    E *k_dst = kv_s + (size_t)stage * 2 * C::kTileElems;
    E *v_dst = k_dst + C::kTileElems;
    const int n = imin(C::kTile, t_end - tile_start);
    for (int i = tid; i < C::kTile * C::kChunks; i += C::kThreads) {
      const int tok = i / C::kChunks, c = i % C::kChunks;
      if (tok < n) {
        const long long off = row_bytes(tile_start + tok);
        if (off >= 0) {
          db_cp_async_16(k_dst + tok * C::kRow + c * 8, a.k + off + c * 16);
          db_cp_async_16(v_dst + tok * C::kRow + c * 8, a.v + off + c * 16);
        }
      }
    }
    db_cp_async_commit();
  };

  float m_r[C::kHeadsPerWarp], l_r[C::kHeadsPerWarp];
  DB_UNROLL
  for (int j = 0; j < C::kHeadsPerWarp; ++j) m_r[j] = -INFINITY, l_r[j] = 0.0f;
  float acc[C::kHeadsPerThread][8];
  DB_UNROLL
  for (int j = 0; j < C::kHeadsPerThread; ++j)
    DB_UNROLL
    for (int e = 0; e < 8; ++e) acc[j][e] = 0.0f;

  const int qk_tok = tid % C::kTile, qk_part = tid / C::kTile;
  const int pv_chunk = tid % C::kChunks;
  const int pv_slice = (tid / C::kChunks) % C::kHeadSlices;
  const int pv_lane = tid / (C::kChunks * C::kHeadSlices);
  const bool pv_active = tid < C::kPvThreads;

  if (ntiles > 0) load_tile(t_begin, 0);
  for (int it = 0; it < ntiles; ++it) {
    const int tile_start = t_begin + it * C::kTile;
    const int n = imin(C::kTile, t_end - tile_start); /* valid tokens: a prefix of the tile */
    if (it + 1 < ntiles) {
      load_tile(tile_start + C::kTile, (it + 1) & 1);
      db_cp_async_wait<1>();
    } else {
      db_cp_async_wait<0>();
    }
    __syncthreads(); /* this tile's rows (and, the first time, the queries) are visible */
    const E *k_tile = kv_s + (size_t)(it & 1) * 2 * C::kTileElems;
    const E *v_tile = k_tile + C::kTileElems;

    /* 2. partial scores over this thread's chunks of the head dim */
    if (qk_tok < n) {
      float s[GP];
      DB_UNROLL
      for (int g = 0; g < GP; ++g) s[g] = 0.0f;
      for (int c = qk_part; c < C::kChunks; c += C::kParts) {
        float kf[8];
        attn_unpack8<E>(*reinterpret_cast<const uint4 *>(k_tile + qk_tok * C::kRow + c * 8), kf);
        DB_UNROLL
        for (int g = 0; g < GP; ++g) {
          const float4 q0 = *reinterpret_cast<const float4 *>(q_s + g * D + c * 8);
          const float4 q1 = *reinterpret_cast<const float4 *>(q_s + g * D + c * 8 + 4);
          s[g] = fmaf(q0.x, kf[0], s[g]);
          s[g] = fmaf(q0.y, kf[1], s[g]);
          s[g] = fmaf(q0.z, kf[2], s[g]);
          s[g] = fmaf(q0.w, kf[3], s[g]);
          s[g] = fmaf(q1.x, kf[4], s[g]);
          s[g] = fmaf(q1.y, kf[5], s[g]);
          s[g] = fmaf(q1.z, kf[6], s[g]);
          s[g] = fmaf(q1.w, kf[7], s[g]);
        }
      }
      DB_UNROLL
      for (int g = 0; g < GP; ++g) score_s[(qk_part * GP + g) * C::kTile + qk_tok] = s[g];
    }
    __syncthreads();

    /* 3. online softmax, one warp per head */
    DB_UNROLL
    for (int j = 0; j < C::kHeadsPerWarp; ++j) {
      const int g = warp + j * C::kWarps;
      if (g < GP) { /* warp-uniform */
        float sc[C::kTokensPerLane];
        float tile_max = -INFINITY;
        DB_UNROLL
        for (int u = 0; u < C::kTokensPerLane; ++u) {
          const int tok = lane + 32 * u;
          float x = -INFINITY;
          if (tok < n) {
            x = 0.0f;
            DB_UNROLL
            for (int p = 0; p < C::kParts; ++p) x += score_s[(p * GP + g) * C::kTile + tok];
          }
          sc[u] = x;
          tile_max = fmaxf(tile_max, x);
        }
        tile_max = attn_warp_max(tile_max);
        const float m_new = fmaxf(m_r[j], tile_max); /* finite: the tile has a token */
        const float alpha = exp2f(m_r[j] - m_new);    /* 0 on the first tile */
        float sum = 0.0f;
        DB_UNROLL
        for (int u = 0; u < C::kTokensPerLane; ++u) {
          const int tok = lane + 32 * u;
          if (tok < C::kTile) {
            const float p = tok < n ? exp2f(sc[u] - m_new) : 0.0f;
            prob_s[tok * GP + g] = p;
            sum += p;
          }
        }
        sum = db_warp_sum(sum);
        l_r[j] = l_r[j] * alpha + sum;
        m_r[j] = m_new;
        if (lane == 0) alpha_s[g] = alpha;
      }
    }
    __syncthreads();

    /* 4. acc = alpha * acc + sum_t p_t v_t */
    if (pv_active) {
      DB_UNROLL
      for (int j = 0; j < C::kHeadsPerThread; ++j) {
        const float alpha = alpha_s[pv_slice * C::kHeadsPerThread + j];
        DB_UNROLL
        for (int e = 0; e < 8; ++e) acc[j][e] *= alpha;
      }
      for (int tok = pv_lane; tok < n; tok += C::kTokenLanes) {
        float vf[8];
        attn_unpack8<E>(*reinterpret_cast<const uint4 *>(v_tile + tok * C::kRow + pv_chunk * 8), vf);
        const float *p = prob_s + tok * GP + pv_slice * C::kHeadsPerThread;
        float pj[C::kHeadsPerThread];
        if constexpr (C::kHeadsPerThread % 4 == 0) {
          DB_UNROLL
          for (int j = 0; j < C::kHeadsPerThread; j += 4) {
            const float4 p4 = *reinterpret_cast<const float4 *>(p + j);
            pj[j] = p4.x, pj[j + 1] = p4.y, pj[j + 2] = p4.z, pj[j + 3] = p4.w;
          }
        } else {
          DB_UNROLL
          for (int j = 0; j < C::kHeadsPerThread; ++j) pj[j] = p[j];
        }
        DB_UNROLL
        for (int j = 0; j < C::kHeadsPerThread; ++j)
          DB_UNROLL
          for (int e = 0; e < 8; ++e) acc[j][e] = fmaf(pj[j], vf[e], acc[j][e]);
      }
    }
    __syncthreads(); /* the stage is read before the next iteration's copy overwrites it */
  }

  /* Epilogue: sum the token lanes' accumulators through shared memory (the KV stages are free),
   * then normalise (one split) or hand (acc, m, l) to the combine. */
  DB_UNROLL
  for (int j = 0; j < C::kHeadsPerWarp; ++j) {
    const int g = warp + j * C::kWarps;
    if (g < GP && lane == 0) m_s[g] = m_r[j], l_s[g] = l_r[j];
  }
  if (pv_active) {
    DB_UNROLL
    for (int j = 0; j < C::kHeadsPerThread; ++j) {
      float4 *dst = reinterpret_cast<float4 *>(
          red_s + ((size_t)pv_lane * GP + pv_slice * C::kHeadsPerThread + j) * D + pv_chunk * 8);
      dst[0] = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
      dst[1] = make_float4(acc[j][4], acc[j][5], acc[j][6], acc[j][7]);
    }
  }
  __syncthreads();
  for (int i = tid; i < heads * D; i += C::kThreads) {
    const int g = i / D, d = i % D;
    float o = 0.0f;
    DB_UNROLL
    for (int r = 0; r < C::kTokenLanes; ++r) o += red_s[((size_t)r * GP + g) * D + d];
    const size_t row = (size_t)b * a.q_heads + hq0 + g;
    if (a.num_splits == 1) {
      const float l = l_s[g];
      static_cast<E *>(a.out)[row * D + d] = db_dtype<E>::from_float(l > 0.0f ? o / l : 0.0f);
    } else {
      const size_t at = row * a.num_splits + split;
      a.ws_acc[at * D + d] = o;
      if (d == 0) a.ws_ml[at] = make_float2(m_s[g], l_s[g]);
    }
  }
}

/* ---- the split combine ------------------------------------------------------------------------ */

template <bool Max>
DB_DEVICE float attn_block_reduce(float v, float *scratch) {
  v = Max ? attn_warp_max(v) : db_warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); ++w) v = Max ? fmaxf(v, scratch[w]) : v + scratch[w];
  __syncthreads(); /* scratch is reused by the next reduction */
  return v;
}

/* One block per (sequence, query head): out = sum_s w_s acc_s / sum_s w_s l_s, w_s = 2^(m_s - M). */
template <class E>
__global__ void __launch_bounds__(kCombineThreads)
    attention_combine_kernel(const float *ws_acc, const float2 *ws_ml, E *out, int num_splits,
                             int head_dim) {
  DB_SHARED(float, weight_s, kMaxSplits);
  DB_SHARED(float, scratch, kCombineThreads / 32);
  const size_t row = blockIdx.x;
  const float2 *ml = ws_ml + row * num_splits;

  float m = -INFINITY;
  for (int s = threadIdx.x; s < num_splits; s += blockDim.x)
    if (ml[s].y > 0.0f) m = fmaxf(m, ml[s].x);
  m = attn_block_reduce<true>(m, scratch);
  float l = 0.0f;
  for (int s = threadIdx.x; s < num_splits; s += blockDim.x) {
    const float2 x = ml[s];
    const float w = x.y > 0.0f ? exp2f(x.x - m) : 0.0f; /* an empty split weighs nothing */
    weight_s[s] = w;
    l += w * x.y;
  }
  l = attn_block_reduce<false>(l, scratch); /* its barriers also publish weight_s */
  const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;

  const float4 *acc = reinterpret_cast<const float4 *>(ws_acc + row * num_splits * head_dim);
  const int quads = head_dim / 4;
  for (int d4 = threadIdx.x; d4 < quads; d4 += blockDim.x) {
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int s = 0; s < num_splits; ++s) {
      const float w = weight_s[s];
      if (w != 0.0f) { /* skipping also keeps a stale partial from turning 0 * x into NaN */
        const float4 x = acc[(size_t)s * quads + d4];
        o.x = fmaf(w, x.x, o.x), o.y = fmaf(w, x.y, o.y);
        o.z = fmaf(w, x.z, o.z), o.w = fmaf(w, x.w, o.w);
      }
    }
    E *dst = out + row * head_dim + d4 * 4;
    dst[0] = db_dtype<E>::from_float(o.x * inv_l);
    dst[1] = db_dtype<E>::from_float(o.y * inv_l);
    dst[2] = db_dtype<E>::from_float(o.z * inv_l);
    dst[3] = db_dtype<E>::from_float(o.w * inv_l);
  }
}

/* ---- KV append -------------------------------------------------------------------------------- */

struct AppendArgs {
  const uint4 *k_new, *v_new; /* [batch, kv_heads, head_dim] */
  uint4 *k, *v;
  const int32_t *positions;
  const int32_t *page_table;
  int32_t batch, kv_heads, chunks; /* chunks = head_dim / 8 */
  int32_t paged, capacity, page_shift, num_pages, pages_per_seq;
};

/* One thread per 16-byte chunk of each (sequence, KV head)'s new K and V rows. */
__global__ void __launch_bounds__(256) kv_append_kernel(const AppendArgs a) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)a.batch * a.kv_heads * a.chunks) return;
  const int c = (int)(i % a.chunks);
  const int seq_head = (int)(i / a.chunks);
  const int h = seq_head % a.kv_heads, b = seq_head / a.kv_heads;
  const int pos = a.positions[b];
  if (pos < 0 || pos >= (a.paged ? a.pages_per_seq << a.page_shift : a.capacity)) return;
  const long long row =
      kv_cache_row(a, a.paged ? a.page_table + (size_t)b * a.pages_per_seq : nullptr, seq_head, h, pos);
  if (row < 0) return;
  a.k[row * a.chunks + c] = a.k_new[i];
  a.v[row * a.chunks + c] = a.v_new[i];
}

}  // namespace

#endif  // DECODEBENCH_ATTENTION_KERNELS_CUH
