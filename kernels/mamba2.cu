// mamba2.cu: Mamba-2's selective-state update for one decode token (decodebench.h,
// db_mamba2_step): Nemotron-H's M blocks.
//
// A unit of work is (sequence, head, tile of 16 rows of head_dim); a block of 4 warps takes units
// in a grid-stride loop. Lane l of warp w owns row p = 16 tile + l / 8 + 4 w and the state
// columns n = 4 (l % 8 + 8 u), u < U (U = state_size / 32, rounded up to 1, 2, 4 or 8): its part
// of the state is U float4s, loaded with 16-byte loads before anything waits (a warp's load
// covers 4 rows x 128 contiguous bytes), decayed, updated and stored back: read once, written
// once. y's sum over n is per thread over its U float4s, then shuffles over the row's 8 lanes.
// No shared memory and no barrier: every lane computes its head's dt and dA itself.
#include "recurrent_common.cuh"

namespace {

constexpr int kM2Threads = 128;
constexpr int kM2Rows = 16; /* rows of head_dim a unit */
/* ptxas's sm_90 registers (the larger of bf16 and fp16), what the emulator plans occupancy with. */
constexpr int m2_sm90_registers(int u) { return u <= 2 ? 32 : u == 4 ? 40 : 56; }

struct M2Args {
  const uint16_t *x, *B, *C, *dt;
  const float *A_log, *D, *dt_bias;
  float *state;
  uint16_t *y;
  long long units;
  int tiles, heads, group, head_dim, ds, x_stride, bc_stride, dt_stride;
  float dt_min, dt_max;
};

template <class T, int U>
__global__ void __launch_bounds__(kM2Threads) mamba2_step_kernel(const M2Args a) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nl = lane & 7, rs = lane >> 3;
  for (long long unit = blockIdx.x; unit < a.units; unit += gridDim.x) {
    const int tile = (int)(unit % a.tiles);
    const int h = (int)((unit / a.tiles) % a.heads);
    const long long b = unit / a.tiles / a.heads;
    const int p = tile * kM2Rows + rs + 4 * warp;
    const bool row_ok = p < a.head_dim;
    float4 *st = reinterpret_cast<float4 *>(a.state + ((b * a.heads + h) * a.head_dim + p) * a.ds);
    float4 s[U];
    DB_UNROLL
    for (int u = 0; u < U; ++u) {
      const int n = 4 * (nl + 8 * u);
      s[u] = (row_ok && n < a.ds) ? rc_state_load(st + n / 4) : make_float4(0, 0, 0, 0);
    }
    const long long row = b * a.x_stride;
    const long long grp = b * a.bc_stride + (long long)(h / a.group) * a.ds;
    const float xp = row_ok ? so_to_float<T>(a.x[row + (long long)h * a.head_dim + p]) : 0.0f;
    float dt = rc_softplus(so_to_float<T>(a.dt[b * a.dt_stride + h]) + a.dt_bias[h]);
    dt = dt < a.dt_min ? a.dt_min : (dt > a.dt_max ? a.dt_max : dt); /* comparisons: a NaN stays NaN */
    const float dA = expf(-expf(a.A_log[h]) * dt);
    const float dtx = dt * xp;
    float y = 0.0f;
    DB_UNROLL
    for (int u = 0; u < U; ++u) {
      const int n = 4 * (nl + 8 * u);
      if (n < a.ds) {
        float bv[4], cv[4];
        rc_load4<T>(a.B + grp + n, bv);
        rc_load4<T>(a.C + grp + n, cv);
        s[u].x = s[u].x * dA + dtx * bv[0];
        s[u].y = s[u].y * dA + dtx * bv[1];
        s[u].z = s[u].z * dA + dtx * bv[2];
        s[u].w = s[u].w * dA + dtx * bv[3];
        y += s[u].x * cv[0] + s[u].y * cv[1] + s[u].z * cv[2] + s[u].w * cv[3];
        if (row_ok) rc_state_store(st + n / 4, s[u]);
      }
    }
    y += __shfl_xor_sync(0xffffffffu, y, 1);
    y += __shfl_xor_sync(0xffffffffu, y, 2);
    y += __shfl_xor_sync(0xffffffffu, y, 4);
    if (nl == 0 && row_ok)
      a.y[(b * a.heads + h) * a.head_dim + p] = so_from_float<T>(y + a.D[h] * xp);
  }
}

