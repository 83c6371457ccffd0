// recurrent.cu: the elementwise and group-wise ops around the recurrent layers' state updates
// (decodebench.h's recurrent section): the depthwise causal conv1d update of Gated DeltaNet and
// Mamba-2, the gated RMSNorm of both, the sigmoid output gate of Qwen3-Next's gated attention and
// the relu^2 MLP activation of Nemotron-H. gdn.cu and mamba2.cu hold the state updates.
//
// All are bandwidth-bound and read and write 16 bytes at a time: a thread owns one 8-channel
// chunk of a row (the conv: every tap's weights and the K-1 state rows of that chunk, all loaded
// before the first use), in blocks of 128 threads over a grid-stride loop. The gated norm gives
// each (sequence, group) one block that keeps the group in registers, as db_rmsnorm does.
#include "recurrent_common.cuh"

namespace {

constexpr unsigned kRcThreads = 128;
constexpr int kRcNormChunks = 2;     /* chunks a thread of the gated norm keeps */
constexpr int kRcNormThreads = 1024; /* at most (two chunks a thread: no spills on sm_80-90) */
static_assert(kRcNormThreads * kRcNormChunks * kVec == DB_GATED_NORM_MAX_GROUP, "one block holds a group");

/* ---- conv1d update ---------------------------------------------------------------------------- */

template <class T, int K>
__global__ void __launch_bounds__(kRcThreads)
    conv1d_update_kernel(const uint4 *x, uint4 *state, const uint4 *weight, const uint4 *bias, uint4 *out,
                         int batch, int chunks, int x_stride, int out_stride, int silu) {
  const long long total = (long long)batch * chunks;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long b = i / chunks;
    const int c = (int)(i % chunks);
    uint4 *st = state + b * (K - 1) * chunks + c;
    uint4 rows[K]; /* the K inputs, oldest first: K-1 from the state, then x */
    DB_UNROLL
    for (int j = 0; j < K - 1; ++j) rows[j] = st[(long long)j * chunks];
    rows[K - 1] = db_ld_nc_v4(x + b * x_stride + c);
    uint4 w[K];
    DB_UNROLL
    for (int j = 0; j < K; ++j) w[j] = db_ld_nc_v4(weight + (long long)j * chunks + c);
    float acc[8];
    if (bias) {
      so_unpack8<T>(db_ld_nc_v4(bias + c), acc);
    } else {
      DB_UNROLL
      for (int e = 0; e < 8; ++e) acc[e] = 0.0f;
    }
    DB_UNROLL
    for (int j = 0; j < K; ++j) {
      float xv[8], wv[8];
      so_unpack8<T>(rows[j], xv);
      so_unpack8<T>(w[j], wv);
      DB_UNROLL
      for (int e = 0; e < 8; ++e) acc[e] += wv[e] * xv[e];
    }
    if (silu) {
      DB_UNROLL
      for (int e = 0; e < 8; ++e) acc[e] = rc_silu(acc[e]);
    }
    DB_UNROLL
    for (int j = 0; j < K - 1; ++j) db_st_v4(st + (long long)j * chunks, rows[j + 1]);
    db_st_v4(out + b * out_stride + c, so_pack8<T>(acc));
  }
}

template <class T>
int conv1d_launch(db_context *ctx, const db_conv1d_update_params *p, int chunks, int xs, int os) {
  auto x = reinterpret_cast<const uint4 *>(p->x);
  auto state = reinterpret_cast<uint4 *>(p->state);
  auto weight = reinterpret_cast<const uint4 *>(p->weight);
  auto bias = reinterpret_cast<const uint4 *>(p->bias);
  auto out = reinterpret_cast<uint4 *>(p->out);
  const unsigned blocks = so_blocks((uint64_t)p->batch * chunks, kRcThreads);
  const int silu = p->activation == DB_CONV_ACT_SILU;
#define RC_CONV(KK)                                                                                             \
  case KK:                                                                                                      \
    return DB_LAUNCH((conv1d_update_kernel<T, KK>), dim3(blocks), dim3(kRcThreads), 0, ctx->stream, x, state,   \
                     weight, bias, out, p->batch, chunks, xs, os, silu);
  switch (p->kernel) {
    RC_CONV(2) RC_CONV(3) RC_CONV(4) RC_CONV(5) RC_CONV(6) RC_CONV(7) RC_CONV(8)
  }
#undef RC_CONV
  static_assert(DB_CONV_MAX_KERNEL == 8, "a case for every kernel size");
  return db_fail(DB_ERR_INTERNAL, "db_conv1d_update: kernel %d has no instance", p->kernel);
}

