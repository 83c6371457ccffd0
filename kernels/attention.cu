/*
 * attention.cu: decode attention over a KV cache (one new query token per sequence), split-KV
 * with the log-sum-exp merge fused into the decode kernel, and the KV append. Implements the
 * attention section of decodebench.h.
 *
 * This file is the host side: it validates the parameters and the cache description, plans a
 * call (variant, heads per block, kernel, splits from the kernel's occupancy, workspace) and
 * launches the kernel that attention_d<D>.cu compiled for the head dim (attention_launch.cuh);
 * attention_kernels.cuh and attention_mma_kernels.cuh describe the kernels and why their tiles
 * are what they are.
 *
 * Variant choice: AUTO resolves to SIMT, today's kernel, until a card has timed both
 * (scripts/gpu-check.sh benches `--variant mma` next to the default). The MMA kernel takes
 * every shape the SIMT one does (head dims are multiples of 16, groups run in chunks of 16), so
 * the plan never refuses it for its shape. Not yet measured on a card.
 */
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common.cuh"
#include "attention_kernels.cuh"
#include "attention_launch.cuh"

namespace {

using db_attn::AttnKernel;
using db_attn::kMaxSplits;

constexpr int kMaxGroupChunk = 16;     /* query heads one block serves */
constexpr int kMaxContext = 1 << 30;   /* keeps split * split_tokens + a tile inside int32 */

/* ---- host side: validation, planning, launch -------------------------------------------------- */

int attn_log2(int x) {
  int s = 0;
  while ((1 << s) < x) ++s;
  return s;
}

/* Heads per block for a group: the smallest SIMT instantiation that holds it, 16 at most; the MMA
 * kernel pads to one or two n-tiles of 8. */
int attn_heads_per_block(int variant, int group) {
  if (variant == DB_ATTENTION_MMA) return group <= 8 ? 8 : kMaxGroupChunk;
  int gp = 1;
  while (gp < group && gp < kMaxGroupChunk) gp *= 2;
  return gp;
}

bool attn_is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

/* The dtype of the activations used with a validated cache: its own, or act_dtype for fp8. */
int attn_act_dtype(const db_kv_cache &c) { return c.dtype == DB_DTYPE_FP8_E4M3 ? c.act_dtype : c.dtype; }

bool attn_scale_ok(float s) { return s > 0.0f && !std::isinf(s); } /* false for NaN */

/* Checks a KV cache description for `batch` sequences of up to `tokens` tokens. */
int attn_validate_cache(const char *fn, const db_kv_cache &c, int32_t batch, int64_t tokens) {
  if (c.dtype != DB_DTYPE_BF16 && c.dtype != DB_DTYPE_FP16 && c.dtype != DB_DTYPE_FP8_E4M3)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: cache dtype %d (%s) unsupported: want bf16, fp16 or fp8_e4m3",
                   fn, c.dtype, db_dtype_name(c.dtype));
  if (c.dtype == DB_DTYPE_FP8_E4M3) {
    if (c.act_dtype != DB_DTYPE_BF16 && c.act_dtype != DB_DTYPE_FP16)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                     "%s: act_dtype %d (%s) of an fp8 cache unsupported: want bf16 or fp16", fn, c.act_dtype,
                     db_dtype_name(c.act_dtype));
    if (!attn_scale_ok(c.k_scale) || !attn_scale_ok(c.v_scale))
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: fp8 cache scales k_scale %g, v_scale %g must be finite and > 0",
                     fn, (double)c.k_scale, (double)c.v_scale);
    if ((c.k_scales | c.v_scales) % 4 != 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: per-head scales k_scales 0x%llx, v_scales 0x%llx must be "
                     "4-byte aligned (f32 [kv_heads], or 0)", fn, (unsigned long long)c.k_scales,
                     (unsigned long long)c.v_scales);
  } else if (c.act_dtype != 0 && c.act_dtype != c.dtype) {
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: act_dtype %d (%s) of a %s cache unsupported: want 0 or %s", fn,
                   c.act_dtype, db_dtype_name(c.act_dtype), db_dtype_name(c.dtype), db_dtype_name(c.dtype));
  }
  if (c.kv_heads < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: kv_heads %d must be >= 1", fn, c.kv_heads);
  DB_CHECK(DB_DISPATCH_HEAD_DIM(fn, c.head_dim, D, DB_OK));
  if (c.k == 0 || c.v == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null K or V cache", fn);
  if ((c.k | c.v) % 16 != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: K and V caches must be 16-byte aligned", fn);
  const int64_t row_bytes = (int64_t)c.head_dim * (c.dtype == DB_DTYPE_FP8_E4M3 ? 1 : 2);
  if (c.layout == DB_KV_CONTIGUOUS) {
    if (c.capacity < 1 || c.capacity < tokens)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: cache capacity %d tokens is less than %lld", fn,
                     c.capacity, (long long)(tokens > 1 ? tokens : 1));
    if ((double)batch * c.kv_heads * c.capacity * row_bytes > 9.0e18)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: cache of %d x %d x %d rows is too large", fn,
                     batch, c.kv_heads, c.capacity);
    return DB_OK;
  }
  if (c.layout != DB_KV_PAGED)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: layout %d unknown (want DB_KV_CONTIGUOUS 0 or DB_KV_PAGED 1)",
                   fn, c.layout);
  if (c.page_size < 16 || c.page_size > 256 || !attn_is_pow2(c.page_size))
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                   "%s: page_size %d unsupported (want a power of two from 16 to 256)", fn, c.page_size);
  if (c.num_pages < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: num_pages %d must be >= 1", fn, c.num_pages);
  if (c.pages_per_seq < 1)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: pages_per_seq %d must be >= 1", fn, c.pages_per_seq);
  if ((int64_t)c.pages_per_seq * c.page_size > INT32_MAX)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: %d pages of %d tokens overflow a sequence", fn,
                   c.pages_per_seq, c.page_size);
  if ((int64_t)c.pages_per_seq * c.page_size < tokens)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: %d pages of %d tokens hold %lld tokens, less than %lld",
                   fn, c.pages_per_seq, c.page_size, (long long)c.pages_per_seq * c.page_size,
                   (long long)tokens);
  if (c.page_table == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: paged cache without a page table", fn);
  if (c.page_table % 4 != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: page table must be 4-byte aligned", fn);
  if ((double)c.num_pages * c.kv_heads * c.page_size * row_bytes > 9.0e18)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: %d pages are too large", fn, c.num_pages);
  return DB_OK;
}

/* What a validated call will launch. */
struct AttnPlan {
  int variant; /* DB_ATTENTION_SIMT or DB_ATTENTION_MMA, never AUTO */
  int gp, head_chunks, num_splits, split_tokens;
  int blocks_per_sm; /* the kernel's occupancy on this device */
  AttnKernel kernel;
  dim3 grid;         /* (batch * kv_heads * head_chunks, num_splits) */
  uint64_t workspace, ml_offset, counters_offset;
};

/*
 * The split count of an automatic plan. With `blocks` blocks a split, `slots` resident blocks on
 * the card (occupancy x SMs) and `tiles` tiles of span (the context, or the most a window or
 * chunk reads), s splits of k = ceil(tiles / s) whole tiles run in ceil(blocks * s / slots)
 * waves; a wave lasts about k tiles plus a block's fixed cost (the queries, the pipeline's first
 * tile, the partials: kBlockOverheadTokens), the time of a memory-bound launch whose resident
 * blocks share the card's bandwidth evenly, and the last split of each (sequence, KV head)
 * then merges s partials (kMergeTokensPerSplit each). Only split counts that whole tiles give
 * exactly are candidates (s = ceil(tiles / k) for some k).
 *
 * The rule, the linear planners' (kWholeWaves): among the candidates whose launch fills at least
 * kWholeWaves of the card (blocks * s / (waves * slots)), the one of least time; where none
 * does (too few tiles for a wave, or whole tiles that land between waves), the one of least
 * time overall. A split count must beat the best so far by 2% (each split adds partials to
 * write and merge), so ties go to fewer splits. So a small batch at a long context is cut until
 * it fills one wave (batch 1 x 8k, Llama-3-8B: 64 splits of 128 tokens, 0.97 of the card,
 * where a 256-token floor left it at 0.48), a launch that already fills the card in whole waves
 * stays one split, and a batch of 1.3 waves is cut where four waves of shorter splits fill it.
 * Splits go down to one tile (the kernels' pipeline then has no second stage to overlap, which
 * the fixed cost counts); the merge of up to kMaxSplits partials is counted, so it never
 * outweighs the splits it saves.
 */
constexpr int kBlockOverheadTokens = 64; /* about 2 us of latency at a block's share of HBM on an
                                            H200: a guess until a card measures it */
constexpr int kMergeTokensPerSplit = 1;  /* the merging block reads each split's partials (heads x
                                            head_dim fp32) from L2, with most of the card idle; one
                                            token of K and V at a resident block's share of HBM a
                                            split puts 64 splits at ~3.5 us, above the ~2 us that
                                            kernels/README.md predicts: a guess on the safe side */
constexpr double kWholeWaves = 0.9;      /* kernels/linear.cu's and the static gate's wave rule */
int attn_auto_splits(int64_t blocks, int64_t slots, int tokens, int tile) {
  const int64_t tiles = (tokens + tile - 1) / tile;
  const int64_t most = std::min<int64_t>(kMaxSplits, tiles);
  auto waves = [&](int64_t s) { return (blocks * s + slots - 1) / slots; };
  auto cost = [&](int64_t s, int64_t k) {
    return waves(s) * (k * tile + kBlockOverheadTokens) + (s > 1 ? s * kMergeTokensPerSplit : 0);
  };
  auto fills = [&](int64_t s) { return (double)(blocks * s) >= kWholeWaves * (double)(waves(s) * slots); };
  int best = 1;
  int64_t best_cost = cost(1, tiles);
  bool best_fills = fills(1);
  for (int64_t s = 2; s <= most; ++s) {
    const int64_t k = (tiles + s - 1) / s;
    if ((tiles + k - 1) / k != s) continue; /* rounding gives another s */
    const bool f = fills(s);
    if (best_fills && !f) continue;
    if ((f && !best_fills) || cost(s, k) * 50 < best_cost * 49) /* 2% better */
      best = (int)s, best_cost = cost(s, k), best_fills = f;
  }
  return best;
}

/* Validates p and resolves its variant (AUTO) and split count (0 = auto) into plan; p is not
 * modified. */
int attn_plan(const char *fn, db_context *ctx, const db_attention_params *p, AttnPlan *plan) {
  if (p == nullptr) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
  if (p->batch < 1 || p->batch > DB_MAX_BATCH)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: batch %d out of range 1..%d (DB_MAX_BATCH)", fn, p->batch,
                   DB_MAX_BATCH);
  if (p->q_heads < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: q_heads %d must be >= 1", fn, p->q_heads);
  if (p->max_context < 1 || p->max_context > kMaxContext)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: max_context %d out of range 1..%d", fn, p->max_context,
                   kMaxContext);
  DB_CHECK(attn_validate_cache(fn, p->cache, p->batch, p->max_context));
  const db_kv_cache &c = p->cache;
  if (p->q_heads % c.kv_heads != 0)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: q_heads %d is not a multiple of kv_heads %d", fn,
                   p->q_heads, c.kv_heads);
  if (p->q == 0 || p->out == 0 || p->context_lens == 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null q, out or context_lens", fn);
  if ((p->q | p->out) % 16 != 0 || p->context_lens % 4 != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: q and out must be 16-byte aligned, context_lens 4-byte", fn);
  if (!(p->scale >= 0.0f) || std::isinf(p->scale))
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: scale %g must be finite and >= 0 (0 = 1/sqrt(head_dim))",
                   fn, (double)p->scale);
  if (p->num_splits < 0 || p->num_splits > kMaxSplits)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: num_splits %d out of range 0..%d (0 = auto)", fn,
                   p->num_splits, kMaxSplits);
  if (p->variant < DB_ATTENTION_AUTO || p->variant > DB_ATTENTION_MMA)
    return db_fail(DB_ERR_INVALID_ARGUMENT,
                   "%s: variant %d is not a DB_ATTENTION_* (0 auto, 1 simt, 2 mma)", fn, p->variant);

  if (p->window < 0 || p->chunk < 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: window %d and chunk %d must be >= 0 (0 = the whole context)", fn,
                   p->window, p->chunk);
  if (p->window > 0 && p->chunk > 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: window %d and chunk %d are both set: a layer has one span or none",
                   fn, p->window, p->chunk);
  if (p->sinks % 4 != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: sinks must be 4-byte aligned (f32 [q_heads])", fn);

  const int group = p->q_heads / c.kv_heads;
  plan->variant = p->variant == DB_ATTENTION_AUTO ? DB_ATTENTION_SIMT : p->variant;
  plan->gp = attn_heads_per_block(plan->variant, group);
  DB_CHECK(DB_DISPATCH_HEAD_DIM(fn, c.head_dim, D,
                                db_attn::attn_kernel<D>(fn, plan->variant, attn_act_dtype(c), c.dtype, plan->gp,
                                                        &plan->kernel)));
  const int tile = plan->kernel.tile;
  plan->head_chunks = (group + plan->gp - 1) / plan->gp;
  if ((int64_t)plan->kernel.smem > ctx->smem_per_block_optin_bytes)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                   "%s: the %s kernel with head_dim %d and %d heads per block needs %zu bytes of "
                   "shared memory, the device gives %lld",
                   fn, plan->variant == DB_ATTENTION_MMA ? "mma" : "simt", c.head_dim, plan->gp,
                   plan->kernel.smem, (long long)ctx->smem_per_block_optin_bytes);
  const int64_t blocks = (int64_t)p->batch * c.kv_heads * plan->head_chunks;
  if (blocks > INT32_MAX)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: %lld blocks per split exceed the grid", fn, (long long)blocks);
  DB_CHECK(plan->kernel.occupancy(ctx, &plan->blocks_per_sm));

  /* The splits cover a span, not the context: a window or chunk of n tokens is read from the
   * tile that holds its first token, n + tile - 1 tokens at most (n when a chunk's starts are
   * tile-aligned), and never more than max_context. So the plan knows the most any sequence
   * reads without reading the lengths. */
  int64_t span = p->max_context;
  if (p->window > 0) span = std::min<int64_t>(span, (int64_t)p->window + tile - 1);
  if (p->chunk > 0) span = std::min<int64_t>(span, (int64_t)p->chunk + (p->chunk % tile != 0 ? tile - 1 : 0));
  int splits = p->num_splits;
  if (splits == 0) {
    const int64_t slots = (int64_t)plan->blocks_per_sm * (ctx->sm_count > 0 ? ctx->sm_count : 1);
    splits = attn_auto_splits(blocks, slots, (int)span, tile);
  }
  int64_t per_split = (span + splits - 1) / splits;
  per_split = (per_split + tile - 1) / tile * tile;
  if (p->num_splits == 0) splits = (int)((span + per_split - 1) / per_split);
  plan->num_splits = splits;
  plan->split_tokens = (int)per_split;
  plan->grid = dim3((unsigned)blocks, (unsigned)splits);
  if (splits == 1) {
    plan->workspace = plan->ml_offset = plan->counters_offset = 0;
  } else {
    const uint64_t partials = (uint64_t)p->batch * p->q_heads * splits;
    plan->ml_offset = partials * c.head_dim * 4;
    plan->counters_offset = plan->ml_offset + partials * 8;
    plan->workspace = plan->counters_offset + (uint64_t)blocks * 8;
  }
  return DB_OK;
}

