// linear_grouped.cu: the expert linears of a mixture of experts over exactly the rows routed to
// each expert (db_grouped_linear), in one launch that reads the experts' row offsets on the
// device, so a CUDA graph can replay it whatever the router chose.
//
// The same kernels serve a call without offsets (MLA's absorbed per-head projections, q_absorb
// and v_absorb): `experts` groups of `rows` rows each, group g's chunks found by division rather
// than the offsets' scan, and rows placed by strides (db_grouped_linear_params), so that a head's
// slice is read inside q_b_proj's rows and written into the attention's q where it lies. The
// strides cost the CUDA-core loop no registers: it steps one x pointer a row.
//
// Two kernels share the layout below: the CUDA-core grouped_linear_kernel, described here, and
// for batches that give a touched expert 8 rows or more on average the tensor-core
// grouped_linear_mma_kernel (chunks of 16 rows, 64 W rows a block; its comment has the rest).
//
// Work is cut into (chunk, tile) blocks. A chunk is up to kGlChunkRows = 8 consecutive rows of
// one expert (rows [offsets[e], offsets[e + 1]) in chunks of 8, the experts one after another);
// a tile is kGlTileN = 16 rows of that expert's W. blockIdx.x is the chunk, blockIdx.y the tile.
// Every warp of a block finds its chunk from the offsets itself (a warp scan of the experts'
// chunk counts, lane l holding experts 8l..8l+7, so no barrier), and a block past the last chunk
// exits at once: an expert no row is routed to has no chunk, so no block reads its W. The grid
// is sized for any routing: sum_e ceil(count_e / 8) <= (rows + 7 min(experts, rows)) / 8 chunks,
// which is every chunk when all rows go to one expert and a few spare columns when they spread.
// Chunks are the grid's fast dimension, so the blocks of one tile's chunks are dispatched
// together and the tile comes from DRAM once, from L2 for the others.
//
// In a block, each of the 4 warps owns 4 rows of W; its lanes stride K in 16-byte chunks,
// kGlUnroll at a time, so a lane has 4 x 2 = 8 16-byte loads of W in flight a trip (10 with the
// first token row's x: sm_90 SASS), and every W element loaded serves the chunk's up to 8 token
// rows (x from L1: every warp of the block and every tile block on the SM reread the same rows). At 8 rows a chunk a 16-byte W load feeds 64
// FMAs a lane, 0.25 bytes a FMA: bandwidth-bound on an H200 (4.8 TB/s over 33.5 TFMA/s is 0.14),
// where 16 rows would make the FMAs the limit. The 4 x 8 fp32 sums of a lane are reduced with a
// butterfly reduce-scatter (31 shuffles a warp, not 32 x 5): lane L ends with the total of W row
// L / 8 and token row L % 8 and stores it, plus the bias, rounded once.
//
// Quantized experts (weight_format, decodebench.h "quantized weight formats") run on a third
// kernel, grouped_linear_quant_kernel, the CUDA-core one's layout over packed W: a lane's 16-byte
// load is one vector of a W row (16 elements of K for 8-bit formats, 32 for 4-bit), decoded in
// registers with linear_quant.cuh's exact decoders 8 elements at a time (the 4 W rows' 32 values
// at once; 2 rows for the grouped formats and 1 for int4-zp, whose scales take the registers) and used by
// every token row of the chunk, so decoding costs one conversion per W
// element whatever the rows. Group scales (int4, mxfp4, fp8 blocks) multiply the decoded values
// (exact for mxfp4's powers of two and int4's fp16 scales); per-channel and per-tensor scales
// multiply the row's total. A 4-bit load carries 32 elements, so the same 8 loads a trip cover
// twice the K. The tensor-core kernel takes no quantized format: decode batches give an expert
// a few rows (batch x top_k / experts), where the CUDA-core kernel is bandwidth-bound anyway.
#include "linear_quant.cuh"

