// bandwidth.cu: the probes that measure a card's own ceilings: memory read, write, copy and triad
// with 16-byte accesses, and fp32-FMA and bf16 tensor-core (mma.sync) arithmetic rates.
//
// Memory probes: a grid-stride loop over 16-byte vectors with kMemUnroll independent loads issued
// before any is used, so each thread keeps 64 B in flight. An H200 needs about 36-48 KiB in
// flight per SM (Little's law, below); kMemBlocksPerSm blocks of 256 threads give 4 x 256 x 64 B =
// 64 KiB per SM (not yet measured on a card: the first GPU run should sweep blocks and threads to
// confirm). Every access is a 16-byte vector; READ and COPY keep 64 B
// and TRIAD 128 B of loads in flight per thread; the READ sum meets in one atomicAdd per block;
// blocks come from the SM count (never more than the work needs); bench/measure sizes each buffer
// max(32x L2, 1 GiB). Little's law: 4.8 TB/s x ~1 us loaded latency / 132 SMs ~ 36 KB per SM.
// ptxas (CUDA 11.8, sm_80 and sm_90): READ, COPY, TRIAD 32 registers, WRITE 20, FMA 26, MMA 30;
// no spills, so a full SM (2048 threads) is resident.
#include <cstdio>

#include "common.cuh"

namespace {

constexpr int kMemUnroll = 4;
constexpr int kMemBlocksPerSm = 4;
constexpr int kDefaultThreads = 256;
constexpr int kMaxThreads = 1024;

// Compute probes: independent chains per thread so the pipelines never wait on a result.
// FMA: 8 chains cover the 4-cycle FMA latency with room to spare for the 4 schedulers of an SM.
constexpr int kFmaChains = 8;
constexpr int kFmaSteps = 16;  // unrolled steps per loop trip: one compare-and-branch per 128 FMAs
// MMA: 4 accumulators per warp keep several mma.sync in flight per warp.
constexpr int kMmaChains = 4;
constexpr int kMmaSteps = 8;
constexpr double kMmaFlops = 2.0 * 16 * 8 * 16;  // one m16n8k16 per warp

DB_DEVICE uint32_t sum_words(uint4 v) { return v.x + v.y + v.z + v.w; }

// Sums a block's per-thread values into *result (uint32 wrap-around, so exact in any order).
DB_DEVICE void block_sum_to(uint32_t value, uint32_t *result) {
  DB_SHARED(uint32_t, warp_sums, kMaxThreads / 32);
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  value = db_warp_sum(value);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  if (warp == 0) {
    uint32_t s = lane < (blockDim.x >> 5) ? warp_sums[lane] : 0u;
    s = db_warp_sum(s);
    if (lane == 0) atomicAdd(result, s);
  }
}

__global__ __launch_bounds__(kMaxThreads) void probe_read_kernel(const uint4 *__restrict__ a,
                                                                 uint64_t vectors,
                                                                 uint32_t *result) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t sum = 0;
  for (; i + (kMemUnroll - 1) * stride < vectors; i += kMemUnroll * stride) {
    uint4 v[kMemUnroll];
    DB_UNROLL
    for (int u = 0; u < kMemUnroll; ++u) v[u] = db_ld_stream_v4(a + i + u * stride);
    DB_UNROLL
    for (int u = 0; u < kMemUnroll; ++u) sum += sum_words(v[u]);
  }
  for (; i < vectors; i += stride) sum += sum_words(db_ld_stream_v4(a + i));
  block_sum_to(sum, result);
}

// Word w = (uint32)seed + w * 0x9E3779B9 (a Weyl sequence, db_write_word): one integer
// multiply-add per word, so the probe stays store-bound. The first version wrote the 64-bit
// input hash, three 64-bit multiplies per word: ~14 integer ops per 4 bytes is about what an
// H200's ALUs can issue at 4.8 TB/s, which would have made WRITE measure the ALUs.
__global__ __launch_bounds__(kMaxThreads) void probe_write_kernel(uint4 *__restrict__ a,
                                                                  uint64_t vectors,
                                                                  uint64_t seed) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < vectors; i += stride) {
    const uint64_t w = 4 * i;
    a[i] = make_uint4(db_write_word(seed, w), db_write_word(seed, w + 1), db_write_word(seed, w + 2),
                      db_write_word(seed, w + 3));
  }
}

