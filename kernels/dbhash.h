/*
 * dbhash.h: the counter-based input hash, read by nvcc, g++ and (re-implemented bit for bit)
 * by bench/ref in Go. Inputs are generated on the device from (seed, index), so a float64
 * reference never needs the inputs copied back.
 *
 *   db_hash64(seed, i):    splitmix64 finalizer of (seed * 0x9E3779B97F4A7C15 + i + 1)
 *   db_hash_uniform(s, i): ((db_hash64(s, i) >> 40) - 2^23) * 2^-23, exactly representable
 *                          in float32, uniform on [-1, 1)
 */
#ifndef DECODEBENCH_DBHASH_H
#define DECODEBENCH_DBHASH_H

#include <stdint.h>

#if defined(__CUDACC__)
#define DB_HD __host__ __device__ __forceinline__
#else
#define DB_HD static inline
#endif

DB_HD uint64_t db_hash64(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 1ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

DB_HD float db_hash_uniform(uint64_t seed, uint64_t index) {
  int32_t m = (int32_t)(db_hash64(seed, index) >> 40) - (1 << 23);
  return (float)m * (1.0f / 8388608.0f);
}

/* The WRITE probe's word i: a Weyl sequence, one multiply-add, so the probe measures stores. */
DB_HD uint32_t db_write_word(uint64_t seed, uint64_t index) {
  return (uint32_t)seed + (uint32_t)index * 0x9E3779B9u;
}

#endif
