/*
 * decodebench.h: the whole ABI between Go (cgo/) and the kernels library.
 *
 * Plain C only: fixed-width integers, float, double, uint64_t device addresses and params
 * structs. Two libraries implement it: libdecodebench_cuda.so (nvcc, runs on a GPU) and
 * libdecodebench_emu.so (g++ with kernels/emu, runs the same kernel sources on a CPU).
 *
 * Rules: every function returns a db_status (0 = DB_OK); nothing exits or throws across this
 * seam; the library never keeps a pointer the caller passed in; each call names its context (and
 * so its device), so no caller depends on thread-local CUDA state. After a failure,
 * db_last_error_message gives the detail (CUDA error name, kernel name, offending value) for the
 * calling OS thread.
 */
#ifndef DECODEBENCH_H
#define DECODEBENCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: db_linear_params grew the quantized-weight fields (scales, zeros, weight_format,
 * group_size); a caller built for 1 would pass a shorter struct.
 * 3: db_moe_route_params grew the sigmoid routing's fields (correction_bias, groups,
 * groups_kept, scaling), db_moe_group_params the gather's row_weights,
 * db_grouped_linear_params the row and group strides of x and y, and db_kv_cache the fp8
 * cache's per-KV-head scales (k_scales, v_scales), which moves every field after the cache in
 * the params that embed it. */
#define DB_ABI_VERSION 3

/* ---- the kernels' limits ---------------------------------------------------------------------
 * The one definition of every shape limit the kernels have: the planners check them, and Go
 * reads them through cgo (cgo.MaxBatch, ...), so a bad value is refused before any device work
 * with the same numbers. */
#define DB_MAX_BATCH 1024        /* sequences of one linear, attention or KV append call */
#define DB_LINEAR_K_MULTIPLE 8   /* linear k: rows of X and W are read as 16-byte vectors */
#define DB_MAX_SPLIT_K 64        /* K splits of the gemv and tiled linear (fp32 partials: split_k x batch x n x 4 bytes) */
#define DB_MAX_SPLITS 1024       /* KV splits of one attention sequence */
#define DB_MIN_PAGE_SIZE 16      /* tokens per page of a paged KV cache: a power of two */
#define DB_MAX_PAGE_SIZE 256
/* The attention head dims the kernels are compiled for, smallest first. */
#define DB_NUM_HEAD_DIMS 5
#define DB_HEAD_DIM_0 64
#define DB_HEAD_DIM_1 80
#define DB_HEAD_DIM_2 96
#define DB_HEAD_DIM_3 128
#define DB_HEAD_DIM_4 256

/* Status codes. Keep in step with db_status_string and cgo/status.go. */
enum {
  DB_OK = 0,
  DB_ERR_INVALID_ARGUMENT = 1,  /* a null pointer, a bad enum value, a size <= 0 */
  DB_ERR_UNSUPPORTED_SHAPE = 2, /* a shape the kernel cannot compute (e.g. K not a multiple of 8) */
  DB_ERR_NO_DEVICE = 3,         /* no usable device, or the device index is out of range */
  DB_ERR_OUT_OF_MEMORY = 4,     /* device (or emulated) allocation failed */
  DB_ERR_CUDA = 5,              /* a CUDA runtime call failed; the message names it */
  DB_ERR_LAUNCH = 6,            /* a kernel launch or execution failed */
  DB_ERR_EMU_DEADLOCK = 7,      /* emulation: a barrier was not reached by every thread */
  DB_ERR_INTERNAL = 8,          /* a bug in decodebench; the message says where */
  DB_ERR_WORKSPACE = 9          /* the workspace passed is smaller than the call needs */
};

/* Element types of device buffers. */
enum {
  DB_DTYPE_F32 = 0,
  DB_DTYPE_BF16 = 1,
  DB_DTYPE_FP16 = 2,
  DB_DTYPE_U32 = 3, /* raw 32-bit words (bandwidth probes, page tables) */
  DB_DTYPE_FP8_E4M3 = 4 /* OCP fp8 e4m3 (KV caches only): bias 7, largest 448, smallest
                           subnormal 2^-9, S.1111.111 NaN, no infinities */
};

const char *db_status_string(int status);
/* Copies the detail of the calling thread's last failure into buf (always NUL-terminated). */
int db_last_error_message(char *buf, size_t len);
int db_abi_version(void);
/* "cuda" or "emu". */
const char *db_backend_name(void);

/* ---- devices ------------------------------------------------------------------------------ */

typedef struct {
  char name[256];
  int32_t cc_major, cc_minor;
  int32_t sm_count;
  int32_t max_threads_per_block;
  int64_t l2_bytes;
  int64_t smem_per_block_bytes;       /* default limit */
  int64_t smem_per_block_optin_bytes; /* with cudaFuncAttributeMaxDynamicSharedMemorySize */
  int64_t smem_per_sm_bytes;
  uint64_t mem_total_bytes;
  uint64_t mem_free_bytes;
  int32_t sm_clock_khz;  /* cudaDevAttrClockRate (0 where the runtime does not say) */
  int32_t mem_clock_khz; /* cudaDevAttrMemoryClockRate */
  int32_t mem_bus_width_bits;
} db_device_props;

int db_device_count(int32_t *count);
int db_device_props_get(int32_t device, db_device_props *out);

/* ---- contexts, buffers, timers ------------------------------------------------------------ */

/* A context binds one device and one non-default stream; all work of the context goes there. */
typedef struct db_context db_context;
int db_context_create(int32_t device, db_context **out);
int db_context_destroy(db_context *ctx);
int db_synchronize(db_context *ctx);

int db_buffer_alloc(db_context *ctx, uint64_t bytes, uint64_t *dptr);
int db_buffer_free(db_context *ctx, uint64_t dptr);
/* Byte fill (0xFF poisons bf16, fp16 and f32 alike with NaN). */
int db_memset(db_context *ctx, uint64_t dptr, int32_t byte_value, uint64_t bytes);
int db_copy_to_host(db_context *ctx, void *host_dst, uint64_t src, uint64_t bytes);
int db_copy_to_device(db_context *ctx, uint64_t dst, const void *host_src, uint64_t bytes);

/*
 * Fills count elements of dtype at dptr on the device: element i = round_to_dtype(
 * db_hash_uniform(seed, i) * scale) for float types, db_hash64(seed, i) >> 32 for DB_DTYPE_U32.
 * kernels/dbhash.h defines the hash; bench/ref reproduces it bit for bit in Go.
 */
int db_fill_hash(db_context *ctx, uint64_t dptr, uint64_t count, int32_t dtype, uint64_t seed,
                 float scale);

/* Device-side timing with events recorded on the context's stream. */
typedef struct db_timer db_timer;
int db_timer_create(db_context *ctx, db_timer **out);
int db_timer_destroy(db_timer *t);
int db_timer_start(db_timer *t);
int db_timer_stop(db_timer *t);
/* Waits for the stop event, then gives the milliseconds between start and stop. */
int db_timer_elapsed_ms(db_timer *t, float *ms);

/* ---- decode linear: Y[batch x n] = X[batch x k] * W^T, W row-major [n x k] ----------------- */

enum {
  DB_LINEAR_AUTO = 0,  /* chosen by batch: gemv up to 4, mma up to 16, tiled above */
  DB_LINEAR_GEMV = 1,  /* CUDA-core GEMV, small batches, optional split-K */
  DB_LINEAR_MMA = 2,   /* tensor-core skinny GEMM, mma.sync m16n8k16, W straight from DRAM */
  DB_LINEAR_TILED = 3, /* tensor-core GEMM, shared-memory tiles by a cp.async pipeline, split-K */
  DB_LINEAR_CUBLAS = 4 /* cuBLASLt, opened at run time (kernels/cublas.cu): the peer our kernels
                          are measured against; unsupported on the emulator and where
                          libcublasLt cannot be opened */
};

