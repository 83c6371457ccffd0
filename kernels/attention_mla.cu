/*
 * attention_mla.cu: multi-head latent attention decode (the absorbed form) and the latent cache
 * append: the host side of decodebench.h's MLA section. attention_mla.cuh holds the kernels and
 * says why their tiles are what they are; kernels/README.md ("MLA attention") has the plan's
 * predicted speed.
 */
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common.cuh"
#include "attention_mla.cuh"

namespace {

using namespace db_mla;

constexpr int kMlaMaxSplits = DB_MAX_SPLITS;
constexpr int kMaxContext = 1 << 30; /* keeps split * split_tokens + a tile inside int32 */
/* Auto splits never cut finer than two tiles: a split's fixed cost (16 queries of 1152 bytes in,
 * 16 x 512 fp32 partials out and back in the merge: 50 KiB) is then under the 74 KiB of cache it
 * reads, and a batch-1 call of a few thousand tokens still spreads over dozens of SMs. */
constexpr int kMinSplitTokens = 2 * kTile;
/* A block's fixed cost in tokens of cache read, for the split choice: the queries, the
 * pipeline's first tile and the partials (about 45 tokens of bytes) and a few microseconds of
 * latency. A guess until a card measures it, as for the GQA planner. */
constexpr int kBlockOverheadTokens = 64;
/* The merge, in tokens a split: the last split's block reads every split's 16 x 512 fp32
 * partials (32 KiB, 28 tokens of cache bytes) alone at the end of the launch, from L2, at a few
 * times a block's share of HBM: about 10 tokens of time a split. Without it the plan cut a
 * batch-1 32k-token call into 256 splits whose merge, one block reading 8 MiB, would take
 * longer than the attention. A guess until a card measures it. */
constexpr int kMergeTokensPerSplit = 10;
constexpr float kLog2e = 1.4426950408889634f;
/* ptxas's sm_90 registers a thread (nvcc 11.8, -O3; the larger of bf16 and fp16), from
 * build/cuda/attention_mla.ptxas.log: the emulator's occupancy answer uses it, so an emulated
 * plan with DB_EMU_SM_COUNT=132 makes the card's split choice. */
constexpr int kSm90Registers = 155;

int mla_log2(int x) {
  int s = 0;
  while ((1 << s) < x) ++s;
  return s;
}

bool mla_is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

/* Checks a latent cache description for `batch` sequences of up to `tokens` tokens. */
int mla_validate_cache(const char *fn, const db_kv_cache &c, int32_t batch, int64_t tokens) {
  if (c.dtype != DB_DTYPE_BF16 && c.dtype != DB_DTYPE_FP16)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: cache dtype %d (%s) unsupported: want bf16 or fp16", fn,
                   c.dtype, db_dtype_name(c.dtype));
  if (c.kv_heads != 1)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: cache.kv_heads %d: the latent cache has one (want 1)", fn,
                   c.kv_heads);
  if (c.head_dim != DB_MLA_QK_DIM)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                   "%s: cache.head_dim %d unsupported: a latent row is %d elements (kv_lora_rank %d + rope %d)", fn,
                   c.head_dim, DB_MLA_QK_DIM, DB_MLA_LATENT_DIM, DB_MLA_ROPE_DIM);
  if (c.k == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null latent cache (cache.k)", fn);
  if (c.v != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT,
                   "%s: cache.v must be 0: the values are the first %d elements of the latent rows in cache.k", fn,
                   DB_MLA_V_DIM);
  if (c.k % 16 != 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: the latent cache must be 16-byte aligned", fn);
  const double row_bytes = DB_MLA_QK_DIM * 2.0;
  if (c.layout == DB_KV_CONTIGUOUS) {
    if (c.capacity < 1 || c.capacity < tokens)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: cache capacity %d tokens is less than %lld", fn, c.capacity,
                     (long long)(tokens > 1 ? tokens : 1));
    if ((double)batch * c.capacity * row_bytes > 9.0e18)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: cache of %d x %d rows is too large", fn, batch, c.capacity);
    return DB_OK;
  }
  if (c.layout != DB_KV_PAGED)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: layout %d unknown (want DB_KV_CONTIGUOUS 0 or DB_KV_PAGED 1)", fn,
                   c.layout);
  if (c.page_size < DB_MIN_PAGE_SIZE || c.page_size > DB_MAX_PAGE_SIZE || !mla_is_pow2(c.page_size))
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: page_size %d unsupported (want a power of two from %d to %d)", fn,
                   c.page_size, DB_MIN_PAGE_SIZE, DB_MAX_PAGE_SIZE);
  if (c.num_pages < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: num_pages %d must be >= 1", fn, c.num_pages);
  if (c.pages_per_seq < 1)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: pages_per_seq %d must be >= 1", fn, c.pages_per_seq);
  if ((int64_t)c.pages_per_seq * c.page_size > INT32_MAX)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: %d pages of %d tokens overflow a sequence", fn, c.pages_per_seq,
                   c.page_size);
  if ((int64_t)c.pages_per_seq * c.page_size < tokens)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: %d pages of %d tokens hold %lld tokens, less than %lld", fn,
                   c.pages_per_seq, c.page_size, (long long)c.pages_per_seq * c.page_size, (long long)tokens);
  if (c.page_table == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: paged cache without a page table", fn);
  if (c.page_table % 4 != 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: page table must be 4-byte aligned", fn);
  if ((double)c.num_pages * c.page_size * row_bytes > 9.0e18)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: %d pages are too large", fn, c.num_pages);
  return DB_OK;
}

/* The kernel of a dtype. */
using MlaKernelFn = void (*)(const MlaArgs);
MlaKernelFn mla_kernel(int dtype) {
  return dtype == DB_DTYPE_BF16 ? &attention_mla_decode_kernel<__nv_bfloat16> : &attention_mla_decode_kernel<__half>;
}
const char *mla_kernel_name(int dtype) {
  return dtype == DB_DTYPE_BF16 ? "(anonymous namespace)::attention_mla_decode_kernel<__nv_bfloat16>"
                                : "(anonymous namespace)::attention_mla_decode_kernel<__half>";
}

/* Raises the kernel's dynamic shared memory limit (93 KiB > the 48 KiB default) once per device
 * and dtype, then asks its occupancy (cached likewise). */
constexpr int kMaxDevices = 64;
int mla_occupancy(db_context *ctx, int dtype, int *blocks_per_sm) {
  static std::atomic<uint64_t> allowed[2];
  static std::atomic<int> cached[2][kMaxDevices];
  const int d = dtype == DB_DTYPE_BF16 ? 0 : 1;
  const bool cacheable = ctx->device >= 0 && ctx->device < kMaxDevices;
  const uint64_t bit = cacheable ? uint64_t(1) << ctx->device : 0;
  if (bit == 0 || !(allowed[d].load(std::memory_order_relaxed) & bit)) {
    const cudaError_t e =
        cudaFuncSetAttribute(mla_kernel(dtype), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBytes);
    if (e != cudaSuccess)
      return db_fail_cuda(e, "cudaFuncSetAttribute(attention_mla_decode_kernel, MaxDynamicSharedMemorySize)");
    allowed[d].fetch_or(bit, std::memory_order_relaxed);
  }
  if (blocks_per_sm == nullptr) return DB_OK;
  if (cacheable && (*blocks_per_sm = cached[d][ctx->device].load(std::memory_order_relaxed)) > 0) return DB_OK;
  DB_CHECK(db_occupancy(mla_kernel(dtype), kThreads, kSmemBytes, kSm90Registers, "attention_mla_decode_kernel",
                        blocks_per_sm));
  if (cacheable) cached[d][ctx->device].store(*blocks_per_sm, std::memory_order_relaxed);
  return DB_OK;
}

struct MlaPlan {
  int head_chunks, num_splits, split_tokens, blocks_per_sm;
  dim3 grid; /* (batch * head_chunks, num_splits) */
  uint64_t workspace, ml_offset, counters_offset;
};

/* The split count of least predicted time, as db_attention's planner chooses it (attention.cu,
 * attn_auto_splits): s splits of k = ceil(tiles / s) tiles run in ceil(blocks * s / slots) waves
 * of about k tiles plus a block's fixed cost, and then the merge of s partials; a larger s
 * wins only when 2% better, never a split under kMinSplitTokens. */
int mla_auto_splits(int64_t blocks, int64_t slots, int max_context) {
  const int64_t tiles = (max_context + kTile - 1) / kTile;
  const int64_t most = std::min<int64_t>(kMlaMaxSplits, max_context / kMinSplitTokens);
  auto cost = [&](int64_t s, int64_t k) {
    return (blocks * s + slots - 1) / slots * (k * kTile + kBlockOverheadTokens) + (s > 1 ? s * kMergeTokensPerSplit : 0);
  };
  int best = 1;
  int64_t best_cost = cost(1, tiles);
  for (int64_t s = 2; s <= most; ++s) {
    const int64_t k = (tiles + s - 1) / s;
    if ((tiles + k - 1) / k != s || k * kTile < kMinSplitTokens) continue;
    if (cost(s, k) * 50 < best_cost * 49) best = (int)s, best_cost = cost(s, k);
  }
  return best;
}

int mla_plan(const char *fn, db_context *ctx, const db_mla_attention_params *p, MlaPlan *plan) {
  if (p == nullptr) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
  if (p->batch < 1 || p->batch > DB_MAX_BATCH)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: batch %d out of range 1..%d (DB_MAX_BATCH)", fn, p->batch,
                   DB_MAX_BATCH);
  if (p->q_heads < 1 || p->q_heads > DB_MLA_MAX_HEADS)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: q_heads %d out of range 1..%d (DB_MLA_MAX_HEADS)", fn, p->q_heads,
                   DB_MLA_MAX_HEADS);
  if (p->max_context < 1 || p->max_context > kMaxContext)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: max_context %d out of range 1..%d", fn, p->max_context, kMaxContext);
  DB_CHECK(mla_validate_cache(fn, p->cache, p->batch, p->max_context));
  if (p->q == 0 || p->out == 0 || p->context_lens == 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null q, out or context_lens", fn);
  if ((p->q | p->out) % 16 != 0 || p->context_lens % 4 != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: q and out must be 16-byte aligned, context_lens 4-byte", fn);
  if (!(p->scale > 0.0f) || std::isinf(p->scale))
    return db_fail(DB_ERR_INVALID_ARGUMENT,
                   "%s: scale %g must be finite and > 0 (the model's softmax scale: DeepSeek's includes the yarn "
                   "mscale)",
                   fn, (double)p->scale);
  if (p->num_splits < 0 || p->num_splits > kMlaMaxSplits)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: num_splits %d out of range 0..%d (0 = auto)", fn, p->num_splits,
                   kMlaMaxSplits);
  if ((int64_t)kSmemBytes > ctx->smem_per_block_optin_bytes)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: the MLA kernel needs %zu bytes of shared memory, the device gives %lld",
                   fn, kSmemBytes, (long long)ctx->smem_per_block_optin_bytes);
  plan->head_chunks = (p->q_heads + kHeads - 1) / kHeads;
  const int64_t blocks = (int64_t)p->batch * plan->head_chunks;
  DB_CHECK(mla_occupancy(ctx, p->cache.dtype, &plan->blocks_per_sm));
  int splits = p->num_splits;
  if (splits == 0) {
    const int64_t slots = (int64_t)plan->blocks_per_sm * (ctx->sm_count > 0 ? ctx->sm_count : 1);
    splits = mla_auto_splits(blocks, slots, p->max_context);
  }
  int64_t per_split = (p->max_context + splits - 1) / splits;
  per_split = (per_split + kTile - 1) / kTile * kTile;
  if (p->num_splits == 0) splits = (int)((p->max_context + per_split - 1) / per_split);
  plan->num_splits = splits;
  plan->split_tokens = (int)per_split;
  plan->grid = dim3((unsigned)blocks, (unsigned)splits);
  if (splits == 1) {
    plan->workspace = plan->ml_offset = plan->counters_offset = 0;
  } else {
    const uint64_t partials = (uint64_t)p->batch * p->q_heads * splits;
    plan->ml_offset = partials * DB_MLA_V_DIM * 4;
    plan->counters_offset = plan->ml_offset + partials * 8;
    plan->workspace = plan->counters_offset + (uint64_t)blocks * 8;
  }
  return DB_OK;
}

