// linear_quant_mma.cu: the tensor-core decode linear kernel over quantized weights (batch 5..1024
// under AUTO), Y^T = W * X^T with mma.sync m16n8k16 (W rows the M side, the batch the N side),
// fp32 accumulation. The shared-memory tiling follows linear_tiled.cu:
//
//   - a block computes kQMmaBM = 16 rows of W x kQMmaBN = 32 batch rows; its 4 warps take turns
//     over the k tiles of kQMmaBK = 64 (warp w: tiles w, w + 4, ...) and add their sums in shared
//     memory at the end, in warp order. 16 rows a block give 256 blocks at n 4096 (2 an SM on
//     an H200) where 64 gave 64, half the SMs idle at the bytes-bound batches;
//   - a warp's packed W tile (16 rows x 64 or 32 bytes) comes from global memory in 16-byte loads
//     into registers one tile ahead, and is decoded (exactly, unscaled: linear_quant.cuh) into
//     a dtype tile in the warp's own shared memory, stored as linear_tiled.cu's swizzle (chunk c
//     of row r at c ^ (r % 8)) so that ldmatrix reads it without bank conflicts; only the warp
//     touches its stages, so __syncwarp orders them;
//   - the X tile is staged by cp.async (16 bytes, L2 only), two stages a warp: the next tile's
//     copies and W loads fly while a tile computes (12 KiB a warp, 48 KiB a block);
//   - the scales: a k16 step lies in one group (groups are multiples of 32), so the grouped
//     formats sum each group's steps into a second accumulator and add it times the group's
//     scale (one per W row of the fragment) when the group ends or the warp's k tile does (a
//     group of 128 spans two warps' tiles); the per-channel formats scale the total once, in
//     the epilogue. Products of decoded values and activations are exact.
// The blocks of one W tile (its batch tiles) are consecutive in the grid, so they run together
// and the later ones read the tile from L2: DRAM reads each W byte once a call.
#include "linear_quant.cuh"