typedef struct {
  uint64_t x, w, y;       /* device addresses; x, w, y all of dtype */
  uint64_t workspace;     /* fp32 split-K partials; see db_linear_plan */
  uint64_t workspace_bytes;
  int32_t batch, n, k;    /* 1 <= batch <= DB_MAX_BATCH, n >= 1, k >= 8, k % DB_LINEAR_K_MULTIPLE == 0 */
  int32_t dtype;          /* DB_DTYPE_BF16 or DB_DTYPE_FP16; fp32 accumulation */
  int32_t variant;        /* DB_LINEAR_* */
  int32_t split_k;        /* 0 = auto; else 1..DB_MAX_SPLIT_K (GEMV and tiled) */
  /* Quantized weights (see "quantized weight formats" below); all 0 for dense weights of dtype. */
  uint64_t scales;        /* the format's scales (0 for DB_WEIGHT_DENSE) */
  uint64_t zeros;         /* DB_WEIGHT_INT4_ZP's packed zero points, else 0 */
  int32_t weight_format;  /* DB_WEIGHT_*; 0 = DB_WEIGHT_DENSE: w holds dtype elements */
  int32_t group_size;     /* weights along K sharing a scale: INT4 / INT4_ZP 32, 64 or 128;
                             MXFP4 32 (0 reads as 32); 0 for the per-channel formats */
} db_linear_params;

/* Validates p, resolves variant and split_k where they are AUTO / 0 (written back into p), and
 * gives the workspace the call needs. A stream-K plan (the tiled variant's automatic choice
 * where no split count fills whole waves) leaves split_k 0, which plans it again, and needs a
 * workspace for the partials of the tiles its blocks share. Unsupported shapes return DB_ERR_UNSUPPORTED_SHAPE with a
 * message that names the value. */
int db_linear_plan(db_context *ctx, db_linear_params *p, uint64_t *workspace_bytes);
int db_linear(db_context *ctx, const db_linear_params *p);

/* ---- quantized weight formats (kernels/linear_quant*.cu) ----------------------------------
 * db_linear_params.weight_format says how w is stored; X and Y stay dtype (bf16 or fp16) and
 * the accumulation fp32. Every value is decoded exactly (each format's values are exact in
 * fp32, bf16 and fp16 alike) and the scales applied in fp32: per output channel after the sum
 * over K, per group after that group's partial sum, so the only roundings are fp32 additions
 * and multiplications by a scale, and the one of the output.
 *
 * Layouts. W is row-major [n][k] in every format: row r of W (output channel r) is
 * row_bytes(k) contiguous bytes, element (r, c) at byte r * row_bytes + c (8-bit formats) or in
 * byte r * row_bytes + c / 2 (4-bit formats), the even element c in the low nibble (bits 0-3)
 * and c + 1 in the high nibble (bits 4-7). No interleaving: a kernel's 16-byte load of a row
 * holds 16 (8-bit) or 32 (4-bit) consecutive elements of K, and a 4-bit load lies inside one
 * group (groups are multiples of 32 and start at multiples of the group). Scales and zero
 * points are separate buffers:
 *
 *   DB_WEIGHT_FP8_E4M3   w: uint8 [n][k] OCP FP8 E4M3 ("e4m3fn": bias 7, no infinities; 0x7F
 *                        and 0xFF are NaN, +-448 the largest, 2^-6 the smallest normal, 2^-9
 *                        the smallest subnormal); scales: f32 [n]. W[r, c] = e4m3(w) * scales[r].
 *   DB_WEIGHT_FP8_E4M3_TENSOR  as FP8_E4M3 with one f32 scale for the tensor: scales: f32 [1].
 *   DB_WEIGHT_INT8       w: int8 [n][k] two's complement; scales: f32 [n] (symmetric).
 *                        W[r, c] = q * scales[r].
 *   DB_WEIGHT_INT4       GPTQ-style symmetric: w: uint8 [n][k / 2] nibbles u in 0..15;
 *                        scales: fp16 [n][k / group_size]. W[r, c] = (u - 8) * scales[r][c / g].
 *   DB_WEIGHT_INT4_ZP    AWQ-style: as INT4 plus zero points z in 0..15, packed along N in
 *                        pairs of rows: zeros: uint8 [n / 2][k / group_size], byte
 *                        zeros[(r / 2) * (k / g) + c / g] holds row r's zero point in its low
 *                        nibble for an even r and its high nibble for an odd r (so n must be
 *                        even). W[r, c] = (u - z) * scales[r][c / g]: u - z spans -15..15.
 *   DB_WEIGHT_MXFP4      OCP microscaling MXFP4, as gpt-oss stores its experts: w: uint8
 *                        [n][k / 2] E2M1 nibbles (sign, 2 exponent bits with bias 1, 1 mantissa
 *                        bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, -0 included);
 *                        scales: uint8 [n][k / 32] E8M0 (2^(e - 127), e in 0..254; 255 is NaN).
 *                        W[r, c] = e2m1(u) * 2^(scales[r][c / 32] - 127). group_size 32.
 *   DB_WEIGHT_FP8_E4M3_BLOCK  fp8 e4m3 with one f32 scale per 128 x 128 tile of W, as DeepSeek-V3
 *                        and Kimi-K2 ship theirs (quantization_config fmt e4m3,
 *                        weight_block_size [128, 128], weight_scale_inv): w: uint8 [n][k] as
 *                        FP8_E4M3; scales: f32 [ceil(n / 128)][ceil(k / 128)], row-major.
 *                        W[r, c] = e4m3(w) * scales[(r / 128) * ceil(k / 128) + c / 128]. The
 *                        last tile of a row or column may be partial (n or k not a multiple of
 *                        128), as in those checkpoints; group_size 0 or 128 (both mean 128 x 128).
 *
 * Shapes a format takes (db_linear_plan refuses the rest with DB_ERR_UNSUPPORTED_SHAPE naming
 * the format and the value): k a multiple of 16 (8-bit formats) or 32 (4-bit: a row is whole
 * 16-byte vectors) and of group_size (FP8_E4M3_BLOCK excepted: partial tiles); group_size 32, 64
 * or 128 (INT4, INT4_ZP), 32 (MXFP4), 0 or 128 (FP8_E4M3_BLOCK), 0 (the others); an even n for INT4_ZP; split_k 0 or 1. Variants: GEMV (batch 1..4 under AUTO)
 * and TILED (a tensor-core kernel: W dequantised to dtype in shared memory, mma.sync
 * m16n8k16); MMA and CUBLAS are refused. w is 16-byte aligned, scales aligned to their
 * element (f32 4, fp16 2, e8m0 1 byte). */
enum {
  DB_WEIGHT_DENSE = 0,
  DB_WEIGHT_FP8_E4M3 = 1,
  DB_WEIGHT_FP8_E4M3_TENSOR = 2,
  DB_WEIGHT_INT8 = 3,
  DB_WEIGHT_INT4 = 4,
  DB_WEIGHT_INT4_ZP = 5,
  DB_WEIGHT_MXFP4 = 6,
  DB_WEIGHT_FP8_E4M3_BLOCK = 7
};
#define DB_NUM_WEIGHT_FORMATS 8
#define DB_MXFP4_GROUP 32
#define DB_FP8_BLOCK 128 /* FP8_E4M3_BLOCK's tile: 128 rows x 128 elements of k */

/*
 * Fills a quantized W, its scales and its zero points on the device from the counter hash
 * (kernels/dbhash.h), as db_fill_hash fills dense buffers; bench/ref reproduces every byte.
 * With h_v(i) = db_hash64(seed, i), h_s(i) = db_hash64(db_hash64(seed, 1), i) and
 * h_z(i) = db_hash64(db_hash64(seed, 2), i), element i = r * k + c of W and element j of the
 * scales or zeros (in their layouts above):
 *   FP8_E4M3(_TENSOR, _BLOCK): w byte = h_v(i) >> 56, except that the two NaN codes become +-448
 *                      (0x7F -> 0x7E, 0xFF -> 0xFE); scales[j] = db_hash_uniform-style value
 *                      U_s(j) * scale (f32), U_s(j) = ((h_s(j) >> 40) - 2^23) * 2^-23.
 *   INT8:              w byte = h_v(i) >> 56; scales[j] = U_s(j) * scale (f32).
 *   INT4, INT4_ZP:     nibble = h_v(i) >> 60; scales[j] = fp16_rn(U_s(j) * scale);
 *                      INT4_ZP zeros byte j = h_z(j) >> 56 (both nibbles).
 *   MXFP4:             nibble = h_v(i) >> 60 (every code, -0 included); scales byte j =
 *                      127 + ilogb(scale) - 2 + (h_s(j) >> 62) (four exponents around scale's).
 * scale must be finite and non-zero (and at most 65504 for INT4's fp16 scales; MXFP4's
 * exponents must stay in 0..254): a NaN, an infinity or a value that would make a NaN or
 * infinite scale is DB_ERR_INVALID_ARGUMENT before anything is written. group_size as
 * db_linear_plan takes it; zeros must be 0 except for INT4_ZP.
 */
