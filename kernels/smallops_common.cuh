/*
 * smallops_common.cuh: what the small-op files (smallops*.cu) share: 8-element (16-byte)
 * conversions, the dtype dispatch, argument checks that name the value, and the launch sizes.
 *
 * Included by the smallops*.cu files only; like every kernel helper in kernels/, these live in
 * an anonymous namespace, so each file compiles its own copy.
 */
#ifndef DECODEBENCH_SMALLOPS_COMMON_CUH
#define DECODEBENCH_SMALLOPS_COMMON_CUH

#include "common.cuh"

namespace {

constexpr int kVec = DB_SMALLOP_VECTOR; /* 16-bit elements per 16-byte access */

/* 8 elements of a 16-byte chunk, widened exactly to fp32. */
template <class T>
DB_DEVICE void so_unpack8(const uint4 v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  DB_UNROLL
  for (int i = 0; i < 4; ++i) {
    const float2 p = db_dtype<T>::unpack(w[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

/* 8 fp32 values, each rounded once to T, as one 16-byte chunk. */
template <class T>
DB_DEVICE uint4 so_pack8(const float (&f)[8]) {
  uint4 v;
  v.x = db_dtype<T>::pack(f[0], f[1]);
  v.y = db_dtype<T>::pack(f[2], f[3]);
  v.z = db_dtype<T>::pack(f[4], f[5]);
  v.w = db_dtype<T>::pack(f[6], f[7]);
  return v;
}

/* One 16-bit element (its bits), widened exactly. */
template <class T>
DB_DEVICE float so_to_float(uint16_t bits) {
  return db_dtype<T>::unpack((uint32_t)bits).x;
}
template <class T>
DB_DEVICE uint16_t so_from_float(float v) {
  return (uint16_t)(db_dtype<T>::pack(v, 0.0f) & 0xffffu);
}

/* A monotone key of a float: larger float, larger key; a NaN above everything (as torch.argmax
 * ranks it) and -0 equal to +0, so that ties go to the lower index. */
DB_DEVICE uint32_t so_order_key(float v) {
  if (v != v) return 0xffffffffu;
  const uint32_t u = __float_as_uint(v + 0.0f); /* -0 + 0 = +0 */
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* ---- host-side checks ------------------------------------------------------------------------- */

inline int so_check_dtype(const char *fn, int32_t dtype) {
  if (dtype != DB_DTYPE_BF16 && dtype != DB_DTYPE_FP16)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: dtype %d (%s) unsupported: want bf16 or fp16", fn,
                   dtype, db_dtype_name(dtype));
  return DB_OK;
}

inline int so_check_batch(const char *fn, const char *name, int32_t batch) {
  if (batch < 1 || batch > DB_MAX_BATCH)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: %s %d out of range 1..%d", fn, name, batch, DB_MAX_BATCH);
  return DB_OK;
}

/* A row length of 16-bit elements that 16-byte accesses read: a positive multiple of 8. */
inline int so_check_row(const char *fn, const char *name, int32_t n) {
  if (n < 1) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: %s %d must be >= 1", fn, name, n);
  if (n % kVec != 0)
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                   "%s: %s %d is not a multiple of %d (rows are read 16 bytes at a time)", fn, name, n, kVec);
  return DB_OK;
}

/* A device pointer that must be set and aligned to `align` bytes. */
inline int so_check_ptr(const char *fn, const char *name, uint64_t ptr, uint64_t align) {
  if (ptr == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: %s is null", fn, name);
  if (ptr % align != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: %s 0x%llx is not %llu-byte aligned", fn, name,
                   (unsigned long long)ptr, (unsigned long long)align);
  return DB_OK;
}

/* Blocks of `threads` covering `items` work items, one per thread; the grid-stride loops in the
 * kernels take whatever is beyond the grid's limit. */
inline unsigned so_blocks(uint64_t items, unsigned threads) {
  const uint64_t blocks = db_ceil_div(items, threads);
  return (unsigned)std::max<uint64_t>(1, std::min<uint64_t>(blocks, 1u << 30));
}

}  // namespace

#endif /* DECODEBENCH_SMALLOPS_COMMON_CUH */
