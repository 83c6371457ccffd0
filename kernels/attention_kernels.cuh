/*
 * attention_kernels.cuh: the device side of decode attention that both decode kernels share (the
 * argument struct, the block's prologue, the paged or contiguous tile loads, the split-KV
 * epilogue with its fused merge) and the SIMT decode kernel. attention_mma_kernels.cuh holds the
 * tensor-core decode kernel, attention_instance.cuh the host side of one head dim, attention.cu
 * the validation, the planning and the KV append.
 *
 * The kernel templates live in an anonymous namespace: each attention_d<D>.cu instantiates the
 * head dim it is named for, and no two translation units instantiate the same kernel.
 *
 * The SIMT decode kernel: one block of 128 threads per (sequence, KV head, head chunk, split). A
 * head chunk is the whole query group of the KV head when the group has at most 16 heads (every
 * GQA model we know of: 1 for multi-head, 4 to 8 for Llama / Mistral / Qwen, 7 for Qwen2.5-7B), so
 * each K and V element is read from memory once per step; larger groups (multi-query with many
 * heads) run in chunks of 16 heads that read the same tiles, mostly from L2. Per tile of T tokens:
 *
 *   1. cp.async copies the next tile's K and V rows into shared memory (16-byte copies, two
 *      stages, so one tile is in flight while the block computes on the other; AttnTiles);
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
 * Spans and sinks: a sliding window or a chunk (db_attention_params.window, .chunk) makes the
 * sequence attend to the tokens start..len-1 only; the splits cover those, from the tile that
 * holds `start`, and nothing before it is read (attn_block, AttnTiles). A sink logit per query
 * head joins the softmax denominator once, where the output is normalised (attn_finish for one
 * split, attn_merge for several), and adds no value.
 *
 * Split-KV, fused: when batch * kv_heads * head_chunks blocks cannot fill the card, each
 * sequence's span is cut into num_splits chunks of split_tokens (a multiple of T). A span of n
 * tokens (from its first tile) has active = ceil(n / split_tokens) splits that see a token; the
 * others exit at once. With one active split the block writes the normalised output itself. Otherwise every
 * active split writes its unnormalised fp32 accumulator and (m, l) to the workspace and arrives
 * at its (sequence, KV head, head chunk)'s counter (attn_arrive); the last to arrive merges all
 * of them (attn_merge): out = sum_s 2^(m_s - M) acc_s / (sum_s 2^(m_s - M) l_s + 2^(sink - M)),
 * M = max_s m_s (no sink term without sinks), in
 * split order whatever the order of arrival, so the result is deterministic. No second kernel,
 * and no launch waits for the slowest split of another sequence.
 *
 * Tile sizes are chosen on paper, not yet timed on a GPU: T = 64 tokens for
 * head dim 64, 32 for 80-128, 16 for 256, so one stage of K and V is 11-18 KiB and a block takes
 * 23-58 KiB of shared memory. ptxas registers and blocks per SM: kernels/README.md. The fp32
 * CUDA-core math does 2 * group FMAs per K or V element: for group 8 that is about as long as
 * the element's share of HBM time on an H200, so group 8 is at the edge of memory-bound; the
 * tensor-core variant (DB_ATTENTION_MMA) is the alternative, chosen per call; AUTO picks this
 * kernel until a card has timed both.
 */
#ifndef DECODEBENCH_ATTENTION_KERNELS_CUH
#define DECODEBENCH_ATTENTION_KERNELS_CUH

#include <cmath>
#include <type_traits>

#include "attention_fp8.cuh"
#include "common.cuh"

