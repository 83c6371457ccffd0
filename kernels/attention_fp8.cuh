/*
 * attention_fp8.cuh: the fp8 e4m3 codes of a KV cache (DB_DTYPE_FP8_E4M3) on the device: the
 * decode the attention kernels run after their shared-memory loads, and the quantisation the
 * appends (db_kv_append, db_rope_kv_append) write. Integer and fp32 arithmetic only, so the
 * same code runs on every architecture the library builds for and on the emulator.
 */
#ifndef DECODEBENCH_ATTENTION_FP8_CUH
#define DECODEBENCH_ATTENTION_FP8_CUH

#include "common.cuh"

namespace {

/*
 * Two e4m3 codes (bits 0..7 and 8..15 of x) as the fp16 bit patterns of code / 256 (low and high
 * half), exactly: fp16's exponent bias is 8 more than e4m3's, and its subnormals hold e4m3's
 * (2^-9 / 256 = 2^-17 = 2^-24 * 128), so the code's exponent and mantissa bits move up by 7 and
 * the sign by 8. The NaN code (S.1111.111) would be 480 / 256: adding 1 to its 7 bits carries
 * into bit 14 of the half, which spreads into an all-ones exponent (fp16 NaN). Integer work
 * only (about 10 operations a pair), no conversion unit.
 */
DB_DEVICE uint32_t attn_e4m3x2_half2_bits(uint32_t x) {
  const uint32_t s = ((x & 0x80u) << 8) | ((x & 0x8000u) << 16);
  const uint32_t e = ((x & 0x7fu) << 7) | ((x & 0x7f00u) << 15);
  const uint32_t nan = (((e + 0x00800080u) & 0x40004000u) >> 4) * 31u;
  return s | e | nan;
}

/*
 * The e4m3 code of x, rounded to nearest even and saturated to +-448 (what vLLM's fp8 cache
 * writes: __NV_SATFINITE); NaN gives the NaN code S.1111.111, an infinity +-448. Below 2^-6 the
 * codes are subnormal, steps of 2^-9 (x * 512 is exact, rintf rounds half to even); above, the
 * fp32 mantissa is rounded to 3 bits at bit 20, a carry moving into the exponent.
 */
DB_DEVICE uint32_t attn_e4m3_from_float(float x) {
  const uint32_t u = __float_as_uint(x);
  const uint32_t sign = (u >> 24) & 0x80u, mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return sign | 0x7fu;           /* NaN */
  if (mag >= 0x43e00000u) return sign | 0x7eu;          /* >= 448 (and infinity): saturate */
  if (mag < 0x3c800000u)                                /* < 2^-6: subnormal, or 2^-6 itself */
    return sign | (uint32_t)rintf(__uint_as_float(mag) * 512.0f);
  const uint32_t r = (mag + 0x7ffffu + ((mag >> 20) & 1u)) & 0xfff00000u;
  return sign | ((((r >> 23) - 120u) << 3) | ((r >> 20) & 7u));
}

/* Eight floats as eight e4m3 codes of x / scale (fp32 division, then the code's rounding). */
DB_DEVICE uint2 attn_e4m3_pack8(const float (&x)[8], float scale) {
  uint32_t w[2];
  DB_UNROLL
  for (int h = 0; h < 2; ++h) {
    w[h] = 0;
    DB_UNROLL
    for (int e = 0; e < 4; ++e) w[h] |= attn_e4m3_from_float(x[4 * h + e] / scale) << (8 * e);
  }
  return make_uint2(w[0], w[1]);
}

/* The scale of KV head h: its entry of a per-head f32 [kv_heads] array, or the tensor's where
 * there is no array or the entry is 0. */
DB_DEVICE float attn_e4m3_head_scale(const float *scales, int h, float tensor) {
  if (scales == nullptr) return tensor;
  const float s = scales[h];
  return s != 0.0f ? s : tensor;
}

}  // namespace

#endif  // DECODEBENCH_ATTENTION_FP8_CUH
