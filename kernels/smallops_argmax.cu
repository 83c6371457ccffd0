// smallops_argmax.cu: greedy sampling, ids[b] = argmax of logits[b, :] (decodebench.h,
// db_argmax). A vocabulary's row is 64-300 KB at batch 1 (Llama-3 128256, Qwen2 151936 entries),
// too much for one SM to stream quickly, so each row is cut into num_splits slices: kernel 1
// runs one 256-thread block per (slice, row), each thread keeping 4 16-byte loads in flight,
// and writes the slice's (key, index) to the workspace; kernel 2, one warp per row, picks the
// winner. With one slice kernel 1 writes the id itself.
//
// Rows of any length: row b starts at element b * vocab, which is 16-byte aligned only when
// vocab is a multiple of 8, so each row is read as the aligned 16-byte chunks that lie wholly
// inside it, with its unaligned head and tail element by element. Nothing outside the row is read.
#include "smallops_common.cuh"

namespace {

constexpr unsigned kArgmaxThreads = 256;
constexpr int kArgmaxUnroll = 4;
constexpr int kMinSliceElements = kArgmaxThreads * kVec * 2; /* 2 loads per thread at least */
constexpr int kMaxArgmaxSplits = 1024;

/* The better of two (key, index) candidates: the larger key, the lower index on a tie. */
DB_DEVICE void so_better(uint32_t &key, int &index, uint32_t k2, int i2) {
  if (k2 > key || (k2 == key && i2 < index)) {
    key = k2;
    index = i2;
  }
}

DB_DEVICE void so_warp_best(uint32_t &key, int &index) {
  DB_UNROLL
  for (int offset = 16; offset > 0; offset >>= 1) {
    const uint32_t k2 = __shfl_xor_sync(0xffffffffu, key, offset);
    const int i2 = __shfl_xor_sync(0xffffffffu, index, offset);
    so_better(key, index, k2, i2);
  }
}

template <class T>
__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_slice_kernel(const uint16_t *logits, uint2 *partials, int32_t *ids, int vocab, int splits) {
  DB_SHARED(uint32_t, warp_keys, kArgmaxThreads / 32);
  DB_SHARED(int, warp_index, kArgmaxThreads / 32);
  const int b = blockIdx.y, split = blockIdx.x, tid = threadIdx.x;
  const long long row_start = (long long)b * vocab;           /* in elements */
  const int head = (int)((kVec - row_start % kVec) % kVec);    /* elements before the first chunk */
  const int first = head < vocab ? head : vocab;
  const int chunks = (vocab - first) / kVec;                   /* whole aligned chunks in the row */
  const int tail_start = first + chunks * kVec;
  const uint4 *row_chunks = reinterpret_cast<const uint4 *>(logits + row_start + first);
  const int per_split = (chunks + splits - 1) / splits;
  const int c_begin = split * per_split, c_end = db_min(chunks, c_begin + per_split);

  uint32_t best = 0;
  int best_index = 0x7fffffff;
  for (int c0 = c_begin + tid; c0 < c_end; c0 += kArgmaxUnroll * kArgmaxThreads) {
    uint4 v[kArgmaxUnroll];
    DB_UNROLL
    for (int u = 0; u < kArgmaxUnroll; ++u) {
      const int c = c0 + u * kArgmaxThreads;
      if (c < c_end) v[u] = db_ld_stream_v4(row_chunks + c);
    }
    DB_UNROLL
    for (int u = 0; u < kArgmaxUnroll; ++u) {
      const int c = c0 + u * kArgmaxThreads;
      if (c < c_end) {
        float f[8];
        so_unpack8<T>(v[u], f);
        DB_UNROLL
        for (int e = 0; e < 8; ++e) so_better(best, best_index, so_order_key(f[e]), first + c * kVec + e);
      }
    }
  }
  /* the unaligned head and tail: the last split takes them */
  if (split == splits - 1) {
    const uint16_t *row = logits + row_start;
    if (tid < first) so_better(best, best_index, so_order_key(so_to_float<T>(row[tid])), tid);
    const int t = tail_start + tid;
    if (tid < kVec && t < vocab) so_better(best, best_index, so_order_key(so_to_float<T>(row[t])), t);
  }
  so_warp_best(best, best_index);
  if ((tid & 31) == 0) {
    warp_keys[tid >> 5] = best;
    warp_index[tid >> 5] = best_index;
  }
  __syncthreads();
  if (tid == 0) {
    for (int w = 1; w < (int)(kArgmaxThreads / 32); ++w) so_better(best, best_index, warp_keys[w], warp_index[w]);
    if (splits == 1)
      ids[b] = best_index;
    else
      partials[(long long)b * splits + split] = make_uint2(best, (uint32_t)best_index);
  }
}

/* One warp per row: the best of its slices. */
__global__ void __launch_bounds__(128) argmax_combine_kernel(const uint2 *partials, int32_t *ids, int batch,
                                                             int splits) {
  const int b = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
  if (b >= batch) return; /* a whole warp leaves together: batch is counted in warps */
  uint32_t best = 0;
  int best_index = 0x7fffffff;
  for (int s = lane; s < splits; s += 32) {
    const uint2 p = partials[(long long)b * splits + s];
    so_better(best, best_index, p.x, (int)p.y);
  }
  so_warp_best(best, best_index);
  if (lane == 0) ids[b] = best_index;
}

int argmax_plan(const char *fn, db_context *ctx, db_argmax_params *p, uint64_t *workspace) {
  if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
  DB_CHECK(so_check_dtype(fn, p->dtype));
  DB_CHECK(so_check_batch(fn, "batch", p->batch));
  if (p->vocab < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: vocab %d must be >= 1", fn, p->vocab);
  if (p->num_splits < 0 || p->num_splits > kMaxArgmaxSplits)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: num_splits %d out of range 0..%d (0 = auto)", fn, p->num_splits,
                   kMaxArgmaxSplits);
  if (p->num_splits == 0) {
    /* two blocks per SM over the batch, but never a slice under kMinSliceElements */
    const int want = (int)db_ceil_div((uint64_t)2 * std::max(1, ctx->sm_count), (uint64_t)p->batch);
    const int most = std::max(1, p->vocab / kMinSliceElements);
    p->num_splits = std::max(1, std::min({want, most, kMaxArgmaxSplits}));
  }
  *workspace = p->num_splits > 1 ? (uint64_t)p->batch * p->num_splits * 8 : 0;
  return DB_OK;
}

}  // namespace