namespace db_attn {

constexpr int kMaxSplits = 1024; /* db_attention_params.num_splits */
constexpr int kMinPageTokens = 16; /* the smallest page (DB_KV_PAGED) */
constexpr float kLog2e = 1.4426950408889634f;

/* The element of an fp8 e4m3 KV cache (DB_DTYPE_FP8_E4M3): the kernels' cache type CE is this,
 * or the activation type E for a 16-bit cache. The decode below gives code / kE4m3Unit exactly;
 * each block folds kE4m3Unit and its KV head's scales into the softmax scale (K) and the output
 * scale (V) once (attn_fp8_scales), so no multiply is spent per element. */
struct E4m3 {
  uint8_t bits;
};
constexpr float kE4m3Unit = 256.0f;

/* Everything a decode launch needs; passed by value. */
struct AttnArgs {
  const uint4 *q;           /* [batch, q_heads, D] */
  void *out;                /* [batch, q_heads, D] */
  const int32_t *context_lens;
  const int32_t *page_table;
  const float *sinks;       /* [q_heads] sink logits (natural-log units), or null */
  const unsigned char *k, *v; /* byte addresses of the caches */
  float *ws_acc;            /* [batch * q_heads][num_splits][D] */
  float2 *ws_ml;            /* [batch * q_heads][num_splits]: (m in log2 units, l) */
  unsigned long long *ws_counters; /* [gridDim.x]: (epoch << 32) | arrivals, see attn_arrive */
  uint32_t epoch;           /* this call's tag for the counters: never 0 or 0xffffffff */
  int32_t q_heads, kv_heads, group, head_chunks;
  int32_t max_context, num_splits, split_tokens;
  int32_t window, chunk;    /* the span: 0 = none (db_attention_params) */
  int32_t paged, capacity, page_shift, num_pages, pages_per_seq;
  float q_scale;            /* softmax scale * log2(e) */
  /* fp8 cache: K's and V's per-tensor scales, and f32 [kv_heads] per-KV-head ones (null, or a
   * 0 entry: that head takes the tensor's). See attn_fp8_scales. */
  float k_scale, v_scale;
  const float *k_scales, *v_scales;
};

struct AppendArgs {
  const uint4 *k_new, *v_new; /* [batch, kv_heads, head_dim] */
  uint4 *k, *v;
  float k_scale, v_scale;     /* fp8 cache: the divisors of the quantisation, per tensor */
  const float *k_scales, *v_scales; /* fp8 cache: per KV head (0 entries: the tensor's), or null */
  const int32_t *positions;
  const int32_t *page_table;
  int32_t batch, kv_heads, chunks; /* chunks = head_dim / 8 */
  int32_t paged, capacity, page_shift, num_pages, pages_per_seq;
};

}  // namespace db_attn