namespace {

using namespace db_lin;

constexpr int kBM = kQMmaBM, kBN = kQMmaBN, kBK = kQMmaBK;
constexpr int kRowBytes = kBK * 2;                        // 128: 8 chunks of 16 bytes
constexpr int kStageBytes = (kBM + kBN) * kRowBytes;      // 6 KiB: a W tile and an X tile
constexpr int kWarps = kQMmaThreads / 32;
constexpr int kWarpBytes = 2 * kStageBytes;               // a warp's two stages
static_assert(kWarps * kBN * kBM * 4 <= kWarps * kWarpBytes, "the warps' sums fit the staging");
constexpr int kNI = kBN / 8;                              // n8 tiles a warp

DB_DEVICE int tile_offset(int row, int chunk) { return (row * 8 + (chunk ^ (row & 7))) * 16; }

// The decoded values of one 16-byte W vector as dtype pairs: 8 words (16 elements, 8-bit
// formats) or 16 (32 elements, 4-bit), element 2j in the low half of word j.
template <class T, int F>
DB_DEVICE void decode_vector(const uint4 w, float zero, uint32_t (&out)[QuantFormat<F>::kPerVector / 2]) {
  const uint32_t wv[4] = {w.x, w.y, w.z, w.w};
  if (QuantFormat<F>::kFourBit) {
    const float magic = 8388608.0f + zero;
    DB_UNROLL
    for (int j = 0; j < 16; ++j) {
      const uint32_t byte = (wv[j >> 2] >> (8 * (j & 3))) & 0xFFu;
      float a, b;
      if (F == DB_WEIGHT_MXFP4) {
        a = q_e2m1(byte & 0xFu);
        b = q_e2m1(byte >> 4);
      } else {
        a = q_uint_minus(byte & 0xFu, magic);
        b = q_uint_minus(byte >> 4, magic);
      }
      out[j] = db_dtype<T>::pack(a, b);
    }
  } else {
    DB_UNROLL
    for (int j = 0; j < 8; ++j) {
      const uint32_t pair = (wv[j >> 1] >> (16 * (j & 1))) & 0xFFFFu;
      float a, b;
      if (F == DB_WEIGHT_INT8) {
        a = q_uint_minus((pair & 0xFFu) ^ 0x80u, 8388608.0f + 128.0f);
        b = q_uint_minus((pair >> 8) ^ 0x80u, 8388608.0f + 128.0f);
      } else {
        a = q_e4m3(pair & 0xFFu);
        b = q_e4m3(pair >> 8);
      }
      out[j] = db_dtype<T>::pack(a, b);
    }
  }
}

template <int F>
DB_DEVICE float row_scale(const void *scales, int row, int group_index, int groups) {
  if (F == DB_WEIGHT_MXFP4)
    return q_e8m0(static_cast<const uint8_t *>(scales)[(size_t)row * groups + group_index]);
  if (F == DB_WEIGHT_INT4 || F == DB_WEIGHT_INT4_ZP)
    return q_fp16(static_cast<const uint16_t *>(scales)[(size_t)row * groups + group_index]);
  if (F == DB_WEIGHT_FP8_E4M3_TENSOR) return static_cast<const float *>(scales)[0];
  return static_cast<const float *>(scales)[row];
}

template <int F>
DB_DEVICE float row_zero(const uint8_t *zeros, int row, int group_index, int groups) {
  if (F == DB_WEIGHT_INT4) return 8.0f;
  if (F != DB_WEIGHT_INT4_ZP) return 0.0f;
  const uint32_t byte = zeros[(size_t)(row >> 1) * groups + group_index];
  return (float)((byte >> (4 * (row & 1))) & 0xFu);
}

template <class T, int F>
__global__ __launch_bounds__(kQMmaThreads) void linear_quant_mma_kernel(
    const uint4 *__restrict__ x, const uint4 *__restrict__ w, const void *__restrict__ scales,
    const uint8_t *__restrict__ zeros, T *__restrict__ y, int batch, int n, int k, int group,
    int batch_tiles) {
  using Fmt = QuantFormat<F>;
  constexpr int kVecPerRow = kBK / Fmt::kPerVector;        // W vectors of a row in a k tile
  constexpr int kVecPerLane = kBM * kVecPerRow / 32;
  constexpr int kWordsPerVec = Fmt::kPerVector / 2;
  static_assert(kVecPerLane >= 1 && kBM * kVecPerRow % 32 == 0, "W tile split");
  DB_SHARED(uint4, smem_v, kWarps * kWarpBytes / 16);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned char *const region = reinterpret_cast<unsigned char *>(smem_v) + warp * kWarpBytes;
  const int bt = blockIdx.x % batch_tiles, mt = blockIdx.x / batch_tiles;
  const int m0 = mt * kBM, b0 = bt * kBN;
  const int w_vectors = k / Fmt::kPerVector;  // a packed row
  const int x_chunks = k >> 3;
  const int ktiles = (k + kBK - 1) / kBK;
  const int groups = Fmt::kGrouped ? k / group : 1;
  // This warp's k tiles: warp, warp + kWarps, ...
  const int nk = ktiles > warp ? (ktiles - warp + kWarps - 1) / kWarps : 0;

  uint4 wreg[kVecPerLane];
  auto load_w = [&](int kt) {
    DB_UNROLL
    for (int j = 0; j < kVecPerLane; ++j) {
      const int i = lane + j * 32, r = i / kVecPerRow, v = kt * kVecPerRow + i % kVecPerRow;
      const int row = db_min(m0 + r, n - 1);
      wreg[j] = v < w_vectors ? db_ld_stream_v4(w + (size_t)row * w_vectors + v) : make_uint4(0, 0, 0, 0);
    }
  };
  // Decodes the registers of tile kt into slot's W tile (zeros past K).
  auto store_w = [&](int slot, int kt) {
    unsigned char *ws = region + slot * kStageBytes;
    DB_UNROLL
    for (int j = 0; j < kVecPerLane; ++j) {
      const int i = lane + j * 32, r = i / kVecPerRow, vc = i % kVecPerRow;
      const int v = kt * kVecPerRow + vc;
      const int row = db_min(m0 + r, n - 1);
      uint32_t words[kWordsPerVec];
      const float zero = v < w_vectors ? row_zero<F>(zeros, row, Fmt::kGrouped ? v * Fmt::kPerVector / group : 0, groups) : 0.0f;
      decode_vector<T, F>(wreg[j], zero, words);
      if (v >= w_vectors) {
        DB_UNROLL
        for (int q = 0; q < kWordsPerVec; ++q) words[q] = 0;
      }
      DB_UNROLL
      for (int q = 0; q < kWordsPerVec / 4; ++q) {
        const int chunk = vc * (kWordsPerVec / 4) + q;
        *reinterpret_cast<uint4 *>(ws + tile_offset(r, chunk)) =
            make_uint4(words[4 * q], words[4 * q + 1], words[4 * q + 2], words[4 * q + 3]);
      }
    }
  };
  auto stage_x = [&](int slot, int kt) {
    unsigned char *xs = region + slot * kStageBytes + kBM * kRowBytes;
    DB_UNROLL
    for (int j = 0; j < kBN * 8 / 32; ++j) {
      const int i = lane + j * 32, r = i >> 3, c = i & 7, gc = kt * 8 + c;
      unsigned char *dst = xs + tile_offset(r, c);
      if (gc < x_chunks) {
        const int row = db_min(b0 + r, batch - 1);
        db_cp_async_16(dst, x + (size_t)row * x_chunks + gc);
      } else {
        *reinterpret_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0);
      }
    }
  };

