/*
 * attention_instance.cuh: db_attn::attn_kernel<D>, the host side of one head dim's decode
 * kernels: their launch geometry, occupancy and launch. Included only by attention_d<D>.cu, each
 * of which instantiates its own D.
 */
#ifndef DECODEBENCH_ATTENTION_INSTANCE_CUH
#define DECODEBENCH_ATTENTION_INSTANCE_CUH

#include <atomic>
#include <cstdio>
#include <type_traits>

#include "attention_kernels.cuh"
#include "attention_launch.cuh"
#include "attention_mma_kernels.cuh"

namespace {

/*
 * ptxas's sm_90 registers a thread (nvcc 11.8, -O3; the larger of bf16 and fp16, which differ by
 * at most 8), read from build/kernels-ptxas.log. The emulator's occupancy answer is computed
 * from them, so that an emulated plan with the card's SM count (DB_EMU_SM_COUNT) makes the
 * card's split choice; on CUDA the runtime's occupancy query replaces them. When a kernel
 * changes, update the row from the log (kernels/README.md, "Attention", says how).
 */
constexpr int attn_sm90_registers(bool mma, int D, int GP) {
  const int i = D == 64 ? 0 : D == 80 ? 1 : D == 96 ? 2 : D == 128 ? 3 : 4;
  if (mma) {
    /*                  D:   64   80   96  128  256 */
    constexpr int gp8[] = {101, 106, 106, 102, 128};
    constexpr int gp16[] = {103, 113, 125, 138, 209};
    return GP <= 8 ? gp8[i] : gp16[i];
  }
  /*                   GP:    1    2    4    8   16  (SIMT) */
  constexpr int regs[5][5] = {{86, 100, 126, 168, 192},  /* D 64 */
                              {80, 92, 124, 168, 189},   /* D 80 */
                              {80, 110, 135, 168, 189},  /* D 96 */
                              {94, 96, 126, 168, 189},   /* D 128 */
                              {87, 101, 128, 168, 191}};  /* D 256 */
  return regs[i][GP == 1 ? 0 : GP == 2 ? 1 : GP == 4 ? 2 : GP == 8 ? 3 : 4];
}

template <class E>
constexpr const char *attn_dtype_type_name() {
  return std::is_same_v<E, __nv_bfloat16> ? "__nv_bfloat16" : "__half";
}

/* One decode kernel instantiation; Mma selects attention_decode_mma_kernel (GP 8 or 16), Fp8 the
 * kernels over an fp8 e4m3 cache (attention_decode_fp8_kernel, attention_decode_mma_fp8_kernel). */
template <class E, int D, int GP, bool Mma, bool Fp8>
struct AttnInstance {
  using CE = std::conditional_t<Fp8, db_attn::E4m3, E>;
  using C = std::conditional_t<Mma, AttnMmaConfig<D, GP, CE>, AttnConfig<D, GP, CE>>;
  static constexpr int kMaxDevices = 64;
  static constexpr const char *kName =
      Mma ? (Fp8 ? "attention_decode_mma_fp8_kernel" : "attention_decode_mma_kernel")
          : (Fp8 ? "attention_decode_fp8_kernel" : "attention_decode_kernel");

  static void (*kernel())(const AttnArgs) {
    if constexpr (Mma && Fp8) return &attention_decode_mma_fp8_kernel<E, D, GP>;
    else if constexpr (Mma) return &attention_decode_mma_kernel<E, D, GP>;
    else if constexpr (Fp8) return &attention_decode_fp8_kernel<E, D, GP>;
    else return &attention_decode_kernel<E, D, GP>;
  }

  /* Raises the kernel's dynamic shared memory limit once per device (the attribute is per
   * device); needed before the occupancy query and the launch alike. */
  static int allow_smem(db_context *ctx) {
    static std::atomic<uint64_t> done{0};
    if (C::kSmemBytes <= 48 * 1024) return DB_OK;
    const uint64_t bit = ctx->device < kMaxDevices ? uint64_t(1) << ctx->device : 0;
    if (bit != 0 && (done.load(std::memory_order_relaxed) & bit)) return DB_OK;
    const cudaError_t e =
        cudaFuncSetAttribute(kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::kSmemBytes);
    if (e != cudaSuccess)
      return db_fail_cuda(e, "cudaFuncSetAttribute(attention decode kernel, MaxDynamicSharedMemorySize)");
    done.fetch_or(bit, std::memory_order_relaxed);
    return DB_OK;
  }