typedef struct {
  uint64_t w, scales, zeros; /* device buffers in the format's layout */
  int32_t weight_format;     /* DB_WEIGHT_*, not DENSE (db_fill_hash fills those) */
  int32_t n, k;              /* the shape db_linear will read, with its rules */
  int32_t group_size;
  uint64_t seed;
  float scale;
} db_quant_fill_params;
int db_fill_quantized(db_context *ctx, const db_quant_fill_params *p);

/* ---- probes: the measured ceilings -------------------------------------------------------- */

enum {
  DB_PROBE_READ = 0,  /* result[0..1] = uint32 wrap-around sum of a[0..n) (checked exactly)  */
  DB_PROBE_WRITE = 1, /* a[i] = db_write_word(seed, i) (dbhash.h) for uint32 words         */
  DB_PROBE_COPY = 2,  /* b[i] = a[i]                                                         */
  DB_PROBE_TRIAD = 3, /* a[i] = b[i] + scalar * c[i], float32                                */
  DB_PROBE_FMA_F32 = 4, /* fp32 FMA chains in registers; result gets one value per thread     */
  DB_PROBE_MMA_BF16 = 5 /* mma.sync m16n8k16 bf16 chains; result gets one value per thread   */
};

typedef struct {
  int32_t kind;
  uint64_t a, b, c;       /* device buffers (which ones each kind uses: see above) */
  uint64_t words;         /* memory probes: number of 32-bit words in each buffer */
  uint64_t result;        /* READ: 1 uint32; FMA/MMA: one float per launched thread */
  uint64_t seed;          /* WRITE */
  float scalar;           /* TRIAD */
  int32_t blocks;         /* 0 = auto (enough bytes in flight to fill every SM) */
  int32_t threads;        /* 0 = auto */
  int32_t iterations;     /* compute probes: loop trips per thread */
  /* written by the call: the minimum work the launch did */
  double bytes_moved;
  double flops;
  int32_t blocks_used, threads_used;
} db_probe_params;

int db_probe(db_context *ctx, db_probe_params *p);
/* Validates p and resolves blocks and threads where they are 0 (auto), filling blocks_used,
 * threads_used, bytes_moved and flops as db_probe would, without launching anything: FMA_F32 and
 * MMA_BF16 write blocks_used * threads_used floats to result, so size it from this first. */
int db_probe_plan(db_context *ctx, db_probe_params *p);

/* ---- decode attention over a KV cache (kernels/attention.cu) ------------------------------ */

/*
 * One new query token per sequence against that sequence's cached tokens:
 *   out[b, hq, :] = sum_{t < context_lens[b]} softmax_t(scale * q[b, hq, :] . K[b, hkv, t, :]) V[b, hkv, t, :]
 * with hkv = hq / (q_heads / kv_heads): the consecutive query heads of one group share a KV
 * head (GQA; group 1 is multi-head, kv_heads 1 multi-query). q, out and the caches are all of
 * one dtype (bf16 or fp16); softmax and accumulation are fp32.
 */
enum {
  DB_KV_CONTIGUOUS = 0, /* [batch, kv_heads, capacity, head_dim]                              */
  DB_KV_PAGED = 1       /* [num_pages, kv_heads, page_size, head_dim]; token t of sequence b is
                           in page page_table[b * pages_per_seq + t / page_size] at t % page_size */
};

/* Which decode kernel db_attention runs (db_attention_params.variant). Both give the same
 * result up to rounding; MMA rounds the softmax probabilities to the input dtype before P.V. */
enum {
  DB_ATTENTION_AUTO = 0, /* chosen by the plan: SIMT until a card says otherwise */
  DB_ATTENTION_SIMT = 1, /* fp32 CUDA-core scores and P.V */
  DB_ATTENTION_MMA = 2   /* tensor-core scores and P.V, mma.sync m16n8k16, fp32 accumulation */
};

/* A KV cache: what both db_attention and db_kv_append read or write. */
typedef struct {
  uint64_t k, v;          /* device addresses of the K and V caches, same layout and dtype */
  uint64_t page_table;    /* PAGED: int32 [batch, pages_per_seq] page ids in [0, num_pages) */
  int32_t layout;         /* DB_KV_* */
  int32_t dtype;          /* DB_DTYPE_BF16 or DB_DTYPE_FP16 */
  int32_t kv_heads;       /* >= 1 */
  int32_t head_dim;       /* DB_HEAD_DIM_0 .. DB_HEAD_DIM_{DB_NUM_HEAD_DIMS-1} */
  int32_t capacity;       /* CONTIGUOUS: tokens per (sequence, kv head) the cache holds */
  int32_t page_size;      /* PAGED: tokens per page, a power of two, DB_MIN_PAGE_SIZE..DB_MAX_PAGE_SIZE */
  int32_t num_pages;      /* PAGED: pages in the cache */
  int32_t pages_per_seq;  /* PAGED: the page table's row length */
  /* An FP8_E4M3 cache (dtype) holds e4m3 codes, one byte an element in the same layout; an
   * element's value is code * k_scale (K) or code * v_scale (V): one fp32 scale per tensor,
   * finite and > 0. The appends quantise round(x / scale) to nearest even, saturating to +-448
   * (NaN stays NaN). The activations the cache is used with (q, out, k_new, v_new) are then
   * act_dtype, BF16 or FP16; for a 16-bit cache act_dtype is 0 or its dtype and the scales are
   * not read. */
  float k_scale, v_scale;
  int32_t act_dtype;
  /* An FP8_E4M3 cache's per-KV-head scales: device addresses of f32 [kv_heads] (4-byte aligned),
   * K's and V's, or 0 for none. Head h's elements are code * k_scales[h] (V: v_scales[h]); a 0
   * entry means that head takes the per-tensor scale above. Entries are device memory, which no
   * call validates: each must be 0 or finite and > 0 (a NaN entry makes that head's output NaN).
   * The appends quantise with the same per-head scale. Static scales: no per-token bytes. */
  uint64_t k_scales, v_scales;
} db_kv_cache;

typedef struct {
  uint64_t q;             /* [batch, q_heads, head_dim], the activation dtype (cache.act_dtype for fp8, else cache.dtype) */
  uint64_t out;           /* [batch, q_heads, head_dim], the activation dtype (cache.act_dtype for fp8, else cache.dtype) */
  uint64_t context_lens;  /* int32 [batch]: tokens of each sequence, 1..max_context */
  uint64_t workspace;     /* fp32 split partials; see db_attention_plan (0 when it needs none) */
  uint64_t workspace_bytes;
  db_kv_cache cache;
  int32_t batch;          /* 1..DB_MAX_BATCH */
  int32_t q_heads;        /* a multiple of cache.kv_heads */
  int32_t max_context;    /* >= every context_lens[b]; at most the cache's tokens per sequence.
                             Plans the splits; the kernels clamp each length to it, so a wrong
                             length never reads outside the cache */
  float scale;            /* softmax scale; 0 = 1/sqrt(head_dim) */
  int32_t num_splits;     /* 0 = auto; else 1..1024 KV splits per sequence (written back) */
  int32_t split_tokens;   /* written back: tokens per split (a multiple of the kernel's tile) */
  int32_t variant;        /* DB_ATTENTION_*; AUTO is resolved and written back */
  /* Spans and sinks (0 = none). With L = context_lens[b] (the new token included):
   *   window > 0: the sequence attends only to its last `window` tokens, t >= L - window
   *               (a sliding window: Mistral, Gemma 2/3, gpt-oss's sliding layers);
   *   chunk > 0:  only to the tokens of its own chunk, t >= floor((L - 1) / chunk) * chunk
   *               (Llama 4's chunked attention); window and chunk are not both set;
   *   sinks:      f32 [q_heads], one learned logit per query head that joins the softmax's
   *               denominator and contributes no value (gpt-oss): out = sum_t e^(s_t - m) V_t /
   *               (sum_t e^(s_t - m) + e^(sink - m)). */
  uint64_t sinks;
  int32_t window;
  int32_t chunk;
} db_attention_params;