__global__ __launch_bounds__(kMaxThreads) void probe_copy_kernel(const uint4 *__restrict__ src,
                                                                 uint4 *__restrict__ dst,
                                                                 uint64_t vectors) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (kMemUnroll - 1) * stride < vectors; i += kMemUnroll * stride) {
    uint4 v[kMemUnroll];
    DB_UNROLL
    for (int u = 0; u < kMemUnroll; ++u) v[u] = db_ld_stream_v4(src + i + u * stride);
    DB_UNROLL
    for (int u = 0; u < kMemUnroll; ++u) dst[i + u * stride] = v[u];
  }
  for (; i < vectors; i += stride) dst[i] = db_ld_stream_v4(src + i);
}

// a = b + scalar * c as fmaf(scalar, c, b): one rounding, the same on a GPU and in emulation.
DB_DEVICE uint4 triad4(uint4 b, uint4 c, float s) {
  return make_uint4(__float_as_uint(fmaf(s, __uint_as_float(c.x), __uint_as_float(b.x))),
                    __float_as_uint(fmaf(s, __uint_as_float(c.y), __uint_as_float(b.y))),
                    __float_as_uint(fmaf(s, __uint_as_float(c.z), __uint_as_float(b.z))),
                    __float_as_uint(fmaf(s, __uint_as_float(c.w), __uint_as_float(b.w))));
}

__global__ __launch_bounds__(kMaxThreads) void probe_triad_kernel(uint4 *__restrict__ a,
                                                                  const uint4 *__restrict__ b,
                                                                  const uint4 *__restrict__ c,
                                                                  float scalar, uint64_t vectors) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (kMemUnroll - 1) * stride < vectors; i += kMemUnroll * stride) {
    uint4 vb[kMemUnroll], vc[kMemUnroll];
    DB_UNROLL
    for (int u = 0; u < kMemUnroll; ++u) {
      vb[u] = db_ld_stream_v4(b + i + u * stride);
      vc[u] = db_ld_stream_v4(c + i + u * stride);
    }
    DB_UNROLL
    for (int u = 0; u < kMemUnroll; ++u) a[i + u * stride] = triad4(vb[u], vc[u], scalar);
  }
  for (; i < vectors; i += stride)
    a[i] = triad4(db_ld_stream_v4(b + i), db_ld_stream_v4(c + i), scalar);
}

// x = x * mul + add converges to add / (1 - mul): finite for any number of iterations.
__global__ __launch_bounds__(kMaxThreads) void probe_fma_kernel(float *result, int iterations,
                                                                float mul, float add) {
  const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  float x[kFmaChains];
  DB_UNROLL
  for (int j = 0; j < kFmaChains; ++j) x[j] = (float)(threadIdx.x + j) * 1e-3f;
  for (int it = 0; it < iterations; ++it) {
    DB_UNROLL
    for (int s = 0; s < kFmaSteps; ++s) {
      DB_UNROLL
      for (int j = 0; j < kFmaChains; ++j) x[j] = fmaf(x[j], mul, add);
    }
  }
  float total = 0.0f;
  DB_UNROLL
  for (int j = 0; j < kFmaChains; ++j) total += x[j];
  result[tid] = total;
}