namespace {

using namespace db_lin;

constexpr int kGlThreads = 128;
constexpr int kGlWarps = kGlThreads / 32;
constexpr int kGlRowsPerWarp = 4;
constexpr int kGlTileN = kGlWarps * kGlRowsPerWarp;  // 16 rows of W a block
constexpr int kGlChunkRows = 8;                       // token rows a chunk
constexpr int kGlUnroll = 2;                          // 16-byte chunks of K a lane and trip
constexpr int kGlExpertsPerLane = DB_MOE_MAX_EXPERTS / 32;
constexpr int kGlMaxRows = DB_MAX_BATCH * DB_MOE_MAX_TOP_K;
constexpr int kGlMaxTiles = 65535;  // gridDim.y
static_assert(kGlRowsPerWarp * kGlChunkRows == 32, "the reduce-scatter gives one sum a lane");
static_assert(kGlMaxRows < (1 << 15) && DB_MOE_MAX_EXPERTS <= 512, "the chunk's packing");
// The tensor-core kernel: chunks of 16 rows (the mma's M), 16 W rows (two n8 tiles) a warp.
constexpr int kGmChunkRows = 16;
constexpr int kGmTilesN = 2;
constexpr int kGmTileN = kGlWarps * kGmTilesN * 8;  // 64 rows of W a block
// Rows a touched expert gets on average from which the tensor-core kernel runs: below it most
// chunks would be mostly empty rows, and the CUDA-core kernel, memory-bound there, is the
// simpler one.
constexpr int kGmMinAverageRows = 8;

DB_DEVICE int gl_max(int a, int b) { return a < b ? b : a; }
DB_DEVICE float gl_to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
DB_DEVICE float gl_to_float(__half v) { return __half2float(v); }

template <class T>
DB_DEVICE float gl_dot8(uint4 w, uint4 x, float acc) {
  const uint32_t wv[4] = {w.x, w.y, w.z, w.w}, xv[4] = {x.x, x.y, x.z, x.w};
  DB_UNROLL
  for (int i = 0; i < 4; ++i) {
    const float2 a = db_dtype<T>::unpack(wv[i]), b = db_dtype<T>::unpack(xv[i]);
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
  }
  return acc;
}

// The chunk of this block: expert, first row and rows (0: no chunk, the block exits). Each
// expert's rows are its offsets clamped to [0, rows], so a wrong offset never reads outside x
// or writes outside y. The owning lane packs its answer, expert | row0 << 9 | rows << 24, and a
// warp sum hands it to every lane (the other lanes add 0).
struct GlChunk {
  int expert, row0, rows;
};
template <int ChunkRows>
DB_DEVICE GlChunk gl_find_chunk(const int32_t *__restrict__ offsets, int experts, int total_rows,
                                int chunk) {
  const int lane = threadIdx.x & 31;
  const int e0 = lane * kGlExpertsPerLane;
  int chunks[kGlExpertsPerLane], begin[kGlExpertsPerLane], end[kGlExpertsPerLane];
  int sum = 0;
  DB_UNROLL
  for (int j = 0; j < kGlExpertsPerLane; ++j) {
    const int e = e0 + j;
    begin[j] = end[j] = chunks[j] = 0;
    if (e < experts) {
      begin[j] = db_min(gl_max(offsets[e], 0), total_rows);
      end[j] = db_min(gl_max(offsets[e + 1], begin[j]), total_rows);
      chunks[j] = (end[j] - begin[j] + ChunkRows - 1) / ChunkRows;
    }
    sum += chunks[j];
  }
  int inclusive = sum;  // warp inclusive scan of the lanes' chunk counts
  DB_UNROLL
  for (int d = 1; d < 32; d <<= 1) {
    const int v = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += v;
  }
  unsigned packed = 0;
  int at = inclusive - sum;
  if (chunk >= at && chunk < inclusive) {
    DB_UNROLL
    for (int j = 0; j < kGlExpertsPerLane; ++j) {
      if (packed == 0 && chunk < at + chunks[j]) {
        const int row0 = begin[j] + (chunk - at) * ChunkRows;
        const int rows = db_min(ChunkRows, end[j] - row0);
        packed = (unsigned)(e0 + j) | (unsigned)row0 << 9 | (unsigned)rows << 24;
      }
      at += chunks[j];
    }
  }
  packed = db_warp_sum(packed);
  return GlChunk{(int)(packed & 0x1ffu), (int)(packed >> 9 & 0x7fffu), (int)(packed >> 24)};
}

// The chunk of this block when the call has no offsets: `experts` groups of group_rows rows
// each, the chunks of group 0 first.
template <int ChunkRows>
DB_DEVICE GlChunk gl_uniform_chunk(int group_rows, int chunk) {
  const int per_group = (group_rows + ChunkRows - 1) / ChunkRows;
  const int group = chunk / per_group, row0 = (chunk - group * per_group) * ChunkRows;
  return GlChunk{group, row0, db_min(ChunkRows, group_rows - row0)};
}

// Where a call's rows lie, in the kernels' units: x in 16-byte chunks (strides are multiples of
// 8 elements), y in elements. group_rows 0: rows in expert order (the offsets), group strides 0.
struct GlLayout {
  int group_rows;
  int x_row, y_row;        // row strides (< 2^31 elements)
  size_t x_group, y_group; // group strides
};

// One step of the butterfly reduce-scatter and the ones after it (H = 16, 8, .., 1, by
// templates so that every index is a constant and v stays in registers). The halves are chosen
// with a bit mask, not `upper ? v[i] : v[i + H]`, which nvcc turns into a select of addresses
// and so puts v in local memory.
template <int H>
DB_DEVICE void gl_reduce_scatter(float (&v)[32], int lane) {
  const unsigned upper = (lane & H) ? 0xffffffffu : 0u;
  DB_UNROLL
  for (int i = 0; i < H; ++i) {
    const unsigned lo = __float_as_uint(v[i]), hi = __float_as_uint(v[i + H]);
    const float send = __uint_as_float((lo & upper) | (hi & ~upper));
    const float keep = __uint_as_float((hi & upper) | (lo & ~upper));
    v[i] = keep + __shfl_xor_sync(0xffffffffu, send, H);
  }
  if constexpr (H > 1) gl_reduce_scatter<H / 2>(v, lane);
}

template <class T>
__global__ __launch_bounds__(kGlThreads, 4) void grouped_linear_kernel(
    const uint4 *__restrict__ x, const uint4 *__restrict__ w, const T *__restrict__ bias,
    T *__restrict__ y, const int32_t *__restrict__ offsets, int total_rows, int experts, int n,
    int k, GlLayout lay) {
  const GlChunk ch = lay.group_rows
                        ? gl_uniform_chunk<kGlChunkRows>(lay.group_rows, (int)blockIdx.x)
                        : gl_find_chunk<kGlChunkRows>(offsets, experts, total_rows, (int)blockIdx.x);
  if (ch.rows == 0) return;  // past the last chunk: nothing to read
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n0 = (int)blockIdx.y * kGlTileN + warp * kGlRowsPerWarp;
  if (n0 >= n) return;  // the tile's last warps past n (no barrier follows)
  const int chunks = k >> 3;
  const uint4 *we = w + (size_t)ch.expert * n * chunks;
  // The warp's rows from one pointer and 32-bit offsets (registers: sm_80-89 spill with four
  // 64-bit row pointers); rows past n reread row n - 1 and store nothing.
  const uint4 *w0 = we + (size_t)n0 * chunks;
  int roff[kGlRowsPerWarp];
  DB_UNROLL
  for (int r = 0; r < kGlRowsPerWarp; ++r) roff[r] = db_min(r, n - 1 - n0) * chunks;
  const uint4 *x0 = x + (size_t)ch.row0 * lay.x_row + ch.expert * lay.x_group;

  float acc[kGlRowsPerWarp][kGlChunkRows];
  DB_UNROLL
  for (int r = 0; r < kGlRowsPerWarp; ++r) {
    DB_UNROLL
    for (int b = 0; b < kGlChunkRows; ++b) acc[r][b] = 0.0f;
  }
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int c = lane; c < chunks; c += 32 * kGlUnroll) {
    uint4 wv[kGlUnroll][kGlRowsPerWarp];
    DB_UNROLL
    for (int u = 0; u < kGlUnroll; ++u) {
      const int cc = c + 32 * u;
      DB_UNROLL
      for (int r = 0; r < kGlRowsPerWarp; ++r)
        wv[u][r] = cc < chunks ? db_ld_stream_v4(w0 + (roff[r] + cc)) : zero;
    }
    // A token row's kGlUnroll chunks of x are loaded together (zeros past K, whose FMAs add
    // nothing), so a row costs one wait for L1, not one a chunk.
    // The rows' chunks by one pointer stepped a row at a time (eight offsets b * x_row held
    // at once cost sm_90 the registers of the W loads in flight).
    const uint4 *xr = x0 + c;
    DB_UNROLL
    for (int b = 0; b < kGlChunkRows; ++b) {
      if (b >= ch.rows) break;
      uint4 xv[kGlUnroll];
      DB_UNROLL
      for (int u = 0; u < kGlUnroll; ++u) xv[u] = c + 32 * u < chunks ? db_ld_nc_v4(xr + 32 * u) : zero;
      xr += lay.x_row;
      DB_UNROLL
      for (int u = 0; u < kGlUnroll; ++u) {
        DB_UNROLL
        for (int r = 0; r < kGlRowsPerWarp; ++r) acc[r][b] = gl_dot8<T>(wv[u][r], xv[u], acc[r][b]);
      }
    }
  }