struct M2Choice {
  void (*kernel)(const M2Args);
  const char *name;
  int registers;
};

template <class T>
M2Choice m2_choose_t(int u, const char *const (&names)[4]) {
  if (u <= 1) return {mamba2_step_kernel<T, 1>, names[0], m2_sm90_registers(1)};
  if (u <= 2) return {mamba2_step_kernel<T, 2>, names[1], m2_sm90_registers(2)};
  if (u <= 4) return {mamba2_step_kernel<T, 4>, names[2], m2_sm90_registers(4)};
  return {mamba2_step_kernel<T, 8>, names[3], m2_sm90_registers(8)};
}

M2Choice m2_choose(int32_t dtype, int ds) {
  static const char *const bf16[4] = {"mamba2_step_kernel<__nv_bfloat16, 1>", "mamba2_step_kernel<__nv_bfloat16, 2>",
                                      "mamba2_step_kernel<__nv_bfloat16, 4>", "mamba2_step_kernel<__nv_bfloat16, 8>"};
  static const char *const fp16[4] = {"mamba2_step_kernel<__half, 1>", "mamba2_step_kernel<__half, 2>",
                                      "mamba2_step_kernel<__half, 4>", "mamba2_step_kernel<__half, 8>"};
  const int u = (int)db_ceil_div(ds, 32);
  return dtype == DB_DTYPE_BF16 ? m2_choose_t<__nv_bfloat16>(u, bf16) : m2_choose_t<__half>(u, fp16);
}

struct M2Plan {
  M2Args args;
  M2Choice choice;
  unsigned grid;
};