/* ---- gated RMSNorm ---------------------------------------------------------------------------- */

template <class T>
__global__ void __launch_bounds__(kRcNormThreads)
    gated_rmsnorm_kernel(const uint4 *x, const uint4 *z, const uint4 *weight, uint4 *out, int groups, int chunks,
                         int z_stride, int shared_weight, int norm_before_gate, float eps) {
  DB_SHARED(float, warp_sums, 32);
  const int g = blockIdx.x % groups, tid = threadIdx.x, threads = blockDim.x;
  const long long b = blockIdx.x / groups;
  const long long xbase = (b * groups + g) * chunks, zbase = b * z_stride + (long long)g * chunks;
  const long long wbase = shared_weight ? 0 : (long long)g * chunks;
  /* z stays packed (4 registers a chunk) and its silu is taken again after the norm: 8 floats a
   * chunk of gates beside the row's spilled */
  float s[kRcNormChunks][8];
  uint4 zr[kRcNormChunks];
  float sumsq = 0.0f;
  DB_UNROLL
  for (int u = 0; u < kRcNormChunks; ++u) {
    const int c = tid + u * threads;
    if (c < chunks) {
      so_unpack8<T>(x[xbase + c], s[u]);
      zr[u] = db_ld_nc_v4(z + zbase + c);
      if (!norm_before_gate) {
        float g[8];
        so_unpack8<T>(zr[u], g);
        DB_UNROLL
        for (int e = 0; e < 8; ++e) s[u][e] *= rc_silu(g[e]);
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
  for (int u = 0; u < kRcNormChunks; ++u) {
    const int c = tid + u * threads;
    if (c < chunks) {
      float w[8], g[8];
      so_unpack8<T>(db_ld_nc_v4(weight + wbase + c), w);
      so_unpack8<T>(zr[u], g);
      DB_UNROLL
      for (int e = 0; e < 8; ++e) {
        s[u][e] = s[u][e] * inv_rms * w[e];
        if (norm_before_gate) s[u][e] *= rc_silu(g[e]);
      }
      db_st_v4(out + xbase + c, so_pack8<T>(s[u]));
    }
  }
}

/* ---- sigmoid output gate, relu^2 -------------------------------------------------------------- */

template <class T>
__global__ void __launch_bounds__(kRcThreads)
    sigmoid_gate_kernel(const uint4 *o, const uint4 *gate, uint4 *out, int batch, int heads, int chunks,
                        int gate_row, int gate_head) {
  const long long total = (long long)batch * heads * chunks;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const int c = (int)(i % chunks), h = (int)(i / chunks % heads);
    const long long b = i / chunks / heads;
    float v[8], g[8];
    so_unpack8<T>(o[i], v);
    so_unpack8<T>(db_ld_nc_v4(gate + b * gate_row + (long long)h * gate_head + c), g);
    DB_UNROLL
    for (int e = 0; e < 8; ++e) v[e] *= rc_sigmoid(g[e]);
    db_st_v4(out + i, so_pack8<T>(v));
  }
}

template <class T>
__global__ void __launch_bounds__(kRcThreads) relu2_kernel(const uint4 *x, uint4 *out, long long total) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    float v[8];
    so_unpack8<T>(x[i], v);
    DB_UNROLL
    for (int e = 0; e < 8; ++e) {
      const float r = v[e] < 0.0f ? 0.0f : v[e]; /* a NaN is not < 0: it stays NaN, as torch.relu keeps it */
      v[e] = r * r;
    }
    db_st_v4(out + i, so_pack8<T>(v));
  }
}

}  // namespace

/* ---- entry points ----------------------------------------------------------------------------- */

