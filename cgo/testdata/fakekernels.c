/*
 * fakekernels.c: a stand-in kernels library for the tests of package cgo. It implements
 * decodebench.h on the host in the plainest way (device memory is malloc, the linear layer a
 * naive loop), so the seam itself (loading, status codes, thread-local error detail, buffers,
 * params conversion) is tested without the real emulator. Build variants:
 *   -DFAKE_BACKEND='"cuda"' -DFAKE_DEVICES=0   a GPU library that sees no device
 *   -DFAKE_ABI_VERSION=99                      a library of another ABI
 *   -DFAKE_OMIT_KV_APPEND                      a library missing one function
 *   -DFAKE_LINEAR_SKIP=i                       a linear layer that never writes Y[i]
 *   -DFAKE_LINEAR_BIAS=x                       a linear layer that adds x to every output
 *   -DFAKE_PROBE_BUG                           probes that get one word or value wrong
 *   -DFAKE_LAUNCHES                            the optional functions (launch lists, empty kernel)
 *   -DFAKE_NO_CUBLAS                           the cublas variant's plan fails (no libcublasLt)
 *   -DFAKE_CUBLAS_SLOWER=x                     the timer reports x times its time after a cublas
 *                                              linear call (a peer x times slower than ours)
 * Faults chosen at run time by FAKEKERNELS_FAULT, so that one build serves a whole suite of
 * fault-injection tests (a subprocess or an in-process command reads it at each call):
 *   nan             the linear layer writes NaN to Y[0]
 *   unwritten       the linear layer never writes the last element of Y
 *   timer-nan       the timer reports NaN milliseconds
 *   timer-zero      the timer reports 0 ms
 *   timer-negative  the timer reports -0.25 ms
 *   timer-tiny      the timer reports 1e-20 ms (a speed no card reaches)
 * FAKEKERNELS_NAME replaces the device's name (e.g. "NVIDIA H200", to give it a datasheet).
 * cgotest.FakeLibrary builds it for tests.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbhash.h"
#include "decodebench.h"

#ifndef FAKE_BACKEND
#define FAKE_BACKEND "emu"
#endif
#ifndef FAKE_DEVICES
#define FAKE_DEVICES 1
#endif
#ifndef FAKE_ABI_VERSION
#define FAKE_ABI_VERSION DB_ABI_VERSION
#endif

static __thread char last_error[512];

/* fault reports whether FAKEKERNELS_FAULT names f. */
static int fault(const char *f) {
  const char *v = getenv("FAKEKERNELS_FAULT");
  return v && strcmp(v, f) == 0;
}

