/*
 * attention_mma_kernels.cuh: the tensor-core decode kernel (DB_ATTENTION_MMA). Same grid, same
 * arguments (AttnArgs), same prologue, tile loads (AttnTiles) and split epilogue with its fused
 * merge (attn_finish) as attention_decode_kernel (attention_kernels.cuh); attention.cu chooses
 * between them.
 *
 * One block per (sequence, KV head, head chunk, split), kWarps warps. A head chunk is up to 16
 * query heads, padded to GP = 8 (one mma n-tile) or 16 (two); padding heads have zero queries
 * and their results are discarded. Tiles of kTile = 16 * kWarps tokens stream into shared memory
 * with cp.async, two stages, exactly as in the SIMT kernel; each warp then owns 16 rows of the
 * tile and runs its own online softmax over them, like an intra-block split:
 *
 *   1. scores, transposed: S^T[16 tokens x 8 heads] = K[16 x D] . Q^T[D x 8] with
 *      mma.m16n8k16 (A = K rows from shared memory, 32-bit loads; B = Q rows from shared
 *      memory, unscaled, so exact; the softmax scale * log2(e) multiplies the fp32 result);
 *   2. online softmax per head on the accumulator fragment (lane: tokens g, g+8, heads 2t,
 *      2t+1): the tile max is a shuffle over the 8 lanes of a head, the running sum l stays a
 *      per-lane partial until the end (every lane of a head shares m and alpha), and the output
 *      accumulator columns are that lane's own heads, so the rescale needs no shuffle;
 *   3. P is rounded to the input dtype (as FlashAttention does; fp16 first scaled by 2^15 so
 *      that probabilities down to 2^-29 stay normal; the scale leaves at the end, exactly) and
 *      goes through 384 (8 heads) or 768 (16) bytes of per-warp shared memory from the
 *      accumulator layout to the B layout; l sums the unrounded fp32 probabilities;
 *   4. O^T[D x 8 heads] += V^T[D x 16 tokens] . P^T[16 tokens x 8 heads]: A = V read
 *      transposed with 16-bit shared loads (ldmatrix.trans would do it in one instruction
 *      but the emulator does not model it yet), fp32 accumulation in registers.
 *
 * Epilogue: the warps' (m, l, O) merge by log-sum-exp through shared memory (the KV stages are
 * free by then), then attn_finish normalises (one active split) or writes the split's partials
 * and, in the last split to arrive, merges them all. Rows of the last tile past the context are
 * never copied: their scores are masked to -inf and their V rows are zeroed (AttnTiles), since
 * p = 0 times a stale NaN would still be NaN.
 *
 * Work per K or V element: 2 * 8 * ceil(group / 8) MACs on the tensor core instead of
 * 2 * group fp32 FMAs, plus about 1/16 of a 16-bit shared load per element and head tile for
 * V^T. Not yet measured on a card: `bench attention --variant mma` next to the default
 * (scripts/gpu-check.sh) decides whether AUTO should pick it.
 *
 * Shapes: kWarps = 4 (64-token tiles, 39-76 KiB of shared memory) for head dims up to 128;
 * 2 warps (32-token tiles, 71-76 KiB) for 256, whose 4-warp tile would need 135 KiB and one
 * block per SM. ptxas registers and blocks per SM on sm_90: kernels/README.md ("Attention").
 */
#ifndef DECODEBENCH_ATTENTION_MMA_KERNELS_CUH
#define DECODEBENCH_ATTENTION_MMA_KERNELS_CUH

#include "attention_kernels.cuh"