  // Butterfly reduce-scatter: at step h each lane keeps the half of its sums that (lane & h)
  // selects, adding its partner's copy of that half; after h = 16..1, v[0] is the warp's total
  // of sum L = lane (W row L / 8, token row L % 8).
  float v[32];
  DB_UNROLL
  for (int i = 0; i < 32; ++i) v[i] = acc[i / kGlChunkRows][i % kGlChunkRows];
  gl_reduce_scatter<16>(v, lane);
  const int r = lane / kGlChunkRows, b = lane % kGlChunkRows;
  if (b < ch.rows && n0 + r < n) {
    const size_t col = (size_t)n0 + r;
    float out = v[0];
    if (bias) out += gl_to_float(bias[(size_t)ch.expert * n + col]);
    // The row's address from the params here, not held across the loop (registers: the
    // loop's 32 sums and 8 W chunks leave none, and sm_90 spills with it).
    y[(size_t)(ch.row0 + b) * lay.y_row + ch.expert * lay.y_group + col] = db_dtype<T>::from_float(out);
  }
}

/*
 * The tensor-core kernel, for batches that give experts many rows: a chunk is up to 16 rows of
 * one expert, a block 64 rows of W, each warp 16 of them (two n8 tiles) over the whole of K with
 * mma.sync m16n8k16 (A = the chunk's rows, B = W^T). The operand layout and k-permutation are
 * linear_mma.cu's: in a 64-k step lane (g, t) loads the 16-byte chunks 2t and 2t + 1 of its W
 * rows g and 8 + g and of its token rows g and g + 8, 8 loads that feed 8 mma with no moves; two
 * steps a trip, so 16 16-byte loads of a lane are in flight. Rows past the chunk or past n read a
 * valid row (the chunk's first, row n - 1) and are never stored, so the loads need no branch.
 */
