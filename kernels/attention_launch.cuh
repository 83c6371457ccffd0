/*
 * attention_launch.cuh: what the attention planner (attention.cu) knows of one decode kernel
 * instantiation, and the per-head-dim entry point that each attention_d<D>.cu compiles
 * (attention_instance.cuh), so that the 70 decode kernels build in five translation units.
 */
#ifndef DECODEBENCH_ATTENTION_LAUNCH_CUH
#define DECODEBENCH_ATTENTION_LAUNCH_CUH

#include "common.cuh"

namespace db_attn {

struct AttnArgs;

/* One decode kernel instantiation (element type, head dim, heads per block, variant). */
struct AttnKernel {
  char name[128];     /* as cuobjdump shows it, demangled, without the argument list */
  int threads;        /* per block */
  int tile;           /* tokens per tile; split_tokens is a multiple of it */
  size_t smem;        /* dynamic shared memory of a launch (the kernels use no static one) */
  int sm90_registers; /* ptxas's count for sm_90 (the emulator's occupancy answer uses it) */
  /* resident blocks per SM on ctx's device (cached per device after the first call) */
  int (*occupancy)(db_context *ctx, int *blocks_per_sm);
  int (*launch)(db_context *ctx, dim3 grid, const AttnArgs &args);
};

/* Describes the kernel of (variant DB_ATTENTION_SIMT or _MMA, activation dtype, cache dtype (the
 * same, or DB_DTYPE_FP8_E4M3), gp heads per block) for head
 * dim D; an unsupported gp is DB_ERR_UNSUPPORTED_SHAPE naming fn and the value. Defined in
 * attention_instance.cuh, instantiated once per head dim by attention_d<D>.cu. */
template <int D>
int attn_kernel(const char *fn, int variant, int dtype, int cache_dtype, int gp, AttnKernel *out);
extern template int attn_kernel<64>(const char *, int, int, int, int, AttnKernel *);
extern template int attn_kernel<80>(const char *, int, int, int, int, AttnKernel *);
extern template int attn_kernel<96>(const char *, int, int, int, int, AttnKernel *);
extern template int attn_kernel<128>(const char *, int, int, int, int, AttnKernel *);
extern template int attn_kernel<256>(const char *, int, int, int, int, AttnKernel *);

}  // namespace db_attn

#endif  // DECODEBENCH_ATTENTION_LAUNCH_CUH