extern "C" int db_conv1d_update(db_context *ctx, const db_conv1d_update_params *p) {
  return db_guard("db_conv1d_update", [&]() -> int {
    const char *fn = "db_conv1d_update";
    DB_CHECK(db_enter(ctx));
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
    DB_CHECK(so_check_dtype(fn, p->dtype));
    DB_CHECK(so_check_batch(fn, "batch", p->batch));
    DB_CHECK(so_check_row(fn, "channels", p->channels));
    if (p->kernel < 2 || p->kernel > DB_CONV_MAX_KERNEL)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: kernel %d out of range 2..%d", fn, p->kernel, DB_CONV_MAX_KERNEL);
    if (p->activation != DB_CONV_ACT_NONE && p->activation != DB_CONV_ACT_SILU)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: activation %d unknown (want DB_CONV_ACT_NONE 0 or DB_CONV_ACT_SILU 1)",
                     fn, p->activation);
    int32_t xs = 0, os = 0;
    DB_CHECK(rc_stride(fn, "x_row_stride", p->x_row_stride, p->channels, &xs));
    DB_CHECK(rc_stride(fn, "out_row_stride", p->out_row_stride, p->channels, &os));
    DB_CHECK(so_check_ptr(fn, "x", p->x, 16));
    DB_CHECK(so_check_ptr(fn, "state", p->state, 16));
    DB_CHECK(so_check_ptr(fn, "weight", p->weight, 16));
    DB_CHECK(so_check_ptr(fn, "out", p->out, 16));
    if (p->bias != 0) DB_CHECK(so_check_ptr(fn, "bias", p->bias, 16));
    if (p->out == p->x && xs != os)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: out is x but out_row_stride %d differs from x_row_stride %d", fn, os,
                     xs);
    const int chunks = p->channels / kVec;
    if (p->dtype == DB_DTYPE_BF16) return conv1d_launch<__nv_bfloat16>(ctx, p, chunks, xs / kVec, os / kVec);
    return conv1d_launch<__half>(ctx, p, chunks, xs / kVec, os / kVec);
  });
}

extern "C" int db_gated_rmsnorm(db_context *ctx, const db_gated_rmsnorm_params *p) {
  return db_guard("db_gated_rmsnorm", [&]() -> int {
    const char *fn = "db_gated_rmsnorm";
    DB_CHECK(db_enter(ctx));
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
    DB_CHECK(so_check_dtype(fn, p->dtype));
    DB_CHECK(so_check_batch(fn, "batch", p->batch));
    if (p->groups < 1 || p->groups > 65536)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: groups %d out of range 1..65536", fn, p->groups);
    DB_CHECK(so_check_row(fn, "group_size", p->group_size));
    if (p->group_size > DB_GATED_NORM_MAX_GROUP)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: group_size %d exceeds %d (one block holds a group)", fn,
                     p->group_size, DB_GATED_NORM_MAX_GROUP);
    const long long width = (long long)p->groups * p->group_size;
    if (width > (1LL << 30)) return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: width %lld too large", fn, width);
    int32_t zs = 0;
    DB_CHECK(rc_stride(fn, "z_row_stride", p->z_row_stride, (int32_t)width, &zs));
    if (p->shared_weight != 0 && p->shared_weight != 1)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: shared_weight %d must be 0 or 1", fn, p->shared_weight);
    if (p->norm_before_gate != 0 && p->norm_before_gate != 1)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: norm_before_gate %d must be 0 or 1", fn, p->norm_before_gate);
    if (!(p->eps > 0.0f) || !(p->eps < 1.0f))
      return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: eps %g must be in (0, 1)", fn, (double)p->eps);
    DB_CHECK(so_check_ptr(fn, "x", p->x, 16));
    DB_CHECK(so_check_ptr(fn, "z", p->z, 16));
    DB_CHECK(so_check_ptr(fn, "weight", p->weight, 16));
    DB_CHECK(so_check_ptr(fn, "out", p->out, 16));
    const long long blocks = (long long)p->batch * p->groups;
    if (blocks > (1LL << 31) - 1) return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: batch x groups too many", fn);
    const int chunks = p->group_size / kVec;
    const unsigned threads = (unsigned)std::min<uint64_t>(kRcNormThreads, db_ceil_div(chunks, 32) * 32);
    auto x = reinterpret_cast<const uint4 *>(p->x);
    auto z = reinterpret_cast<const uint4 *>(p->z);
    auto w = reinterpret_cast<const uint4 *>(p->weight);
    auto out = reinterpret_cast<uint4 *>(p->out);
    if (p->dtype == DB_DTYPE_BF16)
      return DB_LAUNCH((gated_rmsnorm_kernel<__nv_bfloat16>), dim3((unsigned)blocks), dim3(threads), 0, ctx->stream,
                       x, z, w, out, p->groups, chunks, zs / kVec, p->shared_weight, p->norm_before_gate, p->eps);
    return DB_LAUNCH((gated_rmsnorm_kernel<__half>), dim3((unsigned)blocks), dim3(threads), 0, ctx->stream, x, z, w,
                     out, p->groups, chunks, zs / kVec, p->shared_weight, p->norm_before_gate, p->eps);
  });
}

