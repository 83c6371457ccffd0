// smallops.cu: the elementwise and row-wise small ops of a decode step: embedding gather,
// RMSNorm (fused with the residual add), the gated MLP activation and the bias add. Implements
// that part of decodebench.h's small-ops section; smallops_argmax.cu, smallops_rope.cu and
// smallops_moe.cu hold the rest.
//
// All are bandwidth-bound: each element is read once and written once in 16-byte accesses.
// Elementwise kernels give each thread one 16-byte chunk of every operand (all its loads issue
// before the first use) in blocks of 128 threads, so even a batch-1 call over a 4096-wide row
// spreads over 4 blocks and a 14336-wide activation over 28; the grid-stride loop covers the
// rest. RMSNorm gives each row one block that keeps the row in registers (one chunk per thread
// up to 8192 elements, at most 4), so the row is read once, reduced, and written once.
#include "smallops_common.cuh"

namespace {

constexpr unsigned kElemThreads = 128;
constexpr int kNormChunksPerThread = 4;

/* ---- embedding -------------------------------------------------------------------------------- */

template <class T>
__global__ void __launch_bounds__(kElemThreads)
    embedding_kernel(const uint4 *table, const int32_t *ids, uint4 *out, int batch, int vocab, int chunks,
                     float scale) {
  const long long total = (long long)batch * chunks;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const int b = (int)(i / chunks), c = (int)(i % chunks);
    const int id = ids[b];
    if (id >= 0 && id < vocab) {
      uint4 row = db_ld_nc_v4(table + (long long)id * chunks + c);
      if (scale != 1.0f) {
        float f[8];
        so_unpack8<T>(row, f);
        DB_UNROLL
        for (int e = 0; e < 8; ++e) f[e] *= scale;
        row = so_pack8<T>(f);
      }
      db_st_v4(out + i, row);
    } else {
      const uint32_t nan_pair = 0xffffffffu; /* a NaN in both dtypes */
      db_st_v4(out + i, make_uint4(nan_pair, nan_pair, nan_pair, nan_pair));
    }
  }
}

/* ---- RMSNorm ---------------------------------------------------------------------------------- */

/* One block per row; thread t holds chunks t, t + T, ... (coalesced). x and residual are loaded
 * with plain (coherent) loads: out may be x, and residual is written. */
template <class T>
__global__ void __launch_bounds__(1024)
    rmsnorm_kernel(const uint4 *x, uint4 *residual, const uint4 *weight, uint4 *out, int chunks,
                   float eps, float weight_offset) {
  DB_SHARED(float, warp_sums, 32);
  const int row = blockIdx.x, tid = threadIdx.x, threads = blockDim.x;
  const long long base = (long long)row * chunks;
  float s[kNormChunksPerThread][8];
  float sumsq = 0.0f;
  DB_UNROLL
  for (int u = 0; u < kNormChunksPerThread; ++u) {
    const int c = tid + u * threads;
    if (c < chunks) {
      uint4 xv = x[base + c];
      so_unpack8<T>(xv, s[u]);
      if (residual) {
        float r[8];
        so_unpack8<T>(residual[base + c], r);
        DB_UNROLL
        for (int e = 0; e < 8; ++e) s[u][e] += r[e];
        /* the sum as stored: the norm reads the same rounded values the next layer adds to */
        const uint4 sv = so_pack8<T>(s[u]);
        so_unpack8<T>(sv, s[u]);
        residual[base + c] = sv;
      }
      DB_UNROLL
      for (int e = 0; e < 8; ++e) sumsq += s[u][e] * s[u][e];
    }
  }
  sumsq = db_warp_sum(sumsq);
  if ((tid & 31) == 0) warp_sums[tid >> 5] = sumsq;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < (threads + 31) / 32; ++w) total += warp_sums[w];
  const float inv_rms = rsqrtf(total / (float)(chunks * kVec) + eps);
  DB_UNROLL
  for (int u = 0; u < kNormChunksPerThread; ++u) {
    const int c = tid + u * threads;
    if (c < chunks) {
      float w[8];
      so_unpack8<T>(db_ld_nc_v4(weight + c), w);
      DB_UNROLL
      for (int e = 0; e < 8; ++e) s[u][e] = s[u][e] * inv_rms * (w[e] + weight_offset);
      db_st_v4(out + base + c, so_pack8<T>(s[u]));
    }
  }
}