namespace {

using db_attn::AppendArgs;
using db_attn::AttnArgs;
using db_attn::kMinPageTokens;

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

/* Eight cache elements at p (16 bytes of a 16-bit cache, 8 of an fp8 one; aligned) as fp32:
 * the 16-bit values, or code / kE4m3Unit. */
template <class CE>
DB_DEVICE void attn_load8(const CE *p, float (&out)[8]) {
  if constexpr (sizeof(CE) == 1) {
    const uint2 raw = *reinterpret_cast<const uint2 *>(p);
    const float2 a = db_dtype<__half>::unpack(attn_e4m3x2_half2_bits(raw.x));
    const float2 b = db_dtype<__half>::unpack(attn_e4m3x2_half2_bits(raw.x >> 16));
    const float2 c = db_dtype<__half>::unpack(attn_e4m3x2_half2_bits(raw.y));
    const float2 d = db_dtype<__half>::unpack(attn_e4m3x2_half2_bits(raw.y >> 16));
    out[0] = a.x, out[1] = a.y, out[2] = b.x, out[3] = b.y;
    out[4] = c.x, out[5] = c.y, out[6] = d.x, out[7] = d.y;
  } else {
    attn_unpack8<CE>(*reinterpret_cast<const uint4 *>(p), out);
  }
}

/*
 * The scales KV head h's block applies: the query's (the softmax scale * log2(e), times K's
 * scale * kE4m3Unit for an fp8 cache) and the output's (V's scale * kE4m3Unit for an fp8 cache,
 * else 1). One load of each per-head scale a block, before its tiles; a 16-bit cache reads
 * neither. The product is the one the per-tensor plan always formed, so a per-tensor fp8 cache
 * computes what it did before per-head scales existed.
 */
template <class CE>
DB_DEVICE float2 attn_fp8_scales(const AttnArgs &a, int h) {
  if constexpr (sizeof(CE) == 1) {
    const float ks = attn_e4m3_head_scale(a.k_scales, h, a.k_scale);
    const float vs = attn_e4m3_head_scale(a.v_scales, h, a.v_scale);
    return make_float2(a.q_scale * (ks * db_attn::kE4m3Unit), vs * db_attn::kE4m3Unit);
  } else {
    return make_float2(a.q_scale, 1.0f);
  }
}

/* ---- the block's prologue (both decode kernels) ----------------------------------------------- */

/* Where a block sits: blockIdx.x = seq_head * head_chunks + head_chunk, blockIdx.y = split. */
struct AttnBlock {
  int split, seq_head, h, b;
  int heads;  /* real query heads in this block (a partial last chunk has fewer than GP) */
  int hq0;    /* its first query head */
  int len;    /* the sequence's tokens, clamped to 0..max_context */
  int start;  /* the span's first token: 0, or where a window or chunk begins */
  int active; /* splits of this sequence that see a token (1 for an empty sequence) */
  int t_begin, t_end, ntiles;
  const int32_t *table; /* the sequence's page-table row (paged) */
};

template <int GP, int Tile>
DB_DEVICE AttnBlock attn_block(const AttnArgs &a) {
  AttnBlock k;
  k.split = blockIdx.y;
  const int head_chunk = blockIdx.x % a.head_chunks;
  k.seq_head = blockIdx.x / a.head_chunks; /* b * kv_heads + h */
  k.h = k.seq_head % a.kv_heads, k.b = k.seq_head / a.kv_heads;
  k.heads = imin(GP, a.group - head_chunk * GP);
  k.hq0 = k.h * a.group + head_chunk * GP;
  /* A length outside 0..max_context is the caller's bug; clamping keeps reads inside the cache. */
  k.len = imax(0, imin(a.context_lens[k.b], a.max_context));
  /* The span (db_attention_params): a window's last tokens, or the current chunk. The splits
   * start at the tile that holds its first token, so that every tile begins on a multiple of
   * Tile (and spans at most Tile / 16 pages) whatever the span's start; the tokens of that tile
   * before the start are masked, never copied. */
  k.start = 0;
  if (a.window > 0) k.start = imax(0, k.len - a.window);
  else if (a.chunk > 0 && k.len > 0) k.start = (k.len - 1) / a.chunk * a.chunk;
  const int base = k.start & ~(Tile - 1);
  k.active = imax(1, imin(a.num_splits, (k.len - base + a.split_tokens - 1) / a.split_tokens));
  k.t_begin = base + k.split * a.split_tokens;
  k.t_end = imin(k.t_begin + a.split_tokens, k.len);
  k.ntiles = k.t_end > k.t_begin ? (k.t_end - k.t_begin + Tile - 1) / Tile : 0;
  k.table = a.paged ? a.page_table + (size_t)k.b * a.pages_per_seq : nullptr;
  return k;
}

/* Each (head g < GP, 16-byte chunk c) of the block's queries, zero for padding heads, to
 * store(g, c, raw). */
template <int D, int GP, int Threads, class Store>
DB_DEVICE void attn_load_queries(const AttnArgs &a, const AttnBlock &k, Store store) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < GP * kChunks; i += Threads) {
    const int g = i / kChunks, c = i % kChunks;
    uint4 raw = make_uint4(0u, 0u, 0u, 0u);
    if (g < k.heads) raw = db_ld_nc_v4(a.q + ((size_t)k.b * a.q_heads + k.hq0 + g) * kChunks + c);
    store(g, c, raw);
  }
}

/* ---- K and V tiles: two cp.async stages, page ids staged one tile ahead ----------------------- */

/*
 * The K and V rows of a tile go to shared memory with 16-byte cp.async copies (Tile * D / 8 of
 * each, (Tile * D / 8) / Threads per thread, all issued back to back). For a paged cache the
 * copies' addresses need the tile's page ids: those are loaded from the page table two tiles
 * ahead into a register (fetch_pages), stored to shared memory at the end of the iteration
 * (store_pages) and published by its closing barrier, so issuing a tile's copies never waits on
 * a global load. A tile spans at most Tile / 16 pages (tiles start on multiples of Tile, pages
 * are powers of two of at least 16 tokens). Rows outside the tile's valid tokens (past the
 * split, before the span's start, or behind a page id outside the cache) are not copied, nor
 * are the page ids of pages wholly before the span read; their V rows are zeroed, since P.V
 * multiplies p = 0 by them and 0 * NaN would be NaN.
 */