/* The counters' tag for one call: never 0 (a zeroed counter, or one the last arrival reset) nor
 * 0xffffffff (a workspace poisoned with 0xff bytes), distinct for 2^32 - 2 calls in a row. */
uint32_t attn_next_epoch() {
  static std::atomic<uint32_t> last{0};
  for (;;) {
    const uint32_t e = last.fetch_add(1, std::memory_order_relaxed) + 1;
    if (e != 0 && e != 0xffffffffu) return e;
  }
}

int attn_run(db_context *ctx, const db_attention_params &p, const AttnPlan &plan) {
  const db_kv_cache &c = p.cache;
  db_attn::AttnArgs args;
  args.q = reinterpret_cast<const uint4 *>(p.q);
  args.out = reinterpret_cast<void *>(p.out);
  args.context_lens = reinterpret_cast<const int32_t *>(p.context_lens);
  args.sinks = reinterpret_cast<const float *>(p.sinks);
  args.window = p.window;
  args.chunk = p.chunk;
  args.page_table = reinterpret_cast<const int32_t *>(c.page_table);
  args.k = reinterpret_cast<const unsigned char *>(c.k);
  args.v = reinterpret_cast<const unsigned char *>(c.v);
  args.ws_acc = reinterpret_cast<float *>(p.workspace);
  args.ws_ml = reinterpret_cast<float2 *>(p.workspace + plan.ml_offset);
  args.ws_counters = reinterpret_cast<unsigned long long *>(p.workspace + plan.counters_offset);
  args.epoch = attn_next_epoch();
  args.q_heads = p.q_heads;
  args.kv_heads = c.kv_heads;
  args.group = p.q_heads / c.kv_heads;
  args.head_chunks = plan.head_chunks;
  args.max_context = p.max_context;
  args.num_splits = plan.num_splits;
  args.split_tokens = plan.split_tokens;
  args.paged = c.layout == DB_KV_PAGED;
  args.capacity = c.capacity;
  args.page_shift = args.paged ? attn_log2(c.page_size) : 0;
  args.num_pages = c.num_pages;
  args.pages_per_seq = c.pages_per_seq;
  const float scale = p.scale > 0.0f ? p.scale : 1.0f / std::sqrt((float)c.head_dim);
  args.q_scale = scale * db_attn::kLog2e;
  args.k_scale = c.k_scale, args.v_scale = c.v_scale; /* read by the fp8 kernels only */
  args.k_scales = reinterpret_cast<const float *>(c.k_scales);
  args.v_scales = reinterpret_cast<const float *>(c.v_scales);
  return plan.kernel.launch(ctx, plan.grid, args);
}