/* The counters' tag for one call: never 0 (a zeroed counter, or one the last arrival reset) nor
 * 0xffffffff (a workspace poisoned with 0xff bytes). Its own sequence, apart from db_attention's:
 * a workspace passed to both in turn meets a counter of the other's epoch only after a call that
 * died halfway, as a single sequence would after 2^32 calls. */
uint32_t mla_next_epoch() {
  static std::atomic<uint32_t> last{0x80000000u};
  for (;;) {
    const uint32_t e = last.fetch_add(1, std::memory_order_relaxed) + 1;
    if (e != 0 && e != 0xffffffffu) return e;
  }
}

int mla_run(db_context *ctx, const db_mla_attention_params &p, const MlaPlan &plan) {
  const db_kv_cache &c = p.cache;
  MlaArgs a;
  a.q = reinterpret_cast<const uint4 *>(p.q);
  a.out = reinterpret_cast<void *>(p.out);
  a.context_lens = reinterpret_cast<const int32_t *>(p.context_lens);
  a.page_table = reinterpret_cast<const int32_t *>(c.page_table);
  a.kv = reinterpret_cast<const unsigned char *>(c.k);
  a.ws_acc = reinterpret_cast<float *>(p.workspace);
  a.ws_ml = reinterpret_cast<float2 *>(p.workspace + plan.ml_offset);
  a.ws_counters = reinterpret_cast<unsigned long long *>(p.workspace + plan.counters_offset);
  a.epoch = mla_next_epoch();
  a.q_heads = p.q_heads;
  a.head_chunks = plan.head_chunks;
  a.max_context = p.max_context;
  a.num_splits = plan.num_splits;
  a.split_tokens = plan.split_tokens;
  a.paged = c.layout == DB_KV_PAGED;
  a.capacity = c.capacity;
  a.page_shift = a.paged ? mla_log2(c.page_size) : 0;
  a.num_pages = c.num_pages;
  a.pages_per_seq = c.pages_per_seq;
  a.q_scale = p.scale * kLog2e;
  DB_CHECK(mla_occupancy(ctx, c.dtype, nullptr));
  if (c.dtype == DB_DTYPE_BF16)
    return DB_LAUNCH((attention_mla_decode_kernel<__nv_bfloat16>), plan.grid, dim3(kThreads), kSmemBytes,
                     ctx->stream, a);
  return DB_LAUNCH((attention_mla_decode_kernel<__half>), plan.grid, dim3(kThreads), kSmemBytes, ctx->stream, a);
}

}  // namespace