template <class T>
__global__ __launch_bounds__(kGlThreads, 4) void grouped_linear_mma_kernel(
    const uint4 *__restrict__ x, const uint4 *__restrict__ w, const T *__restrict__ bias,
    T *__restrict__ y, const int32_t *__restrict__ offsets, int total_rows, int experts, int n,
    int k, GlLayout lay) {
  const GlChunk ch = lay.group_rows
                        ? gl_uniform_chunk<kGmChunkRows>(lay.group_rows, (int)blockIdx.x)
                        : gl_find_chunk<kGmChunkRows>(offsets, experts, total_rows, (int)blockIdx.x);
  if (ch.rows == 0) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n0 = (int)blockIdx.y * kGmTileN + warp * kGmTilesN * 8;
  if (n0 >= n) return;
  const int chunks = k >> 3;
  const int steps = (chunks + 7) >> 3;  // 64-element k-steps
  const uint4 *we = w + (size_t)ch.expert * n * chunks;
  const uint4 *w_row[kGmTilesN], *x_row[2];
  DB_UNROLL
  for (int nt = 0; nt < kGmTilesN; ++nt)
    w_row[nt] = we + (size_t)db_min(n0 + nt * 8 + g, n - 1) * chunks + 2 * t;
  DB_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int b = g + 8 * h;
    x_row[h] = x + (size_t)(ch.row0 + (b < ch.rows ? b : 0)) * lay.x_row + ch.expert * lay.x_group + 2 * t;
  }
  float acc[kGmTilesN][4];
  DB_UNROLL
  for (int nt = 0; nt < kGmTilesN; ++nt) {
    DB_UNROLL
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
  }
  const uint4 zero = make_uint4(0, 0, 0, 0);
  constexpr int kSteps = 2;  // 64-k steps a trip
  for (int s0 = 0; s0 < steps; s0 += kSteps) {
    uint4 wlo[kSteps][kGmTilesN], whi[kSteps][kGmTilesN], xlo[kSteps][2], xhi[kSteps][2];
    DB_UNROLL
    for (int u = 0; u < kSteps; ++u) {
      const int c = (s0 + u) * 8;
      const bool ok0 = c + 2 * t < chunks, ok1 = c + 2 * t + 1 < chunks;
      DB_UNROLL
      for (int nt = 0; nt < kGmTilesN; ++nt) {
        wlo[u][nt] = ok0 ? db_ld_stream_v4(w_row[nt] + c) : zero;
        whi[u][nt] = ok1 ? db_ld_stream_v4(w_row[nt] + c + 1) : zero;
      }
      DB_UNROLL
      for (int h = 0; h < 2; ++h) {
        xlo[u][h] = ok0 ? db_ld_nc_v4(x_row[h] + c) : zero;
        xhi[u][h] = ok1 ? db_ld_nc_v4(x_row[h] + c + 1) : zero;
      }
    }
    DB_UNROLL
    for (int u = 0; u < kSteps; ++u) {
      DB_UNROLL
      for (int j = 0; j < 4; ++j) {
        const uint4 &x0 = j < 2 ? xlo[u][0] : xhi[u][0], &x1 = j < 2 ? xlo[u][1] : xhi[u][1];
        // a0a1: token row g, k 2t; a2a3: row g + 8; a4a5 / a6a7: the same rows at k 2t + 8
        const uint32_t a[4] = {j & 1 ? x0.z : x0.x, j & 1 ? x1.z : x1.x, j & 1 ? x0.w : x0.y,
                               j & 1 ? x1.w : x1.y};
        DB_UNROLL
        for (int nt = 0; nt < kGmTilesN; ++nt) {
          const uint4 &wv = j < 2 ? wlo[u][nt] : whi[u][nt];
          const uint32_t b[2] = {j & 1 ? wv.z : wv.x, j & 1 ? wv.w : wv.y};
          db_mma_m16n8k16<T>(acc[nt], a, b);
        }
      }
    }
  }
  // C fragment i of tile nt: token row g + 8 (i >> 1), W row nt * 8 + 2t + (i & 1).
  DB_UNROLL
  for (int nt = 0; nt < kGmTilesN; ++nt) {
    DB_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int b = g + 8 * (i >> 1), col = n0 + nt * 8 + 2 * t + (i & 1);
      if (b >= ch.rows || col >= n) continue;
      float out = acc[nt][i];
      if (bias) out += gl_to_float(bias[(size_t)ch.expert * n + col]);
      y[(size_t)(ch.row0 + b) * lay.y_row + ch.expert * lay.y_group + col] = db_dtype<T>::from_float(out);
    }
  }
}

/*
 * Quantized experts: as grouped_linear_kernel, with W packed in format F. Expert e's W, scales
 * and zeros lie at e times one matrix's bytes (QuantExperts) from their bases. A lane strides
 * the W rows in 16-byte vectors, kGlUnroll a trip for each of its warp's 4 rows; each vector is
 * decoded 8 elements (one x vector) at a time for the 4 rows, then multiplied into the chunk's
 * token rows. A vector past the row's end loads zeros and gets a zero group scale (int4's zero
 * code decodes to -8), and rereads the last vector's activations.
 */