/* ---- KV append -------------------------------------------------------------------------------- */

using db_attn::AppendArgs;

/* The row (in head_dim elements) of token t of KV head h, seq_head = b * kv_heads + h, or -1 for
 * a page id outside the cache (that row is never touched); table is sequence b's row of the page
 * table (paged only). The decode kernels do the same arithmetic in AttnTiles::issue. */
DB_DEVICE long long kv_cache_row(const AppendArgs &a, const int32_t *table, int seq_head, int h, int t) {
  if (a.paged) {
    const int page = table[t >> a.page_shift];
    if (page < 0 || page >= a.num_pages) return -1;
    return (((long long)page * a.kv_heads + h) << a.page_shift) + (t & ((1 << a.page_shift) - 1));
  }
  return (long long)seq_head * a.capacity + t;
}

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

/* The same into an fp8 e4m3 cache: each thread quantises its 8 elements of K and of V
 * (attn_e4m3_pack8, with KV head h's scales) and writes 8 bytes of each. */
template <class E>
__global__ void __launch_bounds__(256) kv_append_fp8_kernel(const AppendArgs a) {
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
  float x[8];
  attn_unpack8<E>(a.k_new[i], x);
  reinterpret_cast<uint2 *>(a.k)[row * a.chunks + c] = attn_e4m3_pack8(x, attn_e4m3_head_scale(a.k_scales, h, a.k_scale));
  attn_unpack8<E>(a.v_new[i], x);
  reinterpret_cast<uint2 *>(a.v)[row * a.chunks + c] = attn_e4m3_pack8(x, attn_e4m3_head_scale(a.v_scales, h, a.v_scale));
}

}  // namespace