/* ---- gated activation ------------------------------------------------------------------------- */

DB_DEVICE float so_silu(float g) { return g / (1.0f + expf(-g)); }
DB_DEVICE float so_gelu_tanh(float g) {
  const float k0 = 0.7978845608028654f; /* sqrt(2 / pi) */
  return 0.5f * g * (1.0f + tanhf(k0 * (g + 0.044715f * g * g * g)));
}

/* gpt-oss's clamped SwiGLU. The clamps are comparisons, not fminf/fmaxf, so that a NaN gate or
 * up stays NaN (as torch.clamp keeps it) instead of becoming the limit. */
DB_DEVICE float so_swiglu_clamp(float g, float u, float limit, float alpha) {
  g = g > limit ? limit : g;
  u = u > limit ? limit : (u < -limit ? -limit : u);
  return (u + 1.0f) * (g / (1.0f + expf(-alpha * g)));
}

template <class T, int Act>
__global__ void __launch_bounds__(kElemThreads)
    gated_act_kernel(const uint4 *gate_up, uint4 *out, int batch, int chunks, float limit, float alpha) {
  const long long total = (long long)batch * chunks;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long b = i / chunks, c = i % chunks;
    const uint4 gv = db_ld_stream_v4(gate_up + b * 2 * chunks + c);
    const uint4 uv = db_ld_stream_v4(gate_up + b * 2 * chunks + chunks + c);
    float g[8], u[8];
    so_unpack8<T>(gv, g);
    so_unpack8<T>(uv, u);
    DB_UNROLL
    for (int e = 0; e < 8; ++e) {
      if constexpr (Act == DB_ACT_SWIGLU_CLAMP)
        g[e] = so_swiglu_clamp(g[e], u[e], limit, alpha);
      else
        g[e] = (Act == DB_ACT_SILU ? so_silu(g[e]) : so_gelu_tanh(g[e])) * u[e];
    }
    db_st_v4(out + i, so_pack8<T>(g));
  }
}

/* ---- bias add --------------------------------------------------------------------------------- */

template <class T>
__global__ void __launch_bounds__(kElemThreads)
    bias_add_kernel(uint4 *y, const uint4 *bias, int batch, int chunks) {
  const long long total = (long long)batch * chunks;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    float v[8], b[8];
    so_unpack8<T>(y[i], v);
    so_unpack8<T>(db_ld_nc_v4(bias + i % chunks), b);
    DB_UNROLL
    for (int e = 0; e < 8; ++e) v[e] += b[e];
    db_st_v4(y + i, so_pack8<T>(v));
  }
}

}  // namespace

/* ---- entry points ----------------------------------------------------------------------------- */