/*
 * Validates p, resolves variant where it is AUTO and num_splits where it is 0 (written back with
 * split_tokens), and gives the workspace the call needs. Auto splits come from the shape, the
 * device's SM count and the occupancy of the kernel the call launches (blocks per SM), so that
 * the launch fills at least 0.9 of the card's resident blocks where whole tiles allow it (the
 * linear planners' rule), at the least predicted time; splits go down to one kernel tile.
 * With a window or chunk the splits cover the span instead of max_context: at most window (or
 * chunk) tokens plus the kernel's tile less one, since a span is read from the tile holding its
 * first token.
 * Workspace: 0 for one split, else batch * q_heads * num_splits * (head_dim + 2) * 4 bytes of
 * partials and 8 bytes per (sequence, KV head, block of up to 16 query heads) of counters. Its
 * contents need no initialisation (every call tags the counters with its own epoch), and no two
 * calls in flight at once may share it. Unsupported shapes return DB_ERR_UNSUPPORTED_SHAPE and
 * bad values DB_ERR_INVALID_ARGUMENT, with a message naming the value. Device memory is not read:
 * context_lens and page_table are the caller's to check.
 */
int db_attention_plan(db_context *ctx, db_attention_params *p, uint64_t *workspace_bytes);
/* Runs the attention (planning it first if num_splits is 0): one kernel launch, whose last split
 * of each (sequence, KV head) merges the splits' partials. */
int db_attention(db_context *ctx, const db_attention_params *p);


typedef struct {
  uint64_t k_new, v_new;  /* [batch, kv_heads, head_dim], activation dtype: each sequence's new token */
  uint64_t positions;     /* int32 [batch]: where each goes (its context length before the append);
                             positions outside the sequence's capacity are skipped */
  db_kv_cache cache;
  int32_t batch;          /* 1..DB_MAX_BATCH */
} db_kv_append_params;

/* Writes each sequence's new K and V at its position, in either layout. */
int db_kv_append(db_context *ctx, const db_kv_append_params *p);

/* ---- launch geometry (for the static performance gate, cmd/kernels-check) ----------------- */

typedef struct {
  char kernel[128];          /* the kernel's name as cuobjdump shows it, demangled (no args) */
  int32_t grid_x, grid_y, grid_z;
  int32_t block_threads;
  int32_t smem_bytes;        /* dynamic + static shared memory per block */
  int32_t work_units;        /* equal units of work the blocks share (a grid-stride kernel's:
                                each block takes units b, b + blocks, ...); 0: one per block */
} db_launch_info;
/* Plans p (as db_*_plan does) and lists the kernel launches one call makes, in order. For
 * attention: *count = 1 (the decode kernel); out may be NULL with max 0 to ask only the count;
 * a max smaller than the count is DB_ERR_INVALID_ARGUMENT. cuBLAS's launches are not listed. */
int db_linear_launches(db_context *ctx, const db_linear_params *p, db_launch_info *out,
                       int32_t max, int32_t *count);
int db_attention_launches(db_context *ctx, const db_attention_params *p, db_launch_info *out,
                          int32_t max, int32_t *count);

/* ---- launch baseline ---------------------------------------------------------------------- */

/* Launches an empty kernel (1 block of 32 threads) `launches` times (1..1000000) on the
 * context's stream and returns without waiting: bracketed by a timer, (stop - start) /
 * launches is what one launch costs back to back on this card. */
int db_empty_kernel(db_context *ctx, int32_t launches);

/* ---- small ops: everything of a decode step that is not a linear or attention ---------------
 * (kernels/smallops*.cu). bf16 or fp16 in and out, fp32 arithmetic, one rounding per output.
 * Every call takes device pointers and sizes only and reads per-sequence data (token ids,
 * positions) from device arrays: nothing waits on the host, so a step can chain these calls on
 * the context's stream and capture them in a CUDA graph. Rows of 16-bit elements are read and
 * written 16 bytes at a time, so row lengths must be multiples of 8 (DB_SMALLOP_VECTOR) and the
 * buffers 16-byte aligned (int32 and f32 arrays 4-byte), except the logits of db_argmax, whose
 * rows may be any length. */

#define DB_SMALLOP_VECTOR 8         /* elements per 16-byte access: hidden, ffn, n multiples */
#define DB_SMALLOP_MAX_HIDDEN 32768 /* db_rmsnorm: one block keeps a row in registers */
#define DB_MOE_MAX_EXPERTS 384 /* Kimi-K2 */
#define DB_MOE_MAX_GROUPS 32   /* db_moe_route's expert groups: one lane each */
#define DB_MOE_MAX_TOP_K 16

/* out[b, :] = round(table[ids[b], :] * scale) (a plain copy when scale is 0 or 1; Gemma scales
 * by sqrt(hidden)); an id outside [0, vocab) gives a row of NaN, so a wrong token cannot pass
 * unnoticed. */
typedef struct {
  uint64_t table;         /* [vocab, hidden], dtype */
  uint64_t ids;           /* int32 [batch] */
  uint64_t out;           /* [batch, hidden], dtype */
  int32_t batch;          /* 1..DB_MAX_BATCH */
  int32_t vocab, hidden;  /* vocab >= 1; hidden a multiple of 8 */
  int32_t dtype;          /* DB_DTYPE_BF16 or DB_DTYPE_FP16 */
  float scale;            /* 0 = 1 */
} db_embedding_params;
int db_embedding(db_context *ctx, const db_embedding_params *p);

/*
 * RMSNorm, fused with the residual add where residual is not 0:
 *   s = round(x + residual); residual = s (in place); out = round(s / rms(s) * w')
 * and without a residual s = x. rms(s) = sqrt(mean(s^2) + eps); w' = weight, or 1 + weight when
 * unit_offset is 1 (Gemma). out may be x (in place); it may not be residual.
 */
typedef struct {
  uint64_t x, residual, weight, out; /* [batch, hidden] except weight [hidden]; one dtype */
  int32_t batch;          /* 1..DB_MAX_BATCH */
  int32_t hidden;         /* a multiple of 8, at most DB_SMALLOP_MAX_HIDDEN */
  float eps;              /* > 0 */
  int32_t unit_offset;    /* 0: w' = w; 1: w' = 1 + w */
  int32_t dtype;
} db_rmsnorm_params;
int db_rmsnorm(db_context *ctx, const db_rmsnorm_params *p);

/* Rotary position embedding: the frequencies and their scaling, as Hugging Face configs state
 * them (rope_theta, rope_scaling, partial_rotary_factor). */
enum {
  DB_ROPE_DEFAULT = 0,     /* inv_freq[i] = theta^(-2i / rotary_dim) */
  DB_ROPE_LINEAR = 1,      /* inv_freq / factor (position interpolation) */
  DB_ROPE_DYNAMIC_NTK = 2, /* for a sequence of L = position + 1 > original_max_positions tokens,
                              theta' = theta * (factor * L / original - (factor - 1))^(d / (d - 2)),
                              d = rotary_dim; each sequence by its own length */
  DB_ROPE_LLAMA3 = 3       /* Llama 3.1: wavelengths above original / low_freq_factor divided by
                              factor, below original / high_freq_factor kept, smooth between */
};
typedef struct {
  float theta;            /* > 0, e.g. 10000 or 500000 */
  int32_t scaling;        /* DB_ROPE_* */
  float factor;           /* LINEAR, DYNAMIC_NTK, LLAMA3: >= 1 */
  float low_freq_factor, high_freq_factor; /* LLAMA3: low < high */
  int32_t original_max_positions;          /* DYNAMIC_NTK, LLAMA3: >= 1 */
  int32_t rotary_dim;     /* even, 0..head_dim: the first rotary_dim elements of each head
                             rotate, the rest pass through (partial rotary; 0 rotates nothing:
                             a layer without rotary, whose q and k are copied) */
} db_rope;

/*
 * Rotary embedding in the neox (half-split) layout, fused with the KV append: element i < r/2
 * of a head pairs with i + r/2 (r = rotary_dim) and the pair turns by position * inv_freq[i].
 * q is rotated in place; k_new is rotated into the cache at each sequence's position and v_new
 * copied beside it (k_new itself is left as it was). Angles are reduced in double precision, so
 * they stay accurate at long positions. A sequence whose position is negative or past what its
 * cache holds is skipped entirely (q untouched, nothing written), as db_kv_append skips it.
 */