// Fragments of small bf16 values (about 2^-8) that depend on the lane, so nothing folds; each mma
// adds about 16 * 2^-16 to an accumulator: finite for any realistic number of iterations.
__global__ __launch_bounds__(kMaxThreads) void probe_mma_kernel(float *result, int iterations) {
  const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t element = 0x3b80u + (threadIdx.x & 7u); /* bf16 2^-8 and a little more */
  const uint32_t pair = element | element << 16;
  const uint32_t a[4] = {pair, pair, pair, pair};
  const uint32_t b[2] = {pair, pair};
  float acc[kMmaChains][4];
  DB_UNROLL
  for (int c = 0; c < kMmaChains; ++c) {
    DB_UNROLL
    for (int i = 0; i < 4; ++i) acc[c][i] = 0.0f;
  }
  for (int it = 0; it < iterations; ++it) {
    DB_UNROLL
    for (int s = 0; s < kMmaSteps; ++s) {
      DB_UNROLL
      for (int c = 0; c < kMmaChains; ++c) db_mma_m16n8k16_bf16(acc[c], a, b);
    }
  }
  float total = 0.0f;
  DB_UNROLL
  for (int c = 0; c < kMmaChains; ++c) total += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  result[tid] = total;
}

const char *probe_name(int32_t kind) {
  switch (kind) {
    case DB_PROBE_READ: return "READ";
    case DB_PROBE_WRITE: return "WRITE";
    case DB_PROBE_COPY: return "COPY";
    case DB_PROBE_TRIAD: return "TRIAD";
    case DB_PROBE_FMA_F32: return "FMA_F32";
    case DB_PROBE_MMA_BF16: return "MMA_BF16";
  }
  return "unknown";
}

bool is_memory_probe(int32_t kind) { return kind >= DB_PROBE_READ && kind <= DB_PROBE_TRIAD; }

int require_buffer(const char *probe, const char *name, uint64_t dptr, uint64_t alignment) {
  if (dptr == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "probe %s: %s is null", probe, name);
  if (dptr % alignment != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "probe %s: %s=0x%llx is not %llu-byte aligned", probe,
                   name, (unsigned long long)dptr, (unsigned long long)alignment);
  return DB_OK;
}

// Validates p and resolves blocks and threads; fills blocks_used, threads_used, bytes_moved and
// flops. Launches nothing.
int plan_probe(const db_context *ctx, db_probe_params *p) {
  if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "probe params are null");
  const char *name = probe_name(p->kind);
  if (p->kind < DB_PROBE_READ || p->kind > DB_PROBE_MMA_BF16)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "probe kind=%d is not a DB_PROBE_*", p->kind);
  if (p->blocks < 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "probe %s: blocks=%d", name, p->blocks);
  if (p->threads != 0 && (p->threads < 32 || p->threads > kMaxThreads || p->threads % 32 != 0))
    return db_fail(DB_ERR_INVALID_ARGUMENT,
                   "probe %s: threads=%d is not a multiple of 32 in 32..%d (or 0 for auto)", name,
                   p->threads, kMaxThreads);
  const int threads = p->threads ? p->threads : kDefaultThreads;

  if (is_memory_probe(p->kind)) {
    if (p->words == 0) return db_fail(DB_ERR_INVALID_ARGUMENT, "probe %s: words=0", name);
    if (p->words % 4 != 0)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                     "probe %s: words=%llu is not a multiple of 4 (the probes move 16-byte vectors)",
                     name, (unsigned long long)p->words);
    DB_CHECK(require_buffer(name, "a", p->a, 16));
    if (p->kind == DB_PROBE_READ) DB_CHECK(require_buffer(name, "result", p->result, 4));
    if (p->kind == DB_PROBE_COPY || p->kind == DB_PROBE_TRIAD)
      DB_CHECK(require_buffer(name, "b", p->b, 16));
    if (p->kind == DB_PROBE_TRIAD) DB_CHECK(require_buffer(name, "c", p->c, 16));
    const uint64_t vectors = p->words / 4;
    // Enough blocks for kMemBlocksPerSm x 256 threads per SM, but none without a full sweep of work.
    uint64_t blocks = p->blocks;
    if (blocks == 0) {
      const uint64_t fill = (uint64_t)ctx->sm_count * kMemBlocksPerSm * kDefaultThreads / threads;
      blocks = std::min<uint64_t>(std::max<uint64_t>(fill, 1),
                                  db_ceil_div(vectors, (uint64_t)threads * kMemUnroll));
    }
    if (blocks > 0x7fffffffu)
      return db_fail(DB_ERR_INVALID_ARGUMENT, "probe %s: %llu blocks is too many", name,
                     (unsigned long long)blocks);
    const double bytes = (double)p->words * 4.0;
    p->blocks_used = (int32_t)blocks;
    p->threads_used = threads;
    p->flops = 0.0;
    switch (p->kind) {
      case DB_PROBE_READ:
      case DB_PROBE_WRITE: p->bytes_moved = bytes; break;
      case DB_PROBE_COPY: p->bytes_moved = 2.0 * bytes; break;
      default:
        p->bytes_moved = 3.0 * bytes;
        p->flops = 2.0 * (double)p->words;
        break;
    }
    return DB_OK;
  }

  // Compute probes: every SM full of threads.
  DB_CHECK(require_buffer(name, "result", p->result, 4));
  if (p->iterations < 1)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "probe %s: iterations=%d is not >= 1", name,
                   p->iterations);
  int blocks = p->blocks;
  if (blocks == 0) blocks = ctx->sm_count * std::max(1, ctx->max_threads_per_sm / threads);
  const double all_threads = (double)blocks * threads;
  p->blocks_used = blocks;
  p->threads_used = threads;
  p->bytes_moved = 0.0;
  if (p->kind == DB_PROBE_FMA_F32)
    p->flops = 2.0 * kFmaChains * kFmaSteps * (double)p->iterations * all_threads;
  else
    p->flops = kMmaFlops * kMmaChains * kMmaSteps * (double)p->iterations * (all_threads / 32.0);
  return DB_OK;
}

}  // namespace