extern "C" int db_embedding(db_context *ctx, const db_embedding_params *p) {
  return db_guard("db_embedding", [&]() -> int {
    const char *fn = "db_embedding";
    DB_CHECK(db_enter(ctx));
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
    DB_CHECK(so_check_dtype(fn, p->dtype));
    DB_CHECK(so_check_batch(fn, "batch", p->batch));
    if (p->vocab < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: vocab %d must be >= 1", fn, p->vocab);
    DB_CHECK(so_check_row(fn, "hidden", p->hidden));
    if (!std::isfinite(p->scale))
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: scale %g must be finite (0 = 1)", fn, (double)p->scale);
    const float scale = p->scale == 0.0f ? 1.0f : p->scale;
    DB_CHECK(so_check_ptr(fn, "table", p->table, 16));
    DB_CHECK(so_check_ptr(fn, "ids", p->ids, 4));
    DB_CHECK(so_check_ptr(fn, "out", p->out, 16));
    const int chunks = p->hidden / kVec;
    const unsigned blocks = so_blocks((uint64_t)p->batch * chunks, kElemThreads);
    auto table = reinterpret_cast<const uint4 *>(p->table);
    auto ids = reinterpret_cast<const int32_t *>(p->ids);
    auto out = reinterpret_cast<uint4 *>(p->out);
    if (p->dtype == DB_DTYPE_BF16)
      return DB_LAUNCH((embedding_kernel<__nv_bfloat16>), dim3(blocks), dim3(kElemThreads), 0, ctx->stream,
                       table, ids, out, p->batch, p->vocab, chunks, scale);
    return DB_LAUNCH((embedding_kernel<__half>), dim3(blocks), dim3(kElemThreads), 0, ctx->stream, table, ids,
                     out, p->batch, p->vocab, chunks, scale);
  });
}

extern "C" int db_rmsnorm(db_context *ctx, const db_rmsnorm_params *p) {
  return db_guard("db_rmsnorm", [&]() -> int {
    const char *fn = "db_rmsnorm";
    DB_CHECK(db_enter(ctx));
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
    DB_CHECK(so_check_dtype(fn, p->dtype));
    DB_CHECK(so_check_batch(fn, "batch", p->batch));
    DB_CHECK(so_check_row(fn, "hidden", p->hidden));
    if (p->hidden > DB_SMALLOP_MAX_HIDDEN)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: hidden %d exceeds %d (one block holds a row)", fn,
                     p->hidden, DB_SMALLOP_MAX_HIDDEN);
    if (!(p->eps > 0.0f) || !(p->eps < 1.0f))
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: eps %g must be in (0, 1)", fn, (double)p->eps);
    if (p->unit_offset != 0 && p->unit_offset != 1)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: unit_offset %d must be 0 or 1", fn, p->unit_offset);
    DB_CHECK(so_check_ptr(fn, "x", p->x, 16));
    DB_CHECK(so_check_ptr(fn, "weight", p->weight, 16));
    DB_CHECK(so_check_ptr(fn, "out", p->out, 16));
    if (p->residual != 0) {
      DB_CHECK(so_check_ptr(fn, "residual", p->residual, 16));
      if (p->residual == p->out || p->residual == p->x)
        return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: residual 0x%llx must not be x or out", fn,
                       (unsigned long long)p->residual);
    }
    const int chunks = p->hidden / kVec;
    /* as many threads as chunks (to 1024): at batch 1 one block is the whole call, so every
     * load of the row should be in flight at once; rows past 8192 elements give threads 2-4 */
    const unsigned threads = (unsigned)std::min<uint64_t>(1024, db_ceil_div(chunks, 32) * 32);
    auto x = reinterpret_cast<const uint4 *>(p->x);
    auto residual = reinterpret_cast<uint4 *>(p->residual);
    auto weight = reinterpret_cast<const uint4 *>(p->weight);
    auto out = reinterpret_cast<uint4 *>(p->out);
    const float offset = p->unit_offset ? 1.0f : 0.0f;
    if (p->dtype == DB_DTYPE_BF16)
      return DB_LAUNCH((rmsnorm_kernel<__nv_bfloat16>), dim3(p->batch), dim3(threads), 0, ctx->stream, x,
                       residual, weight, out, chunks, p->eps, offset);
    return DB_LAUNCH((rmsnorm_kernel<__half>), dim3(p->batch), dim3(threads), 0, ctx->stream, x, residual,
                     weight, out, chunks, p->eps, offset);
  });
}