typedef struct {
  uint64_t q;             /* [batch, q_heads, head_dim], activation dtype, rotated in place */
  uint64_t k_new, v_new;  /* [batch, kv_heads, head_dim], activation dtype */
  uint64_t positions;     /* int32 [batch] */
  db_kv_cache cache;      /* head_dim, kv_heads, dtype and layout as db_kv_append takes them */
  db_rope rope;
  int32_t batch;          /* 1..DB_MAX_BATCH */
  int32_t q_heads;        /* >= 1 */
  /* The fused QKV projection's output read where it lies: row_stride > 0 is the number of
   * elements from one sequence's q, k_new and v_new to the next's (the projection's row,
   * (q_heads + 2 kv_heads) head_dim, with k_new = q + q_heads head_dim and v_new after it); 0:
   * each packed as above. A multiple of 8. */
  int32_t row_stride;
  uint64_t q_out;         /* 0: q is rotated in place; else the rotated q is written here, packed
                             [batch, q_heads, head_dim] (what the attention reads), and q is
                             left as it was. A skipped sequence's q_out is not written */
} db_rope_append_params;
int db_rope_kv_append(db_context *ctx, const db_rope_append_params *p);

/* The gated MLP activation from the fused gate_up projection: gate = gate_up[b, 0:ffn],
 * up = gate_up[b, ffn:2 ffn], out[b, :] = round(act(gate) * up), computed in fp32. */
enum {
  DB_ACT_SILU = 0,      /* silu(g) = g / (1 + exp(-g)): Llama, Mistral, Qwen */
  DB_ACT_GELU_TANH = 1, /* 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))): Gemma */
  DB_ACT_SWIGLU_CLAMP = 2 /* gpt-oss: g' = min(g, limit), u' = clamp(u, -limit, limit),
                             out = (u' + 1) g' sigmoid(alpha g') (alpha 1.702, limit
                             swiglu_limit = 7); gpt-oss interleaves gate and up in its
                             checkpoint, which a loader de-interleaves into this layout */
};
typedef struct {
  uint64_t gate_up;       /* [batch, 2 * ffn], dtype */
  uint64_t out;           /* [batch, ffn], dtype */
  int32_t batch;          /* >= 1 (rows: a mixture of experts passes batch * top_k) */
  int32_t ffn;            /* a multiple of 8 */
  int32_t activation;     /* DB_ACT_* */
  int32_t dtype;
  float limit, alpha;     /* SWIGLU_CLAMP: both > 0 (finite); the other activations ignore them */
} db_gated_act_params;
int db_gated_act(db_context *ctx, const db_gated_act_params *p);

/* y[b, :] = round(y[b, :] + bias), in place. */
typedef struct {
  uint64_t y;             /* [batch, n], dtype */
  uint64_t bias;          /* [n], dtype */
  int32_t batch, n;       /* batch >= 1; n a multiple of 8 */
  int32_t dtype;
} db_bias_add_params;
int db_bias_add(db_context *ctx, const db_bias_add_params *p);

/* Greedy sampling: ids[b] = the index of the largest logits[b, :], the lowest index on a tie
 * (a NaN counts as larger than any number, as torch.argmax has it). Rows of any length: the
 * kernel finds each row's 16-byte boundary itself. Each row is cut into num_splits slices that
 * separate blocks reduce to the workspace; a second launch picks each row's winner. */
typedef struct {
  uint64_t logits;        /* [batch, vocab], dtype; the buffer 16-byte aligned, rows anywhere */
  uint64_t ids;           /* int32 [batch] */
  uint64_t workspace;     /* batch * num_splits * 8 bytes when num_splits > 1 (see the plan) */
  uint64_t workspace_bytes;
  int32_t batch;          /* 1..DB_MAX_BATCH */
  int32_t vocab;          /* >= 1 */
  int32_t dtype;
  int32_t num_splits;     /* 0 = auto (enough blocks to fill the card); else 1..1024 */
} db_argmax_params;
/* Validates p, resolves num_splits where it is 0 (written back) and gives the workspace. */
int db_argmax_plan(db_context *ctx, db_argmax_params *p, uint64_t *workspace_bytes);
int db_argmax(db_context *ctx, const db_argmax_params *p);

/*
 * Mixture of experts, in three calls around the expert linears:
 *   db_moe_route:   router logits -> each token's top_k experts and their weights (fp32);
 *   db_moe_group:   the batch * top_k (token, expert) slots grouped by expert: counts,
 *                   offsets, the permutation, and optionally the token rows gathered in
 *                   expert order for the expert linears;
 *   db_moe_combine: out[t, :] = round(sum_j weight[t, j] * y[row of slot (t, j), :]).
 * A slot is s = token * top_k + j. Ties between equal router scores go to the lower expert.
 */
enum {
  DB_MOE_SOFTMAX_TOPK = 0, /* softmax over all experts, then the top k of the probabilities
                              (Mixtral, Qwen-MoE, OLMoE; renormalise for norm_topk_prob) */
  DB_MOE_TOPK_SOFTMAX = 1, /* top k of the logits, then a softmax over those k (gpt-oss) */
  DB_MOE_SIGMOID_TOPK = 2, /* DeepSeek-V3, Kimi-K2, GLM-4.5 (noaux_tc): scores s = sigmoid(logit);
                              the choice is on s + correction_bias, limited to the groups_kept
                              of groups expert groups with the largest sums of their two best
                              biased scores (the other groups' experts are never chosen); the
                              weights are the chosen s, divided by their sum (+ 1e-20) when
                              renormalize */
  DB_MOE_TOPK_SIGMOID = 3  /* Llama 4: top k of the logits, weight sigmoid(logit) rounded to
                              dtype; Llama 4 scales each expert's input by it (db_moe_group's
                              row_weights) and sums the outputs unweighted (db_moe_combine
                              without topk_weights) */
};
typedef struct {
  uint64_t logits;        /* [batch, experts], dtype */
  uint64_t topk_ids;      /* int32 [batch, top_k], best first */
  uint64_t topk_weights;  /* f32 [batch, top_k] */
  int32_t batch;          /* 1..DB_MAX_BATCH */
  int32_t experts;        /* 1..DB_MOE_MAX_EXPERTS */
  int32_t top_k;          /* 1..min(experts, DB_MOE_MAX_TOP_K) */
  int32_t mode;           /* DB_MOE_* */
  int32_t renormalize;    /* SOFTMAX_TOPK, SIGMOID_TOPK: 1 divides the k weights by their sum */
  int32_t dtype;
  uint64_t correction_bias; /* SIGMOID_TOPK: f32 [experts] added to the scores for the choice
                               alone (e_score_correction_bias), or 0 for none */
  int32_t groups;         /* SIGMOID_TOPK: expert groups (n_group), 0 or 1 for no limit; else
                             2..DB_MOE_MAX_GROUPS dividing experts into groups of 2 or more */
  int32_t groups_kept;    /* topk_group: 1..groups, enough groups for top_k experts */
  float scaling;          /* every mode: the weights are multiplied by it at the end
                             (routed_scaling_factor); 0 means 1 */
} db_moe_route_params;
int db_moe_route(db_context *ctx, const db_moe_route_params *p);

typedef struct {
  uint64_t topk_ids;      /* int32 [batch * top_k] (from db_moe_route) */
  uint64_t expert_counts; /* int32 [experts]: slots per expert */
  uint64_t expert_offsets;/* int32 [experts + 1]: exclusive prefix sum of the counts */
  uint64_t sorted_slots;  /* int32 [batch * top_k]: row r of the expert order holds slot
                             sorted_slots[r]; within an expert, slots ascend */
  uint64_t slot_rows;     /* int32 [batch * top_k]: the inverse, slot -> row (-1 for an expert id
                             outside [0, experts), which is dropped) */
  uint64_t x;             /* optional [batch, hidden], dtype: 0 skips the gather */
  uint64_t x_sorted;      /* [batch * top_k, hidden]: x_sorted[r] = x[sorted_slots[r] / top_k] */
  int32_t batch, top_k, experts;
  int32_t hidden;         /* the gather's row length, a multiple of 8 */
  int32_t dtype;
  uint64_t row_weights;   /* optional f32 [batch * top_k]: x_sorted[r] = round(x[token] *
                             row_weights[slot]) (Llama 4 weighs the experts' input); 0: a copy */
} db_moe_group_params;
int db_moe_group(db_context *ctx, const db_moe_group_params *p);