namespace {

/* Compile-time layout of one (head dim D, padded heads GP = 8 or 16) instantiation. */
template <int D, int GP, class CE = __half>
struct AttnMmaConfig {
  static constexpr int kWarps = D >= 256 ? 2 : 4;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kTile = 16 * kWarps;  /* tokens per tile: 16 rows per warp */
  static constexpr int kChunks = D / 8;      /* 16-byte chunks per K or V row */
  static constexpr int kRow = D + 8;         /* query row stride in elements (+16 bytes: the
                                                32-bit fragment loads of 8 rows x 4 lanes hit 32
                                                distinct banks for every supported D); the
                                                K and V rows' is Tiles::kRow (the same for a
                                                16-bit cache, D + 16 bytes for fp8) */
  static constexpr int kNT = GP / 8;         /* n-tiles of 8 heads */
  static constexpr int kDTiles = D / 16;     /* k-steps of the scores, m-tiles of P.V */
  static constexpr int kPRow = 24;           /* P row stride (elements): 12 words, so the B loads
                                                of 8 heads x 4 lanes are conflict-free */

  using Tiles = AttnTiles<CE, D, kTile, kThreads>; /* sizes only: the same for both 16-bit dtypes */
  static_assert(sizeof(CE) == 1 || Tiles::kRow == kRow, "the tiles' row stride is the one the fragment loads assume");

  /* Shared memory (bytes; every region starts 16-byte aligned). */
  static constexpr size_t kReduceBytes = (size_t)kWarps * GP * D * 4; /* epilogue, reuses KV */
  static constexpr size_t kBigBytes = Tiles::kBytes > kReduceBytes ? Tiles::kBytes : kReduceBytes;
  static constexpr size_t kQOffset = kBigBytes;                                  /* [GP][kRow] E */
  static constexpr size_t kPOffset = kQOffset + (size_t)GP * kRow * 2;          /* [warp][GP][kPRow] E */
  static constexpr size_t kStatOffset = kPOffset + (size_t)kWarps * GP * kPRow * 2;
  /* per warp and head m, l and merge factor [3][kWarps][GP], then the block's M, L [2][GP], last */
  static constexpr size_t kPageOffset = kStatOffset + ((size_t)(3 * kWarps + 2) * GP * 4 + 4 + 15) / 16 * 16;
  static constexpr size_t kSmemBytes = kPageOffset + Tiles::kPageBytes;

