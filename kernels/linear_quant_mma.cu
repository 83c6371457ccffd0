// linear_quant_mma.cu: the tensor-core decode linear kernel over quantized weights (batch 5..1024
// under AUTO), Y^T = W * X^T with mma.sync m16n8k16 (W rows the M side, the batch the N side),
// fp32 accumulation. The shared-memory tiling follows linear_tiled.cu:
//
//   - a block computes kQMmaBM = 16 rows of W x BN (16 up to batch 16, else 32) batch rows; its
//     4 warps take turns over the k tiles of kQMmaBK = 64 (warp w: tiles w, w + 4, ...) and add
//     their sums in shared memory at the end, in warp order. 16 rows a block give 256 blocks at
//     n 4096 (2 an SM on an H200) where 64 gave 64, half the SMs idle at the bytes-bound batches;
//   - each warp stages its own k tiles, packed W (16 rows x 64 or 32 bytes) and X (BN rows x 128
//     bytes), by cp.async (16 bytes, L2 only) in a ring of kStages slots (4 at BN 32, 7 or 8 at
//     BN 16: what 24 KiB a warp holds), so kStages - 1 tiles are in flight while one computes;
//     W bytes in flight an SM: (kStages - 1) x 1 KiB (8-bit) or 512 B (4-bit) x 7.75 warps at n
//     4096. The X tile is BN / 8 (8-bit) or BN / 4 (4-bit) times the W tile: X, not W, fills
//     the ring, which is why BN is 16 where the batch allows;
//   - a lane decodes the packed W vectors it copied itself (exactly, unscaled:
//     linear_quant.cuh) into the warp's decoded W tile, stored as linear_tiled.cu's swizzle
//     (chunk c of row r at c ^ (r % 8)) so that ldmatrix reads it without bank conflicts; only
//     the warp touches its staging, so __syncwarp orders it (two a trip: after the wait, for the
//     X tile's copies and the reuse of the slot and decoded tile; after the decode);
//   - the scales: a k16 step lies in one group (groups are multiples of 32), so the grouped
//     formats sum each group's steps into a second accumulator and add it times the group's
//     scale (one per W row of the fragment) when the group ends or the warp's k tile does (a
//     group of 128 spans two warps' tiles); the per-channel formats scale the total once, in
//     the epilogue. Products of decoded values and activations are exact.
// The blocks of one W tile (its batch tiles) are consecutive in the grid, so they run together
// and the later ones read the tile from L2: DRAM reads each W byte once a call.
#include <atomic>

#include "linear_quant.cuh"

namespace {

using namespace db_lin;

constexpr int kBM = kQMmaBM, kBK = kQMmaBK;
constexpr int kRowBytes = kBK * 2;                        // 128: 8 chunks of 16 bytes
constexpr int kDecodedBytes = kBM * kRowBytes;            // 2 KiB: a warp's decoded W tile

DB_DEVICE int tile_offset(int row, int chunk) { return (row * 8 + (chunk ^ (row & 7))) * 16; }

// The staging of one warp for format F and batch tile BN: a ring of kStages slots, each a
// packed W tile (kBM rows x kBK elements in F's bytes) and an X tile (BN rows x kBK), then the
// decoded W tile. kStages is as many slots as fit kQMmaWarpSmem: the X tile is BN / 8 (8-bit)
// or BN / 4 (4-bit) times the packed W tile, so X, not W, is what bounds the ring. A block has
// kWarps warps (4, or 8 where the plan needs the larger block for whole waves).
template <int F, int BN, int kWarps>
struct MmaStaging {
  static constexpr int kWBytes = kBM * kBK * (QuantFormat<F>::kFourBit ? 1 : 2) / 2;
  static constexpr int kXBytes = BN * kRowBytes;
  static constexpr int kSlotBytes = kWBytes + kXBytes;
  static constexpr int kStages = db_lin::quant_mma_stages(QuantFormat<F>::kFourBit, BN);
  static constexpr int kWarpBytes = kStages * kSlotBytes + kDecodedBytes;
  static constexpr int kBlockBytes = kWarps * kWarpBytes;
  static_assert(kStages >= 3, "a ring of at least 3: one computing, two in flight");
  static_assert(kWarps * BN * kBM * 4 <= kBlockBytes, "the warps' sums fit the staging");
  static_assert(kWBytes % 16 == 0 && kXBytes % 16 == 0, "16-byte slots");
};

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
  if (F == DB_WEIGHT_FP8_E4M3_BLOCK)
    return static_cast<const float *>(scales)[(size_t)(row / DB_FP8_BLOCK) * groups + group_index];
  return static_cast<const float *>(scales)[row];
}