extern "C" int db_probe_plan(db_context *ctx, db_probe_params *p) {
  return db_guard("db_probe_plan", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    return plan_probe(ctx, p);
  });
}

extern "C" int db_probe(db_context *ctx, db_probe_params *p) {
  return db_guard("db_probe", [&]() -> int {
    DB_CHECK(db_enter(ctx));
    DB_CHECK(plan_probe(ctx, p));
    const dim3 grid((unsigned)p->blocks_used), block((unsigned)p->threads_used);
    const uint64_t vectors = p->words / 4;
    uint4 *a = reinterpret_cast<uint4 *>(p->a);
    uint4 *b = reinterpret_cast<uint4 *>(p->b);
    const uint4 *c = reinterpret_cast<const uint4 *>(p->c);
    switch (p->kind) {
      case DB_PROBE_READ: {
        uint32_t *result = reinterpret_cast<uint32_t *>(p->result);
        // This 4-byte memset runs inside every timed READ call. It costs a
        // microsecond or two beside a read of >= 1 GiB (>= 220 us on an H200): under 1%, and it
        // only lowers the measured bandwidth. Kept: the ABI promises result = this call's sum.
        DB_CHECK_CUDA(cudaMemsetAsync(result, 0, sizeof(uint32_t), ctx->stream));
        return DB_LAUNCH(probe_read_kernel, grid, block, 0, ctx->stream, a, vectors, result);
      }
      case DB_PROBE_WRITE:
        return DB_LAUNCH(probe_write_kernel, grid, block, 0, ctx->stream, a, vectors, p->seed);
      case DB_PROBE_COPY:
        return DB_LAUNCH(probe_copy_kernel, grid, block, 0, ctx->stream, a, b, vectors);
      case DB_PROBE_TRIAD:
        return DB_LAUNCH(probe_triad_kernel, grid, block, 0, ctx->stream, a, b, c, p->scalar,
                         vectors);
      case DB_PROBE_FMA_F32:
        return DB_LAUNCH(probe_fma_kernel, grid, block, 0, ctx->stream,
                         reinterpret_cast<float *>(p->result), p->iterations, 0.999f, 0.001f);
      case DB_PROBE_MMA_BF16:
        return DB_LAUNCH(probe_mma_kernel, grid, block, 0, ctx->stream,
                         reinterpret_cast<float *>(p->result), p->iterations);
    }
    return db_fail(DB_ERR_INTERNAL, "db_probe: kind=%d passed validation", p->kind);
  });
}