extern "C" int db_sigmoid_gate(db_context *ctx, const db_sigmoid_gate_params *p) {
  return db_guard("db_sigmoid_gate", [&]() -> int {
    const char *fn = "db_sigmoid_gate";
    DB_CHECK(db_enter(ctx));
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
    DB_CHECK(so_check_dtype(fn, p->dtype));
    DB_CHECK(so_check_batch(fn, "batch", p->batch));
    if (p->heads < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: heads %d must be >= 1", fn, p->heads);
    DB_CHECK(so_check_row(fn, "head_dim", p->head_dim));
    const long long width = (long long)p->heads * p->head_dim;
    if (width > (1LL << 30)) return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: heads x head_dim %lld too large", fn, width);
    int32_t hs = 0, rs = 0;
    DB_CHECK(rc_stride(fn, "gate_head_stride", p->gate_head_stride, p->head_dim, &hs));
    const long long least = (long long)(p->heads - 1) * hs + p->head_dim;
    if (least > (1LL << 30)) return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: gate row %lld too long", fn, least);
    if (p->gate_row_stride == 0) {
      if (p->gate_head_stride != 0 && p->gate_head_stride != p->head_dim)
        return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: gate_row_stride 0 needs gate_head_stride 0 (packed), got %d", fn,
                       p->gate_head_stride);
      rs = (int32_t)width;
    } else {
      DB_CHECK(rc_stride(fn, "gate_row_stride", p->gate_row_stride, (int32_t)least, &rs));
    }
    DB_CHECK(so_check_ptr(fn, "o", p->o, 16));
    DB_CHECK(so_check_ptr(fn, "gate", p->gate, 16));
    DB_CHECK(so_check_ptr(fn, "out", p->out, 16));
    const int chunks = p->head_dim / kVec;
    const unsigned blocks = so_blocks((uint64_t)width / kVec * p->batch, kRcThreads);
    auto o = reinterpret_cast<const uint4 *>(p->o);
    auto g = reinterpret_cast<const uint4 *>(p->gate);
    auto out = reinterpret_cast<uint4 *>(p->out);
    if (p->dtype == DB_DTYPE_BF16)
      return DB_LAUNCH((sigmoid_gate_kernel<__nv_bfloat16>), dim3(blocks), dim3(kRcThreads), 0, ctx->stream, o, g,
                       out, p->batch, p->heads, chunks, rs / kVec, hs / kVec);
    return DB_LAUNCH((sigmoid_gate_kernel<__half>), dim3(blocks), dim3(kRcThreads), 0, ctx->stream, o, g, out,
                     p->batch, p->heads, chunks, rs / kVec, hs / kVec);
  });
}

extern "C" int db_relu2(db_context *ctx, const db_relu2_params *p) {
  return db_guard("db_relu2", [&]() -> int {
    const char *fn = "db_relu2";
    DB_CHECK(db_enter(ctx));
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
    DB_CHECK(so_check_dtype(fn, p->dtype));
    DB_CHECK(so_check_batch(fn, "batch", p->batch));
    DB_CHECK(so_check_row(fn, "n", p->n));
    DB_CHECK(so_check_ptr(fn, "x", p->x, 16));
    DB_CHECK(so_check_ptr(fn, "out", p->out, 16));
    const long long total = (long long)p->batch * (p->n / kVec);
    const unsigned blocks = so_blocks((uint64_t)total, kRcThreads);
    auto x = reinterpret_cast<const uint4 *>(p->x);
    auto out = reinterpret_cast<uint4 *>(p->out);
    if (p->dtype == DB_DTYPE_BF16)
      return DB_LAUNCH((relu2_kernel<__nv_bfloat16>), dim3(blocks), dim3(kRcThreads), 0, ctx->stream, x, out, total);
    return DB_LAUNCH((relu2_kernel<__half>), dim3(blocks), dim3(kRcThreads), 0, ctx->stream, x, out, total);
  });
}