template <int F>
DB_DEVICE float row_zero(const uint8_t *zeros, int row, int group_index, int groups) {
  if (F == DB_WEIGHT_INT4) return 8.0f;
  if (F != DB_WEIGHT_INT4_ZP) return 0.0f;
  const uint32_t byte = zeros[(size_t)(row >> 1) * groups + group_index];
  return (float)((byte >> (4 * (row & 1))) & 0xFu);
}

// The kernel's body, for the two block sizes' kernels below.
template <class T, int F, int BN, int kWarps>
DB_DEVICE void quant_mma_body(const uint4 *__restrict__ x, const uint4 *__restrict__ w,
                              const void *__restrict__ scales, const uint8_t *__restrict__ zeros,
                              T *__restrict__ y, int batch, int n, int k, int group,
                              int batch_tiles) {
  using Fmt = QuantFormat<F>;
  using S = MmaStaging<F, BN, kWarps>;
  constexpr int kNI = BN / 8;                              // n8 tiles a warp
  constexpr int kVecPerRow = kBK / Fmt::kPerVector;        // W vectors of a row in a k tile
  constexpr int kVecPerLane = kBM * kVecPerRow / 32;
  constexpr int kWordsPerVec = Fmt::kPerVector / 2;
  static_assert(kVecPerLane >= 1 && kBM * kVecPerRow % 32 == 0, "W tile split");
  static_assert(kNI % 2 == 0, "ldmatrix x4 reads two n8 tiles of X");
  DB_EXTERN_SHARED(unsigned char, smem);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned char *const region = smem + warp * S::kWarpBytes;
  unsigned char *const decoded = region + S::kStages * S::kSlotBytes;
  const int bt = blockIdx.x % batch_tiles, mt = blockIdx.x / batch_tiles;
  const int m0 = mt * kBM, b0 = bt * BN;
  const int w_vectors = k / Fmt::kPerVector;  // a packed row
  const int x_chunks = k >> 3;
  const int ktiles = (k + kBK - 1) / kBK;
  const int groups = Fmt::kGrouped ? quant_groups(F, k, group) : 1;
  // Groups are 32, 64 or 128 (the plan's rule): shifts and masks instead of divisions by a
  // run-time value (whose code cost the int4-zp kernel 8 bytes of spills on sm_90).
  const int gshift = group == 32 ? 5 : group == 64 ? 6 : 7;
  // This warp's k tiles: warp, warp + kWarps, ...
  const int nk = ktiles > warp ? (ktiles - warp + kWarps - 1) / kWarps : 0;

  // Copies the warp's i-th tile (k tile warp + i * kWarps) into ring slot `slot` by cp.async and
  // commits them as one group (an empty group past the warp's last tile, so that the wait below
  // always leaves kStages - 2 groups). W vector j of the lane goes to slot bytes (lane + 32 j)
  // * 16, and this lane alone reads it back (its own wait_group orders that); the X tile is read
  // by every lane's ldmatrix (the __syncwarp after the wait orders that).
  auto issue = [&](int slot, int i) {
    if (i < nk) {
      const int kt = warp + i * kWarps;
      unsigned char *ws = region + slot * S::kSlotBytes;
      DB_UNROLL
      for (int j = 0; j < kVecPerLane; ++j) {
        const int e = lane + j * 32, r = e / kVecPerRow, v = kt * kVecPerRow + e % kVecPerRow;
        const int row = db_min(m0 + r, n - 1);
        uint4 *dst = reinterpret_cast<uint4 *>(ws + e * 16);
        if (v < w_vectors) db_cp_async_16(dst, w + (size_t)row * w_vectors + v);
        else *dst = make_uint4(0, 0, 0, 0);
      }
      unsigned char *xs = ws + S::kWBytes;
      DB_UNROLL
      for (int j = 0; j < BN * 8 / 32; ++j) {
        const int e = lane + j * 32, r = e >> 3, c = e & 7, gc = kt * 8 + c;
        unsigned char *dst = xs + tile_offset(r, c);
        if (gc < x_chunks) {
          const int row = db_min(b0 + r, batch - 1);
          db_cp_async_16(dst, x + (size_t)row * x_chunks + gc);
        } else {
          *reinterpret_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0);
        }
      }
    }
    db_cp_async_commit();
  };
  // Decodes this lane's packed vectors of slot (k tile kt) into the decoded W tile.
  auto decode = [&](int slot, int kt) {
    const unsigned char *ws = region + slot * S::kSlotBytes;
    DB_UNROLL
    for (int j = 0; j < kVecPerLane; ++j) {
      const int e = lane + j * 32, r = e / kVecPerRow, vc = e % kVecPerRow;
      const int v = kt * kVecPerRow + vc;
      const int row = db_min(m0 + r, n - 1);
      const uint4 packed = *reinterpret_cast<const uint4 *>(ws + e * 16);
      uint32_t words[kWordsPerVec];
      const float zero = v < w_vectors ? row_zero<F>(zeros, row, Fmt::kGrouped ? (v * Fmt::kPerVector) >> gshift : 0, groups) : 0.0f;
      decode_vector<T, F>(packed, zero, words);
      if (v >= w_vectors) {
        DB_UNROLL
        for (int q = 0; q < kWordsPerVec; ++q) words[q] = 0;
      }
      DB_UNROLL
      for (int q = 0; q < kWordsPerVec / 4; ++q) {
        const int chunk = vc * (kWordsPerVec / 4) + q;
        *reinterpret_cast<uint4 *>(decoded + tile_offset(r, chunk)) =
            make_uint4(words[4 * q], words[4 * q + 1], words[4 * q + 2], words[4 * q + 3]);
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

  // The ring: tiles 0 .. kStages - 2 in flight before the first trip; trip `it` waits for its
  // tile, then refills the slot trip it - 1 read with tile it + kStages - 1.
#if !DB_EMU
#pragma unroll 1  // a rolled prologue: unrolled, sm_86 / sm_89 spilled in the 8-bit BN 16 kernels
#endif
  for (int i = 0; i < S::kStages - 1; ++i) issue(i, i);
  int slot = 0, refill = S::kStages - 1;
  for (int it = 0; it < nk; ++it) {
    const int kt = warp + it * kWarps;
    db_cp_async_wait<S::kStages - 2>();  // this lane's copies of tile it have landed
    // Every lane's copies of tile it have landed, and every lane is done with trip it - 1's
    // reads (its slot, refilled next, and the decoded tile, rewritten below).
    __syncwarp();
    issue(refill, it + S::kStages - 1);
    decode(slot, kt);
    __syncwarp();  // every lane's decoded vectors of tile it are stored

    const unsigned char *xs = region + slot * S::kSlotBytes + S::kWBytes;
    DB_UNROLL
    for (int kk = 0; kk < kBK / 16; ++kk) {
      const int k0 = kt * kBK + kk * 16;
      if (k0 >= k) break;
      uint32_t a[4], b[kNI][2];
      db_ldmatrix_x4(a, decoded + tile_offset(lane & 15, 2 * kk + (lane >> 4)));
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
        // A group ends here, or this warp's share of it (the next k tile is another warp's), or
        // k does (FP8_E4M3_BLOCK's last tile may be partial): the sum so far times the group's
        // scale joins the total.
        if (((k0 + 16) & (group - 1)) == 0 || kk == kBK / 16 - 1 || (Fmt::kBlock && k0 + 16 >= k)) {
          const int gi = k0 >> gshift;
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
    slot = slot + 1 == S::kStages ? 0 : slot + 1;
    refill = refill + 1 == S::kStages ? 0 : refill + 1;
  }
  db_cp_async_wait<0>();
  __syncthreads();  // the staging memory becomes the warps' partial sums

  // The warps' sums, [warp][batch column][W row], then one thread an output: the warps' sums
  // added in warp order (deterministic), scaled per channel, rounded once.
  float *sums = reinterpret_cast<float *>(smem);
  DB_UNROLL
  for (int ni = 0; ni < kNI; ++ni) {
    DB_UNROLL
    for (int i = 0; i < 4; ++i)
      sums[(warp * BN + ni * 8 + 2 * t + (i & 1)) * kBM + g + 8 * (i >> 1)] = acc[ni][i];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < BN * kBM; idx += kWarps * 32) {
    const int col = idx / kBM, r = idx % kBM, row = m0 + r, b = b0 + col;
    if (row >= n || b >= batch) continue;
    float v = 0.0f;
    DB_UNROLL
    for (int q = 0; q < kWarps; ++q) v += sums[(q * BN + col) * kBM + r];
    if (!Fmt::kGrouped) v *= row_scale<F>(scales, row, 0, 1);
    y[(size_t)b * n + row] = db_dtype<T>::from_float(v);
  }
}

// (128, 2): the 2 blocks an SM the staging allows on sm_90 (at most 255 registers, no limit in
// practice); without the second bound ptxas spilled 8-12 bytes in some instantiations (int4-zp
// at BN 32 on sm_90, the 8-bit ones at BN 16 on sm_86 / sm_89) at 56-72 registers.
template <class T, int F, int BN>
__global__ __launch_bounds__(kQMmaThreads, kQMmaBlocksPerSm) void linear_quant_mma_kernel(
    const uint4 *__restrict__ x, const uint4 *__restrict__ w, const void *__restrict__ scales,
    const uint8_t *__restrict__ zeros, T *__restrict__ y, int batch, int n, int k, int group,
    int batch_tiles) {
  quant_mma_body<T, F, BN, kQMmaWarps>(x, w, scales, zeros, y, batch, n, k, group, batch_tiles);
}

// The wide block (kQMmaWideWarps warps, 192 KiB: one an sm_90 SM, the same 255 registers a
// thread at most), where the 4-warp grid would not fill whole waves.
template <class T, int F, int BN>
__global__ __launch_bounds__(kQMmaWideWarps * 32, kQMmaWideBlocksPerSm) void
linear_quant_mma_wide_kernel(const uint4 *__restrict__ x, const uint4 *__restrict__ w,
                             const void *__restrict__ scales, const uint8_t *__restrict__ zeros,
                             T *__restrict__ y, int batch, int n, int k, int group,
                             int batch_tiles) {
  quant_mma_body<T, F, BN, kQMmaWideWarps>(x, w, scales, zeros, y, batch, n, k, group,
                                           batch_tiles);
}

template <class T, int F, int BN, int W>
struct QuantMmaKernel {
  static auto kernel() { return linear_quant_mma_kernel<T, F, BN>; }
  static constexpr const char *kName = "linear_quant_mma_kernel";
};
template <class T, int F, int BN>
struct QuantMmaKernel<T, F, BN, kQMmaWideWarps> {
  static auto kernel() { return linear_quant_mma_wide_kernel<T, F, BN>; }
  static constexpr const char *kName = "linear_quant_mma_wide_kernel";
};

template <class T, int F, int BN, int W>
int quant_mma_launch(const db_context *ctx, const db_linear_params *p, const QuantPlan &plan,
                     const LaunchSink *sink) {
  using K = QuantMmaKernel<T, F, BN, W>;
  constexpr int kSmem = MmaStaging<F, BN, W>::kBlockBytes;
  if (plan.threads != W * 32)
    return db_fail(DB_ERR_INTERNAL, "linear: quantized tensor-core plan of %d threads for %d warps",
                   plan.threads, W);
  if (sink) {
    char name[128];
    std::snprintf(name, sizeof name, "(anonymous namespace)::%s<%s, %d, %d>", K::kName,
                  dtype_cxx_name<T>(), F, BN);
    return sink_add(*sink, name, plan.grid, plan.threads, kSmem, plan.units);
  }
  static std::atomic<uint64_t> smem_set{0};
  DB_CHECK(allow_smem(K::kernel(), smem_set, ctx->device, kSmem,
                      "cudaFuncSetAttribute(linear_quant_mma_kernel, MaxDynamicSharedMemorySize)"));
  const int batch_tiles = (int)db_ceil_div((uint64_t)p->batch, BN);
  return db_launch(K::kName, K::kernel(), plan.grid, dim3(plan.threads), (size_t)kSmem, ctx->stream,
                   reinterpret_cast<const uint4 *>(p->x), reinterpret_cast<const uint4 *>(p->w),
                   reinterpret_cast<const void *>(p->scales),
                   reinterpret_cast<const uint8_t *>(p->zeros), reinterpret_cast<T *>(p->y),
                   p->batch, p->n, p->k, plan.group, batch_tiles);
}

template <class T, int F>
int quant_mma_tile(const db_context *ctx, const db_linear_params *p, const QuantPlan &plan,
                   const LaunchSink *sink) {
  const bool wide = plan.warps == kQMmaWideWarps;
  if (!wide && plan.warps != kQMmaWarps)
    return db_fail(DB_ERR_INTERNAL, "linear: no quantized tensor-core kernel of %d warps",
                   plan.warps);
  switch (plan.batch_tile) {
    case 16:
      return wide ? quant_mma_launch<T, F, 16, kQMmaWideWarps>(ctx, p, plan, sink)
                  : quant_mma_launch<T, F, 16, kQMmaWarps>(ctx, p, plan, sink);
    case 32:
      return wide ? quant_mma_launch<T, F, 32, kQMmaWideWarps>(ctx, p, plan, sink)
                  : quant_mma_launch<T, F, 32, kQMmaWarps>(ctx, p, plan, sink);
  }
  return db_fail(DB_ERR_INTERNAL, "linear: no quantized tensor-core kernel for batch tile %d",
                 plan.batch_tile);
}

template <class T>
int quant_mma_dtype(const db_context *ctx, const db_linear_params *p, const QuantPlan &plan,
                    const LaunchSink *sink) {
  return DB_DISPATCH_WEIGHT_FORMAT(p->weight_format, F, quant_mma_tile<T, F>(ctx, p, plan, sink));
}

}  // namespace

namespace db_lin {

int quant_mma_run(const db_context *ctx, const db_linear_params *p, const QuantPlan &plan,
                  const LaunchSink *sink) {
  if (p->dtype == DB_DTYPE_BF16) return quant_mma_dtype<__nv_bfloat16>(ctx, p, plan, sink);
  return quant_mma_dtype<__half>(ctx, p, plan, sink);
}

}  // namespace db_lin