template <class E, int D, int Tile, int Threads>
struct AttnTiles {
  static constexpr int kElemBytes = (int)sizeof(E);   /* 2, or 1 for an fp8 cache */
  static constexpr int kChunkElems = 16 / kElemBytes;
  static constexpr int kChunks = D / kChunkElems;      /* 16-byte chunks per K or V row */
  static constexpr int kRow = D + kChunkElems;         /* shared row stride in elements: +16 bytes */
  static constexpr int kMaxPages = Tile / kMinPageTokens > 0 ? Tile / kMinPageTokens : 1;
  static constexpr int kCopies = Tile * kChunks;       /* of K, and of V, per tile */
  static constexpr int kCopiesPerThread = (kCopies + Threads - 1) / Threads;
  static constexpr size_t kTileElems = (size_t)Tile * kRow; /* one of K or V, one stage */
  static constexpr size_t kBytes = 2 /*stages*/ * 2 /*K, V*/ * kTileElems * kElemBytes;
  static constexpr size_t kPageBytes = 2 /*slots*/ * kMaxPages * 4;
  static_assert(kMaxPages <= 32, "one warp fetches a tile's page ids");
  static_assert((kRow * kElemBytes) % 16 == 0 && D % kChunkElems == 0, "16-byte aligned shared rows");

  E *kv_s;          /* [stage][K, V][Tile][kRow] */
  int32_t *page_s;  /* [slot][kMaxPages]: page id, -1 outside the cache */

  DB_DEVICE const E *k_tile(int stage) const { return kv_s + (size_t)stage * 2 * kTileElems; }
  DB_DEVICE const E *v_tile(int stage) const { return k_tile(stage) + kTileElems; }

  /* Thread p < kMaxPages: the id of page p of tile `it`, or -1 (past the split, or outside the
   * cache). A global load whose value is needed only at store_pages. */
  DB_DEVICE int fetch_pages(const AttnArgs &a, const AttnBlock &k, int it) const {
    const int p = threadIdx.x;
    if (!a.paged || p >= kMaxPages || it >= k.ntiles) return -1;
    const int t = k.t_begin + it * Tile + (p << a.page_shift);
    if (p > 0 && ((p << a.page_shift) >= Tile || t >= k.t_end)) return -1;
    if ((((t >> a.page_shift) + 1) << a.page_shift) <= k.start) return -1; /* before the span */
    const int page = k.table[t >> a.page_shift];
    return page >= 0 && page < a.num_pages ? page : -1;
  }
  DB_DEVICE void store_pages(int slot, int page) const {
    if (threadIdx.x < kMaxPages) page_s[slot * kMaxPages + threadIdx.x] = page;
  }

  /* Issues tile `it`'s copies into `stage` (page ids from slot it & 1) and commits them. */
  DB_DEVICE void issue(const AttnArgs &a, const AttnBlock &k, int it, int stage) const {
    E *k_dst = kv_s + (size_t)stage * 2 * kTileElems;
    E *v_dst = k_dst + kTileElems;
    const int tile_start = k.t_begin + it * Tile;
    const int n = imin(Tile, k.t_end - tile_start);
    const int lo = imax(0, k.start - tile_start); /* rows lo..n-1 are the span's */
    const int32_t *pages = page_s + (it & 1) * kMaxPages;
    const int first_page = tile_start >> a.page_shift;
    const long long seq_row = (long long)k.seq_head * a.capacity + tile_start;
    /* All kCopiesPerThread copies unrolled, so they issue back to back; the thread index goes
     * through an opaque move so that their addresses are recomputed each tile (a few integer ops
     * a copy) instead of hoisted out of the tile loop, which cost 30 registers (126 -> 156 at
     * head dim 128 with 4 heads: one block per SM fewer). */
    const int tid = db_opaque(threadIdx.x);
    DB_UNROLL
    for (int j = 0; j < kCopiesPerThread; ++j) {
      const int i = tid + j * Threads;
      if (kCopies % Threads != 0 && i >= kCopies) break;
      const int tok = i / kChunks, c = i % kChunks;
      long long row = -1;
      if (tok < n && tok >= lo) {
        if (a.paged) {
          const int t = tile_start + tok;
          const int page = pages[(t >> a.page_shift) - first_page];
          if (page >= 0)
            row = (((long long)page * a.kv_heads + k.h) << a.page_shift) + (t & ((1 << a.page_shift) - 1));
        } else {
          row = seq_row + tok;
        }
      }
      if (row >= 0) {
        const long long off = row * (D * kElemBytes) + c * 16;
        db_cp_async_16(k_dst + tok * kRow + c * kChunkElems, a.k + off);
        db_cp_async_16(v_dst + tok * kRow + c * kChunkElems, a.v + off);
      } else {
        *reinterpret_cast<uint4 *>(v_dst + tok * kRow + c * kChunkElems) = make_uint4(0u, 0u, 0u, 0u);
      }
    }
    db_cp_async_commit();
  }

