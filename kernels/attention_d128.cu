/* attention_d128.cu: the decode attention kernels of head dim 128 (both dtypes, every heads-per-block
 * count, SIMT and MMA), one translation unit per head dim so that make -j spreads the build. */
#include "attention_instance.cuh"

template int db_attn::attn_kernel<128>(const char *, int, int, int, int, db_attn::AttnKernel *);
