/*
 * attention_mla.cuh: the device side of multi-head latent attention decode (DeepSeek-V2/V3,
 * Kimi-K2), absorbed form: every query head of a sequence attends over one latent cache whose
 * rows are [c_kv (512) | k_pe (64)]; the scores use all 576, the values are the first 512:
 *
 *   out[b, h, 0:512] = sum_t softmax_t(scale * q[b, h, :] . c[b, t, :]) c[b, t, 0:512]
 *
 * One block of 4 warps per (sequence, chunk of 16 query heads, split). A 16-head chunk is one
 * mma m-tile, so every cache element a block loads feeds 16 heads on the tensor cores; DeepSeek-V3
 * at tp 8 has exactly 16 heads a GPU, and 128 heads run as 8 chunks whose blocks read the same
 * tiles (the first from HBM, the others mostly from L2). Per tile of kTile = 32 tokens (two
 * cp.async stages of 32 x 1168 bytes, as attention_kernels.cuh's AttnTiles, but one row per
 * token instead of a K row and a V row):
 *
 *   1. scores S[16 heads x 8 tokens] per warp (warp w: tokens 8w..8w+7 of the tile) over all
 *      576 dims: A = Q (ldmatrix.x4 from shared memory, 36 k-steps), B = the cache rows
 *      (ldmatrix.x4 non-transposed: a token's row is B's column, k contiguous), fp32 accumulation;
 *   2. the online softmax with the tile max shared through shared memory (4 x 16 floats), so m
 *      is the same in every warp; P rounded to the input dtype (fp16 scaled by 2^15 first, as the
 *      GQA tensor-core kernel does) into a [16 heads][32 tokens] scratch; l sums the unrounded
 *      fp32 probabilities, per lane, reduced once at the end;
 *   3. O[16 heads x 512] += P[16 x 32] . C[32 x 512]: warp w owns output dims 128w..128w+127
 *      (16 n-tiles, 64 fp32 accumulators a lane), A = P (ldmatrix.x4), B = the latent columns of
 *      the same cache rows read transposed (ldmatrix.x4.trans). No cross-warp reduction of O is
 *      needed: the warps' output dims are disjoint.
 *
 * Rows past the context (or behind a page id outside the cache) are not copied: they are zeroed,
 * and their scores masked to -inf, so p = 0 meets a zero and never a stale NaN.
 *
 * Split-KV with the merge fused, as in the GQA kernels: with one active split the block writes
 * the normalised output; otherwise it writes its unnormalised fp32 O and (m, l) to the workspace
 * and arrives at its (sequence, head chunk)'s epoch-tagged counter (attn_arrive); the last split
 * merges every split's partials in split order, so the result is deterministic.
 */
#ifndef DECODEBENCH_ATTENTION_MLA_CUH
#define DECODEBENCH_ATTENTION_MLA_CUH

#include <cmath>
#include <cstdio>

#include "common.cuh"
#include "attention_kernels.cuh"     /* attn_arrive, attn_warp_max, imin, imax */
#include "attention_mma_kernels.cuh" /* AttnPScale */