struct QuantExperts {
  size_t w_vectors;     // 16-byte vectors of one expert's W
  size_t scale_bytes;   // bytes of one expert's scales
  size_t zero_bytes;    // bytes of one expert's zero points
  int group;            // the grouped formats' group (k elements), else 0
};

// The scale of W row `row`'s vector v (grouped formats: its group's), or of the row (per
// channel, per tensor), in one expert's scales.
template <int F>
DB_DEVICE float gl_quant_scale(const uint8_t *scales, int row, int v, int groups,
                               int vectors_per_group) {
  if (F == DB_WEIGHT_MXFP4) return q_e8m0(scales[(size_t)row * groups + v]);
  if (F == DB_WEIGHT_INT4 || F == DB_WEIGHT_INT4_ZP)
    return q_fp16(reinterpret_cast<const uint16_t *>(scales)[(size_t)row * groups + v / vectors_per_group]);
  if (F == DB_WEIGHT_FP8_E4M3_BLOCK)
    return reinterpret_cast<const float *>(scales)[(size_t)(row / DB_FP8_BLOCK) * groups + v / vectors_per_group];
  if (F == DB_WEIGHT_FP8_E4M3_TENSOR) return reinterpret_cast<const float *>(scales)[0];
  return reinterpret_cast<const float *>(scales)[row];
}

// 2^23 plus the value an integer code is offset by (int4's 8, int4-zp's zero point).
template <int F>
DB_DEVICE float gl_quant_magic(const uint8_t *zeros, int row, int v, int groups, int vectors_per_group) {
  if (F == DB_WEIGHT_INT4) return 8388608.0f + 8.0f;
  if (F == DB_WEIGHT_INT4_ZP) {
    const uint32_t byte = zeros[(size_t)(row >> 1) * groups + v / vectors_per_group];
    return 8388608.0f + (float)((byte >> (4 * (row & 1))) & 0xFu);
  }
  return 8388608.0f + 128.0f;  // int8: byte ^ 0x80 is q + 128
}

// Elements 8j .. 8j + 7 of one W vector, decoded exactly (unscaled).
template <int F>
DB_DEVICE void gl_quant_decode8(const uint4 &w, int j, float magic, float (&out)[8]) {
  const uint32_t wv[4] = {w.x, w.y, w.z, w.w};
  DB_UNROLL
  for (int i = 0; i < 8; ++i) {
    if (QuantFormat<F>::kFourBit) {
      const uint32_t nib = (wv[j] >> (4 * i)) & 0xFu;
      out[i] = F == DB_WEIGHT_MXFP4 ? q_e2m1(nib) : q_uint_minus(nib, magic);
    } else {
      const uint32_t byte = (wv[2 * j + (i >> 2)] >> (8 * (i & 3))) & 0xFFu;
      out[i] = F == DB_WEIGHT_INT8 ? q_uint_minus(byte ^ 0x80u, magic) : q_e4m3(byte);
    }
  }
}

