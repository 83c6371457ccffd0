// gdn.cu: the gated delta rule's decode step (decodebench.h, db_gdn_step): Qwen3-Next's and
// Qwen3.5's linear_attention layers, one token a sequence.
//
// A unit of work is (sequence, value head, tile of 16 value columns); a block of 4 warps takes
// units in a grid-stride loop. Lane l of warp w owns columns 4 (l % 4) .. +3 of the tile and key
// rows r = l / 4 + 8 w + 32 t (t < T): its part of the state is T float4s, loaded with 16-byte
// loads before anything waits (a warp's load instruction covers 8 rows x 64 contiguous bytes),
// decayed, updated and stored back: the state is read once and written once. The two sums over
// key rows (S^T k for the delta, S^T q for the output) are per thread over its T rows, then
// shuffles over the 8 lanes of a column group, then shared memory over the 4 warps.
// q and k of the unit's key head are L2-normalised by warps 0 and 1 (one 16-byte chunk a lane:
// head dims up to 256), g and beta by warp 2, into shared memory.
#include "recurrent_common.cuh"

namespace {

constexpr int kGdnThreads = 128;
constexpr int kGdnWarps = kGdnThreads / 32;
constexpr int kGdnCols = 16;                     /* value columns a unit */
constexpr int kGdnRowsPerPass = 8 * kGdnWarps;   /* key rows one t covers */
constexpr float kGdnL2Eps = 1e-6f;               /* Hugging Face's l2norm eps */
/* ptxas's sm_90 registers (the larger of bf16 and fp16), what the emulator plans occupancy with. */
constexpr int gdn_sm90_registers(int t) { return t <= 4 ? 72 : 88; }

struct GdnArgs {
  const uint16_t *q, *k, *v, *a, *b;
  const float *A_log, *dt_bias;
  float *state;
  uint16_t *out;
  long long units;
  int tiles, v_heads, group, dk, dv, qk_stride, v_stride, ab_stride;
  float scale;
};

/* Warp-wide: the L2-normalised head of `dim` elements at src (one 16-byte chunk a lane),
 * times mul, into dst. */
template <class T>
DB_DEVICE void gdn_l2norm(const uint16_t *src, int dim, float mul, float *dst, int lane) {
  float f[8];
  float ss = 0.0f;
  const bool has = lane * kVec < dim;
  if (has) {
    so_unpack8<T>(db_ld_nc_v4(reinterpret_cast<const uint4 *>(src) + lane), f);
    DB_UNROLL
    for (int e = 0; e < 8; ++e) ss += f[e] * f[e];
  }
  ss = db_warp_sum(ss);
  const float inv = rsqrtf(ss + kGdnL2Eps) * mul;
  if (has) {
    DB_UNROLL
    for (int e = 0; e < 8; ++e) dst[lane * kVec + e] = f[e] * inv;
  }
}

/* Sum over the 8 lanes that share a column group (lanes l, l ^ 4, l ^ 8, ...). */
DB_DEVICE void gdn_col_sum(float (&s)[4]) {
  DB_UNROLL
  for (int j = 0; j < 4; ++j) {
    s[j] += __shfl_xor_sync(0xffffffffu, s[j], 4);
    s[j] += __shfl_xor_sync(0xffffffffu, s[j], 8);
    s[j] += __shfl_xor_sync(0xffffffffu, s[j], 16);
  }
}

template <class T, int TR>
__global__ void __launch_bounds__(kGdnThreads) gdn_step_kernel(const GdnArgs a) {
  DB_SHARED(float, qn, DB_GDN_MAX_HEAD_DIM);
  DB_SHARED(float, kn, DB_GDN_MAX_HEAD_DIM);
  DB_SHARED(float, red, 2 * kGdnWarps * kGdnCols);
  DB_SHARED(float, gates, 2);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int cg = lane & 3, rs = lane >> 2;
  for (long long unit = blockIdx.x; unit < a.units; unit += gridDim.x) {
    const int tile = (int)(unit % a.tiles);
    const int h = (int)((unit / a.tiles) % a.v_heads);
    const long long b = unit / a.tiles / a.v_heads;
    const int col = tile * kGdnCols + cg * 4;
    const bool col_ok = col < a.dv;
    float4 *st = reinterpret_cast<float4 *>(a.state + ((b * a.v_heads + h) * a.dk) * a.dv + col);
    /* the state first: its loads are in flight while the gates are computed */
    float4 s[TR];
    DB_UNROLL
    for (int t = 0; t < TR; ++t) {
      const int r = rs + 8 * warp + kGdnRowsPerPass * t;
      s[t] = (col_ok && r < a.dk) ? rc_state_load(st + (long long)r * (a.dv / 4)) : make_float4(0, 0, 0, 0);
    }
    float vv[4] = {0, 0, 0, 0};
    if (col_ok) rc_load4<T>(a.v + b * a.v_stride + (long long)h * a.dv + col, vv);
    const long long qk = b * a.qk_stride + (long long)(h / a.group) * a.dk;
    if (warp == 0) gdn_l2norm<T>(a.q + qk, a.dk, a.scale, qn, lane);
    if (warp == 1) gdn_l2norm<T>(a.k + qk, a.dk, 1.0f, kn, lane);
    if (warp == 2 && lane == 0) {
      const float av = so_to_float<T>(a.a[b * a.ab_stride + h]);
      const float bv = so_to_float<T>(a.b[b * a.ab_stride + h]);
      gates[0] = expf(-expf(a.A_log[h]) * rc_softplus(av + a.dt_bias[h])); /* exp(g) */
      gates[1] = rc_sigmoid(bv);                                             /* beta */
    }
    __syncthreads();
    const float decay = gates[0], beta = gates[1];
    float kv[4] = {0, 0, 0, 0};
    DB_UNROLL
    for (int t = 0; t < TR; ++t) {
      const int r = rs + 8 * warp + kGdnRowsPerPass * t;
      const float kr = r < a.dk ? kn[r] : 0.0f;
      s[t].x *= decay, s[t].y *= decay, s[t].z *= decay, s[t].w *= decay;
      kv[0] += s[t].x * kr, kv[1] += s[t].y * kr, kv[2] += s[t].z * kr, kv[3] += s[t].w * kr;
    }
    gdn_col_sum(kv);
    if (rs == 0) {
      DB_UNROLL
      for (int j = 0; j < 4; ++j) red[warp * kGdnCols + cg * 4 + j] = kv[j];
    }
    __syncthreads();
    float delta[4];
    DB_UNROLL
    for (int j = 0; j < 4; ++j) {
      float sum = 0.0f;
      DB_UNROLL
      for (int w = 0; w < kGdnWarps; ++w) sum += red[w * kGdnCols + cg * 4 + j];
      delta[j] = beta * (vv[j] - sum);
    }
    float o[4] = {0, 0, 0, 0};
    DB_UNROLL
    for (int t = 0; t < TR; ++t) {
      const int r = rs + 8 * warp + kGdnRowsPerPass * t;
      const float kr = r < a.dk ? kn[r] : 0.0f, qr = r < a.dk ? qn[r] : 0.0f;
      s[t].x += kr * delta[0], s[t].y += kr * delta[1], s[t].z += kr * delta[2], s[t].w += kr * delta[3];
      o[0] += s[t].x * qr, o[1] += s[t].y * qr, o[2] += s[t].z * qr, o[3] += s[t].w * qr;
      if (col_ok && r < a.dk) rc_state_store(st + (long long)r * (a.dv / 4), s[t]);
    }
    gdn_col_sum(o);
    float *red_o = red + kGdnWarps * kGdnCols;
    if (rs == 0) {
      DB_UNROLL
      for (int j = 0; j < 4; ++j) red_o[warp * kGdnCols + cg * 4 + j] = o[j];
    }
    __syncthreads();
    if (warp == 0 && rs == 0 && col_ok) {
      float sum[4];
      DB_UNROLL
      for (int j = 0; j < 4; ++j) {
        sum[j] = 0.0f;
        DB_UNROLL
        for (int w = 0; w < kGdnWarps; ++w) sum[j] += red_o[w * kGdnCols + cg * 4 + j];
      }
      uint2 packed;
      packed.x = db_dtype<T>::pack(sum[0], sum[1]);
      packed.y = db_dtype<T>::pack(sum[2], sum[3]);
      *reinterpret_cast<uint2 *>(a.out + (b * a.v_heads + h) * a.dv + col) = packed;
    }
    /* the next unit rewrites qn, kn, gates and red only after every warp is past them */
    __syncthreads();
  }
}

/* The kernel, its name as the gate reads it, and its sm_90 registers, for p's dtype and dims. */
struct GdnChoice {
  void (*kernel)(const GdnArgs);
  const char *name;
  int registers;
};

GdnChoice gdn_choose(int32_t dtype, int dk) {
  const bool bf16 = dtype == DB_DTYPE_BF16, small = dk <= 4 * kGdnRowsPerPass;
  if (bf16)
    return small ? GdnChoice{gdn_step_kernel<__nv_bfloat16, 4>, "gdn_step_kernel<__nv_bfloat16, 4>", gdn_sm90_registers(4)}
                 : GdnChoice{gdn_step_kernel<__nv_bfloat16, 8>, "gdn_step_kernel<__nv_bfloat16, 8>", gdn_sm90_registers(8)};
  return small ? GdnChoice{gdn_step_kernel<__half, 4>, "gdn_step_kernel<__half, 4>", gdn_sm90_registers(4)}
               : GdnChoice{gdn_step_kernel<__half, 8>, "gdn_step_kernel<__half, 8>", gdn_sm90_registers(8)};
}

struct GdnPlan {
  GdnArgs args;
  GdnChoice choice;
  unsigned grid;
};

int gdn_plan(const char *fn, db_context *ctx, const db_gdn_step_params *p, GdnPlan *plan) {
  if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
  DB_CHECK(so_check_dtype(fn, p->dtype));
  DB_CHECK(so_check_batch(fn, "batch", p->batch));
  if (p->k_heads < 1 || p->v_heads < 1 || p->v_heads % p->k_heads != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: v_heads %d must be a positive multiple of k_heads %d", fn,
                   p->v_heads, p->k_heads);
  DB_CHECK(so_check_row(fn, "head_k_dim", p->head_k_dim));
  DB_CHECK(so_check_row(fn, "head_v_dim", p->head_v_dim));
  if (p->head_k_dim > DB_GDN_MAX_HEAD_DIM || p->head_v_dim > DB_GDN_MAX_HEAD_DIM)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: head_k_dim %d and head_v_dim %d must be at most %d", fn,
                   p->head_k_dim, p->head_v_dim, DB_GDN_MAX_HEAD_DIM);
  const long long packed = 2LL * p->k_heads * p->head_k_dim + (long long)p->v_heads * p->head_v_dim;
  if (packed > (1LL << 30)) return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: heads too many", fn);
  int32_t qkv_stride = 0, ab_stride = 0;
  if (p->qkv_row_stride != 0) {
    const int32_t least = std::max(p->k_heads * p->head_k_dim, p->v_heads * p->head_v_dim);
    DB_CHECK(rc_stride(fn, "qkv_row_stride", p->qkv_row_stride, least, &qkv_stride));
  }
  if (p->ab_row_stride != 0 && p->ab_row_stride < p->v_heads)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: ab_row_stride %d must be 0 or at least v_heads %d", fn,
                   p->ab_row_stride, p->v_heads);
  ab_stride = p->ab_row_stride ? p->ab_row_stride : p->v_heads;
  if (!(p->scale >= 0.0f && p->scale < 3.0e38f))
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: scale %g must be finite and >= 0 (0 = 1/sqrt(head_k_dim))", fn,
                   (double)p->scale);
  DB_CHECK(so_check_ptr(fn, "q", p->q, 16));
  DB_CHECK(so_check_ptr(fn, "k", p->k, 16));
  DB_CHECK(so_check_ptr(fn, "v", p->v, 16));
  DB_CHECK(so_check_ptr(fn, "a", p->a, 2));
  DB_CHECK(so_check_ptr(fn, "b_gate", p->b_gate, 2));
  DB_CHECK(rc_check_f32(fn, "A_log", p->A_log));
  DB_CHECK(rc_check_f32(fn, "dt_bias", p->dt_bias));
  DB_CHECK(so_check_ptr(fn, "state", p->state, 16));
  DB_CHECK(so_check_ptr(fn, "out", p->out, 16));
  GdnArgs &a = plan->args;
  a.q = reinterpret_cast<const uint16_t *>(p->q);
  a.k = reinterpret_cast<const uint16_t *>(p->k);
  a.v = reinterpret_cast<const uint16_t *>(p->v);
  a.a = reinterpret_cast<const uint16_t *>(p->a);
  a.b = reinterpret_cast<const uint16_t *>(p->b_gate);
  a.A_log = reinterpret_cast<const float *>(p->A_log);
  a.dt_bias = reinterpret_cast<const float *>(p->dt_bias);
  a.state = reinterpret_cast<float *>(p->state);
  a.out = reinterpret_cast<uint16_t *>(p->out);
  a.tiles = (int)db_ceil_div(p->head_v_dim, kGdnCols);
  a.v_heads = p->v_heads;
  a.group = p->v_heads / p->k_heads;
  a.dk = p->head_k_dim, a.dv = p->head_v_dim;
  a.ab_stride = ab_stride;
  /* packed: q and k [batch, k_heads, head_k_dim], v [batch, v_heads, head_v_dim] */
  a.qk_stride = qkv_stride ? qkv_stride : p->k_heads * p->head_k_dim;
  a.v_stride = qkv_stride ? qkv_stride : p->v_heads * p->head_v_dim;
  a.scale = p->scale == 0.0f ? 1.0f / std::sqrt((float)p->head_k_dim) : p->scale;
  a.units = (long long)p->batch * p->v_heads * a.tiles;
  plan->choice = gdn_choose(p->dtype, p->head_k_dim);
  int blocks_per_sm = 0;
  DB_CHECK(db_occupancy(plan->choice.kernel, kGdnThreads, 0, plan->choice.registers, fn, &blocks_per_sm));
  plan->grid = rc_grid(a.units, blocks_per_sm, ctx->sm_count);
  return DB_OK;
}

}  // namespace