static int fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static int fail(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

const char *db_status_string(int status) {
  switch (status) {
    case DB_OK: return "ok";
    case DB_ERR_INVALID_ARGUMENT: return "invalid argument";
    case DB_ERR_UNSUPPORTED_SHAPE: return "unsupported shape";
    case DB_ERR_NO_DEVICE: return "no device";
    case DB_ERR_OUT_OF_MEMORY: return "out of memory";
    default: return "other error";
  }
}
int db_last_error_message(char *buf, size_t len) {
  if (!buf || !len) return DB_ERR_INVALID_ARGUMENT;
  snprintf(buf, len, "%s", last_error);
  return DB_OK;
}
int db_abi_version(void) { return FAKE_ABI_VERSION; }
const char *db_backend_name(void) { return FAKE_BACKEND; }

int db_device_count(int32_t *count) {
  if (!count) return fail(DB_ERR_INVALID_ARGUMENT, "count is NULL");
  *count = FAKE_DEVICES;
  return DB_OK;
}
int db_device_props_get(int32_t device, db_device_props *out) {
  if (device < 0 || device >= FAKE_DEVICES) return fail(DB_ERR_NO_DEVICE, "device %d of %d", device, FAKE_DEVICES);
  memset(out, 0, sizeof *out);
  const char *name = getenv("FAKEKERNELS_NAME");
  if (name && *name)
    snprintf(out->name, sizeof out->name, "%s", name);
  else
    snprintf(out->name, sizeof out->name, "fake device %d", device);
  out->cc_major = 9;
  out->sm_count = 4;
  out->max_threads_per_block = 1024;
  out->l2_bytes = 1 << 20;
  out->mem_total_bytes = 1ull << 30;
  out->mem_free_bytes = 1ull << 29;
  return DB_OK;
}

struct db_context { int32_t device; long live; };
int db_context_create(int32_t device, db_context **out) {
  if (device < 0 || device >= FAKE_DEVICES) return fail(DB_ERR_NO_DEVICE, "device %d of %d", device, FAKE_DEVICES);
  *out = calloc(1, sizeof **out);
  (*out)->device = device;
  return DB_OK;
}
int db_context_destroy(db_context *ctx) {
  if (!ctx) return fail(DB_ERR_INVALID_ARGUMENT, "ctx is NULL");
  if (ctx->live) return fail(DB_ERR_INTERNAL, "%ld buffers still live", ctx->live);
  free(ctx);
  return DB_OK;
}
int db_synchronize(db_context *ctx) { return ctx ? DB_OK : fail(DB_ERR_INVALID_ARGUMENT, "ctx is NULL"); }

int db_buffer_alloc(db_context *ctx, uint64_t bytes, uint64_t *dptr) {
  if (bytes > (1ull << 32)) return fail(DB_ERR_OUT_OF_MEMORY, "%llu bytes", (unsigned long long)bytes);
  void *p = malloc(bytes);
  if (!p) return fail(DB_ERR_OUT_OF_MEMORY, "malloc");
  *dptr = (uint64_t)(uintptr_t)p;
  ctx->live++;
  return DB_OK;
}
int db_buffer_free(db_context *ctx, uint64_t dptr) {
  free((void *)(uintptr_t)dptr);
  ctx->live--;
  return DB_OK;
}
int db_memset(db_context *ctx, uint64_t dptr, int32_t v, uint64_t bytes) {
  (void)ctx;
  memset((void *)(uintptr_t)dptr, v, bytes);
  return DB_OK;
}
int db_copy_to_host(db_context *ctx, void *dst, uint64_t src, uint64_t bytes) {
  (void)ctx;
  memcpy(dst, (void *)(uintptr_t)src, bytes);
  return DB_OK;
}
int db_copy_to_device(db_context *ctx, uint64_t dst, const void *src, uint64_t bytes) {
  (void)ctx;
  memcpy((void *)(uintptr_t)dst, src, bytes);
  return DB_OK;
}

static uint16_t to_bf16(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  b += 0x7FFF + ((b >> 16) & 1);
  return (uint16_t)(b >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t b = (uint32_t)h << 16;
  float f;
  memcpy(&f, &b, 4);
  return f;
}
static uint16_t to_fp16(float f) {
  _Float16 h = (_Float16)f;
  uint16_t b;
  memcpy(&b, &h, 2);
  return b;
}
static float from_fp16(uint16_t b) {
  _Float16 h;
  memcpy(&h, &b, 2);
  return (float)h;
}

int db_fill_hash(db_context *ctx, uint64_t dptr, uint64_t count, int32_t dtype, uint64_t seed, float scale) {
  (void)ctx;
  for (uint64_t i = 0; i < count; i++) {
    float v = db_hash_uniform(seed, i) * scale;
    switch (dtype) {
      case DB_DTYPE_F32: ((float *)(uintptr_t)dptr)[i] = v; break;
      case DB_DTYPE_BF16: ((uint16_t *)(uintptr_t)dptr)[i] = to_bf16(v); break;
      case DB_DTYPE_FP16: ((uint16_t *)(uintptr_t)dptr)[i] = to_fp16(v); break;
      case DB_DTYPE_U32: ((uint32_t *)(uintptr_t)dptr)[i] = (uint32_t)(db_hash64(seed, i) >> 32); break;
      default: return fail(DB_ERR_INVALID_ARGUMENT, "dtype %d", dtype);
    }
  }
  return DB_OK;
}

/* The variant of the last linear call, so that FAKE_CUBLAS_SLOWER can time the peer apart. */
static int last_linear_variant = DB_LINEAR_AUTO;

struct db_timer { int started, stopped; };
int db_timer_create(db_context *ctx, db_timer **out) {
  (void)ctx;
  *out = calloc(1, sizeof **out);
  return DB_OK;
}
int db_timer_destroy(db_timer *t) { free(t); return DB_OK; }
int db_timer_start(db_timer *t) { t->started = 1; return DB_OK; }
int db_timer_stop(db_timer *t) {
  if (!t->started) return fail(DB_ERR_INVALID_ARGUMENT, "timer stopped before it started");
  t->stopped = 1;
  return DB_OK;
}
int db_timer_elapsed_ms(db_timer *t, float *ms) {
  if (!t->stopped) return fail(DB_ERR_INVALID_ARGUMENT, "timer not stopped");
  *ms = 0.25f;
#ifdef FAKE_CUBLAS_SLOWER
  if (last_linear_variant == DB_LINEAR_CUBLAS) *ms *= (float)(FAKE_CUBLAS_SLOWER);
#endif
  if (fault("timer-nan")) *ms = NAN;
  if (fault("timer-zero")) *ms = 0;
  if (fault("timer-negative")) *ms = -0.25f;
  if (fault("timer-tiny")) *ms = 1e-20f;
  return DB_OK;
}

int db_linear_plan(db_context *ctx, db_linear_params *p, uint64_t *workspace_bytes) {
  (void)ctx;
  if (p->batch < 1 || p->batch > DB_MAX_BATCH) return fail(DB_ERR_UNSUPPORTED_SHAPE, "batch=%d outside 1..%d", p->batch, DB_MAX_BATCH);
  if (p->n < 1) return fail(DB_ERR_UNSUPPORTED_SHAPE, "n=%d < 1", p->n);
  if (p->k < 8 || p->k % 8) return fail(DB_ERR_UNSUPPORTED_SHAPE, "k=%d is not a positive multiple of 8", p->k);
  if (p->dtype != DB_DTYPE_BF16 && p->dtype != DB_DTYPE_FP16) return fail(DB_ERR_INVALID_ARGUMENT, "dtype=%d", p->dtype);
#ifdef FAKE_NO_CUBLAS
  if (p->variant == DB_LINEAR_CUBLAS)
    return fail(DB_ERR_UNSUPPORTED_SHAPE, "linear: variant cublas: libcublasLt.so.12 not found (fake)");
#endif
  if (p->variant == DB_LINEAR_AUTO) p->variant = p->batch <= 8 ? DB_LINEAR_GEMV : DB_LINEAR_MMA;
  if (p->split_k == 0) p->split_k = p->variant == DB_LINEAR_GEMV && p->k >= 64 ? 2 : 1;
  *workspace_bytes = p->split_k > 1 ? (uint64_t)p->split_k * p->batch * p->n * 4 : 0;
  return DB_OK;
}
int db_linear(db_context *ctx, const db_linear_params *in) {
  db_linear_params p = *in;
  uint64_t ws;
  int st = db_linear_plan(ctx, &p, &ws);
  if (st) return st;
  if (p.workspace_bytes < ws) return fail(DB_ERR_WORKSPACE, "workspace %llu < %llu bytes", (unsigned long long)p.workspace_bytes, (unsigned long long)ws);
  last_linear_variant = p.variant;
  const uint16_t *x = (const uint16_t *)(uintptr_t)p.x, *w = (const uint16_t *)(uintptr_t)p.w;
  uint16_t *y = (uint16_t *)(uintptr_t)p.y;
  const int nan_out = fault("nan"), unwritten = fault("unwritten");
  for (int b = 0; b < p.batch; b++)
    for (int j = 0; j < p.n; j++) {
      float acc = 0;
      for (int k = 0; k < p.k; k++) {
        float xv = p.dtype == DB_DTYPE_BF16 ? from_bf16(x[b * p.k + k]) : from_fp16(x[b * p.k + k]);
        float wv = p.dtype == DB_DTYPE_BF16 ? from_bf16(w[(size_t)j * p.k + k]) : from_fp16(w[(size_t)j * p.k + k]);
        acc += xv * wv;
      }
#ifdef FAKE_LINEAR_BIAS
      acc += (float)(FAKE_LINEAR_BIAS);
#endif
#ifdef FAKE_LINEAR_SKIP
      if (b * p.n + j == (FAKE_LINEAR_SKIP)) continue;
#endif
      if (unwritten && b == p.batch - 1 && j == p.n - 1) continue;
      if (nan_out && b == 0 && j == 0) acc = NAN;
      y[b * p.n + j] = p.dtype == DB_DTYPE_BF16 ? to_bf16(acc) : to_fp16(acc);
    }
  return DB_OK;
}

int db_probe_plan(db_context *ctx, db_probe_params *p) {
  (void)ctx;
  p->blocks_used = p->blocks ? p->blocks : 4;
  p->threads_used = p->threads ? p->threads : 128;
  p->flops = p->kind >= DB_PROBE_FMA_F32 ? 2.0 * p->iterations * p->blocks_used * p->threads_used : 0;
  switch (p->kind) {
    case DB_PROBE_READ: case DB_PROBE_WRITE: p->bytes_moved = 4.0 * p->words; break;
    case DB_PROBE_COPY: p->bytes_moved = 8.0 * p->words; break;
    case DB_PROBE_TRIAD: p->bytes_moved = 12.0 * p->words; break;
    default: p->bytes_moved = 0;
  }
  return DB_OK;
}

int db_probe(db_context *ctx, db_probe_params *p) {
  (void)ctx;
  last_linear_variant = DB_LINEAR_AUTO;
  uint32_t *a = (uint32_t *)(uintptr_t)p->a, *b = (uint32_t *)(uintptr_t)p->b;
  p->blocks_used = p->blocks ? p->blocks : 4;
  p->threads_used = p->threads ? p->threads : 128;
  switch (p->kind) {
    case DB_PROBE_READ: {
      uint32_t s = 0;
      for (uint64_t i = 0; i < p->words; i++) s += a[i];
#ifdef FAKE_PROBE_BUG
      s++;
#endif
      *(uint32_t *)(uintptr_t)p->result = s;
      p->bytes_moved = 4.0 * p->words;
      return DB_OK;
    }
    case DB_PROBE_WRITE:
      for (uint64_t i = 0; i < p->words; i++) a[i] = db_write_word(p->seed, i);
#ifdef FAKE_PROBE_BUG
      a[p->words - 1] ^= 1;
#endif
      p->bytes_moved = 4.0 * p->words;
      return DB_OK;
    case DB_PROBE_COPY:
      memcpy(b, a, 4 * p->words);
#ifdef FAKE_PROBE_BUG
      b[0] ^= 1;
#endif
      p->bytes_moved = 8.0 * p->words;
      return DB_OK;
    case DB_PROBE_TRIAD: {
      float *fa = (float *)a, *fb = (float *)b, *fc = (float *)(uintptr_t)p->c;
      for (uint64_t i = 0; i < p->words; i++) fa[i] = fmaf(p->scalar, fc[i], fb[i]);
#ifdef FAKE_PROBE_BUG
      fa[1] = fb[1] + p->scalar * fc[1] + 1.0f;
#endif
      p->bytes_moved = 12.0 * p->words;
      return DB_OK;
    }
    case DB_PROBE_FMA_F32:
    case DB_PROBE_MMA_BF16: {
      float *r = (float *)(uintptr_t)p->result;
      for (int i = 0; i < p->blocks_used * p->threads_used; i++) r[i] = 1.0f;
      p->flops = 2.0 * p->iterations * p->blocks_used * p->threads_used;
      return DB_OK;
    }
  }
  return fail(DB_ERR_INVALID_ARGUMENT, "probe kind %d", p->kind);
}

int db_attention_plan(db_context *ctx, db_attention_params *p, uint64_t *workspace_bytes) {
  (void)ctx;
  if (p->cache.head_dim != 64 && p->cache.head_dim != 128)
    return fail(DB_ERR_UNSUPPORTED_SHAPE, "head_dim=%d", p->cache.head_dim);
  if (p->num_splits == 0) p->num_splits = 2;
  p->split_tokens = (p->max_context + p->num_splits - 1) / p->num_splits;
  *workspace_bytes = (uint64_t)p->batch * p->q_heads * p->num_splits * (p->cache.head_dim + 2) * 4;
  return DB_OK;
}
int db_attention(db_context *ctx, const db_attention_params *p) {
  last_linear_variant = DB_LINEAR_AUTO;
  db_attention_params q = *p;
  uint64_t ws;
  return db_attention_plan(ctx, &q, &ws);
}
#ifndef FAKE_OMIT_KV_APPEND
int db_kv_append(db_context *ctx, const db_kv_append_params *p) {
  (void)ctx;
  return p->batch > 0 ? DB_OK : fail(DB_ERR_INVALID_ARGUMENT, "batch=%d", p->batch);
}
#endif

#ifdef FAKE_LAUNCHES
/* Fixed geometry: a linear call is one launch of ceil(n / 8) blocks of 128 threads, and one
 * more (a split-K reduce) when it splits; an attention call is one launch of
 * (batch x kv_heads, num_splits) blocks of 128 threads with 39472 bytes of shared memory. */
static void fake_launch(db_launch_info *l, const char *kernel, int32_t gx, int32_t gy, int32_t threads, int32_t smem) {
  memset(l, 0, sizeof *l);
  snprintf(l->kernel, sizeof l->kernel, "%s", kernel);
  l->grid_x = gx, l->grid_y = gy, l->grid_z = 1, l->block_threads = threads, l->smem_bytes = smem;
}
int db_linear_launches(db_context *ctx, const db_linear_params *p, db_launch_info *out, int32_t max, int32_t *count) {
  db_linear_params q = *p;
  uint64_t ws;
  int st = db_linear_plan(ctx, &q, &ws);
  if (st) return st;
  if (max < 2) return fail(DB_ERR_INVALID_ARGUMENT, "max=%d < 2", max);
  fake_launch(&out[0], "linear_gemv_kernel<__nv_bfloat16, 1>", (q.n + 7) / 8, q.split_k, 128, 0);
  *count = 1;
  if (q.split_k > 1) fake_launch(&out[(*count)++], "linear_splitk_reduce_kernel<__nv_bfloat16>", 64, 1, 256, 0);
  return DB_OK;
}
int db_attention_launches(db_context *ctx, const db_attention_params *p, db_launch_info *out, int32_t max,
                          int32_t *count) {
  db_attention_params q = *p;
  uint64_t ws;
  int st = db_attention_plan(ctx, &q, &ws);
  if (st) return st;
  if (max < 1) return fail(DB_ERR_INVALID_ARGUMENT, "max=%d < 1", max);
  fake_launch(&out[0], "attention_decode_kernel<__nv_bfloat16, 128, 4>", q.batch * q.cache.kv_heads, q.num_splits, 128, 39472);
  *count = 1;
  return DB_OK;
}
int db_empty_kernel(db_context *ctx, int32_t launches) {
  (void)ctx;
  last_linear_variant = DB_LINEAR_AUTO;
  return launches >= 1 ? DB_OK : fail(DB_ERR_INVALID_ARGUMENT, "launches=%d", launches);
}
#endif

/* small ops: resolvable, but the fake computes none of them */
int db_argmax_plan(db_context *ctx, db_argmax_params *p, uint64_t *workspace_bytes) {
  (void)ctx;
  if (p->num_splits == 0) p->num_splits = 1;
  *workspace_bytes = 0;
  return DB_OK;
}
int db_embedding(db_context *ctx, const db_embedding_params *p) {
  (void)ctx;
  (void)p;
  return fail(DB_ERR_INTERNAL, "the fake kernels library does not run small ops");
}
int db_rmsnorm(db_context *ctx, const db_rmsnorm_params *p) {
  (void)ctx;
  (void)p;
  return fail(DB_ERR_INTERNAL, "the fake kernels library does not run small ops");
}
int db_rope_kv_append(db_context *ctx, const db_rope_append_params *p) {
  (void)ctx;
  (void)p;
  return fail(DB_ERR_INTERNAL, "the fake kernels library does not run small ops");
}
int db_gated_act(db_context *ctx, const db_gated_act_params *p) {
  (void)ctx;
  (void)p;
  return fail(DB_ERR_INTERNAL, "the fake kernels library does not run small ops");
}
int db_bias_add(db_context *ctx, const db_bias_add_params *p) {
  (void)ctx;
  (void)p;
  return fail(DB_ERR_INTERNAL, "the fake kernels library does not run small ops");
}
int db_argmax(db_context *ctx, const db_argmax_params *p) {
  (void)ctx;
  (void)p;
  return fail(DB_ERR_INTERNAL, "the fake kernels library does not run small ops");
}
int db_moe_route(db_context *ctx, const db_moe_route_params *p) {
  (void)ctx;
  (void)p;
  return fail(DB_ERR_INTERNAL, "the fake kernels library does not run small ops");
}
int db_moe_group(db_context *ctx, const db_moe_group_params *p) {
  (void)ctx;
  (void)p;
  return fail(DB_ERR_INTERNAL, "the fake kernels library does not run small ops");
}
int db_moe_combine(db_context *ctx, const db_moe_combine_params *p) {
  (void)ctx;
  (void)p;
  return fail(DB_ERR_INTERNAL, "the fake kernels library does not run small ops");
}