  float acc[kNI][4], part[kNI][4];
  DB_UNROLL
  for (int ni = 0; ni < kNI; ++ni) {
    DB_UNROLL
    for (int i = 0; i < 4; ++i) acc[ni][i] = part[ni][i] = 0.0f;
  }
  const int g = lane >> 2, t = lane & 3;
  const int frag_row0 = db_min(m0 + g, n - 1), frag_row1 = db_min(m0 + g + 8, n - 1);

  if (nk > 0) {
    load_w(warp);
    stage_x(0, warp);
  }
  db_cp_async_commit();
  for (int it = 0; it < nk; ++it) {
    const int slot = it & 1, kt = warp + it * kWarps;
    store_w(slot, kt);  // slot was last read two trips ago, before the last __syncwarp
    if (it + 1 < nk) {
      load_w(kt + kWarps);
      stage_x(slot ^ 1, kt + kWarps);
    }
    db_cp_async_commit();
    db_cp_async_wait<1>();  // this lane's copies of tile kt have landed
    __syncwarp();           // every lane's, and every lane's W tile kt is stored

    const unsigned char *ws = region + slot * kStageBytes;
    const unsigned char *xs = ws + kBM * kRowBytes;
    DB_UNROLL
    for (int kk = 0; kk < kBK / 16; ++kk) {
      const int k0 = kt * kBK + kk * 16;
      if (k0 >= k) break;
      uint32_t a[4], b[kNI][2];
      db_ldmatrix_x4(a, ws + tile_offset(lane & 15, 2 * kk + (lane >> 4)));
      DB_UNROLL
      for (int ni = 0; ni < kNI; ni += 2) {
        const int q = lane >> 3;
        uint32_t v[4];
        db_ldmatrix_x4(v, xs + tile_offset((ni + (q >> 1)) * 8 + (lane & 7), 2 * kk + (q & 1)));
        b[ni][0] = v[0];
        b[ni][1] = v[1];
        b[ni + 1][0] = v[2];
        b[ni + 1][1] = v[3];
      }
      if (Fmt::kGrouped) {
        DB_UNROLL
        for (int ni = 0; ni < kNI; ++ni) db_mma_m16n8k16<T>(part[ni], a, b[ni]);
        // A group ends here, or this warp's share of it (the next k tile is another warp's):
        // the sum so far times the group's scale joins the total.
        if ((k0 + 16) % group == 0 || kk == kBK / 16 - 1) {
          const int gi = k0 / group;
          const float s0 = row_scale<F>(scales, frag_row0, gi, groups);
          const float s1 = row_scale<F>(scales, frag_row1, gi, groups);
          DB_UNROLL
          for (int ni = 0; ni < kNI; ++ni) {
            acc[ni][0] = fmaf(part[ni][0], s0, acc[ni][0]);
            acc[ni][1] = fmaf(part[ni][1], s0, acc[ni][1]);
            acc[ni][2] = fmaf(part[ni][2], s1, acc[ni][2]);
            acc[ni][3] = fmaf(part[ni][3], s1, acc[ni][3]);
            DB_UNROLL
            for (int i = 0; i < 4; ++i) part[ni][i] = 0.0f;
          }
        }
      } else {
        DB_UNROLL
        for (int ni = 0; ni < kNI; ++ni) db_mma_m16n8k16<T>(acc[ni], a, b[ni]);
      }
    }
    __syncwarp();  // every lane is done with slot before trip it + 2 overwrites it
  }
  db_cp_async_wait<0>();
  __syncthreads();  // the staging memory becomes the warps' partial sums