extern "C" int db_gdn_step(db_context *ctx, const db_gdn_step_params *p) {
  return db_guard("db_gdn_step", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    GdnPlan plan;
    DB_CHECK(gdn_plan("db_gdn_step", ctx, p, &plan));
    return db_launch(plan.choice.name, plan.choice.kernel, dim3(plan.grid), dim3(kGdnThreads), 0, ctx->stream,
                     plan.args);
  });
}

extern "C" int db_gdn_step_launches(db_context *ctx, const db_gdn_step_params *p, db_launch_info *out, int32_t max,
                                    int32_t *count) {
  return db_guard("db_gdn_step_launches", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (count == nullptr) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_gdn_step_launches: null count");
    GdnPlan plan;
    DB_CHECK(gdn_plan("db_gdn_step_launches", ctx, p, &plan));
    *count = 1;
    if (out == nullptr && max == 0) return DB_OK;
    if (out == nullptr || max < 1)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_gdn_step_launches: room for %d launches, the call makes 1", max);
    db_launch_info &l = out[0];
    std::memset(&l, 0, sizeof l);
    std::snprintf(l.kernel, sizeof l.kernel, "%s", plan.choice.name);
    l.grid_x = (int32_t)plan.grid, l.grid_y = 1, l.grid_z = 1;
    l.block_threads = kGdnThreads;
    l.smem_bytes = (int32_t)((2 * DB_GDN_MAX_HEAD_DIM + 2 * kGdnWarps * kGdnCols + 2) * sizeof(float));
    l.work_units = (int32_t)std::min<long long>(plan.args.units, INT32_MAX);
    return DB_OK;
  });
}