  /* Before the loop: the page ids of tiles 0 and 1, then tile 0's copies. The caller's first
   * in-loop barrier publishes nothing new for issue(0): this function has its own. */
  DB_DEVICE void start(const AttnArgs &a, const AttnBlock &k) const {
    if (a.paged) {
      store_pages(0, fetch_pages(a, k, 0));
      store_pages(1, fetch_pages(a, k, 1));
      __syncthreads();
    }
    issue(a, k, 0, 0);
  }

  /* At the top of iteration it: issues tile it + 1 and waits for tile it's own copies. */
  DB_DEVICE void next(const AttnArgs &a, const AttnBlock &k, int it) const {
    if (it + 1 < k.ntiles) {
      issue(a, k, it + 1, (it + 1) & 1);
      db_cp_async_wait<1>();
    } else {
      db_cp_async_wait<0>();
    }
  }
};

/* ---- the split epilogue and the fused merge (both decode kernels) ----------------------------- */

/*
 * Arrival at a (sequence, KV head, head chunk)'s counter; true for the last of `expected`.
 * The counter is (epoch << 32) | arrivals. A value with another epoch (a zeroed or poisoned
 * workspace, a call that died halfway, the previous call) counts as no arrival, so no memset is
 * ever needed; the last arrival leaves 0, so a replay of the same launch (a CUDA graph, the same
 * epoch) also starts from no arrival.
 */
DB_DEVICE bool attn_arrive(unsigned long long *counter, uint32_t epoch, int expected) {
  unsigned long long seen = *reinterpret_cast<volatile unsigned long long *>(counter), assumed;
  uint32_t arrived;
  do {
    assumed = seen;
    arrived = (uint32_t)(assumed >> 32) == epoch ? (uint32_t)assumed + 1u : 1u;
    const unsigned long long next =
        arrived >= (uint32_t)expected ? 0ull : ((unsigned long long)epoch << 32) | arrived;
    seen = atomicCAS(counter, assumed, next);
  } while (seen != assumed);
  return arrived >= (uint32_t)expected;
}

/* Vectors of V floats read through L2 (ld.global.cg): the partials of other blocks, which this
 * SM's L1 may hold stale from an earlier call. */
template <int V>
struct AttnVec;
template <>
struct AttnVec<4> {
  float4 x;
  DB_DEVICE void load(const float *p) { x = db_ld_cg(reinterpret_cast<const float4 *>(p)); }
  DB_DEVICE float operator[](int e) const { return e == 0 ? x.x : e == 1 ? x.y : e == 2 ? x.z : x.w; }
};
template <>
struct AttnVec<2> {
  float2 x;
  DB_DEVICE void load(const float *p) { x = db_ld_cg(reinterpret_cast<const float2 *>(p)); }
  DB_DEVICE float operator[](int e) const { return e == 0 ? x.x : x.y; }
};
template <>
struct AttnVec<1> {
  float x;
  DB_DEVICE void load(const float *p) { x = db_ld_cg(p); }
  DB_DEVICE float operator[](int) const { return x; }
};

/*
 * The last split of a (sequence, KV head, head chunk) merges every active split's partials into
 * out. M_s and inv_l_s are [GP] shared floats the caller no longer reads.
 *
 * 1. per head (warp w takes heads w, w + warps, ...; lane s takes splits s, s + 32, ...):
 *    M = max_s m_s, L = sum_s 2^(m_s - M) l_s;
 * 2. per output vector of V floats (V = 4 where the block's heads * D / 4 vectors keep every
 *    thread busy, else 2 or 1, so no thread idles at one head): the splits in batches of kBatch
 *    (16: 256 bytes of 16-byte loads a thread, 32 KiB a block, in flight),
 *    each batch's kBatch partial vectors and m values loaded before the first is used (a batch
 *    past the last split re-reads the last split with weight 0), summed in split order.
 */