typedef struct {
  uint64_t y_sorted;      /* [batch * top_k, hidden], dtype: the expert outputs in expert order */
  uint64_t slot_rows;     /* int32 [batch * top_k] (from db_moe_group); -1 contributes nothing */
  uint64_t topk_weights;  /* f32 [batch, top_k], or 0: every weight 1 (Llama 4, whose weights
                             scaled the experts' input) */
  uint64_t out;           /* [batch, hidden], dtype */
  int32_t batch, top_k;
  int32_t hidden;         /* a multiple of 8 */
  int32_t dtype;
} db_moe_combine_params;
int db_moe_combine(db_context *ctx, const db_moe_combine_params *p);

/* ---- a whole decode step: graphs, device-side counters, the experts' linears ---------------
 * Optional functions: the Go side looks each up on first use (cgo/launches.go), so a library
 * without them still loads and a step says which is missing. */

/* A CUDA graph of calls on one context's stream. Between db_graph_begin and db_graph_end every
 * call on ctx that launches work is recorded, not run (CUDA stream capture; the emulator
 * records the launches and replays them in order); calls that would wait for the device or
 * copy to or from the host (timers, db_synchronize, db_copy_to_host/device) fail while
 * capturing, as do db_buffer_alloc and db_buffer_free. Arguments are fixed at capture: what must
 * change between replays (token ids, positions, lengths) lives in device arrays the captured
 * kernels read. Beginning twice, ending without a capture, launching into a capture, and
 * launching or destroying a destroyed graph (or one of another context) are
 * DB_ERR_INVALID_ARGUMENT; a capture that a failed device call invalidated makes db_graph_end
 * fail. kernels/README.md, "Graphs", has the details. */
typedef struct db_graph db_graph;
int db_graph_begin(db_context *ctx);
int db_graph_end(db_context *ctx, db_graph **out);
int db_graph_launch(db_context *ctx, db_graph *g); /* asynchronous, on the context's stream */
int db_graph_destroy(db_context *ctx, db_graph *g);

/* dptr[i] += delta for 0 <= i < count (int32, on the stream): advances a step's positions and
 * context lengths on the device, so a replayed graph needs no host update. */
int db_add_i32(db_context *ctx, uint64_t dptr, int32_t count, int32_t delta);

/*
 * The expert linears of a mixture of experts over exactly the rows routed to each expert: for
 * every expert e and row r in [expert_offsets[e], expert_offsets[e + 1]):
 *   y[r, :] = x[r, :] W_e^T (+ bias_e),  W_e = w + e * n * k elements, bias_e = bias + e * n
 * (x in expert order, as db_moe_group gathers it). The offsets are read on the device, so the
 * call is graph safe; an expert no row is routed to is not read. fp32 accumulation. Offsets
 * are clamped to [0, rows] (a wrong one never reads outside x or writes outside y); a row no
 * expert takes is not written. x and w 16-byte aligned, y and bias 2-byte, the offsets 4-byte;
 * n at most 65535 * 16. kernels/README.md, "Grouped linear", has the launch.
 */
typedef struct {
  uint64_t x;              /* [rows, k], dtype */
  uint64_t w;              /* [experts, n, k], dtype */
  uint64_t bias;           /* [experts, n], dtype, or 0 */
  uint64_t y;              /* [rows, n], dtype */
  uint64_t expert_offsets; /* int32 [experts + 1] (db_moe_group's) */
  int32_t rows;            /* batch * top_k: the rows x and y hold, 1..DB_MAX_BATCH * DB_MOE_MAX_TOP_K */
  int32_t experts;         /* 1..DB_MOE_MAX_EXPERTS */
  int32_t n, k;            /* n >= 1, k a multiple of DB_LINEAR_K_MULTIPLE */
  int32_t dtype;           /* DB_DTYPE_BF16 or DB_DTYPE_FP16 */
  /* Strides in elements, 0 for the dense layout (x_row_stride k, y_row_stride n, group strides
   * rows * k and rows * n). With expert_offsets 0 the call is `experts` groups of `rows` rows
   * each, no routing (MLA's absorbed per-head projections: group g a head, row r a sequence):
   *   y(g, r, :) = x(g, r, :) W_g^T (+ bias_g),  x(g, r, :) at x + r * x_row_stride + g * x_group_stride,
   *   y(g, r, :) at y + r * y_row_stride + g * y_group_stride,
   * so a head's slice of a wider row is read and written where it lies. With expert_offsets
   * the rows are in expert order as above: row r at x + r * x_row_stride, y + r * y_row_stride,
   * and the group strides must be 0. x strides are multiples of 8 (16-byte loads); every stride
   * is 0..2^31 - 1 elements. */
  int64_t x_row_stride, x_group_stride;
  int64_t y_row_stride, y_group_stride;
  /* Quantized experts ("quantized weight formats" above; all 0 for dense weights of dtype):
   * w, scales and zeros hold `experts` matrices of one layout each, expert e's at e times one
   * matrix's bytes from the base (w: n * row_bytes(k); scales and zeros as the format gives them
   * for an n x k matrix, e.g. MXFP4 n * k / 32 bytes of scales, FP8_E4M3 4 * n). The shape
   * rules are db_linear_plan's for the format; the tensor-core kernel takes no quantized format,
   * so these always run on the CUDA-core kernel (each 16-byte W load decoded in registers and
   * used by up to 8 token rows). bias stays dtype [experts, n]. */
  uint64_t scales;        /* the format's scales, experts of them (0 for DB_WEIGHT_DENSE) */
  uint64_t zeros;         /* DB_WEIGHT_INT4_ZP's zero points, experts of them, else 0 */
  int32_t weight_format;  /* DB_WEIGHT_*; 0 = DB_WEIGHT_DENSE: w holds dtype elements */
  int32_t group_size;     /* as db_linear_params.group_size */
} db_grouped_linear_params;
int db_grouped_linear(db_context *ctx, const db_grouped_linear_params *p);

/* ---- multi-head latent attention (kernels/attention_mla.cu) --------------------------------
 * DeepSeek-V2/V3 and Kimi-K2 decode in the absorbed form: the query of every head is projected
 * into the latent space (q_nope W_UK, then its rotary part q_pe), every head of a sequence
 * attends over that sequence's one latent cache, and the output (still latent, before W_UV) is
 *   out[b, h, 0:512] = sum_{t < context_lens[b]} softmax_t(scale * q[b, h, :] . c[b, t, :]) c[b, t, 0:512]
 * where a cache row c[b, t] is [c_kv (DB_MLA_LATENT_DIM) | k_pe (DB_MLA_ROPE_DIM)]: the scores
 * read all 576 elements, the values the first 512. q, out and the cache are of one dtype (bf16
 * or fp16); scores, softmax and accumulation are fp32 on the tensor cores, the probabilities
 * rounded to the input dtype before P.V (as DB_ATTENTION_MMA does).
 * Optional functions (cgo/mla.go looks each up on first use). */
#define DB_MLA_LATENT_DIM 512 /* kv_lora_rank */
#define DB_MLA_ROPE_DIM 64    /* qk_rope_head_dim */
#define DB_MLA_QK_DIM 576     /* a query head and a cache row: latent, then rotary key */
#define DB_MLA_V_DIM 512      /* an output head: the latent */
#define DB_MLA_MAX_HEADS 128  /* query heads of one call (DeepSeek-V3 and Kimi-K2 have 128 and 64) */

/*
 * The latent cache is a db_kv_cache with k the rows, v 0 (the values are the rows' first 512
 * elements, not a second cache), kv_heads 1 and head_dim DB_MLA_QK_DIM:
 *   CONTIGUOUS [batch, capacity, 576];  PAGED [num_pages, page_size, 576] with the page table of
 *   db_kv_cache (token t of sequence b in page page_table[b * pages_per_seq + t / page_size]).
 */
