/*
 * attention.cu: decode attention over a KV cache (one new query token per sequence), split-KV
 * with a log-sum-exp combine, and the KV append. Implements the attention section of
 * decodebench.h.
 *
 * This file is the host side: it validates the parameters and the cache description, plans a
 * call (variant, heads per block, tile, splits, shared memory, workspace), turns the head dim and
 * the heads per block into template parameters and launches the kernels of attention_kernels.cuh
 * (SIMT) or attention_mma_kernels.cuh (MMA), whose top comments describe how they work and why
 * the tile sizes are what they are.
 *
 * Variant choice: AUTO resolves to SIMT, today's kernel, until a card has timed both
 * (scripts/gpu-check.sh benches `--variant mma` next to the default). The MMA kernel takes
 * every shape the SIMT one does (head dims are multiples of 16, groups run in chunks of 16), so
 * the plan never refuses it for its shape. Not yet measured on a card.
 */
#include <algorithm>
#include <atomic>
#include <cmath>

#include "common.cuh"
#include "attention_kernels.cuh"
#include "attention_mma_kernels.cuh"

namespace {

constexpr int kMaxGroupChunk = 16;     /* query heads one block serves */
constexpr int kMinSplitTokens = 256;   /* auto splits never cut finer: each split still streams
                                          several tiles, so the pipeline and the combine pay off */
constexpr int kMaxBatch = 65536;
constexpr int kMaxContext = 1 << 30;   /* keeps split * split_tokens + a tile inside int32 */
constexpr float kLog2e = 1.4426950408889634f;

/* ---- host side: validation, planning, dispatch ------------------------------------------------ */

int attn_log2(int x) {
  int s = 0;
  while ((1 << s) < x) ++s;
  return s;
}

/* Heads per block for a group: the smallest template that holds it, 16 at most. */
int attn_heads_per_block(int group) {
  if (group <= 1) return 1;
  if (group <= 2) return 2;
  if (group <= 4) return 4;
  if (group <= 8) return 8;
  return kMaxGroupChunk;
}

int attn_tile_tokens(int head_dim) { return head_dim <= 64 ? 64 : (head_dim <= 128 ? 32 : 16); }

/* The MMA kernel's tile (tokens), from its config: 64, or 32 for head dim 256. */
int attn_mma_tile_tokens(int head_dim) { return head_dim >= 256 ? AttnMmaConfig<256, 8>::kTile : AttnMmaConfig<128, 8>::kTile; }

/* The dynamic shared memory of an instantiation, without instantiating the kernel. */
template <int D>
size_t attn_smem_bytes_d(int gp) {
  switch (gp) {
    case 1: return AttnConfig<D, 1>::kSmemBytes;
    case 2: return AttnConfig<D, 2>::kSmemBytes;
    case 4: return AttnConfig<D, 4>::kSmemBytes;
    case 8: return AttnConfig<D, 8>::kSmemBytes;
    default: return AttnConfig<D, 16>::kSmemBytes;
  }
}
size_t attn_smem_bytes(int head_dim, int gp) {
  switch (head_dim) {
    case 64: return attn_smem_bytes_d<64>(gp);
    case 80: return attn_smem_bytes_d<80>(gp);
    case 96: return attn_smem_bytes_d<96>(gp);
    case 128: return attn_smem_bytes_d<128>(gp);
    default: return attn_smem_bytes_d<256>(gp);
  }
}
template <int D>
size_t attn_mma_smem_bytes_d(int gp) {
  return gp <= 8 ? AttnMmaConfig<D, 8>::kSmemBytes : AttnMmaConfig<D, 16>::kSmemBytes;
}
size_t attn_mma_smem_bytes(int head_dim, int gp) {
  switch (head_dim) {
    case 64: return attn_mma_smem_bytes_d<64>(gp);
    case 80: return attn_mma_smem_bytes_d<80>(gp);
    case 96: return attn_mma_smem_bytes_d<96>(gp);
    case 128: return attn_mma_smem_bytes_d<128>(gp);
    default: return attn_mma_smem_bytes_d<256>(gp);
  }
}

bool attn_is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

/* Checks a KV cache description for `batch` sequences of up to `tokens` tokens. */
int attn_validate_cache(const char *fn, const db_kv_cache &c, int32_t batch, int64_t tokens) {
  if (c.dtype != DB_DTYPE_BF16 && c.dtype != DB_DTYPE_FP16)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: cache dtype %d (%s) unsupported: want bf16 or fp16",
                   fn, c.dtype, db_dtype_name(c.dtype));
  if (c.kv_heads < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: kv_heads %d must be >= 1", fn, c.kv_heads);
  switch (c.head_dim) {
    case 64: case 80: case 96: case 128: case 256: break;
    default:
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                     "%s: head_dim %d unsupported (want 64, 80, 96, 128 or 256)", fn, c.head_dim);
  }
  if (c.k == 0 || c.v == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null K or V cache", fn);
  if ((c.k | c.v) % 16 != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: K and V caches must be 16-byte aligned", fn);
  const int64_t row_bytes = (int64_t)c.head_dim * 2;
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
  int gp, head_chunks, tile, num_splits, split_tokens;
  size_t smem;
  uint64_t workspace;
};

/* Validates p and resolves its variant (AUTO) and split count (0 = auto) into plan; p is not
 * modified. */
int attn_plan(const char *fn, const db_context *ctx, const db_attention_params *p, AttnPlan *plan) {
  if (p == nullptr) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
  if (p->batch < 1 || p->batch > kMaxBatch)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: batch %d out of range 1..%d", fn, p->batch, kMaxBatch);
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

  const int group = p->q_heads / c.kv_heads;
  plan->variant = p->variant == DB_ATTENTION_AUTO ? DB_ATTENTION_SIMT : p->variant;
  if (plan->variant == DB_ATTENTION_MMA) {
    plan->gp = attn_mma_heads_per_block(group);
    plan->tile = attn_mma_tile_tokens(c.head_dim);
    plan->smem = attn_mma_smem_bytes(c.head_dim, plan->gp);
  } else {
    plan->gp = attn_heads_per_block(group);
    plan->tile = attn_tile_tokens(c.head_dim);
    plan->smem = attn_smem_bytes(c.head_dim, plan->gp);
  }
  plan->head_chunks = (group + plan->gp - 1) / plan->gp;
  if ((int64_t)plan->smem > ctx->smem_per_block_optin_bytes)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                   "%s: the %s kernel with head_dim %d and %d heads per block needs %zu bytes of "
                   "shared memory, the device gives %lld",
                   fn, plan->variant == DB_ATTENTION_MMA ? "mma" : "simt", c.head_dim, plan->gp,
                   plan->smem, (long long)ctx->smem_per_block_optin_bytes);
  const int64_t blocks = (int64_t)p->batch * c.kv_heads * plan->head_chunks;
  if (blocks > INT32_MAX)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: %lld blocks per split exceed the grid", fn, (long long)blocks);

  int splits = p->num_splits;
  if (splits == 0) {
    /* About four blocks per SM (3 to 8 fit by registers and shared memory, see the top of
     * attention_kernels.cuh), never a split shorter than kMinSplitTokens. */
    const int64_t target = 4 * (int64_t)(ctx->sm_count > 0 ? ctx->sm_count : 1);
    int64_t s = blocks >= target ? 1 : (target + blocks - 1) / blocks;
    s = std::min<int64_t>(s, (p->max_context + kMinSplitTokens - 1) / kMinSplitTokens);
    splits = (int)std::max<int64_t>(1, std::min<int64_t>(s, kMaxSplits));
  }
  int64_t per_split = (p->max_context + splits - 1) / splits;
  per_split = (per_split + plan->tile - 1) / plan->tile * plan->tile;
  if (p->num_splits == 0) splits = (int)((p->max_context + per_split - 1) / per_split);
  plan->num_splits = splits;
  plan->split_tokens = (int)per_split;
  plan->workspace = splits == 1 ? 0
                                : (uint64_t)p->batch * p->q_heads * splits * (c.head_dim + 2) * 4;
  return DB_OK;
}

/* Raises a kernel's dynamic shared memory limit once per device (the attribute is per device). */
template <class... P>
int attn_allow_smem(void (*kernel)(P...), std::atomic<uint64_t> &done, int device, size_t bytes,
                    const char *name) {
  if (bytes <= 48 * 1024) return DB_OK;
  const uint64_t bit = device < 64 ? uint64_t(1) << device : 0;
  if (bit != 0 && (done.load(std::memory_order_relaxed) & bit)) return DB_OK;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  if (e != cudaSuccess) return db_fail_cuda(e, name);
  done.fetch_or(bit, std::memory_order_relaxed);
  return DB_OK;
}

template <class E, int D, int GP>
int attn_launch(db_context *ctx, const AttnArgs &args, const AttnPlan &plan, int32_t batch, int32_t kv_heads) {
  static std::atomic<uint64_t> smem_set{0};
  auto kernel = attention_decode_kernel<E, D, GP>;
  DB_CHECK(attn_allow_smem(kernel, smem_set, ctx->device, plan.smem,
                           "cudaFuncSetAttribute(attention_decode_kernel, MaxDynamicSharedMemorySize)"));
  const dim3 grid((unsigned)((int64_t)batch * kv_heads * plan.head_chunks), (unsigned)plan.num_splits);
  return DB_LAUNCH((attention_decode_kernel<E, D, GP>), grid, dim3(kAttnThreads), plan.smem,
                   ctx->stream, args);
}

template <class E, int D>
int attn_dispatch_gp(db_context *ctx, const AttnArgs &args, const AttnPlan &plan, int32_t batch, int32_t kv_heads) {
  switch (plan.gp) {
    case 1: return attn_launch<E, D, 1>(ctx, args, plan, batch, kv_heads);
    case 2: return attn_launch<E, D, 2>(ctx, args, plan, batch, kv_heads);
    case 4: return attn_launch<E, D, 4>(ctx, args, plan, batch, kv_heads);
    case 8: return attn_launch<E, D, 8>(ctx, args, plan, batch, kv_heads);
    case 16: return attn_launch<E, D, 16>(ctx, args, plan, batch, kv_heads);
  }
  return db_fail(DB_ERR_INTERNAL, "attention: no kernel for %d heads per block", plan.gp);
}

template <class E, int D, int GP>
int attn_mma_launch(db_context *ctx, const AttnArgs &args, const AttnPlan &plan, int32_t batch,
                    int32_t kv_heads) {
  static std::atomic<uint64_t> smem_set{0};
  auto kernel = attention_decode_mma_kernel<E, D, GP>;
  DB_CHECK(attn_allow_smem(kernel, smem_set, ctx->device, plan.smem,
                           "cudaFuncSetAttribute(attention_decode_mma_kernel, MaxDynamicSharedMemorySize)"));
  const dim3 grid((unsigned)((int64_t)batch * kv_heads * plan.head_chunks), (unsigned)plan.num_splits);
  return DB_LAUNCH((attention_decode_mma_kernel<E, D, GP>), grid, dim3(AttnMmaConfig<D, GP>::kThreads),
                   plan.smem, ctx->stream, args);
}

template <class E, int D>
int attn_dispatch(db_context *ctx, const AttnArgs &args, const AttnPlan &plan, int32_t batch, int32_t kv_heads) {
  if (plan.variant != DB_ATTENTION_MMA) return attn_dispatch_gp<E, D>(ctx, args, plan, batch, kv_heads);
  switch (plan.gp) {
    case 8: return attn_mma_launch<E, D, 8>(ctx, args, plan, batch, kv_heads);
    case 16: return attn_mma_launch<E, D, 16>(ctx, args, plan, batch, kv_heads);
  }
  return db_fail(DB_ERR_INTERNAL, "attention: no mma kernel for %d heads per block", plan.gp);
}

template <class E>
int attn_run(db_context *ctx, const db_attention_params &p, const AttnPlan &plan) {
  const db_kv_cache &c = p.cache;
  AttnArgs args;
  args.q = reinterpret_cast<const uint4 *>(p.q);
  args.out = reinterpret_cast<void *>(p.out);
  args.context_lens = reinterpret_cast<const int32_t *>(p.context_lens);
  args.page_table = reinterpret_cast<const int32_t *>(c.page_table);
  args.k = reinterpret_cast<const unsigned char *>(c.k);
  args.v = reinterpret_cast<const unsigned char *>(c.v);
  args.ws_acc = reinterpret_cast<float *>(p.workspace);
  args.ws_ml = reinterpret_cast<float2 *>(
      p.workspace + (uint64_t)p.batch * p.q_heads * plan.num_splits * c.head_dim * 4);
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
  args.q_scale = scale * kLog2e;

  int status;
  switch (c.head_dim) {
    case 64: status = attn_dispatch<E, 64>(ctx, args, plan, p.batch, c.kv_heads); break;
    case 80: status = attn_dispatch<E, 80>(ctx, args, plan, p.batch, c.kv_heads); break;
    case 96: status = attn_dispatch<E, 96>(ctx, args, plan, p.batch, c.kv_heads); break;
    case 128: status = attn_dispatch<E, 128>(ctx, args, plan, p.batch, c.kv_heads); break;
    case 256: status = attn_dispatch<E, 256>(ctx, args, plan, p.batch, c.kv_heads); break;
    default:
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "db_attention: head_dim %d unsupported", c.head_dim);
  }
  DB_CHECK(status);
  if (plan.num_splits == 1) return DB_OK;
  return DB_LAUNCH((attention_combine_kernel<E>), dim3((unsigned)((int64_t)p.batch * p.q_heads)),
                   dim3(kCombineThreads), 0, ctx->stream, args.ws_acc,
                   static_cast<const float2 *>(args.ws_ml), reinterpret_cast<E *>(p.out),
                   (int)plan.num_splits, (int)c.head_dim);
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
    if (p->cache.dtype == DB_DTYPE_BF16) return attn_run<__nv_bfloat16>(ctx, *p, plan);
    return attn_run<__half>(ctx, *p, plan);
  });
}

extern "C" int db_kv_append(db_context *ctx, const db_kv_append_params *p) {
  return db_guard("db_kv_append", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (p == nullptr) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_kv_append: null params");
    if (p->batch < 1 || p->batch > kMaxBatch)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_kv_append: batch %d out of range 1..%d", p->batch, kMaxBatch);
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
    const int64_t threads = (int64_t)p->batch * c.kv_heads * a.chunks;
    return DB_LAUNCH(kv_append_kernel, dim3((unsigned)db_ceil_div((uint64_t)threads, 256)), dim3(256), 0,
                     ctx->stream, a);
  });
}