  static_assert(D % 16 == 0, "head dim must be a whole number of mma k-steps");
  static_assert(GP == 8 || GP == 16, "one or two n-tiles of 8 heads");
  static_assert((kQOffset % 16) == 0 && (kPOffset % 16) == 0 && (kStatOffset % 16) == 0,
                "16-byte aligned shared regions");
};

/* Minimum blocks per SM, for the register cap: every instantiation but one fits 3 blocks (168
 * registers) with room (at most 127, see the top); D 256 with 16 heads needs about 200 and gets
 * 2. Not tuned on a card. */
template <int D, int GP>
constexpr int attn_mma_min_blocks() { return D >= 256 && GP >= 16 ? 2 : 3; }

/* The fp16 probabilities are scaled by 2^15 before rounding, so that every p >= 2^-29 is a
 * normal fp16 (relative error 2^-11, not an absolute 2^-25); p <= 1 keeps them <= 32768. bf16 has
 * fp32's exponent range and needs no scale. */
template <class E>
struct AttnPScale {
  static constexpr float kScale = 1.0f, kUnscale = 1.0f;
};
template <>
struct AttnPScale<__half> {
  static constexpr float kScale = 32768.0f, kUnscale = 1.0f / 32768.0f;
};

DB_DEVICE uint32_t attn_ld_smem_u32(const void *p) { return *reinterpret_cast<const uint32_t *>(p); }

/* Two e4m3 codes (bits 0..15) as an mma operand pair of E holding code / kE4m3Unit, exactly
 * (fp16 bits directly; bf16 through fp32, which holds every such value). */
template <class E>
DB_DEVICE uint32_t attn_e4m3x2_operand(uint32_t x) {
  const uint32_t h = attn_e4m3x2_half2_bits(x);
  if constexpr (std::is_same_v<E, __half>) {
    return h;
  } else {
    const float2 f = db_dtype<__half>::unpack(h);
    return db_dtype<E>::pack(f.x, f.y);
  }
}

/* Elements p[0], p[1] of a K row as one 32-bit mma operand of E. */
template <class E, class CE>
DB_DEVICE uint32_t attn_ld_pair(const CE *p) {
  if constexpr (sizeof(CE) == 1) return attn_e4m3x2_operand<E>(*reinterpret_cast<const uint16_t *>(p));
  else return attn_ld_smem_u32(p);
}

/* The MMA kernel's body, for activations E and cache elements CE (E, or E4m3); wrapped below
 * as attention_decode_mma_kernel (16-bit cache) and attention_decode_mma_fp8_kernel. */
template <class E, class CE, int D, int GP>
DB_DEVICE void attn_decode_mma(const AttnArgs &a) {
  using C = AttnMmaConfig<D, GP, CE>;
  using Tiles = AttnTiles<CE, D, C::kTile, C::kThreads>;
  constexpr int kKvRow = Tiles::kRow;
  DB_EXTERN_SHARED(unsigned char, smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g8 = lane >> 2, t4 = lane & 3; /* mma groupID and threadID_in_group */

  float *red_s = reinterpret_cast<float *>(smem);              /* epilogue: [warp][GP][D] */
  E *q_s = reinterpret_cast<E *>(smem + C::kQOffset);
  E *p_s = reinterpret_cast<E *>(smem + C::kPOffset) + (size_t)warp * GP * C::kPRow; /* [GP][kPRow] */
  float *wm_s = reinterpret_cast<float *>(smem + C::kStatOffset); /* [warp][GP] */
  float *wl_s = wm_s + C::kWarps * GP;
  float *wf_s = wl_s + C::kWarps * GP;
  float *m_s = wf_s + C::kWarps * GP;                           /* [GP] */
  float *l_s = m_s + GP;
  int *last_s = reinterpret_cast<int *>(l_s + GP);
  const Tiles tiles{reinterpret_cast<CE *>(smem), reinterpret_cast<int32_t *>(smem + C::kPageOffset)};

  const AttnBlock k = attn_block<GP, C::kTile>(a);
  if (k.split >= k.active) return; /* past the sequence: no token, no partial */
  const float2 scales = attn_fp8_scales<CE>(a, k.h); /* (scores, output) */

  /* Queries to shared memory as they are (16-bit, exact). */
  attn_load_queries<D, GP, C::kThreads>(a, k, [&](int g, int c, uint4 raw) {
    *reinterpret_cast<uint4 *>(q_s + g * C::kRow + c * 8) = raw;
  });

  /* Per lane: heads n * 8 + 2 * t4 + j (j = 0, 1) of each n-tile. */
  float m_r[C::kNT][2], l_r[C::kNT][2];
  /* O^T accumulators: [d tile][n-tile][i], row d = 16 * dt + g8 + 8 * (i >> 1), head 2 * t4 + (i & 1) */
  float o_acc[C::kDTiles][C::kNT][4];
  DB_UNROLL
  for (int n = 0; n < C::kNT; ++n) {
    DB_UNROLL
    for (int j = 0; j < 2; ++j) m_r[n][j] = -INFINITY, l_r[n][j] = 0.0f;
    DB_UNROLL
    for (int dt = 0; dt < C::kDTiles; ++dt)
      DB_UNROLL
      for (int i = 0; i < 4; ++i) o_acc[dt][n][i] = 0.0f;
  }

  const int row0 = warp * 16; /* this warp's first row of every tile */
  if (k.ntiles > 0) tiles.start(a, k);
  for (int it = 0; it < k.ntiles; ++it) {
    const int tile_start = k.t_begin + it * C::kTile;
    /* this warp's rows first..valid-1 are the span's (first > 0 only in a span's first tile) */
    const int valid = imin(C::kTile, k.t_end - tile_start) - row0;
    const int first = imax(0, k.start - tile_start) - row0;
    tiles.next(a, k, it);
    __syncthreads(); /* this tile's rows (and, the first time, the queries) are visible */
    const int next_pages = tiles.fetch_pages(a, k, it + 2);
    const CE *k_tile = tiles.k_tile(it & 1) + row0 * kKvRow;
    const CE *v_tile = tiles.v_tile(it & 1) + row0 * kKvRow;
    if (imax(first, 0) < imin(valid, 16)) { /* warp-uniform: one of its 16 rows is the span's */
      /* 1. S^T = K . Q^T */
      float s[C::kNT][4];
      DB_UNROLL
      for (int n = 0; n < C::kNT; ++n)
        DB_UNROLL
        for (int i = 0; i < 4; ++i) s[n][i] = 0.0f;
      DB_UNROLL
      for (int ks = 0; ks < C::kDTiles; ++ks) {
        const CE *kr = k_tile + g8 * kKvRow + ks * 16 + 2 * t4;
        const uint32_t ka[4] = {attn_ld_pair<E>(kr), attn_ld_pair<E>(kr + 8 * kKvRow),
                                attn_ld_pair<E>(kr + 8), attn_ld_pair<E>(kr + 8 * kKvRow + 8)};
        DB_UNROLL
        for (int n = 0; n < C::kNT; ++n) {
          const E *qr = q_s + (n * 8 + g8) * C::kRow + ks * 16 + 2 * t4;
          const uint32_t qb[2] = {attn_ld_smem_u32(qr), attn_ld_smem_u32(qr + 8)};
          db_mma_m16n8k16<E>(s[n], ka, qb);
        }
      }

      /* 2. online softmax; fragment element i: token g8 + 8 * (i >> 1), head 2 * t4 + (i & 1) */
      DB_UNROLL
      for (int n = 0; n < C::kNT; ++n) {
        DB_UNROLL
        for (int i = 0; i < 4; ++i) {
          const int r = g8 + 8 * (i >> 1);
          s[n][i] = r < valid && r >= first ? s[n][i] * scales.x : -INFINITY;
        }
        float alpha[2];
        DB_UNROLL
        for (int j = 0; j < 2; ++j) {
          float tile_max = fmaxf(s[n][j], s[n][j + 2]);
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 4));
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 8));
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 16));
          const float m_new = fmaxf(m_r[n][j], tile_max); /* finite: the warp has a valid row */
          alpha[j] = exp2f(m_r[n][j] - m_new);             /* 0 on the first tile */
          m_r[n][j] = m_new;
          const float p0 = exp2f(s[n][j] - m_new), p1 = exp2f(s[n][j + 2] - m_new);
          s[n][j] = p0, s[n][j + 2] = p1;
          l_r[n][j] = l_r[n][j] * alpha[j] + (p0 + p1); /* this lane's tokens only */
        }
        DB_UNROLL
        for (int dt = 0; dt < C::kDTiles; ++dt)
          DB_UNROLL
          for (int i = 0; i < 4; ++i) o_acc[dt][n][i] *= alpha[i & 1];
        /* 3. P, rounded to E, into the warp's [head][token] scratch */
        DB_UNROLL
        for (int i = 0; i < 4; ++i)
          p_s[(n * 8 + 2 * t4 + (i & 1)) * C::kPRow + g8 + 8 * (i >> 1)] =
              db_dtype<E>::from_float(s[n][i] * AttnPScale<E>::kScale);
      }
      __syncwarp();

      /* 4. O^T += V^T . P^T; B fragment of P^T: tokens 2 * t4 (+1, +8, +9), head g8 */
      uint32_t pb[C::kNT][2];
      DB_UNROLL
      for (int n = 0; n < C::kNT; ++n) {
        const E *pr = p_s + (n * 8 + g8) * C::kPRow + 2 * t4;
        pb[n][0] = attn_ld_smem_u32(pr);
        pb[n][1] = attn_ld_smem_u32(pr + 8);
      }
      using U = std::conditional_t<sizeof(CE) == 1, uint8_t, uint16_t>;
      const U *vr = reinterpret_cast<const U *>(v_tile) + 2 * t4 * kKvRow + g8;
      DB_UNROLL
      for (int dt = 0; dt < C::kDTiles; ++dt) {
        /* A = V^T: a[r] holds tokens 2 * t4 + 8 * (r >> 1) and the next, at d = 16 * dt + g8 + 8 * (r & 1) */
        uint32_t va[4];
        DB_UNROLL
        for (int r = 0; r < 4; ++r) {
          const U *v0 = vr + 8 * (r >> 1) * kKvRow + 16 * dt + 8 * (r & 1);
          const uint32_t pair = (uint32_t)v0[0] | (uint32_t)v0[kKvRow] << (8 * sizeof(U));
          if constexpr (sizeof(CE) == 1) va[r] = attn_e4m3x2_operand<E>(pair);
          else va[r] = pair;
        }
        DB_UNROLL
        for (int n = 0; n < C::kNT; ++n) db_mma_m16n8k16<E>(o_acc[dt][n], va, pb[n]);
      }
    }
    tiles.store_pages(it & 1, next_pages);
    __syncthreads(); /* the stage (and P) are read before the next iteration overwrites them */
  }

  /* Epilogue: each warp's l to a total over its 8 token lanes; (m, l) of every warp to shared. */
  DB_UNROLL
  for (int n = 0; n < C::kNT; ++n)
    DB_UNROLL
    for (int j = 0; j < 2; ++j) {
      float l = l_r[n][j];
      l += __shfl_xor_sync(0xffffffffu, l, 4);
      l += __shfl_xor_sync(0xffffffffu, l, 8);
      l += __shfl_xor_sync(0xffffffffu, l, 16);
      if (g8 == 0) {
        const int g = n * 8 + 2 * t4 + j;
        wm_s[warp * GP + g] = m_r[n][j];
        wl_s[warp * GP + g] = l;
      }
    }
  __syncthreads();
  /* Log-sum-exp merge of the warps: M = max of the warps that saw a token, factor 2^(m_w - M). */
  if (tid < GP) {
    float m = -INFINITY, l = 0.0f;
    for (int w = 0; w < C::kWarps; ++w)
      if (wl_s[w * GP + tid] != 0.0f) m = fmaxf(m, wm_s[w * GP + tid]); /* NaN l: kept, below */
    for (int w = 0; w < C::kWarps; ++w) {
      const float lw = wl_s[w * GP + tid];
      const float f = lw != 0.0f ? exp2f(wm_s[w * GP + tid] - m) : 0.0f;
      wf_s[w * GP + tid] = f;
      l += f * lw;
    }
    m_s[tid] = m, l_s[tid] = l + (tid < k.heads ? attn_direct_sink(a, k, tid, m) : 0.0f);
  }
  __syncthreads();
  DB_UNROLL
  for (int n = 0; n < C::kNT; ++n) {
    const float f[2] = {wf_s[warp * GP + n * 8 + 2 * t4] * AttnPScale<E>::kUnscale,
                        wf_s[warp * GP + n * 8 + 2 * t4 + 1] * AttnPScale<E>::kUnscale};
    DB_UNROLL
    for (int dt = 0; dt < C::kDTiles; ++dt)
      DB_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int g = n * 8 + 2 * t4 + (i & 1), d = 16 * dt + g8 + 8 * (i >> 1);
        /* a warp that saw no token has f = 0 and a zero accumulator */
        red_s[((size_t)warp * GP + g) * D + d] = f[i & 1] * o_acc[dt][n][i];
      }
  }
  __syncthreads();
  attn_finish<E, D, GP, C::kThreads, C::kWarps, sizeof(CE) == 1>(a, k, red_s, m_s, l_s, last_s, scales.y);
}

template <class E, int D, int GP>
__global__ void __launch_bounds__(AttnMmaConfig<D, GP>::kThreads, attn_mma_min_blocks<D, GP>())
    attention_decode_mma_kernel(const AttnArgs a) {
  attn_decode_mma<E, E, D, GP>(a);
}

/* The same kernel over an fp8 e4m3 cache: K and V are converted to E exactly before mma.sync. */
template <class E, int D, int GP>
__global__ void __launch_bounds__(AttnMmaConfig<D, GP, db_attn::E4m3>::kThreads, attn_mma_min_blocks<D, GP>())
    attention_decode_mma_fp8_kernel(const AttnArgs a) {
  attn_decode_mma<E, db_attn::E4m3, D, GP>(a);
}

}  // namespace

#endif  // DECODEBENCH_ATTENTION_MMA_KERNELS_CUH