typedef struct {
  uint64_t q;             /* [batch, q_heads, DB_MLA_QK_DIM], cache.dtype */
  uint64_t out;           /* [batch, q_heads, DB_MLA_V_DIM], cache.dtype */
  uint64_t context_lens;  /* int32 [batch]: tokens of each sequence, 1..max_context */
  uint64_t workspace;     /* fp32 split partials; see db_mla_attention_plan (0 when it needs none) */
  uint64_t workspace_bytes;
  db_kv_cache cache;      /* the latent cache, as above */
  int32_t batch;          /* 1..DB_MAX_BATCH */
  int32_t q_heads;        /* 1..DB_MLA_MAX_HEADS */
  int32_t max_context;    /* >= every context_lens[b]; at most the cache's tokens per sequence */
  float scale;            /* softmax scale, > 0 and required: DeepSeek's softmax_scale is
                             mscale^2 / sqrt(qk_nope_head_dim + qk_rope_head_dim) (yarn), not
                             1/sqrt(576) */
  int32_t num_splits;     /* 0 = auto; else 1..DB_MAX_SPLITS KV splits per sequence (written back) */
  int32_t split_tokens;   /* written back: tokens per split (a multiple of 32) */
} db_mla_attention_params;

/* Validates p, resolves num_splits where it is 0 (written back with split_tokens) from the shape,
 * the SM count and the kernel's occupancy, as db_attention_plan does, and gives the workspace:
 * 0 for one split, else batch * q_heads * num_splits * (DB_MLA_V_DIM + 2) * 4 bytes of partials
 * and 8 bytes per (sequence, block of 16 query heads) of counters, needing no initialisation
 * (epoch-tagged, as db_attention's); no two calls in flight may share it. */
int db_mla_attention_plan(db_context *ctx, db_mla_attention_params *p, uint64_t *workspace_bytes);
/* One kernel launch (planning first if num_splits is 0); the last split of each (sequence,
 * head block) merges the splits' partials. */
int db_mla_attention(db_context *ctx, const db_mla_attention_params *p);
/* db_attention_launches for db_mla_attention: one launch. */
int db_mla_attention_launches(db_context *ctx, const db_mla_attention_params *p, db_launch_info *out,
                              int32_t max, int32_t *count);

/* Writes each sequence's new latent row (c_kv and the rotated k_pe, DB_MLA_QK_DIM elements) at
 * its position; positions outside the sequence's capacity, and page ids outside the cache, are
 * skipped. db_kv_append does not serve: its head dims are the GQA list, and it writes a V row
 * beside every K row, which the latent cache does not have. */
typedef struct {
  uint64_t kv_new;        /* [batch, DB_MLA_QK_DIM], cache.dtype */
  uint64_t positions;     /* int32 [batch] */
  db_kv_cache cache;      /* the latent cache, as for db_mla_attention */
  int32_t batch;          /* 1..DB_MAX_BATCH */
} db_mla_kv_append_params;
int db_mla_kv_append(db_context *ctx, const db_mla_kv_append_params *p);

/*
 * What an MLA decode step does between its projections and the attention
 * (kernels/smallops_mla.cu), in one launch: for each sequence b at position positions[b],
 *   c    = kv_a[b, 0:512] (kv_a_proj's latent), k_pe = kv_a[b, 512:576];
 *   row  = [ round(c / rms(c) * kv_norm) | round(rope(k_pe, position)) ]  -> the latent cache
 *   q_out[b, h, 512:576] = round(rope(q_pe[b, h], position))           for every query head h
 * rms(c) = sqrt(mean(c^2) + eps) (kv_a_layernorm); rope is db_rope_kv_append's neox rotation
 * with rotary_dim DB_MLA_ROPE_DIM (DB_ROPE_DEFAULT frequencies only). q_out[b, h, 0:512] (the
 * absorbed q_nope, written by the grouped linear) is not touched. A sequence whose position is
 * negative or past the cache's capacity is skipped entirely, as db_mla_kv_append skips it.
 * Element loads: the op moves about 17 KB a sequence at DeepSeek-V3's 128 heads, so its launch,
 * not its bandwidth, is its cost. Optional (cgo/mla_step.go looks it up on first use).
 */
typedef struct {
  uint64_t kv_a;          /* [batch, kv_a_row_stride], cache.dtype: latent then k_pe */
  uint64_t kv_norm;       /* [DB_MLA_LATENT_DIM], cache.dtype: kv_a_layernorm's weight */
  uint64_t q_pe;          /* head h of sequence b's rotary part (DB_MLA_ROPE_DIM elements) at
                             q_pe + b * q_pe_row_stride + h * q_pe_head_stride elements */
  uint64_t q_out;         /* [batch, q_heads, DB_MLA_QK_DIM], cache.dtype: the attention's q */
  uint64_t positions;     /* int32 [batch] */
  db_kv_cache cache;      /* the latent cache, CONTIGUOUS [batch, capacity, DB_MLA_QK_DIM] */
  db_rope rope;           /* DB_ROPE_DEFAULT, rotary_dim DB_MLA_ROPE_DIM */
  float eps;              /* > 0 */
  int32_t batch;          /* 1..DB_MAX_BATCH */
  int32_t q_heads;        /* 1..DB_MLA_MAX_HEADS */
  int32_t kv_a_row_stride;   /* elements from one sequence's kv_a row to the next (0: DB_MLA_QK_DIM) */
  int32_t q_pe_row_stride;   /* >= 1 (q_b_proj's row: q_heads (nope + rope)) */
  int32_t q_pe_head_stride;  /* >= DB_MLA_ROPE_DIM */
} db_mla_rope_append_params;
int db_mla_rope_append(db_context *ctx, const db_mla_rope_append_params *p);

/* ---- recurrent layers: Gated DeltaNet (Qwen3-Next, Qwen3.5 linear_attention) and Mamba-2
 * (Nemotron-H M blocks), one decode token a call (kernels/recurrent_conv.cu, gdn.cu, mamba2.cu).
 * Activations bf16 or fp16 (one dtype a call), recurrent states fp32, arithmetic fp32, one
 * rounding per output. Rows of 16-bit elements are read 16 bytes at a time: every width and
 * stride below is a multiple of DB_SMALLOP_VECTOR and the 16-bit buffers 16-byte aligned (f32
 * per-head arrays 4-byte, states 16-byte). A state is read once and written once a call.
 * Optional functions (cgo/recurrent.go looks each up on first use). */
#define DB_CONV_MAX_KERNEL 8   /* db_conv1d_update: taps (linear_conv_kernel_dim, conv_kernel: 4) */
#define DB_GDN_MAX_HEAD_DIM 256 /* db_gdn_step: head_k_dim and head_v_dim */
#define DB_MAMBA2_MAX_STATE 256 /* db_mamba2_step: ssm_state_size */
#define DB_MAMBA2_MAX_HEAD_DIM 1024 /* db_mamba2_step: mamba_head_dim */
#define DB_GATED_NORM_MAX_GROUP 16384 /* db_gated_rmsnorm: one block keeps a group in registers */

/*
 * Depthwise causal conv1d, one new input a sequence, with its rolling state:
 *   y[c] = act(bias[c] + sum_{j < K-1} weight[j, c] state[b, j, c] + weight[K-1, c] x[b, c])
 *   state[b, 0:K-2, :] = state[b, 1:K-1, :]; state[b, K-2, :] = x[b, :]
 * (state[b, j] is the input K-1-j steps back, oldest first; a new sequence's state is zeros).
 * weight is tap-major [K, channels] (Hugging Face's conv1d.weight [channels, 1, K] transposed
 * once at load). act: DB_CONV_ACT_NONE or DB_CONV_ACT_SILU. out may be x (in place).
 */
enum { DB_CONV_ACT_NONE = 0, DB_CONV_ACT_SILU = 1 };
typedef struct {
  uint64_t x;             /* [batch, x_row_stride]: the new inputs, channels of them a row */
  uint64_t state;         /* [batch, K-1, channels], dtype: updated in place */
  uint64_t weight;        /* [K, channels], dtype */
  uint64_t bias;          /* [channels], dtype; 0 = none (Qwen3-Next has none, Nemotron-H has) */
  uint64_t out;           /* [batch, out_row_stride], dtype */
  int32_t batch;          /* 1..DB_MAX_BATCH */
  int32_t channels;       /* a multiple of 8 */
  int32_t kernel;         /* K: 2..DB_CONV_MAX_KERNEL */
  int32_t x_row_stride;   /* elements from one sequence's x to the next; 0 = channels */
  int32_t out_row_stride; /* 0 = channels */
  int32_t activation;     /* DB_CONV_ACT_* */
  int32_t dtype;
} db_conv1d_update_params;
int db_conv1d_update(db_context *ctx, const db_conv1d_update_params *p);