namespace db_mla {

constexpr int kLatent = DB_MLA_LATENT_DIM; /* 512: c_kv, also the values */
constexpr int kQK = DB_MLA_QK_DIM;         /* 576: c_kv then k_pe */
constexpr int kV = DB_MLA_V_DIM;           /* 512 */
static_assert(kQK == kLatent + DB_MLA_ROPE_DIM && kV == kLatent, "the absorbed form's widths");

constexpr int kHeads = 16;   /* query heads per block: one mma m-tile */
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTile = 32;    /* tokens per tile: 8 per warp in the scores, 2 k-steps of P.V */
constexpr int kChunks = kQK / 8;            /* 72 16-byte chunks per cache row */
constexpr int kRow = kQK + 8;               /* shared row stride (elements): 1168 bytes = 292
                                               words, so 8 rows of an ldmatrix start 4 banks
                                               apart and hit 32 distinct banks */
constexpr int kPRow = kTile + 8;            /* P row stride: 80 bytes, conflict-free likewise */
constexpr int kDimsPerWarp = kV / kWarps;   /* 128 output dims a warp */
constexpr int kNTiles = kDimsPerWarp / 8;   /* 16 n-tiles of 8 dims */
constexpr int kKSteps = kQK / 16;           /* 36 k-steps of the scores */
constexpr int kMaxPages = kTile / db_attn::kMinPageTokens; /* pages one tile spans: 2 */
constexpr int kCopies = kTile * kChunks;    /* 2304 16-byte copies a tile */
constexpr int kCopiesPerThread = kCopies / kThreads; /* 18, issued back to back */
static_assert(kCopies % kThreads == 0, "every thread copies the same number of chunks");
static_assert(kWarps * 8 == kTile, "each warp scores 8 tokens of the tile");

/* Shared memory (bytes; every region 16-byte aligned). */
constexpr size_t kStageElems = (size_t)kTile * kRow;
constexpr size_t kQOffset = 2 * kStageElems * 2;                      /* two stages of rows */
constexpr size_t kPOffset = kQOffset + (size_t)kHeads * kRow * 2;     /* [16][kRow] E */
constexpr size_t kStatOffset = kPOffset + (size_t)kHeads * kPRow * 2; /* [16][kPRow] E */
/* tile max [warp][16], l [warp][16], M [16], L [16], last */
constexpr size_t kPageOffset = kStatOffset + ((size_t)(2 * kWarps + 2) * kHeads * 4 + 4 + 15) / 16 * 16;
constexpr size_t kSmemBytes = kPageOffset + 2 * kMaxPages * 4;
static_assert(kQOffset % 16 == 0 && kPOffset % 16 == 0 && kStatOffset % 16 == 0, "aligned regions");

/* Everything a launch needs; passed by value. */
struct MlaArgs {
  const uint4 *q;           /* [batch, q_heads, 576] */
  void *out;                /* [batch, q_heads, 512] */
  const int32_t *context_lens;
  const int32_t *page_table;
  const unsigned char *kv;  /* byte address of the latent cache */
  float *ws_acc;            /* [batch * q_heads][num_splits][512] */
  float2 *ws_ml;            /* [batch * q_heads][num_splits]: (m in log2 units, l) */
  unsigned long long *ws_counters; /* [batch * head_chunks] */
  uint32_t epoch;
  int32_t q_heads, head_chunks;
  int32_t max_context, num_splits, split_tokens;
  int32_t paged, capacity, page_shift, num_pages, pages_per_seq;
  float q_scale;            /* softmax scale * log2(e) */
};

struct MlaAppendArgs {
  const uint4 *kv_new;      /* [batch, 576] */
  uint4 *kv;
  const int32_t *positions;
  const int32_t *page_table;
  int32_t batch, paged, capacity, page_shift, num_pages, pages_per_seq;
};

}  // namespace db_mla