template <class T, int F>
__global__ __launch_bounds__(kGlThreads, 4) void grouped_linear_quant_kernel(
    const uint4 *__restrict__ x, const uint4 *__restrict__ w, const uint8_t *__restrict__ scales,
    const uint8_t *__restrict__ zeros, const T *__restrict__ bias, T *__restrict__ y,
    const int32_t *__restrict__ offsets, int total_rows, int experts, int n, int k, GlLayout lay,
    QuantExperts qe) {
  using Fmt = QuantFormat<F>;
  constexpr int kXPerVector = Fmt::kPerVector / 8;  // x vectors a W vector spans
  // W rows decoded at once: all 4 for the per-channel formats; 2 for the grouped ones and 1 for
  // int4 with zero points, whose scales and zero points would otherwise spill (sm_80-90 at 128
  // registers), at the price of reading each x vector from L1 2 or 4 times.
  constexpr int kDecodeRows = F == DB_WEIGHT_INT4_ZP ? 1 : Fmt::kGrouped ? 2 : kGlRowsPerWarp;
  // W vectors a lane loads per row and trip: kGlUnroll, but 1 for int4 with zero points, whose
  // zero points and scales spill at 2 (4 loads of 32 elements in flight a lane, not 8).
  constexpr int kUnroll = F == DB_WEIGHT_INT4_ZP ? 1 : kGlUnroll;
  const GlChunk ch = lay.group_rows
                        ? gl_uniform_chunk<kGlChunkRows>(lay.group_rows, (int)blockIdx.x)
                        : gl_find_chunk<kGlChunkRows>(offsets, experts, total_rows, (int)blockIdx.x);
  if (ch.rows == 0) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n0 = (int)blockIdx.y * kGlTileN + warp * kGlRowsPerWarp;
  if (n0 >= n) return;
  const int vectors = k / Fmt::kPerVector;
  const int groups = Fmt::kGrouped ? quant_groups(F, k, qe.group) : 1;
  const int vectors_per_group = Fmt::kGrouped ? qe.group / Fmt::kPerVector : 1;
  const uint4 *w0 = w + ch.expert * qe.w_vectors + (size_t)n0 * vectors;
  const uint8_t *se = scales + ch.expert * qe.scale_bytes;
  const uint8_t *ze = zeros ? zeros + ch.expert * qe.zero_bytes : zeros;
  int roff[kGlRowsPerWarp];
  DB_UNROLL
  for (int r = 0; r < kGlRowsPerWarp; ++r) roff[r] = db_min(r, n - 1 - n0) * vectors;
  const uint4 *x0 = x + (size_t)ch.row0 * lay.x_row + ch.expert * lay.x_group;

  float acc[kGlRowsPerWarp][kGlChunkRows];
  DB_UNROLL
  for (int r = 0; r < kGlRowsPerWarp; ++r) {
    DB_UNROLL
    for (int b = 0; b < kGlChunkRows; ++b) acc[r][b] = 0.0f;
  }
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int c = lane; c < vectors; c += 32 * kUnroll) {
    uint4 wv[kUnroll][kGlRowsPerWarp];
    DB_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const int cc = c + 32 * u;
      DB_UNROLL
      for (int r = 0; r < kGlRowsPerWarp; ++r)
        wv[u][r] = cc < vectors ? db_ld_stream_v4(w0 + (roff[r] + cc)) : zero;
    }
    DB_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const int v = db_min(c + 32 * u, vectors - 1);
      const bool valid = c + 32 * u < vectors;
      DB_UNROLL
      for (int r0 = 0; r0 < kGlRowsPerWarp; r0 += kDecodeRows) {
        // The rows' group scale (a zero one past the row's end) and integer offset.
        float scale[kDecodeRows], magic[kDecodeRows];
        DB_UNROLL
        for (int r = 0; r < kDecodeRows; ++r) {
          const int row = n0 + db_min(r0 + r, n - 1 - n0);
          scale[r] = Fmt::kGrouped ? (valid ? gl_quant_scale<F>(se, row, v, groups, vectors_per_group) : 0.0f) : 1.0f;
          magic[r] = gl_quant_magic<F>(ze, row, v, groups, vectors_per_group);
        }
        DB_UNROLL
        for (int j = 0; j < kXPerVector; ++j) {
          float wf[kDecodeRows][8];
          DB_UNROLL
          for (int r = 0; r < kDecodeRows; ++r) {
            gl_quant_decode8<F>(wv[u][r0 + r], j, magic[r], wf[r]);
            if (Fmt::kGrouped) {
              DB_UNROLL
              for (int i = 0; i < 8; ++i) wf[r][i] *= scale[r];
            }
          }
          const uint4 *xr = x0 + (size_t)v * kXPerVector + j;
          DB_UNROLL
          for (int b = 0; b < kGlChunkRows; ++b) {
            if (b >= ch.rows) break;
            const uint4 xv = db_ld_nc_v4(xr);
            xr += lay.x_row;
            const uint32_t xw[4] = {xv.x, xv.y, xv.z, xv.w};
            DB_UNROLL
            for (int h = 0; h < 4; ++h) {
              const float2 x2 = db_dtype<T>::unpack(xw[h]);
              DB_UNROLL
              for (int r = 0; r < kDecodeRows; ++r) {
                acc[r0 + r][b] = fmaf(wf[r][2 * h], x2.x, acc[r0 + r][b]);
                acc[r0 + r][b] = fmaf(wf[r][2 * h + 1], x2.y, acc[r0 + r][b]);
              }
            }
          }
        }
      }
    }
  }

  float sums[32];
  DB_UNROLL
  for (int i = 0; i < 32; ++i) sums[i] = acc[i / kGlChunkRows][i % kGlChunkRows];
  gl_reduce_scatter<16>(sums, lane);
  const int r = lane / kGlChunkRows, b = lane % kGlChunkRows;
  if (b < ch.rows && n0 + r < n) {
    const size_t col = (size_t)n0 + r;
    float out = sums[0];
    if (!Fmt::kGrouped) out *= gl_quant_scale<F>(se, (int)col, 0, 1, 1);
    if (bias) out += gl_to_float(bias[(size_t)ch.expert * n + col]);
    y[(size_t)(ch.row0 + b) * lay.y_row + ch.expert * lay.y_group + col] = db_dtype<T>::from_float(out);
  }
}