template <class E, int D, int GP, int Threads>
DB_DEVICE void attn_merge(const AttnArgs &a, const AttnBlock &k, float *M_s, float *inv_l_s) {
  constexpr int kWarps = Threads / 32;
  constexpr int kBatch = 16;
  constexpr int V = GP * D / 4 >= Threads ? 4 : (GP * D / 2 >= Threads ? 2 : 1);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int splits = k.active;
  const size_t row0 = (size_t)k.b * a.q_heads + k.hq0;

  for (int g = warp; g < k.heads; g += kWarps) {
    const float2 *ml = a.ws_ml + (row0 + g) * a.num_splits;
    float m = -INFINITY;
    for (int s = lane; s < splits; s += 32) m = fmaxf(m, db_ld_cg(ml + s).x);
    m = attn_warp_max(m);
    float l = 0.0f;
    for (int s = lane; s < splits; s += 32) {
      const float2 x = db_ld_cg(ml + s);
      l += exp2f(x.x - m) * x.y;
    }
    l = db_warp_sum(l);
    if (a.sinks != nullptr) l += exp2f(a.sinks[k.hq0 + g] * db_attn::kLog2e - m); /* once, not per split */
    if (lane == 0) M_s[g] = m, inv_l_s[g] = l != 0.0f ? 1.0f / l : 0.0f; /* NaN stays NaN */
  }
  __syncthreads(); /* M and 1/L of every head */

  constexpr int kVecsPerHead = D / V;
  for (int i = tid; i < k.heads * kVecsPerHead; i += Threads) {
    const int g = i / kVecsPerHead, d = (i % kVecsPerHead) * V;
    const float *acc = a.ws_acc + (row0 + g) * a.num_splits * D + d;
    const float *m_of = reinterpret_cast<const float *>(a.ws_ml + (row0 + g) * a.num_splits);
    const float M = M_s[g];
    float o[V];
    DB_UNROLL
    for (int e = 0; e < V; ++e) o[e] = 0.0f;
    for (int s0 = 0; s0 < splits; s0 += kBatch) {
      AttnVec<V> x[kBatch];
      float m[kBatch];
      DB_UNROLL
      for (int u = 0; u < kBatch; ++u) {
        const int s = imin(s0 + u, splits - 1);
        x[u].load(acc + (size_t)s * D);
        m[u] = db_ld_cg(m_of + 2 * s);
      }
      DB_UNROLL
      for (int u = 0; u < kBatch; ++u) {
        const float w = s0 + u < splits ? exp2f(m[u] - M) : 0.0f;
        DB_UNROLL
        for (int e = 0; e < V; ++e) o[e] = fmaf(w, x[u][e], o[e]);
      }
    }
    const float inv_l = inv_l_s[g];
    E *dst = static_cast<E *>(a.out) + (row0 + g) * D + d;
    DB_UNROLL
    for (int e = 0; e < V; ++e) dst[e] = db_dtype<E>::from_float(o[e] * inv_l);
  }
}

/*
 * The sink's share of head g's softmax denominator, 2^(sink - m) with m the block's running max
 * (log2 units), when this block normalises the output itself (one active split); else 0. The
 * kernels add it to the l they give attn_finish, so that the sink joins the denominator once:
 * here, or in the merge of several splits (attn_merge), never in a split's partial sum.
 */
DB_DEVICE float attn_direct_sink(const AttnArgs &a, const AttnBlock &k, int g, float m) {
  if (k.active != 1 || a.sinks == nullptr) return 0.0f;
  return exp2f(a.sinks[k.hq0 + g] * db_attn::kLog2e - m);
}

/*
 * Both decode kernels end here. red_s is [Lanes][GP][D] fp32 partial sums of the block's
 * unnormalised output (the token lanes or warps of the block), m_s and l_s the block's [GP]
 * running max and sum (with attn_direct_sink added), v_scale the block's output scale
 * (attn_fp8_scales). One active split: the normalised output.
 * Otherwise this split's partials to the workspace, the arrival, and for the last arrival the
 * merge (which reuses m_s and l_s).
 */