  static int occupancy(db_context *ctx, int *blocks_per_sm) {
    static std::atomic<int> cached[kMaxDevices];
    const bool cacheable = ctx->device >= 0 && ctx->device < kMaxDevices;
    if (cacheable && (*blocks_per_sm = cached[ctx->device].load(std::memory_order_relaxed)) > 0) return DB_OK;
    DB_CHECK(allow_smem(ctx));
    DB_CHECK(db_occupancy(kernel(), C::kThreads, C::kSmemBytes, attn_sm90_registers(Mma, D, GP),
                          kName, blocks_per_sm));
    if (cacheable) cached[ctx->device].store(*blocks_per_sm, std::memory_order_relaxed);
    return DB_OK;
  }

  static int launch(db_context *ctx, dim3 grid, const AttnArgs &args) {
    DB_CHECK(allow_smem(ctx));
    if constexpr (Mma && Fp8)
      return DB_LAUNCH((attention_decode_mma_fp8_kernel<E, D, GP>), grid, dim3(C::kThreads), C::kSmemBytes,
                       ctx->stream, args);
    else if constexpr (Mma)
      return DB_LAUNCH((attention_decode_mma_kernel<E, D, GP>), grid, dim3(C::kThreads), C::kSmemBytes,
                       ctx->stream, args);
    else if constexpr (Fp8)
      return DB_LAUNCH((attention_decode_fp8_kernel<E, D, GP>), grid, dim3(C::kThreads), C::kSmemBytes,
                       ctx->stream, args);
    else
      return DB_LAUNCH((attention_decode_kernel<E, D, GP>), grid, dim3(C::kThreads), C::kSmemBytes,
                       ctx->stream, args);
  }

  static void describe(db_attn::AttnKernel *out) {
    std::snprintf(out->name, sizeof out->name, "(anonymous namespace)::%s<%s, %d, %d>", kName,
                  attn_dtype_type_name<E>(), D, GP);
    out->threads = C::kThreads;
    out->tile = C::kTile;
    out->smem = C::kSmemBytes;
    out->sm90_registers = attn_sm90_registers(Mma, D, GP);
    out->occupancy = &occupancy;
    out->launch = &launch;
  }
};

/* dtype: the activations' (BF16 or FP16); cache_dtype: that, or FP8_E4M3. */
template <int D, int GP, bool Mma>
int attn_describe(const char *fn, int dtype, int cache_dtype, db_attn::AttnKernel *out) {
  if constexpr (Mma && GP != 8 && GP != 16) {
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: the mma kernel serves 8 or 16 heads per block, not %d",
                   fn, GP);
  } else {
    const bool fp8 = cache_dtype == DB_DTYPE_FP8_E4M3;
    if (!fp8 && cache_dtype != dtype)
      return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: cache dtype %d (%s) with activations %s unsupported: want "
                     "the activations' dtype or fp8_e4m3", fn, cache_dtype, db_dtype_name(cache_dtype),
                     db_dtype_name(dtype));
    switch (dtype) {
      case DB_DTYPE_BF16:
        if (fp8) AttnInstance<__nv_bfloat16, D, GP, Mma, true>::describe(out);
        else AttnInstance<__nv_bfloat16, D, GP, Mma, false>::describe(out);
        return DB_OK;
      case DB_DTYPE_FP16:
        if (fp8) AttnInstance<__half, D, GP, Mma, true>::describe(out);
        else AttnInstance<__half, D, GP, Mma, false>::describe(out);
        return DB_OK;
    }
    return db_fail(DB_ERR_UNSUPPORTED_SHAPE, "%s: dtype %d (%s) unsupported: want bf16 or fp16", fn, dtype,
                   db_dtype_name(dtype));
  }
}

}  // namespace

template <int D>
int db_attn::attn_kernel(const char *fn, int variant, int dtype, int cache_dtype, int gp, AttnKernel *out) {
  switch (variant) {
    case DB_ATTENTION_SIMT:
      return DB_DISPATCH_HEADS_PER_BLOCK(fn, gp, GP, attn_describe<D, GP, false>(fn, dtype, cache_dtype, out));
    case DB_ATTENTION_MMA:
      return DB_DISPATCH_HEADS_PER_BLOCK(fn, gp, GP, attn_describe<D, GP, true>(fn, dtype, cache_dtype, out));
  }
  return db_fail(DB_ERR_INVALID_ARGUMENT, "%s: variant %d is not DB_ATTENTION_SIMT 1 or DB_ATTENTION_MMA 2",
                 fn, variant);
}

#endif  // DECODEBENCH_ATTENTION_INSTANCE_CUH