// The grid holds any routing: sum_e ceil(count_e / C) <= (rows + (C - 1) min(experts, rows)) / C
// chunks of C rows, by the tiles of n. Without offsets it is exactly experts * ceil(rows / C):
// the groups' chunks, and the tensor-core kernel runs from 8 rows a group.
template <class T>
int grouped_launch(db_context *ctx, const db_grouped_linear_params *p, const GlLayout &lay,
                   const QuantExperts &qe) {
  const int spread = std::min(p->experts, p->rows);
  const auto x = reinterpret_cast<const uint4 *>(p->x), w = reinterpret_cast<const uint4 *>(p->w);
  const auto bias = reinterpret_cast<const T *>(p->bias);
  const auto y = reinterpret_cast<T *>(p->y);
  const auto offsets = reinterpret_cast<const int32_t *>(p->expert_offsets);
  const bool uniform = lay.group_rows > 0;
  auto chunks = [&](int c) {
    return uniform ? (unsigned)p->experts * (unsigned)db_ceil_div((uint64_t)p->rows, c)
                   : (unsigned)((p->rows + (c - 1) * spread) / c);
  };
  if (p->weight_format != DB_WEIGHT_DENSE) {
    const dim3 grid(chunks(kGlChunkRows), (unsigned)db_ceil_div((uint64_t)p->n, kGlTileN));
    const auto scales = reinterpret_cast<const uint8_t *>(p->scales);
    const auto zeros = reinterpret_cast<const uint8_t *>(p->zeros);
    return DB_DISPATCH_WEIGHT_FORMAT(
        p->weight_format, F,
        DB_LAUNCH((grouped_linear_quant_kernel<T, F>), grid, dim3(kGlThreads), 0, ctx->stream, x,
                  w, scales, zeros, bias, y, offsets, p->rows, p->experts, p->n, p->k, lay, qe));
  }
  if (uniform ? p->rows >= kGmMinAverageRows : p->rows >= kGmMinAverageRows * spread) {
    const dim3 grid(chunks(kGmChunkRows), (unsigned)db_ceil_div((uint64_t)p->n, kGmTileN));
    return DB_LAUNCH((grouped_linear_mma_kernel<T>), grid, dim3(kGlThreads), 0, ctx->stream, x, w,
                     bias, y, offsets, p->rows, p->experts, p->n, p->k, lay);
  }
  const dim3 grid(chunks(kGlChunkRows), (unsigned)db_ceil_div((uint64_t)p->n, kGlTileN));
  return DB_LAUNCH((grouped_linear_kernel<T>), grid, dim3(kGlThreads), 0, ctx->stream, x, w, bias,
                   y, offsets, p->rows, p->experts, p->n, p->k, lay);
}

// The layout of p's strides (0: dense), or an error naming the stride.
int grouped_layout(const db_grouped_linear_params *p, GlLayout *lay) {
  const bool uniform = p->expert_offsets == 0;
  const int64_t xr = p->x_row_stride ? p->x_row_stride : p->k;
  const int64_t yr = p->y_row_stride ? p->y_row_stride : p->n;
  const int64_t xg = p->x_group_stride ? p->x_group_stride : (uniform ? (int64_t)p->rows * p->k : 0);
  const int64_t yg = p->y_group_stride ? p->y_group_stride : (uniform ? (int64_t)p->rows * p->n : 0);
  const struct {
    const char *name;
    int64_t v;
  } strides[] = {{"x_row_stride", xr}, {"x_group_stride", xg}, {"y_row_stride", yr}, {"y_group_stride", yg}};
  for (const auto &st : strides)
    if (st.v < 0 || st.v > INT32_MAX)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "db_grouped_linear: %s=%lld out of range 0..2^31-1 elements", st.name,
                     (long long)st.v);
  if (xr % 8 != 0 || xg % 8 != 0)
    return db_fail(DB_ERR_INVALID_ARGUMENT,
                   "db_grouped_linear: x_row_stride=%lld and x_group_stride=%lld must be multiples "
                   "of 8 elements (x is read in 16-byte vectors)",
                   (long long)xr, (long long)xg);
  if (xr < p->k || yr < p->n)
    return db_fail(DB_ERR_INVALID_ARGUMENT,
                   "db_grouped_linear: x_row_stride=%lld and y_row_stride=%lld must be at least "
                   "k=%d and n=%d (rows would overlap)",
                   (long long)xr, (long long)yr, p->k, p->n);
  if (!uniform && (p->x_group_stride != 0 || p->y_group_stride != 0))
    return db_fail(DB_ERR_INVALID_ARGUMENT,
                   "db_grouped_linear: x_group_stride=%lld y_group_stride=%lld with expert_offsets: "
                   "rows in expert order have no group strides (want 0)",
                   (long long)p->x_group_stride, (long long)p->y_group_stride);
  *lay = GlLayout{uniform ? p->rows : 0, (int)(xr / 8), (int)yr, (size_t)(xg / 8), (size_t)yg};
  return DB_OK;
}

int check_aligned(const char *what, uint64_t dptr, uint64_t align) {
  if (dptr % align == 0) return DB_OK;
  return db_fail(DB_ERR_INVALID_ARGUMENT, "db_grouped_linear: %s=0x%llx is not %llu-byte aligned",
                 what, (unsigned long long)dptr, (unsigned long long)align);
}