/*
 * The gated delta rule, one token, for every value head h of every sequence b (Hugging Face's
 * torch_recurrent_gated_delta_rule with use_qk_l2norm_in_kernel). Key head hk = h / (v_heads /
 * k_heads) (q and k repeated over value heads as repeat_interleave does):
 *   q' = q[b, hk] / sqrt(|q|^2 + 1e-6) * scale,   k' = k[b, hk] / sqrt(|k|^2 + 1e-6)
 *   g = -exp(A_log[h]) * softplus(a[b, h] + dt_bias[h]),   beta = sigmoid(b_gate[b, h])
 *   S = state[b, h] (head_k_dim x head_v_dim, fp32, row i = key dim i)
 *   S = S * exp(g);   S += k' (beta (v[b, h] - S^T k'))^T;   out[b, h] = S^T q'
 * state is updated in place. softplus(x) = log(1 + exp(x)), x for x > 20 (torch's threshold).
 */
typedef struct {
  uint64_t q, k;          /* head hk of sequence b at q + b * qkv_row_stride + hk * head_k_dim */
  uint64_t v;             /* head h of sequence b at v + b * qkv_row_stride + h * head_v_dim */
  uint64_t a, b_gate;     /* [batch, ab_row_stride], dtype: in_proj_a / in_proj_b outputs, one a head */
  uint64_t A_log, dt_bias; /* f32 [v_heads] */
  uint64_t state;         /* f32 [batch, v_heads, head_k_dim, head_v_dim], in place */
  uint64_t out;           /* [batch, v_heads, head_v_dim], dtype */
  int32_t batch;          /* 1..DB_MAX_BATCH */
  int32_t k_heads, v_heads; /* v_heads a multiple of k_heads */
  int32_t head_k_dim, head_v_dim; /* multiples of 8, at most DB_GDN_MAX_HEAD_DIM */
  int32_t qkv_row_stride; /* elements from one sequence's q (k, v) to the next, a multiple of 8
                             (the conv's output row: 2 k_heads head_k_dim + v_heads head_v_dim);
                             0 = packed: q, k [batch, k_heads, head_k_dim], v [batch, v_heads, head_v_dim] */
  int32_t ab_row_stride;  /* elements from one sequence's a (b_gate) to the next; 0 = v_heads */
  float scale;            /* 0 = 1 / sqrt(head_k_dim) */
  int32_t dtype;
} db_gdn_step_params;
int db_gdn_step(db_context *ctx, const db_gdn_step_params *p);
/* db_gdn_step's launch (grid, threads): for the static gate's waves. */
int db_gdn_step_launches(db_context *ctx, const db_gdn_step_params *p, db_launch_info *out, int32_t max,
                         int32_t *count);

/*
 * Gated RMSNorm over groups of group_size elements (every row of width = groups group_size):
 *   norm_before_gate 1 (Qwen3-Next's RMSNormGated): out = x / rms(x) * w * silu(z)
 *   norm_before_gate 0 (Mamba-2's, norm_before_gate=False): s = x * silu(z); out = s / rms(s) * w
 * rms over the group, sqrt(mean + eps). w = weight[0:group_size] for every group when
 * shared_weight is 1 (Qwen3-Next: one head_v_dim weight for all heads), else weight[width]
 * (Mamba-2: d_inner). out may be x.
 */
typedef struct {
  uint64_t x;             /* [batch, width] packed, dtype */
  uint64_t z;             /* [batch, z_row_stride], dtype */
  uint64_t weight;        /* [group_size] or [width], dtype */
  uint64_t out;           /* [batch, width], dtype */
  int32_t batch;          /* 1..DB_MAX_BATCH */
  int32_t groups;         /* >= 1 a row */
  int32_t group_size;     /* a multiple of 8, at most DB_GATED_NORM_MAX_GROUP */
  int32_t z_row_stride;   /* 0 = width */
  int32_t shared_weight;  /* 0 or 1 */
  int32_t norm_before_gate; /* 0 or 1 */
  float eps;              /* > 0 */
  int32_t dtype;
} db_gated_rmsnorm_params;
int db_gated_rmsnorm(db_context *ctx, const db_gated_rmsnorm_params *p);

/* The gated attention's output gate (Qwen3-Next, Qwen3.5 attn_output_gate):
 *   out[b, h, :] = o[b, h, :] * sigmoid(gate[b * gate_row_stride + h * gate_head_stride + :])
 * (q_proj's output holds [q | gate] per head: gate = q_proj + head_dim, head stride 2 head_dim).
 * out may be o. */
typedef struct {
  uint64_t o;             /* [batch, heads, head_dim], dtype */
  uint64_t gate;          /* as above, dtype */
  uint64_t out;           /* [batch, heads, head_dim], dtype */
  int32_t batch;          /* 1..DB_MAX_BATCH */
  int32_t heads, head_dim; /* head_dim a multiple of 8 */
  int32_t gate_row_stride; /* 0 = heads head_dim */
  int32_t gate_head_stride; /* 0 = head_dim */
  int32_t dtype;
} db_sigmoid_gate_params;
int db_sigmoid_gate(db_context *ctx, const db_sigmoid_gate_params *p);

/* relu(x)^2, the non-gated MLP activation of Nemotron-H's - blocks (a NaN stays NaN). out may be x. */
typedef struct {
  uint64_t x, out;        /* [batch, n], dtype */
  int32_t batch;          /* 1..DB_MAX_BATCH */
  int32_t n;              /* a multiple of 8 */
  int32_t dtype;
} db_relu2_params;
int db_relu2(db_context *ctx, const db_relu2_params *p);

/*
 * Mamba-2's selective-state update, one token (mamba_ssm's selective_state_update with dt_bias,
 * dt_softplus and z applied by the gated norm instead), for every head h of every sequence b;
 * group gr = h / (heads / n_groups):
 *   dt = clamp(softplus(dt_in[b, h] + dt_bias[h]), dt_min, dt_max)   (time_step_limit)
 *   dA = exp(dt * -exp(A_log[h]))
 *   state[b, h, p, n] = state[b, h, p, n] * dA + dt * B[b, gr, n] * x[b, h, p]
 *   y[b, h, p] = sum_n state[b, h, p, n] * C[b, gr, n] + D[h] * x[b, h, p]
 * state is fp32 [batch, heads, head_dim, state_size] (Hugging Face's ssm_state), in place.
 * Then db_gated_rmsnorm (norm_before_gate 0, group_size heads head_dim / n_groups) with z.
 */
typedef struct {
  uint64_t x;             /* head h of sequence b at x + b * x_row_stride + h * head_dim (the conv's output) */
  uint64_t B, C;          /* group gr at B + b * x_row_stride + gr * state_size (likewise C) */
  uint64_t dt;            /* [batch, dt_row_stride], dtype: one a head */
  uint64_t A_log, D, dt_bias; /* f32 [heads] */
  uint64_t state;         /* f32 [batch, heads, head_dim, state_size], in place */
  uint64_t y;             /* [batch, heads, head_dim], dtype */
  int32_t batch;          /* 1..DB_MAX_BATCH */
  int32_t heads, n_groups; /* heads a multiple of n_groups */
  int32_t head_dim;       /* a multiple of 8, at most DB_MAMBA2_MAX_HEAD_DIM */
  int32_t state_size;     /* a multiple of 8, at most DB_MAMBA2_MAX_STATE */
  int32_t x_row_stride;   /* elements from one sequence's x (B, C) to the next, a multiple of 8;
                             0 = packed: x [batch, heads, head_dim], B and C [batch, n_groups, state_size] */
  int32_t dt_row_stride;  /* 0 = heads */
  float dt_min, dt_max;   /* time_step_limit: 0 <= dt_min <= dt_max (dt_max may be +inf) */
  int32_t dtype;
} db_mamba2_step_params;
int db_mamba2_step(db_context *ctx, const db_mamba2_step_params *p);
int db_mamba2_step_launches(db_context *ctx, const db_mamba2_step_params *p, db_launch_info *out, int32_t max,
                            int32_t *count);

#ifdef __cplusplus
}
#endif
#endif /* DECODEBENCH_H */