  // The warps' sums, [warp][batch column][W row], then one thread an output: the warps' sums
  // added in warp order (deterministic), scaled per channel, rounded once.
  float *sums = reinterpret_cast<float *>(smem_v);
  DB_UNROLL
  for (int ni = 0; ni < kNI; ++ni) {
    DB_UNROLL
    for (int i = 0; i < 4; ++i)
      sums[(warp * kBN + ni * 8 + 2 * t + (i & 1)) * kBM + g + 8 * (i >> 1)] = acc[ni][i];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < kBN * kBM; idx += kQMmaThreads) {
    const int col = idx / kBM, r = idx % kBM, row = m0 + r, b = b0 + col;
    if (row >= n || b >= batch) continue;
    float v = 0.0f;
    DB_UNROLL
    for (int q = 0; q < kWarps; ++q) v += sums[(q * kBN + col) * kBM + r];
    if (!Fmt::kGrouped) v *= row_scale<F>(scales, row, 0, 1);
    y[(size_t)b * n + row] = db_dtype<T>::from_float(v);
  }
}

template <class T, int F>
int quant_mma_launch(const db_context *ctx, const db_linear_params *p, const QuantPlan &plan,
                     const LaunchSink *sink) {
  if (sink) {
    char name[128];
    std::snprintf(name, sizeof name, "(anonymous namespace)::linear_quant_mma_kernel<%s, %d>",
                  dtype_cxx_name<T>(), F);
    return sink_add(*sink, name, plan.grid, plan.threads, kWarps * kWarpBytes);
  }
  const int batch_tiles = (int)db_ceil_div((uint64_t)p->batch, kBN);
  return DB_LAUNCH((linear_quant_mma_kernel<T, F>), plan.grid, dim3(plan.threads), 0, ctx->stream,
                   reinterpret_cast<const uint4 *>(p->x), reinterpret_cast<const uint4 *>(p->w),
                   reinterpret_cast<const void *>(p->scales),
                   reinterpret_cast<const uint8_t *>(p->zeros), reinterpret_cast<T *>(p->y),
                   p->batch, p->n, p->k, plan.group, batch_tiles);
}

template <class T>
int quant_mma_dtype(const db_context *ctx, const db_linear_params *p, const QuantPlan &plan,
                    const LaunchSink *sink) {
  return DB_DISPATCH_WEIGHT_FORMAT(p->weight_format, F, quant_mma_launch<T, F>(ctx, p, plan, sink));
}

}  // namespace

namespace db_lin {

int quant_mma_run(const db_context *ctx, const db_linear_params *p, const QuantPlan &plan,
                  const LaunchSink *sink) {
  if (p->dtype == DB_DTYPE_BF16) return quant_mma_dtype<__nv_bfloat16>(ctx, p, plan, sink);
  return quant_mma_dtype<__half>(ctx, p, plan, sink);
}

}  // namespace db_lin
