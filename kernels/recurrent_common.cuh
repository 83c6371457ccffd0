/*
 * recurrent_common.cuh: what the recurrent-layer kernels (recurrent.cu, gdn.cu, mamba2.cu)
 * share: the scalar gates (softplus, sigmoid, silu), 4- and 8-element 16-bit loads, the fp32
 * state's 16-byte accesses and the grid sizing of their grid-stride loops.
 *
 * Included by those files only; the helpers live in an anonymous namespace, as smallops_common's.
 */
#ifndef DECODEBENCH_RECURRENT_COMMON_CUH
#define DECODEBENCH_RECURRENT_COMMON_CUH

#include "smallops_common.cuh"

namespace {

/* torch.nn.functional.softplus (beta 1, threshold 20): x above 20 is x itself. */
DB_DEVICE float rc_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
DB_DEVICE float rc_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
DB_DEVICE float rc_silu(float x) { return x / (1.0f + expf(-x)); }

/* 4 16-bit elements (8 bytes), widened exactly. */
template <class T>
DB_DEVICE void rc_load4(const uint16_t *p, float (&f)[4]) {
  const uint2 v = *reinterpret_cast<const uint2 *>(p);
  const float2 a = db_dtype<T>::unpack(v.x), b = db_dtype<T>::unpack(v.y);
  f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y;
}

/* The fp32 state, 16 bytes at a time: loaded through L2 (read once a step, by one thread),
 * stored back by the same thread. */
DB_DEVICE float4 rc_state_load(const float4 *p) { return db_ld_cg(p); }
DB_DEVICE void rc_state_store(float4 *p, const float4 v) {
  db_st_v4(reinterpret_cast<uint4 *>(p),
           make_uint4(__float_as_uint(v.x), __float_as_uint(v.y), __float_as_uint(v.z), __float_as_uint(v.w)));
}

/* Blocks of a grid-stride launch over `units`: every unit its own block up to the card's
 * resident slots (blocks_per_sm x SMs), so a large batch runs in one wave of blocks that each
 * take units b, b + grid, ... */
inline unsigned rc_grid(long long units, int blocks_per_sm, int sm_count) {
  const long long slots = (long long)std::max(1, blocks_per_sm) * std::max(1, sm_count);
  return (unsigned)std::max<long long>(1, std::min(units, slots));
}

inline int rc_check_f32(const char *fn, const char *name, uint64_t ptr) { return so_check_ptr(fn, name, ptr, 4); }

/* A row stride: 0 (packed: `packed`) or a multiple of 8 at least `least`. */
inline int rc_stride(const char *fn, const char *name, int32_t stride, int32_t least, int32_t *out) {
  if (stride == 0) return *out = least, DB_OK;
  if (stride < least || stride % kVec != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: %s %d must be 0 or a multiple of %d of at least %d", fn, name,
                   stride, kVec, least);
  return *out = stride, DB_OK;
}

}  // namespace

#endif /* DECODEBENCH_RECURRENT_COMMON_CUH */