template <class E, int D, int GP, int Threads, int Lanes, bool Fp8>
DB_DEVICE void attn_finish(const AttnArgs &a, const AttnBlock &k, const float *red_s, float *m_s,
                           float *l_s, int *last_s, float v_scale) {
  auto lanes_sum = [&](int g, int d) {
    float o = 0.0f;
    DB_UNROLL
    for (int r = 0; r < Lanes; ++r) o += red_s[((size_t)r * GP + g) * D + d];
    if constexpr (Fp8) o *= v_scale; /* a 16-bit cache's output is as it was */
    return o;
  };
  const size_t row0 = (size_t)k.b * a.q_heads + k.hq0;
  /* Two loops, not one with the branch inside: that is what ptxas made of the one loop until
   * the sinks came, and the static gate counts loops by address. */
  const bool direct = k.active == 1;
  /* l is 0 only where no token was seen (o is 0 too); a NaN score (fmaxf skips it in the max)
   * makes l NaN, and the output must say so, so the tests are l != 0, never l > 0. */
  if (direct) {
    for (int i = threadIdx.x; i < k.heads * D; i += Threads) {
      const int g = i / D, d = i % D;
      const float o = lanes_sum(g, d), l = l_s[g];
      static_cast<E *>(a.out)[(row0 + g) * D + d] = db_dtype<E>::from_float(l != 0.0f ? o / l : 0.0f);
    }
  } else {
    for (int i = threadIdx.x; i < k.heads * D; i += Threads) {
      const int g = i / D, d = i % D;
      const size_t at = (row0 + g) * a.num_splits + k.split;
      a.ws_acc[at * D + d] = lanes_sum(g, d);
      if (d == 0) a.ws_ml[at] = make_float2(m_s[g], l_s[g]);
    }
  }
  if (direct) return;
  /* Every writer fences its partials (device scope) before the barrier that lets thread 0
   * arrive; the barrier also ends every read of m_s and l_s, which the merge overwrites. */
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const bool last = attn_arrive(a.ws_counters + blockIdx.x, a.epoch, k.active);
    if (last) __threadfence(); /* the other splits' partials are read after this */
    *last_s = last;
  }
  __syncthreads();
  if (!*last_s) return;
  attn_merge<E, D, GP, Threads>(a, k, m_s, l_s);
}

/* ---- the SIMT decode kernel ------------------------------------------------------------------- */

/* Compile-time layout of one (head dim D, heads per block GP) instantiation. */
template <int D, int GP, class CE = __half>
struct AttnConfig {
  static constexpr int kThreads = 128;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kTile = D <= 64 ? 64 : (D <= 128 ? 32 : 16);
  using Tiles = AttnTiles<CE, D, kTile, kThreads>; /* sizes only: the same for both 16-bit dtypes */
  static constexpr int kChunks = D / 8;
  static constexpr int kRow = Tiles::kRow;
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
  static constexpr size_t kReduceBytes = (size_t)kTokenLanes * GP * D * 4; /* epilogue, reuses KV */
  static constexpr size_t kBigBytes = Tiles::kBytes > kReduceBytes ? Tiles::kBytes : kReduceBytes;
  static constexpr size_t kQOffset = kBigBytes;                                 /* [GP][D] f32 */
  static constexpr size_t kScoreOffset = kQOffset + (size_t)GP * D * 4;        /* [kParts][GP][kTile] */
  static constexpr size_t kProbOffset = kScoreOffset + (size_t)kParts * GP * kTile * 4; /* [kTile][GP] */
  static constexpr size_t kStatOffset = kProbOffset + (size_t)kTile * GP * 4;  /* alpha, m, l [GP], last */
  static constexpr size_t kPageOffset = kStatOffset + ((size_t)3 * GP * 4 + 4 + 15) / 16 * 16;
  static constexpr size_t kSmemBytes = kPageOffset + Tiles::kPageBytes;

  static_assert(D % 8 == 0, "head dim must be a whole number of 16-byte chunks");
  static_assert(kThreads % kTile == 0, "the score step maps threads onto whole tiles");
  static_assert(kTokenLanes >= 1, "P.V needs at least one thread per (chunk, head slice)");
  static_assert(GP % kHeadsPerThread == 0, "heads per block split evenly into slices");
  static_assert((kScoreOffset % 16) == 0 && (kProbOffset % 16) == 0 && (kStatOffset % 16) == 0,
                "16-byte aligned shared regions");
};

/* Minimum blocks per SM: without one, ptxas (nvcc 11.8, sm_80/sm_90) capped some
 * instantiations at 64 or 128 registers and spilled. 3 (a 168-register cap) holds every
 * instantiation of up to 8 heads without a spill, so 3 blocks fit an SM by registers; 16 heads
 * need up to 188 and spill under 168, so they get 2. Minimum 4 (128 registers) spills 24-124
 * bytes in every 8- and 16-head instantiation. */
template <int GP>
constexpr int attn_min_blocks() { return GP >= 16 ? 2 : 3; }

/* The SIMT kernel's body, for activations E and cache elements CE (E, or E4m3). The __global__
 * wrappers below keep one name per cache format, so that the 16-bit kernels keep theirs. */