extern "C" int db_attention_plan(db_context *ctx, db_attention_params *p, uint64_t *workspace_bytes) {
  return db_guard("db_attention_plan", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    AttnPlan plan;
    DB_CHECK(attn_plan("db_attention_plan", ctx, p, &plan));
    p->num_splits = plan.num_splits;
    p->split_tokens = plan.split_tokens;
    p->variant = plan.variant;
    if (workspace_bytes != nullptr) *workspace_bytes = plan.workspace;
    return DB_OK;
  });
}

extern "C" int db_attention_launches(db_context *ctx, const db_attention_params *p, db_launch_info *out,
                                     int32_t max, int32_t *count) {
  return db_guard("db_attention_launches", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (count == nullptr) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_attention_launches: null count");
    AttnPlan plan;
    DB_CHECK(attn_plan("db_attention_launches", ctx, p, &plan));
    *count = 1; /* the decode kernel; the split merge runs inside it */
    if (out == nullptr && max == 0) return DB_OK;
    if (out == nullptr || max < *count)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_attention_launches: room for %d launches, the call makes %d",
                     max, *count);
    db_launch_info &l = out[0];
    std::memset(&l, 0, sizeof l);
    std::snprintf(l.kernel, sizeof l.kernel, "%s", plan.kernel.name);
    l.grid_x = (int32_t)plan.grid.x, l.grid_y = (int32_t)plan.grid.y, l.grid_z = 1;
    l.block_threads = plan.kernel.threads;
    l.smem_bytes = (int32_t)plan.kernel.smem;
    return DB_OK;
  });
}