extern "C" int db_gated_act(db_context *ctx, const db_gated_act_params *p) {
  return db_guard("db_gated_act", [&]() -> int {
    const char *fn = "db_gated_act";
    DB_CHECK(db_enter(ctx));
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
    DB_CHECK(so_check_dtype(fn, p->dtype));
    if (p->batch < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: batch %d must be >= 1", fn, p->batch);
    DB_CHECK(so_check_row(fn, "ffn", p->ffn));
    if (p->activation != DB_ACT_SILU && p->activation != DB_ACT_GELU_TANH && p->activation != DB_ACT_SWIGLU_CLAMP)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "%s: activation %d unknown (want DB_ACT_SILU 0, DB_ACT_GELU_TANH 1 or DB_ACT_SWIGLU_CLAMP 2)", fn,
                     p->activation);
    if (p->activation == DB_ACT_SWIGLU_CLAMP && !(p->limit > 0.0f && p->limit <= 3.0e38f && p->alpha > 0.0f &&
                                                  p->alpha <= 3.0e38f))
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: SWIGLU_CLAMP limit %g and alpha %g must be finite and > 0", fn,
                     (double)p->limit, (double)p->alpha);
    DB_CHECK(so_check_ptr(fn, "gate_up", p->gate_up, 16));
    DB_CHECK(so_check_ptr(fn, "out", p->out, 16));
    const int chunks = p->ffn / kVec;
    const unsigned blocks = so_blocks((uint64_t)p->batch * chunks, kElemThreads);
    auto in = reinterpret_cast<const uint4 *>(p->gate_up);
    auto out = reinterpret_cast<uint4 *>(p->out);
    const bool bf16 = p->dtype == DB_DTYPE_BF16;
    const float limit = p->limit, alpha = p->alpha;
#define SO_GATED_ACT(ACT)                                                                                        \
  (bf16 ? DB_LAUNCH((gated_act_kernel<__nv_bfloat16, ACT>), dim3(blocks), dim3(kElemThreads), 0, ctx->stream, in, \
                    out, p->batch, chunks, limit, alpha)                                                          \
        : DB_LAUNCH((gated_act_kernel<__half, ACT>), dim3(blocks), dim3(kElemThreads), 0, ctx->stream, in, out,   \
                    p->batch, chunks, limit, alpha))
    if (p->activation == DB_ACT_SILU) return SO_GATED_ACT(DB_ACT_SILU);
    if (p->activation == DB_ACT_GELU_TANH) return SO_GATED_ACT(DB_ACT_GELU_TANH);
    return SO_GATED_ACT(DB_ACT_SWIGLU_CLAMP);
#undef SO_GATED_ACT
  });
}

extern "C" int db_bias_add(db_context *ctx, const db_bias_add_params *p) {
  return db_guard("db_bias_add", [&]() -> int {
    const char *fn = "db_bias_add";
    DB_CHECK(db_enter(ctx));
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
    DB_CHECK(so_check_dtype(fn, p->dtype));
    if (p->batch < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: batch %d must be >= 1", fn, p->batch);
    DB_CHECK(so_check_row(fn, "n", p->n));
    DB_CHECK(so_check_ptr(fn, "y", p->y, 16));
    DB_CHECK(so_check_ptr(fn, "bias", p->bias, 16));
    const int chunks = p->n / kVec;
    const unsigned blocks = so_blocks((uint64_t)p->batch * chunks, kElemThreads);
    auto y = reinterpret_cast<uint4 *>(p->y);
    auto bias = reinterpret_cast<const uint4 *>(p->bias);
    if (p->dtype == DB_DTYPE_BF16)
      return DB_LAUNCH((bias_add_kernel<__nv_bfloat16>), dim3(blocks), dim3(kElemThreads), 0, ctx->stream, y,
                       bias, p->batch, chunks);
    return DB_LAUNCH((bias_add_kernel<__half>), dim3(blocks), dim3(kElemThreads), 0, ctx->stream, y, bias,
                     p->batch, chunks);
  });
}