// One expert's bytes of W, scales and zeros in p's weight format (cgo's WeightFormat.Layout),
// after the format's shape rules; all 0 for dense weights, which must come without scales.
int grouped_quant(const db_grouped_linear_params *p, QuantExperts *qe) {
  const int f = p->weight_format;
  if (f == DB_WEIGHT_DENSE) {
    if (p->scales || p->zeros || p->group_size)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "db_grouped_linear: scales=0x%llx zeros=0x%llx group_size=%d with dense "
                     "weights (weight_format 0; want all 0)",
                     (unsigned long long)p->scales, (unsigned long long)p->zeros, p->group_size);
    return DB_OK;
  }
  int group = 0;
  DB_CHECK(quant_check_shape("db_grouped_linear", f, p->n, p->k, p->group_size, &group));
  const char *name = quant_format_name(f);
  const int64_t n = p->n, k = p->k;
  const int64_t groups = f == DB_WEIGHT_FP8_E4M3_BLOCK || group > 0 ? quant_groups(f, p->k, group) : 1;
  int64_t scale_bytes = 0, zero_bytes = 0;
  uint64_t scale_align = 4;
  switch (f) {
    case DB_WEIGHT_FP8_E4M3:
    case DB_WEIGHT_INT8: scale_bytes = 4 * n; break;
    case DB_WEIGHT_FP8_E4M3_TENSOR: scale_bytes = 4; break;
    case DB_WEIGHT_INT4: scale_bytes = 2 * n * groups, scale_align = 2; break;
    case DB_WEIGHT_INT4_ZP:
      scale_bytes = 2 * n * groups, scale_align = 2, zero_bytes = n / 2 * groups;
      break;
    case DB_WEIGHT_MXFP4: scale_bytes = n * groups, scale_align = 1; break;
    case DB_WEIGHT_FP8_E4M3_BLOCK:
      scale_bytes = 4 * ((n + DB_FP8_BLOCK - 1) / DB_FP8_BLOCK) * groups;
      break;
  }
  const int64_t w_bytes = n * quant_row_bytes(f, k);
  if ((uint64_t)w_bytes * (uint64_t)p->experts > (1ull << 40))
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "db_grouped_linear: experts=%d n=%d k=%d is too large",
                   p->experts, p->n, p->k);
  if (!p->scales)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "db_grouped_linear: %s weights need scales (got 0)", name);
  DB_CHECK(check_aligned("scales", p->scales, scale_align));
  if (f == DB_WEIGHT_INT4_ZP && !p->zeros)
    return db_fail(DB_ERR_INVALID_ARGUMENT, "db_grouped_linear: %s weights need zeros (got 0)", name);
  if (f != DB_WEIGHT_INT4_ZP && p->zeros)
    return db_fail(DB_ERR_INVALID_ARGUMENT,
                   "db_grouped_linear: zeros=0x%llx given for %s weights (only int4 with zero "
                   "points has them; want 0)",
                   (unsigned long long)p->zeros, name);
  *qe = QuantExperts{(size_t)(w_bytes / 16), (size_t)scale_bytes, (size_t)zero_bytes, group};
  return DB_OK;
}

}  // namespace

extern "C" int db_grouped_linear(db_context *ctx, const db_grouped_linear_params *p) {
  return db_guard("db_grouped_linear", [&]() -> int {
    if (!p) return db_fail(DB_ERR_INVALID_ARGUMENT, "db_grouped_linear: params is null");
    DB_CHECK(db_enter(ctx));
    if (!p->x || !p->w || !p->y)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "db_grouped_linear: x, w and y must be device addresses "
                     "(got x=0x%llx w=0x%llx y=0x%llx)",
                     (unsigned long long)p->x, (unsigned long long)p->w, (unsigned long long)p->y);
    if (p->dtype != DB_DTYPE_BF16 && p->dtype != DB_DTYPE_FP16)
      return db_fail(DB_ERR_INVALID_ARGUMENT,
                     "db_grouped_linear: dtype=%d unsupported (want DB_DTYPE_BF16 or DB_DTYPE_FP16)",
                     p->dtype);
    if (p->rows < 1 || p->rows > kGlMaxRows)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                     "db_grouped_linear: rows=%d out of range 1..%d (DB_MAX_BATCH x DB_MOE_MAX_TOP_K)",
                     p->rows, kGlMaxRows);
    if (p->experts < 1 || p->experts > DB_MOE_MAX_EXPERTS)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "db_grouped_linear: experts=%d out of range 1..%d",
                     p->experts, DB_MOE_MAX_EXPERTS);
    if (p->n < 1 || p->n > kGlMaxTiles * kGlTileN)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "db_grouped_linear: n=%d out of range 1..%d", p->n,
                     kGlMaxTiles * kGlTileN);
    if (p->k < DB_LINEAR_K_MULTIPLE || p->k % DB_LINEAR_K_MULTIPLE != 0)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE,
                     "db_grouped_linear: k=%d must be a positive multiple of %d", p->k,
                     DB_LINEAR_K_MULTIPLE);
    QuantExperts qe{};
    DB_CHECK(grouped_quant(p, &qe));
    DB_CHECK(check_aligned("x", p->x, 16));
    DB_CHECK(check_aligned("w", p->w, 16));
    DB_CHECK(check_aligned("y", p->y, 2));
    DB_CHECK(check_aligned("bias", p->bias, 2));
    DB_CHECK(check_aligned("expert_offsets", p->expert_offsets, 4));
    GlLayout lay;
    DB_CHECK(grouped_layout(p, &lay));
    return p->dtype == DB_DTYPE_BF16 ? grouped_launch<__nv_bfloat16>(ctx, p, lay, qe)
                                     : grouped_launch<__half>(ctx, p, lay, qe);
  });
}