namespace {

using db_mla::MlaAppendArgs;
using db_mla::MlaArgs;

/* ---- ldmatrix.trans ---------------------------------------------------------------------------
 * ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: as db_ldmatrix_x4 (common.cuh), but each 8x8
 * matrix is delivered transposed: lane l receives in register i elements (row 2 (l % 4), col l / 4)
 * and (row 2 (l % 4) + 1, col l / 4) of matrix i, the first in the low half (PTX ISA, "ldmatrix",
 * .trans). For rows that are tokens and columns that are dims this is the B fragment of
 * mma.m16n8k16 with k = token. Kept here until common.cuh carries it beside db_ldmatrix_x4. */
#if DB_EMU
inline void mla_ldmatrix_x4_trans_complete(void *const *in, void *const *out, unsigned mask) {
  if (mask != 0xffffffffu) db_emu::fail_launch("ldmatrix.sync.aligned.trans needs all 32 lanes of the warp");
  const unsigned char *rows[32];
  for (int lane = 0; lane < 32; ++lane) {
    rows[lane] = static_cast<const unsigned char *>(*static_cast<const void *const *>(in[lane]));
    if (reinterpret_cast<uintptr_t>(rows[lane]) % 16 != 0) {
      char message[128];
      std::snprintf(message, sizeof message, "ldmatrix.x4.trans: lane %d's row address %p is not 16-byte aligned",
                    lane, static_cast<const void *>(rows[lane]));
      db_emu::fail_launch(message);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    uint32_t *d = static_cast<uint32_t *>(out[lane]);
    for (int i = 0; i < 4; ++i) {
      uint16_t lo, hi;
      std::memcpy(&lo, rows[8 * i + 2 * (lane % 4)] + 2 * (lane / 4), 2);
      std::memcpy(&hi, rows[8 * i + 2 * (lane % 4) + 1] + 2 * (lane / 4), 2);
      d[i] = (uint32_t)lo | (uint32_t)hi << 16;
    }
  }
}
inline void mla_ldmatrix_x4_trans(uint32_t (&r)[4], const void *smem_row, DB_EMU_CALLER) {
  db_emu::check_shared(smem_row, 16, "ldmatrix.x4.trans row", file, line);
  const void *in = smem_row;
  uint32_t d[4];
  db_emu::warp_collective(0xffffffffu, "ldmatrix.sync.aligned.m8n8.x4.trans", &mla_ldmatrix_x4_trans_complete,
                          &in, d, file, line);
  for (int i = 0; i < 4; ++i) r[i] = d[i];
}
#else
DB_DEVICE void mla_ldmatrix_x4_trans(uint32_t (&r)[4], const void *smem_row) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
#endif

/* Where a block sits: blockIdx.x = b * head_chunks + head_chunk, blockIdx.y = split. */
struct MlaBlock {
  int split, b, heads, hq0, len, active, t_begin, t_end, ntiles;
  const int32_t *table;
};

DB_DEVICE MlaBlock mla_block(const MlaArgs &a) {
  MlaBlock k;
  k.split = blockIdx.y;
  const int chunk = blockIdx.x % a.head_chunks;
  k.b = blockIdx.x / a.head_chunks;
  k.heads = imin(db_mla::kHeads, a.q_heads - chunk * db_mla::kHeads);
  k.hq0 = chunk * db_mla::kHeads;
  /* A length outside 0..max_context is the caller's bug; clamping keeps reads inside the cache. */
  k.len = imax(0, imin(a.context_lens[k.b], a.max_context));
  k.active = imax(1, imin(a.num_splits, (k.len + a.split_tokens - 1) / a.split_tokens));
  k.t_begin = k.split * a.split_tokens;
  k.t_end = imin(k.t_begin + a.split_tokens, k.len);
  k.ntiles = k.t_end > k.t_begin ? (k.t_end - k.t_begin + db_mla::kTile - 1) / db_mla::kTile : 0;
  k.table = a.paged ? a.page_table + (size_t)k.b * a.pages_per_seq : nullptr;
  return k;
}

/* The row of token t of sequence b (in 576-element rows), or -1 behind a page id outside the
 * cache. The append kernel and the tiles share it. */
DB_DEVICE long long mla_row(int paged, int page_shift, int num_pages, int capacity, const int32_t *table, int b,
                            int t) {
  if (paged) {
    const int page = table[t >> page_shift];
    if (page < 0 || page >= num_pages) return -1;
    return ((long long)page << page_shift) + (t & ((1 << page_shift) - 1));
  }
  return (long long)b * capacity + t;
}

/* The cache tiles: two cp.async stages, page ids staged one tile ahead (as AttnTiles). */
template <class E>
struct MlaTiles {
  E *kv_s;         /* [stage][kTile][kRow] */
  int32_t *page_s; /* [slot][kMaxPages] */

  DB_DEVICE const E *tile(int stage) const { return kv_s + (size_t)stage * db_mla::kStageElems; }

  DB_DEVICE int fetch_pages(const MlaArgs &a, const MlaBlock &k, int it) const {
    const int p = threadIdx.x;
    if (!a.paged || p >= db_mla::kMaxPages || it >= k.ntiles) return -1;
    const int t = k.t_begin + it * db_mla::kTile + (p << a.page_shift);
    if (p > 0 && ((p << a.page_shift) >= db_mla::kTile || t >= k.t_end)) return -1;
    const int page = k.table[t >> a.page_shift];
    return page >= 0 && page < a.num_pages ? page : -1;
  }
  DB_DEVICE void store_pages(int slot, int page) const {
    if (threadIdx.x < db_mla::kMaxPages) page_s[slot * db_mla::kMaxPages + threadIdx.x] = page;
  }

  /*
   * Issues tile `it`'s copies into `stage` (page ids from slot it & 1) and commits them. A tile's
   * rows lie in at most two runs of consecutive rows in memory (tiles start on multiples of 32
   * tokens; pages hold 16 or more, a power of two): one run for a contiguous cache or pages of
   * 32 tokens and more, rows 0-15 and 16-31 for 16-token pages. So copy i of the tile (token
   * i / 72, chunk i % 72) reads byte i * 16 of its run, and lands at 16 (i + token) in shared
   * memory (rows padded by 16 bytes): a division by a constant, a select and two adds a copy,
   * nothing per row from memory, and for a full tile of one run (every tile but a split's
   * last, unless pages hold 16 tokens) only the division. Rows past the split or behind a page id outside the
   * cache are zeroed instead.
   */
  DB_DEVICE void issue(const MlaArgs &a, const MlaBlock &k, int it, int stage) const {
    using namespace db_mla;
    constexpr long long kRowBytes = kQK * 2;
    static_assert(kRow == kQK + 8, "a shared row is its memory row and 16 bytes: copy i lands at 16 (i + token)");
    E *dst = kv_s + (size_t)stage * kStageElems;
    const int tile_start = k.t_begin + it * kTile;
    const int n = imin(kTile, k.t_end - tile_start);
    long long off0, off1; /* byte offset of row 0 of the tile as run 0 and as run 1 sees it */
    int second = kTile;   /* the first row of run 1 */
    bool ok0 = true, ok1 = true;
    if (a.paged) {
      const int32_t *pages = page_s + (it & 1) * kMaxPages;
      const int p0 = pages[0], p1 = pages[1];
      off0 = (((long long)p0 << a.page_shift) + (tile_start & ((1 << a.page_shift) - 1))) * kRowBytes;
      off1 = (((long long)p1 << a.page_shift) - 16) * kRowBytes;
      ok0 = p0 >= 0, ok1 = p1 >= 0;
      if (a.page_shift == 4) second = 16;
    } else {
      off0 = off1 = ((long long)k.b * a.capacity + tile_start) * kRowBytes;
    }
    if (n == kTile && second == kTile && ok0) {
      /* The common case, every row valid in one run: the sources are one base and immediate
       * offsets, no test a copy. */
      const unsigned char *src = a.kv + off0 + threadIdx.x * 16;
      DB_UNROLL
      for (int j = 0; j < kCopiesPerThread; ++j) {
        const int i = threadIdx.x + j * kThreads;
        db_cp_async_16(dst + (size_t)(i + i / kChunks) * 8, src + j * kThreads * 16);
      }
    } else {
      DB_UNROLL
      for (int j = 0; j < kCopiesPerThread; ++j) {
        const int i = threadIdx.x + j * kThreads;
        const int tok = i / kChunks;
        const bool run1 = tok >= second;
        E *d = dst + (size_t)(i + tok) * 8;
        if (tok < n && (run1 ? ok1 : ok0))
          db_cp_async_16(d, a.kv + (run1 ? off1 : off0) + (long long)i * 16);
        else
          *reinterpret_cast<uint4 *>(d) = make_uint4(0u, 0u, 0u, 0u);
      }
    }
    db_cp_async_commit();
  }

  DB_DEVICE void start(const MlaArgs &a, const MlaBlock &k) const {
    if (a.paged) {
      store_pages(0, fetch_pages(a, k, 0));
      store_pages(1, fetch_pages(a, k, 1));
      __syncthreads();
    }
    issue(a, k, 0, 0);
  }

  DB_DEVICE void next(const MlaArgs &a, const MlaBlock &k, int it) const {
    if (it + 1 < k.ntiles) {
      issue(a, k, it + 1, (it + 1) & 1);
      db_cp_async_wait<1>();
    } else {
      db_cp_async_wait<0>();
    }
  }
};

/*
 * The last split of a (sequence, head chunk) merges every active split's partials:
 * M = max_s m_s, L = sum_s 2^(m_s - M) l_s, out = sum_s 2^(m_s - M) acc_s / L, in split order;
 * each thread takes float4s of the output and loads 16 splits' partials before using the first.
 */
template <class E>
DB_DEVICE void mla_merge(const MlaArgs &a, const MlaBlock &k, float *M_s, float *inv_l_s) {
  using namespace db_mla;
  constexpr int kBatch = 16;
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
    if (lane == 0) M_s[g] = m, inv_l_s[g] = l > 0.0f ? 1.0f / l : 0.0f;
  }
  __syncthreads();
  constexpr int kVecs = kV / 4;
  for (int i = tid; i < k.heads * kVecs; i += kThreads) {
    const int g = i / kVecs, d = (i % kVecs) * 4;
    const float *acc = a.ws_acc + (row0 + g) * a.num_splits * kV + d;
    const float *m_of = reinterpret_cast<const float *>(a.ws_ml + (row0 + g) * a.num_splits);
    const float M = M_s[g];
    float o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int s0 = 0; s0 < splits; s0 += kBatch) {
      float4 x[kBatch];
      float m[kBatch];
      DB_UNROLL
      for (int u = 0; u < kBatch; ++u) {
        const int s = imin(s0 + u, splits - 1);
        x[u] = db_ld_cg(reinterpret_cast<const float4 *>(acc + (size_t)s * kV));
        m[u] = db_ld_cg(m_of + 2 * s);
      }
      DB_UNROLL
      for (int u = 0; u < kBatch; ++u) {
        const float w = s0 + u < splits ? exp2f(m[u] - M) : 0.0f;
        o[0] = fmaf(w, x[u].x, o[0]), o[1] = fmaf(w, x[u].y, o[1]);
        o[2] = fmaf(w, x[u].z, o[2]), o[3] = fmaf(w, x[u].w, o[3]);
      }
    }
    const float inv_l = inv_l_s[g];
    uint32_t *dst = reinterpret_cast<uint32_t *>(static_cast<E *>(a.out) + (row0 + g) * kV + d);
    dst[0] = db_dtype<E>::pack(o[0] * inv_l, o[1] * inv_l);
    dst[1] = db_dtype<E>::pack(o[2] * inv_l, o[3] * inv_l);
  }
}

