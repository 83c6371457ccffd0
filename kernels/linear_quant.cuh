/*
 * linear_quant.cuh: the decode linear layer over quantized weights (decodebench.h, "quantized
 * weight formats"): exact decoding of each format's values, the plan, and the entry points that
 * linear.cu's db_linear_plan, db_linear and db_linear_launches hand a non-dense
 * weight_format to.
 *
 *   linear_quant.cu        validation, plan, db_fill_quantized
 *   linear_quant_gemv.cu   CUDA-core GEMV, batch 1..4 under AUTO
 *   linear_quant_mma.cu    tensor-core kernel, W dequantised to dtype in shared memory
 */
#ifndef DECODEBENCH_LINEAR_QUANT_CUH
#define DECODEBENCH_LINEAR_QUANT_CUH

#include "linear_common.cuh"

namespace db_lin {

/* ---- formats: what a kernel needs to know at compile time ---------------------------------- */

template <int F>
struct QuantFormat {
  static constexpr bool kFourBit = F == DB_WEIGHT_INT4 || F == DB_WEIGHT_INT4_ZP || F == DB_WEIGHT_MXFP4;
  /* elements of K one 16-byte vector of a W row holds */
  static constexpr int kPerVector = kFourBit ? 32 : 16;
  /* a scale per group along K (else one per output channel, or per tensor, after the sum);
   * FP8_E4M3_BLOCK's groups are its 128 x 128 tiles: 128 along K, shared by 128 rows */
  static constexpr bool kBlock = F == DB_WEIGHT_FP8_E4M3_BLOCK;
  static constexpr bool kGrouped = kFourBit || kBlock;
};

/* Scales a row of W has along K: k / group, or ceil(k / 128) for FP8_E4M3_BLOCK, whose last
 * tile may be partial. */
DB_HD int quant_groups(int format, int k, int group) {
  return format == DB_WEIGHT_FP8_E4M3_BLOCK ? (k + DB_FP8_BLOCK - 1) / DB_FP8_BLOCK : k / group;
}

inline int64_t quant_row_bytes(int format, int64_t k) {
  return format == DB_WEIGHT_INT4 || format == DB_WEIGHT_INT4_ZP || format == DB_WEIGHT_MXFP4 ? k / 2 : k;
}

/* ---- exact decoding (values unscaled; every one exact in fp32, bf16 and fp16) -------------- */

/* OCP E4M3 (fn) to fp32: the 7 magnitude bits placed at fp32's exponent and mantissa give
 * 2^-120 times the value (subnormals included: fp32 subnormals are not flushed, nvcc is not run
 * with -ftz), so one exact multiplication by 2^120 finishes it. The NaN codes (0x7F, 0xFF)
 * decode to 480, which no fill writes; a kernel never meets them. */
DB_DEVICE float q_e4m3(uint32_t byte) {
  const uint32_t bits = ((byte & 0x80u) << 24) | ((byte & 0x7Fu) << 20);
  return __uint_as_float(bits) * 0x1p120f;
}

/* E2M1 to fp32 the same way: 3 magnitude bits at fp32's top exponent bits, times 2^126. */
DB_DEVICE float q_e2m1(uint32_t nibble) {
  const uint32_t bits = ((nibble & 0x8u) << 28) | ((nibble & 0x7u) << 22);
  return __uint_as_float(bits) * 0x1p126f;
}

/* E8M0 to fp32: 2^(e - 127); e = 0 is fp32's subnormal 2^-127, 255 is NaN. */
DB_DEVICE float q_e8m0(uint32_t e) {
  return __uint_as_float(e == 0 ? 0x00400000u : e == 255 ? 0x7fc00000u : e << 23);
}

/* A small integer v (|v| < 2^22) from 2^23 + v: the nibble or byte put in fp32's mantissa under
 * the exponent of 2^23, then one exact subtraction of 2^23 + offset, instead of a
 * quarter-rate integer-to-float conversion. */
DB_DEVICE float q_uint_minus(uint32_t u, float magic_plus_offset) {
  return __uint_as_float(0x4B000000u | u) - magic_plus_offset;
}

/* fp16 scale bits to fp32 (exact). */
DB_DEVICE float q_fp16(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }

/* ---- the plan and the entry points ----------------------------------------------------------- */

/* Validates p as a quantized linear (p->weight_format != DB_WEIGHT_DENSE), resolves variant and
 * split_k (written back) and gives the workspace (none). */
int quant_linear_plan(db_context *ctx, db_linear_params *p, uint64_t *workspace_bytes);
int quant_linear(db_context *ctx, const db_linear_params *p);
int quant_linear_launches(db_context *ctx, const db_linear_params *p, db_launch_info *out,
                          int32_t max, int32_t *count);

/* GEMV (linear_quant_gemv.cu): 4 warps a block, 2 W rows a warp, 4 vectors a row and trip. */
constexpr int kQGemvWarps = 4;
constexpr int kQGemvThreads = kQGemvWarps * 32;
constexpr int kQGemvUnroll = 4;
constexpr int kQGemvBlocksPerSm = 4; /* __launch_bounds__(128, 4): at most 128 registers */
/* Warps that share a row pair, splitting its K by 32-vector columns (linear_quant_gemv_kernel:
 * 1; linear_quant_gemv_split_kernel: 2, where one a pair does not fill whole waves). */
constexpr int kQGemvMaxKWarps = 2;
/* A warp's W staging: 2 trips x 2 rows x kQGemvUnroll vectors x 32 lanes (8 KiB; 32 KiB a
 * block of static shared memory, 128 KiB an SM at 4 blocks). */
constexpr int kQGemvStageVectors = 2 * 2 * kQGemvUnroll * 32;
/* Dynamic shared memory a GEMV launch reserves and does not use: 32 + 14 KiB (+ 1 KiB the
 * runtime keeps) a block let 4 blocks share an sm_90 SM's 228 KiB, not 5. The kernels that need
 * at most 96 registers (fp8 and int8 at most batch tiles, ptxas) would otherwise hold 5 (6 at 80
 * and under), and 512 blocks of a 4096-row W (2048 row pairs) fill 0.78 of 660 slots and no
 * split of a pair's K fills more (the units stay 2048 pairs x warps a pair on 20 warps an SM);
 * at 4 they fill 0.97 of 528, and a fifth block would only add warps to SMs whose bytes in
 * flight are already past what they need. */
constexpr int kQGemvReservedSmem = 14 * 1024;
/* Tensor cores (linear_quant_mma.cu): a block of 4 warps computes 16 W rows x kQMmaBN (16 or 32)
 * batch rows, its warps taking turns over the k tiles of 64 (split K inside the block). Each
 * warp stages its own tiles (packed W and X) in a cp.async ring of quant_mma_stages slots that
 * fit kQMmaWarpSmem with the decoded W tile: 4 warps x 24 KiB = 96 KiB a block, under the 99 KiB
 * a block of sm_86 / sm_89 (the library is built for them too); 2 blocks an sm_90 SM, which is
 * what the 256 blocks of n 4096 are on an H200's 132 SMs. */
constexpr int kQMmaBM = 16;
constexpr int kQMmaBK = 64;
constexpr int kQMmaWarps = 4;
constexpr int kQMmaThreads = kQMmaWarps * 32;
constexpr int kQMmaBlocksPerSm = 2; /* sm_90: 2 x 96 KiB of shared memory */
/* The wide block: 8 warps splitting K, 192 KiB, one an sm_90 SM (needs sm_90's 227 KiB a
 * block). The plan takes it where the 4-warp grid would not fill whole waves: the same warps an
 * SM at half the blocks, so a grid of n / 16 units lands on 132 slots instead of 264 (8B qkv:
 * 384 units fill 0.73 of two rounds of 264, 0.97 of three of 132). */
constexpr int kQMmaWideWarps = 8;
constexpr int kQMmaWideBlocksPerSm = 1;
constexpr int kQMmaMaxBN = 32;
constexpr int kQMmaWarpSmem = 24 * 1024;
/* Ring slots: (kQMmaWarpSmem - the 2 KiB decoded tile) / (packed W tile + X tile), at most 12.
 * 8-bit W: 4 at BN 32 (1 + 4 KiB a slot), 7 at BN 16 (1 + 2 KiB); 4-bit: 4 and 8. */
constexpr int quant_mma_stages(bool four_bit, int bn) {
  return (kQMmaWarpSmem - kQMmaBM * kQMmaBK * 2) / (kQMmaBM * kQMmaBK / (four_bit ? 2 : 1) + bn * kQMmaBK * 2) > 12
             ? 12
             : (kQMmaWarpSmem - kQMmaBM * kQMmaBK * 2) / (kQMmaBM * kQMmaBK / (four_bit ? 2 : 1) + bn * kQMmaBK * 2);
}

struct QuantPlan {
  int variant;  /* DB_LINEAR_GEMV or DB_LINEAR_TILED */
  int batch_tile;
  int group;    /* the grouped formats' group size (MXFP4's 0 resolved to 32), else 0 */
  dim3 grid;
  int threads;
  int smem;
  int warps;    /* the tensor-core kernel's warps a block (kQMmaWarps or kQMmaWideWarps) */
  int k_warps;  /* the GEMV's warps that share a row pair, splitting K (1 or 2) */
  int64_t units; /* the work units the grid's blocks share (db_launch_info.units) */
};
int quant_gemv_run(const db_context *ctx, const db_linear_params *p, const QuantPlan &plan,
                   const LaunchSink *sink);
int quant_mma_run(const db_context *ctx, const db_linear_params *p, const QuantPlan &plan,
                  const LaunchSink *sink);

/* The shape checks of a quantized format (linear_quant.cu's, for other kernels that read the
 * formats: db_grouped_linear): k a multiple of the row's 16-byte vectors and of the group, an
 * even n for INT4_ZP; *group is the group size the format uses (MXFP4's 0 read as 32). `who`
 * starts the messages. And the format's name in messages. */
int quant_check_shape(const char *who, int format, int n, int k, int group_size, int *group);
const char *quant_format_name(int format);

/* The demangled spelling of a format in a kernel's name (db_linear_launches). */
inline const char *quant_format_cxx(int format) {
  static const char *const names[DB_NUM_WEIGHT_FORMATS] = {"0", "1", "2", "3", "4", "5", "6", "7"};
  return format >= 0 && format < DB_NUM_WEIGHT_FORMATS ? names[format] : "?";
}

/* Dispatch of a run-time format to the template parameter F; a dense or unknown one is an
 * internal error (the plan refused it). */
#define DB_DISPATCH_WEIGHT_FORMAT(format, F, ...)                                           \
  [&]() -> int {                                                                           \
    switch (format) {                                                                      \
      DB_DISPATCH_CASE_(F, DB_WEIGHT_FP8_E4M3, __VA_ARGS__)                                \
      DB_DISPATCH_CASE_(F, DB_WEIGHT_FP8_E4M3_TENSOR, __VA_ARGS__)                         \
      DB_DISPATCH_CASE_(F, DB_WEIGHT_INT8, __VA_ARGS__)                                    \
      DB_DISPATCH_CASE_(F, DB_WEIGHT_INT4, __VA_ARGS__)                                    \
      DB_DISPATCH_CASE_(F, DB_WEIGHT_INT4_ZP, __VA_ARGS__)                                 \
      DB_DISPATCH_CASE_(F, DB_WEIGHT_MXFP4, __VA_ARGS__)                                   \
      DB_DISPATCH_CASE_(F, DB_WEIGHT_FP8_E4M3_BLOCK, __VA_ARGS__)                          \
      default:                                                                             \
        return db_fail(DB_ERR_INTERNAL, "linear: no quantized kernel for weight_format %d", \
                       (int)(format));                                                     \
    }                                                                                      \
  }()

}  // namespace db_lin

#endif /* DECODEBENCH_LINEAR_QUANT_CUH */