extern "C" int db_mla_attention_plan(db_context *ctx, db_mla_attention_params *p, uint64_t *workspace_bytes) {
  return db_guard("db_mla_attention_plan", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    MlaPlan plan;
    DB_CHECK(mla_plan("db_mla_attention_plan", ctx, p, &plan));
    p->num_splits = plan.num_splits;
    p->split_tokens = plan.split_tokens;
    if (workspace_bytes != nullptr) *workspace_bytes = plan.workspace;
    return DB_OK;
  });
}

extern "C" int db_mla_attention_launches(db_context *ctx, const db_mla_attention_params *p, db_launch_info *out,
                                         int32_t max, int32_t *count) {
  return db_guard("db_mla_attention_launches", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (count == nullptr) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_mla_attention_launches: null count");
    MlaPlan plan;
    DB_CHECK(mla_plan("db_mla_attention_launches", ctx, p, &plan));
    *count = 1; /* the decode kernel; the split merge runs inside it */
    if (out == nullptr && max == 0) return DB_OK;
    if (out == nullptr || max < *count)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_mla_attention_launches: room for %d launches, the call makes %d",
                     max, *count);
    db_launch_info &l = out[0];
    std::memset(&l, 0, sizeof l);
    std::snprintf(l.kernel, sizeof l.kernel, "%s", mla_kernel_name(p->cache.dtype));
    l.grid_x = (int32_t)plan.grid.x, l.grid_y = (int32_t)plan.grid.y, l.grid_z = 1;
    l.block_threads = kThreads;
    l.smem_bytes = (int32_t)kSmemBytes;
    return DB_OK;
  });
}