/* Minimum 2 blocks an SM: shared memory (93 KiB a block) allows 2 on sm_90 (228 KiB) and sm_80
 * (164 KiB), so the register cap of 255 a thread costs nothing. */
template <class E>
__global__ void __launch_bounds__(db_mla::kThreads, 2) attention_mla_decode_kernel(const MlaArgs a) {
  using namespace db_mla;
  DB_EXTERN_SHARED(unsigned char, smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g8 = lane >> 2, t4 = lane & 3;
  E *q_s = reinterpret_cast<E *>(smem + kQOffset);
  E *p_s = reinterpret_cast<E *>(smem + kPOffset);
  float *tmax_s = reinterpret_cast<float *>(smem + kStatOffset); /* [warp][16] */
  float *wl_s = tmax_s + kWarps * kHeads;                          /* [warp][16] */
  float *m_s = wl_s + kWarps * kHeads;                             /* [16] */
  float *l_s = m_s + kHeads;                                       /* [16] */
  int *last_s = reinterpret_cast<int *>(l_s + kHeads);
  const MlaTiles<E> tiles{reinterpret_cast<E *>(smem), reinterpret_cast<int32_t *>(smem + kPageOffset)};

  const MlaBlock k = mla_block(a);
  if (k.split >= k.active) return; /* past the sequence: no token, no partial */

  /* Queries to shared memory as they are (exact); padding heads are zero. */
  for (int i = tid; i < kHeads * kChunks; i += kThreads) {
    const int g = i / kChunks, c = i % kChunks;
    uint4 raw = make_uint4(0u, 0u, 0u, 0u);
    if (g < k.heads) raw = db_ld_nc_v4(a.q + ((size_t)k.b * a.q_heads + k.hq0 + g) * kChunks + c);
    *reinterpret_cast<uint4 *>(q_s + g * kRow + c * 8) = raw;
  }

  /* Per lane: heads g8 (j = 0) and g8 + 8 (j = 1). */
  float m_r[2] = {-INFINITY, -INFINITY}, l_r[2] = {0.0f, 0.0f};
  /* O accumulators: n-tile nt, element i: head g8 + 8 (i >> 1), dim 128 warp + 8 nt + 2 t4 + (i & 1) */
  float o_acc[kNTiles][4];
  DB_UNROLL
  for (int nt = 0; nt < kNTiles; ++nt)
    DB_UNROLL
    for (int i = 0; i < 4; ++i) o_acc[nt][i] = 0.0f;

  /* ldmatrix row addresses: lane 8 i + r gives row r of matrix i. */
  const int mrow = (lane & 7) + 8 * ((lane >> 3) & 1), mcol = 8 * (lane >> 4); /* A: 16 x 16 */
  const E *q_lane = q_s + mrow * kRow + mcol;
  const E *p_lane = p_s + mrow * kPRow + mcol;
  const int krow = warp * 8 + (lane & 7), kcol = 8 * (lane >> 3); /* B of the scores: 8 tokens x 32 dims */
  const int tok0 = warp * 8 + 2 * t4; /* this lane's first token of the scores */

  if (k.ntiles > 0) tiles.start(a, k);
  for (int it = 0; it < k.ntiles; ++it) {
    const int valid = imin(kTile, k.t_end - (k.t_begin + it * kTile));
    tiles.next(a, k, it);
    __syncthreads(); /* this tile's rows (and, the first time, the queries) are visible */
    const int next_pages = tiles.fetch_pages(a, k, it + 2);
    const E *kv_t = tiles.tile(it & 1);

    /* 1. S[16 heads x this warp's 8 tokens] = Q . C^T over 576 dims, two k-steps a trip */
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const E *k_lane = kv_t + krow * kRow + kcol;
    DB_UNROLL
    for (int ks = 0; ks < kKSteps; ks += 2) {
      uint32_t kb[4], qa0[4], qa1[4];
      db_ldmatrix_x4(kb, k_lane + ks * 16);
      db_ldmatrix_x4(qa0, q_lane + ks * 16);
      db_ldmatrix_x4(qa1, q_lane + ks * 16 + 16);
      const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
      db_mma_m16n8k16<E>(s, qa0, b0);
      db_mma_m16n8k16<E>(s, qa1, b1);
    }

    /* 2. online softmax; s[i]: head g8 + 8 (i >> 1), token tok0 + (i & 1) */
    DB_UNROLL
    for (int i = 0; i < 4; ++i) s[i] = tok0 + (i & 1) < valid ? s[i] * a.q_scale : -INFINITY;
    DB_UNROLL
    for (int j = 0; j < 2; ++j) {
      float mx = fmaxf(s[2 * j], s[2 * j + 1]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      if (t4 == 0) tmax_s[warp * kHeads + g8 + 8 * j] = mx;
    }
    __syncthreads();
    float alpha[2];
    DB_UNROLL
    for (int j = 0; j < 2; ++j) {
      float mx = tmax_s[g8 + 8 * j];
      DB_UNROLL
      for (int w = 1; w < kWarps; ++w) mx = fmaxf(mx, tmax_s[w * kHeads + g8 + 8 * j]);
      const float m_new = fmaxf(m_r[j], mx); /* finite: token 0 of the tile is valid */
      alpha[j] = exp2f(m_r[j] - m_new);       /* 0 on the first tile */
      m_r[j] = m_new;
      const float p0 = exp2f(s[2 * j] - m_new), p1 = exp2f(s[2 * j + 1] - m_new);
      s[2 * j] = p0, s[2 * j + 1] = p1;
      l_r[j] = l_r[j] * alpha[j] + (p0 + p1);
      *reinterpret_cast<uint32_t *>(p_s + (g8 + 8 * j) * kPRow + tok0) =
          db_dtype<E>::pack(p0 * AttnPScale<E>::kScale, p1 * AttnPScale<E>::kScale);
    }
    /* Past the first tiles the running max seldom moves: skip the 64 multiplies by 1. */
    if (alpha[0] != 1.0f || alpha[1] != 1.0f) {
      DB_UNROLL
      for (int nt = 0; nt < kNTiles; ++nt)
        DB_UNROLL
        for (int i = 0; i < 4; ++i) o_acc[nt][i] *= alpha[i >> 1];
    }
    __syncthreads(); /* P of every warp */

    /* 3. O[16 x this warp's 128 dims] += P . C[:, 0:512] */
    DB_UNROLL
    for (int kk = 0; kk < kTile / 16; ++kk) {
      uint32_t pa[4];
      db_ldmatrix_x4(pa, p_lane + 16 * kk);
      const E *v_lane = kv_t + (16 * kk + mrow) * kRow + warp * kDimsPerWarp + mcol;
      DB_UNROLL
      for (int np = 0; np < kNTiles / 2; ++np) {
        uint32_t vb[4];
        mla_ldmatrix_x4_trans(vb, v_lane + 16 * np);
        const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
        db_mma_m16n8k16<E>(o_acc[2 * np], pa, b0);
        db_mma_m16n8k16<E>(o_acc[2 * np + 1], pa, b1);
      }
    }
    tiles.store_pages(it & 1, next_pages);
    __syncthreads(); /* the stage, P and the tile maxima are read before the next trip writes them */
  }

  /* Epilogue: l to a block total (lanes of a quad, then warps); m is the same in every warp. */
  DB_UNROLL
  for (int j = 0; j < 2; ++j) {
    float l = l_r[j];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (t4 == 0) wl_s[warp * kHeads + g8 + 8 * j] = l;
    if (warp == 0 && t4 == 0) m_s[g8 + 8 * j] = m_r[j];
  }
  __syncthreads();
  if (tid < kHeads) {
    float l = 0.0f;
    for (int w = 0; w < kWarps; ++w) l += wl_s[w * kHeads + tid];
    l_s[tid] = l;
  }
  __syncthreads();

  const bool direct = k.active == 1;
  DB_UNROLL
  for (int j = 0; j < 2; ++j) {
    const int g = g8 + 8 * j;
    if (g >= k.heads) continue;
    const size_t row = (size_t)k.b * a.q_heads + k.hq0 + g;
    const float l = l_s[g];
    const float f = direct ? (l > 0.0f ? AttnPScale<E>::kUnscale / l : 0.0f) : AttnPScale<E>::kUnscale;
    DB_UNROLL
    for (int nt = 0; nt < kNTiles; ++nt) {
      const int d = warp * kDimsPerWarp + nt * 8 + 2 * t4;
      const float x0 = o_acc[nt][2 * j] * f, x1 = o_acc[nt][2 * j + 1] * f;
      if (direct) {
        *reinterpret_cast<uint32_t *>(static_cast<E *>(a.out) + row * kV + d) = db_dtype<E>::pack(x0, x1);
      } else {
        *reinterpret_cast<float2 *>(a.ws_acc + (row * a.num_splits + k.split) * kV + d) = make_float2(x0, x1);
      }
    }
    if (!direct && warp == 0 && t4 == 0) a.ws_ml[row * a.num_splits + k.split] = make_float2(m_s[g], l);
  }
  if (direct) return;
  /* Every writer fences its partials (device scope) before the barrier that lets thread 0
   * arrive; the barrier also ends every read of m_s and l_s, which the merge overwrites. */
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    const bool last = attn_arrive(a.ws_counters + blockIdx.x, a.epoch, k.active);
    if (last) __threadfence();
    *last_s = last;
  }
  __syncthreads();
  if (!*last_s) return;
  mla_merge<E>(a, k, m_s, l_s);
}

/* One thread per 16-byte chunk of each sequence's new latent row. */
__global__ void __launch_bounds__(256) mla_kv_append_kernel(const MlaAppendArgs a) {
  constexpr int kChunks = db_mla::kChunks;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)a.batch * kChunks) return;
  const int c = (int)(i % kChunks), b = (int)(i / kChunks);
  const int pos = a.positions[b];
  if (pos < 0 || pos >= (a.paged ? a.pages_per_seq << a.page_shift : a.capacity)) return;
  const long long row = mla_row(a.paged, a.page_shift, a.num_pages, a.capacity,
                                a.paged ? a.page_table + (size_t)b * a.pages_per_seq : nullptr, b, pos);
  if (row < 0) return;
  a.kv[row * kChunks + c] = a.kv_new[i];
}

}  // namespace

#endif  // DECODEBENCH_ATTENTION_MLA_CUH