int m2_plan(const char *fn, db_context *ctx, const db_mamba2_step_params *p, M2Plan *plan) {
  if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: null params", fn);
  DB_CHECK(so_check_dtype(fn, p->dtype));
  DB_CHECK(so_check_batch(fn, "batch", p->batch));
  if (p->n_groups < 1 || p->heads < 1 || p->heads % p->n_groups != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: heads %d must be a positive multiple of n_groups %d", fn, p->heads,
                   p->n_groups);
  DB_CHECK(so_check_row(fn, "head_dim", p->head_dim));
  DB_CHECK(so_check_row(fn, "state_size", p->state_size));
  if (p->head_dim > DB_MAMBA2_MAX_HEAD_DIM || p->state_size > DB_MAMBA2_MAX_STATE)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: head_dim %d (at most %d) or state_size %d (at most %d) too large", fn,
                   p->head_dim, DB_MAMBA2_MAX_HEAD_DIM, p->state_size, DB_MAMBA2_MAX_STATE);
  const long long x_width = (long long)p->heads * p->head_dim, bc_width = (long long)p->n_groups * p->state_size;
  if (x_width > (1LL << 30) || bc_width > (1LL << 30))
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: heads x head_dim %lld too large", fn, x_width);
  int32_t xs = 0;
  if (p->x_row_stride != 0)
    DB_CHECK(rc_stride(fn, "x_row_stride", p->x_row_stride, (int32_t)std::max(x_width, bc_width), &xs));
  if (p->dt_row_stride != 0 && p->dt_row_stride < p->heads)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: dt_row_stride %d must be 0 or at least heads %d", fn,
                   p->dt_row_stride, p->heads);
  if (!(p->dt_min >= 0.0f) || !(p->dt_max >= p->dt_min))
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: time_step_limit (%g, %g) must have 0 <= dt_min <= dt_max", fn,
                   (double)p->dt_min, (double)p->dt_max);
  DB_CHECK(so_check_ptr(fn, "x", p->x, 16));
  DB_CHECK(so_check_ptr(fn, "B", p->B, 16));
  DB_CHECK(so_check_ptr(fn, "C", p->C, 16));
  DB_CHECK(so_check_ptr(fn, "dt", p->dt, 2));
  DB_CHECK(rc_check_f32(fn, "A_log", p->A_log));
  DB_CHECK(rc_check_f32(fn, "D", p->D));
  DB_CHECK(rc_check_f32(fn, "dt_bias", p->dt_bias));
  DB_CHECK(so_check_ptr(fn, "state", p->state, 16));
  DB_CHECK(so_check_ptr(fn, "y", p->y, 16));
  M2Args &a = plan->args;
  a.x = reinterpret_cast<const uint16_t *>(p->x);
  a.B = reinterpret_cast<const uint16_t *>(p->B);
  a.C = reinterpret_cast<const uint16_t *>(p->C);
  a.dt = reinterpret_cast<const uint16_t *>(p->dt);
  a.A_log = reinterpret_cast<const float *>(p->A_log);
  a.D = reinterpret_cast<const float *>(p->D);
  a.dt_bias = reinterpret_cast<const float *>(p->dt_bias);
  a.state = reinterpret_cast<float *>(p->state);
  a.y = reinterpret_cast<uint16_t *>(p->y);
  a.tiles = (int)db_ceil_div(p->head_dim, kM2Rows);
  a.heads = p->heads, a.group = p->heads / p->n_groups;
  a.head_dim = p->head_dim, a.ds = p->state_size;
  /* packed: x [batch, heads, head_dim], B and C [batch, n_groups, state_size] */
  a.x_stride = xs ? xs : (int)x_width;
  a.bc_stride = xs ? xs : (int)bc_width;
  a.dt_stride = p->dt_row_stride ? p->dt_row_stride : p->heads;
  a.dt_min = p->dt_min, a.dt_max = p->dt_max;
  a.units = (long long)p->batch * p->heads * a.tiles;
  plan->choice = m2_choose(p->dtype, p->state_size);
  int blocks_per_sm = 0;
  DB_CHECK(db_occupancy(plan->choice.kernel, kM2Threads, 0, plan->choice.registers, fn, &blocks_per_sm));
  plan->grid = rc_grid(a.units, blocks_per_sm, ctx->sm_count);
  return DB_OK;
}

}  // namespace

extern "C" int db_mamba2_step(db_context *ctx, const db_mamba2_step_params *p) {
  return db_guard("db_mamba2_step", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    M2Plan plan;
    DB_CHECK(m2_plan("db_mamba2_step", ctx, p, &plan));
    return db_launch(plan.choice.name, plan.choice.kernel, dim3(plan.grid), dim3(kM2Threads), 0, ctx->stream,
                     plan.args);
  });
}

extern "C" int db_mamba2_step_launches(db_context *ctx, const db_mamba2_step_params *p, db_launch_info *out,
                                       int32_t max, int32_t *count) {
  return db_guard("db_mamba2_step_launches", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    if (count == nullptr) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_mamba2_step_launches: null count");
    M2Plan plan;
    DB_CHECK(m2_plan("db_mamba2_step_launches", ctx, p, &plan));
    *count = 1;
    if (out == nullptr && max == 0) return DB_OK;
    if (out == nullptr || max < 1)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "db_mamba2_step_launches: room for %d launches, the call makes 1", max);
    db_launch_info &l = out[0];
    std::memset(&l, 0, sizeof l);
    std::snprintf(l.kernel, sizeof l.kernel, "%s", plan.choice.name);
    l.grid_x = (int32_t)plan.grid, l.grid_y = 1, l.grid_z = 1;
    l.block_threads = kM2Threads;
    l.work_units = (int32_t)std::min<long long>(plan.args.units, INT32_MAX);
    return DB_OK;
  });
}