extern "C" int db_argmax_plan(db_context *ctx, db_argmax_params *p, uint64_t *workspace_bytes) {
  return db_guard("db_argmax_plan", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (!workspace_bytes) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_argmax_plan: workspace_bytes is null");
    return argmax_plan("db_argmax_plan", ctx, p, workspace_bytes);
  });
}

extern "C" int db_argmax(db_context *ctx, const db_argmax_params *params) {
  return db_guard("db_argmax", [&]() -> int {
    const char *fn = "db_argmax";
    DB_CHECK(db_enter(ctx));
    if (!params) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
    db_argmax_params p = *params;
    uint64_t workspace = 0;
    DB_CHECK(argmax_plan(fn, ctx, &p, &workspace));
    DB_CHECK(so_check_ptr(fn, "ids", p.ids, 4));
    if (workspace > 0) {
      if (p.workspace == 0 || p.workspace_bytes < workspace)
        return db_fail(DB_ERR_WORKSPACE, "%s: %d splits need %llu bytes of workspace, got %llu at 0x%llx", fn,
                       p.num_splits, (unsigned long long)workspace, (unsigned long long)p.workspace_bytes,
                       (unsigned long long)p.workspace);
      DB_CHECK(so_check_ptr(fn, "workspace", p.workspace, 8));
    }
    /* 16-byte chunks of a row are found from element offsets, so the buffer itself must start
     * on a 16-byte boundary */
    DB_CHECK(so_check_ptr(fn, "logits", p.logits, 16));
    auto logits = reinterpret_cast<const uint16_t *>(p.logits);
    auto partials = reinterpret_cast<uint2 *>(p.workspace);
    auto ids = reinterpret_cast<int32_t *>(p.ids);
    const dim3 grid((unsigned)p.num_splits, (unsigned)p.batch);
    if (p.dtype == DB_DTYPE_BF16)
      DB_CHECK(DB_LAUNCH((argmax_slice_kernel<__nv_bfloat16>), grid, dim3(kArgmaxThreads), 0, ctx->stream, logits,
                         partials, ids, p.vocab, p.num_splits));
    else
      DB_CHECK(DB_LAUNCH((argmax_slice_kernel<__half>), grid, dim3(kArgmaxThreads), 0, ctx->stream, logits,
                         partials, ids, p.vocab, p.num_splits));
    if (p.num_splits == 1) return DB_OK;
    const unsigned blocks = (unsigned)db_ceil_div((uint64_t)p.batch * 32, 128);
    return DB_LAUNCH(argmax_combine_kernel, dim3(blocks), dim3(128), 0, ctx->stream,
                     (const uint2 *)partials, ids, p.batch, p.num_splits);
  });
}