extern "C" int db_mla_attention(db_context *ctx, const db_mla_attention_params *p) {
  return db_guard("db_mla_attention", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    MlaPlan plan;
    DB_CHECK(mla_plan("db_mla_attention", ctx, p, &plan));
    if (plan.workspace > 0 && (p->workspace == 0 || p->workspace_bytes < plan.workspace))
      return db_fail(DB_ERR_WORKSPACE, "db_mla_attention: %d splits need %llu bytes of workspace, got %llu at 0x%llx",
                     plan.num_splits, (unsigned long long)plan.workspace, (unsigned long long)p->workspace_bytes,
                     (unsigned long long)p->workspace);
    if (plan.workspace > 0 && p->workspace % 16 != 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_mla_attention: workspace must be 16-byte aligned");
    return mla_run(ctx, *p, plan);
  });
}

extern "C" int db_mla_kv_append(db_context *ctx, const db_mla_kv_append_params *p) {
  return db_guard("db_mla_kv_append", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (p == nullptr) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_mla_kv_append: null params");
    if (p->batch < 1 || p->batch > DB_MAX_BATCH)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_mla_kv_append: batch %d out of range 1..%d (DB_MAX_BATCH)",
                     p->batch, DB_MAX_BATCH);
    DB_CHECK(mla_validate_cache("db_mla_kv_append", p->cache, p->batch, 1));
    if (p->kv_new == 0 || p->positions == 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_mla_kv_append: null kv_new or positions");
    if (p->kv_new % 16 != 0 || p->positions % 4 != 0)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_mla_kv_append: kv_new must be 16-byte aligned, positions 4-byte");
    const db_kv_cache &c = p->cache;
    MlaAppendArgs a;
    a.kv_new = reinterpret_cast<const uint4 *>(p->kv_new);
    a.kv = reinterpret_cast<uint4 *>(c.k);
    a.positions = reinterpret_cast<const int32_t *>(p->positions);
    a.page_table = reinterpret_cast<const int32_t *>(c.page_table);
    a.batch = p->batch;
    a.paged = c.layout == DB_KV_PAGED;
    a.capacity = c.capacity;
    a.page_shift = a.paged ? mla_log2(c.page_size) : 0;
    a.num_pages = c.num_pages;
    a.pages_per_seq = c.pages_per_seq;
    const uint64_t threads = (uint64_t)p->batch * kChunks;
    return DB_LAUNCH(mla_kv_append_kernel, dim3((unsigned)db_ceil_div(threads, 256)), dim3(256), 0, ctx->stream, a);
  });
}