template <class E, class CE, int D, int GP>
DB_DEVICE void attn_decode_simt(const AttnArgs &a) {
  using C = AttnConfig<D, GP, CE>;
  using Tiles = AttnTiles<CE, D, C::kTile, C::kThreads>;
  DB_EXTERN_SHARED(unsigned char, smem);
  float *red_s = reinterpret_cast<float *>(smem);              /* epilogue: [lanes][GP][D] */
  float *q_s = reinterpret_cast<float *>(smem + C::kQOffset);
  float *score_s = reinterpret_cast<float *>(smem + C::kScoreOffset);
  float *prob_s = reinterpret_cast<float *>(smem + C::kProbOffset);
  float *alpha_s = reinterpret_cast<float *>(smem + C::kStatOffset);
  float *m_s = alpha_s + GP;
  float *l_s = m_s + GP;
  int *last_s = reinterpret_cast<int *>(l_s + GP);
  const Tiles tiles{reinterpret_cast<CE *>(smem), reinterpret_cast<int32_t *>(smem + C::kPageOffset)};

  const AttnBlock k = attn_block<GP, C::kTile>(a);
  if (k.split >= k.active) return; /* past the sequence: no token, no partial */
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float2 scales = attn_fp8_scales<CE>(a, k.h); /* (query, output) */

  /* Queries to shared memory as fp32, pre-scaled. */
  attn_load_queries<D, GP, C::kThreads>(a, k, [&](int g, int c, uint4 raw) {
    float x[8];
    attn_unpack8<E>(raw, x);
    DB_UNROLL
    for (int e = 0; e < 8; ++e) x[e] *= scales.x;
    float4 *dst = reinterpret_cast<float4 *>(q_s + g * D + c * 8);
    dst[0] = make_float4(x[0], x[1], x[2], x[3]);
    dst[1] = make_float4(x[4], x[5], x[6], x[7]);
  });

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

  if (k.ntiles > 0) tiles.start(a, k);
  for (int it = 0; it < k.ntiles; ++it) {
    const int tile_start = k.t_begin + it * C::kTile;
    const int n = imin(C::kTile, k.t_end - tile_start); /* valid tokens: lo..n-1 */
    const int lo = imax(0, k.start - tile_start);      /* > 0 only in a span's first tile */
    tiles.next(a, k, it);
    __syncthreads(); /* this tile's rows (and, the first time, the queries) are visible */
    const int next_pages = tiles.fetch_pages(a, k, it + 2);
    const CE *k_tile = tiles.k_tile(it & 1);
    const CE *v_tile = tiles.v_tile(it & 1);

    /* 2. partial scores over this thread's chunks of the head dim */
    if (qk_tok < n && qk_tok >= lo) {
      float s[GP];
      DB_UNROLL
      for (int g = 0; g < GP; ++g) s[g] = 0.0f;
      for (int c = qk_part; c < C::kChunks; c += C::kParts) {
        float kf[8];
        attn_load8<CE>(k_tile + qk_tok * C::kRow + c * 8, kf);
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
          if (tok < n && tok >= lo) {
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
        attn_load8<CE>(v_tile + tok * C::kRow + pv_chunk * 8, vf);
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
    tiles.store_pages(it & 1, next_pages);
    __syncthreads(); /* the stage is read before the next iteration's copy overwrites it; pages */
  }

  /* Epilogue: the token lanes' accumulators to shared memory (the KV stages are free), the
   * block's (m, l) beside them, then the split's output or partials. */
  DB_UNROLL
  for (int j = 0; j < C::kHeadsPerWarp; ++j) {
    const int g = warp + j * C::kWarps;
    if (g < GP && lane == 0) m_s[g] = m_r[j], l_s[g] = l_r[j] + (g < k.heads ? attn_direct_sink(a, k, g, m_r[j]) : 0.0f);
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
  attn_finish<E, D, GP, C::kThreads, C::kTokenLanes, sizeof(CE) == 1>(a, k, red_s, m_s, l_s, last_s, scales.y);
}

template <class E, int D, int GP>
__global__ void __launch_bounds__(AttnConfig<D, GP>::kThreads, attn_min_blocks<GP>())
    attention_decode_kernel(const AttnArgs a) {
  attn_decode_simt<E, E, D, GP>(a);
}

/* The same kernel over an fp8 e4m3 cache: half the bytes a tile, dequantised after the loads
 * from shared memory. */
template <class E, int D, int GP>
__global__ void __launch_bounds__(AttnConfig<D, GP, db_attn::E4m3>::kThreads, attn_min_blocks<GP>())
    attention_decode_fp8_kernel(const AttnArgs a) {
  attn_decode_simt<E, db_attn::E4m3, D, GP>(a);
}

}  // namespace

#endif  // DECODEBENCH_ATTENTION_KERNELS_CUH