extern "C" int db_attention(db_context *ctx, const db_attention_params *p) {
  return db_guard("db_attention", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    AttnPlan plan;
    DB_CHECK(attn_plan("db_attention", ctx, p, &plan));
    if (plan.workspace > 0 && (p->workspace == 0 || p->workspace_bytes < plan.workspace))
      return db_fail(DB_ERR_WORKSPACE,
                     "db_attention: %d splits need %llu bytes of workspace, got %llu at 0x%llx",
                     plan.num_splits, (unsigned long long)plan.workspace,
                     (unsigned long long)p->workspace_bytes, (unsigned long long)p->workspace);
    if (plan.workspace > 0 && p->workspace % 16 != 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_attention: workspace must be 16-byte aligned");
    return attn_run(ctx, *p, plan);
  });
}

extern "C" int db_kv_append(db_context *ctx, const db_kv_append_params *p) {
  return db_guard("db_kv_append", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (p == nullptr) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_kv_append: null params");
    if (p->batch < 1 || p->batch > DB_MAX_BATCH)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_kv_append: batch %d out of range 1..%d (DB_MAX_BATCH)",
                     p->batch, DB_MAX_BATCH);
    DB_CHECK(attn_validate_cache("db_kv_append", p->cache, p->batch, 1));
    if (p->k_new == 0 || p->v_new == 0 || p->positions == 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_kv_append: null k_new, v_new or positions");
    if ((p->k_new | p->v_new) % 16 != 0 || p->positions % 4 != 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "db_kv_append: k_new and v_new must be 16-byte aligned, positions 4-byte");
    const db_kv_cache &c = p->cache;
    AppendArgs a;
    a.k_new = reinterpret_cast<const uint4 *>(p->k_new);
    a.v_new = reinterpret_cast<const uint4 *>(p->v_new);
    a.k = reinterpret_cast<uint4 *>(c.k);
    a.v = reinterpret_cast<uint4 *>(c.v);
    a.positions = reinterpret_cast<const int32_t *>(p->positions);
    a.page_table = reinterpret_cast<const int32_t *>(c.page_table);
    a.batch = p->batch;
    a.kv_heads = c.kv_heads;
    a.chunks = c.head_dim / 8;
    a.paged = c.layout == DB_KV_PAGED;
    a.capacity = c.capacity;
    a.page_shift = a.paged ? attn_log2(c.page_size) : 0;
    a.num_pages = c.num_pages;
    a.pages_per_seq = c.pages_per_seq;
    a.k_scale = c.k_scale;
    a.v_scale = c.v_scale;
    a.k_scales = reinterpret_cast<const float *>(c.k_scales);
    a.v_scales = reinterpret_cast<const float *>(c.v_scales);
    const int64_t threads = (int64_t)p->batch * c.kv_heads * a.chunks;
    const dim3 grid((unsigned)db_ceil_div((uint64_t)threads, 256));
    if (c.dtype != DB_DTYPE_FP8_E4M3) return DB_LAUNCH(kv_append_kernel, grid, dim3(256), 0, ctx->stream, a);
    if (c.act_dtype == DB_DTYPE_BF16)
      return DB_LAUNCH((kv_append_fp8_kernel<__nv_bfloat16>), grid, dim3(256), 0, ctx->stream, a);
    return DB_LAUNCH((kv_append_fp8_kernel<__half>), grid, dim3(256), 0, ctx->stream, a);
  });
}
