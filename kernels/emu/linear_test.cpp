// linear_test.cpp: checks the kernels through decodebench.h alone, the way the Go side will:
// inputs from db_fill_hash, references recomputed on the host from dbhash.h in double precision.
// make emu-test runs it on the emulation library (a few seconds); make cuda-test builds the same
// program against the CUDA library for a GPU machine, where it adds decode-sized shapes.
//
//   linear: every variant (and split-K) at awkward shapes, bf16 and fp16, and its launches;
//   probes: READ's exact sum, WRITE / COPY / TRIAD element by element, FMA / MMA finite;
//   errors: the statuses and messages the Go side relies on.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../dbhash.h"
#include "../decodebench.h"

#include "test_check.h"

namespace {


#define MUST(call)                                                                        \
  do {                                                                                    \
    const int status_ = (call);                                                           \
    if (status_ != DB_OK) {                                                               \
      std::printf("FATAL %s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call,                \
                  db_status_string(status_), last_error().c_str());                       \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

/* ---- 16-bit floats, independently of the library: bit rounding for bf16, _Float16 for fp16 ---- */

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t to_fp16(float f) {
  const _Float16 h = (_Float16)f;
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
float from_fp16(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return (float)h;
}

// The value db_fill_hash stores at element i, as a float.
float hashed(int32_t dtype, uint64_t seed, uint64_t i, float scale) {
  const float v = db_hash_uniform(seed, i) * scale;
  return dtype == DB_DTYPE_BF16 ? from_bf16(to_bf16(v)) : from_fp16(to_fp16(v));
}

struct Buffer {
  db_context *ctx;
  uint64_t ptr = 0;
  Buffer(db_context *c, uint64_t bytes) : ctx(c) { MUST(db_buffer_alloc(ctx, bytes, &ptr)); }
  ~Buffer() { db_buffer_free(ctx, ptr); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
};

/* ---- linear ----------------------------------------------------------------------------------- */

bool g_emu = true;  // the emulation library (its device numbers are known)

// One run: y from the library against the double reference. Tolerance: one unit in the last place
// of the output type (the fp32 accumulation may land either side of a rounding boundary) plus
// the fp32 accumulation bound k * 2^-24 * sum |x w|, doubled for tensor cores' unspecified
// accumulation rounding.
void check_linear(db_context *ctx, int32_t dtype, int batch, int n, int k, int32_t variant,
                  int32_t split_k) {
  const uint64_t xseed = 11, wseed = 22;
  const float xscale = 1.0f, wscale = 0.25f;
  Buffer x(ctx, (uint64_t)batch * k * 2), w(ctx, (uint64_t)n * k * 2), y(ctx, (uint64_t)batch * n * 2);
  MUST(db_fill_hash(ctx, x.ptr, (uint64_t)batch * k, dtype, xseed, xscale));
  MUST(db_fill_hash(ctx, w.ptr, (uint64_t)n * k, dtype, wseed, wscale));
  MUST(db_memset(ctx, y.ptr, 0xff, (uint64_t)batch * n * 2));  // NaN where nothing is written

  db_linear_params p{};
  p.x = x.ptr;
  p.w = w.ptr;
  p.y = y.ptr;
  p.batch = batch;
  p.n = n;
  p.k = k;
  p.dtype = dtype;
  p.variant = variant;
  p.split_k = split_k;
  uint64_t ws_bytes = 0;
  MUST(db_linear_plan(ctx, &p, &ws_bytes));
  if (variant != DB_LINEAR_AUTO) EXPECT(p.variant == variant, "plan changed variant %d", p.variant);
  if (split_k) EXPECT(p.split_k == split_k, "plan changed split_k %d", p.split_k);
  // split_k 0 after planning: stream-K, whose workspace holds its split tiles' partials
  EXPECT(p.split_k > 1 ? ws_bytes > 0 : p.split_k == 1 ? ws_bytes == 0 : variant != DB_LINEAR_GEMV,
         "split_k %d workspace %llu", p.split_k, (unsigned long long)ws_bytes);
  Buffer ws(ctx, ws_bytes ? ws_bytes : 16);
  p.workspace = ws_bytes ? ws.ptr : 0;
  p.workspace_bytes = ws_bytes;
  const int status = db_linear(ctx, &p);
  EXPECT(status == DB_OK, "db_linear: %s: %s", db_status_string(status), last_error().c_str());
  std::vector<uint16_t> out((size_t)batch * n);
  MUST(db_copy_to_host(ctx, out.data(), y.ptr, out.size() * 2));

  std::vector<float> xs((size_t)batch * k), wsv((size_t)n * k);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = hashed(dtype, xseed, i, xscale);
  for (size_t i = 0; i < wsv.size(); ++i) wsv[i] = hashed(dtype, wseed, i, wscale);
  const double ulp_bits = dtype == DB_DTYPE_BF16 ? 8 : 11;  // significand bits incl. implicit
  int bad = 0;
  for (int b = 0; b < batch; ++b)
    for (int r = 0; r < n; ++r) {
      double want = 0, magnitude = 0;
      for (int i = 0; i < k; ++i) {
        const double term = (double)xs[(size_t)b * k + i] * wsv[(size_t)r * k + i];
        want += term;
        magnitude += std::fabs(term);
      }
      const uint16_t bits = out[(size_t)b * n + r];
      const double got = dtype == DB_DTYPE_BF16 ? from_bf16(bits) : from_fp16(bits);
      const double ulp = want == 0 ? 0 : std::ldexp(1.0, std::ilogb(want) - (int)ulp_bits + 1);
      const double tol = ulp + 2.0 * k * std::ldexp(magnitude, -24) + 1e-30;
      if (!(std::fabs(got - want) <= tol) && bad++ < 3)
        std::printf("  %s b=%d n=%d k=%d variant=%d split=%d: y[%d][%d] = %.8g, want %.8g\n",
                    dtype == DB_DTYPE_BF16 ? "bf16" : "fp16", batch, n, k, p.variant, p.split_k, b,
                    r, got, want);
    }
  EXPECT(bad == 0, "%s batch=%d n=%d k=%d variant=%d split_k=%d: %d wrong outputs",
         dtype == DB_DTYPE_BF16 ? "bf16" : "fp16", batch, n, k, p.variant, p.split_k, bad);
}

const char *variant_name(int32_t v) {
  switch (v) {
    case DB_LINEAR_AUTO: return "auto";
    case DB_LINEAR_GEMV: return "gemv";
    case DB_LINEAR_MMA: return "mma";
    case DB_LINEAR_TILED: return "tiled";
  }
  return "?";
}

void test_linear(db_context *ctx) {
  int runs = 0;
  auto run = [&](int32_t dtype, int batch, int n, int k, int32_t variant, int32_t split_k) {
    check_linear(ctx, dtype, batch, n, k, variant, split_k);
    ++runs;
  };
  // Every variant at small awkward shapes: n and k tails, k of one 16-byte chunk, a k tile and
  // a chunk (136), batch 1 to past one tile of the skinny kernel.
  for (int32_t dtype : {DB_DTYPE_BF16, DB_DTYPE_FP16})
    for (int batch : {1, 3, 8, 17, 64})
      for (int n : {1, 7, 130})
        for (int k : {8, 136})
          for (int32_t variant : {DB_LINEAR_GEMV, DB_LINEAR_MMA, DB_LINEAR_TILED})
            run(dtype, batch, n, k, variant, 0);
  // Split-K with uneven and empty splits: GEMV (25 chunks in 3 or 30 splits), tiled (3 k tiles
  // in 2, 3, 7 or 64 splits).
  for (int32_t dtype : {DB_DTYPE_BF16, DB_DTYPE_FP16}) {
    for (int batch : {1, 5})
      for (int split : {3, 30}) run(dtype, batch, 7, 200, DB_LINEAR_GEMV, split);
    for (int split : {2, 3, 7, 64}) run(dtype, split == 7 ? 100 : 17, 130, 136, DB_LINEAR_TILED, split);
  }
  // Batches at and past the tiled kernel's tiles (32, 64, 128) up to DB_MAX_BATCH; dtypes
  // alternate to keep the emulated time down.
  int i = 0;
  for (int batch : {33, 100, 255, 256, 257, 1000, DB_MAX_BATCH})
    run(i++ % 2 ? DB_DTYPE_FP16 : DB_DTYPE_BF16, batch, 130, 136, DB_LINEAR_TILED, 0);
  run(DB_DTYPE_BF16, DB_MAX_BATCH, 7, 8, DB_LINEAR_TILED, 0);
  for (int32_t variant : {DB_LINEAR_GEMV, DB_LINEAR_MMA}) {
    run(DB_DTYPE_FP16, DB_MAX_BATCH, 7, 24, variant, 0);
    run(DB_DTYPE_BF16, 257, 33, 72, variant, 0);
  }
  run(DB_DTYPE_FP16, 33, 4099, 136, DB_LINEAR_TILED, 0);  // 33 W tiles, the last of 3 rows
  // Shapes that send warps round their k loops several times with the most warps a block has:
  // GEMV (4 warps, 128 chunks a trip: 513 chunks in 1 or 4 splits), MMA (16 warps on a 7- or
  // 130-row layer under 8 SMs, 65 k-steps), tiled (65 k tiles in one split, or the planner's).
  for (int32_t dtype : {DB_DTYPE_BF16, DB_DTYPE_FP16}) {
    run(dtype, 1, 7, 4104, DB_LINEAR_GEMV, 1);
    run(dtype, 3, 7, 4104, DB_LINEAR_GEMV, 0);
    run(dtype, dtype == DB_DTYPE_BF16 ? 5 : 16, dtype == DB_DTYPE_BF16 ? 7 : 130, 4104,
        DB_LINEAR_MMA, 0);
    run(dtype, 17, 130, 4104, DB_LINEAR_TILED, dtype == DB_DTYPE_BF16 ? 1 : 0);
  }
  // The grid-stride loops: GEMV's 2050 row pairs on the 31 blocks it plans for 8 SMs, MMA's
  // 257 row tiles on 86 blocks of one warp.
  run(DB_DTYPE_BF16, 1, 4099, 136, DB_LINEAR_GEMV, 0);
  run(DB_DTYPE_FP16, 2, 4099, 8, DB_LINEAR_GEMV, 0);
  run(DB_DTYPE_BF16, 9, 4099, 136, DB_LINEAR_MMA, 0);
  // AUTO, including an automatic split-K (7 rows cannot fill even the emulated 8 SMs).
  run(DB_DTYPE_BF16, 3, 7, 2048, DB_LINEAR_AUTO, 0);
  run(DB_DTYPE_BF16, 40, 100, 136, DB_LINEAR_AUTO, 0);
  std::printf("linear: %d runs\n", runs);

  // AUTO's choice by batch; the plan's split and workspace agree.
  db_linear_params p{};
  p.x = p.w = p.y = 256;
  p.n = 7;
  p.k = 2048;
  p.dtype = DB_DTYPE_BF16;
  const struct {
    int batch;
    int32_t variant;
  } autos[] = {{1, DB_LINEAR_GEMV},  {4, DB_LINEAR_GEMV},   {5, DB_LINEAR_MMA},
               {16, DB_LINEAR_MMA},  {17, DB_LINEAR_TILED}, {DB_MAX_BATCH, DB_LINEAR_TILED}};
  for (const auto &a : autos) {
    p.batch = a.batch;
    p.variant = DB_LINEAR_AUTO;
    p.split_k = 0;
    uint64_t ws = 0;
    MUST(db_linear_plan(ctx, &p, &ws));
    EXPECT(p.variant == a.variant, "auto plan at batch %d: %s, want %s", a.batch,
           variant_name(p.variant), variant_name(a.variant));
    EXPECT(p.split_k == 0 ? ws % ((uint64_t)a.batch * 7 * 4) == 0
                          : ws == (p.split_k > 1 ? (uint64_t)p.split_k * a.batch * 7 * 4 : 0),
           "auto plan at batch %d: split %d workspace %llu", a.batch, p.split_k,
           (unsigned long long)ws);
  }
}

// db_linear_launches: the kernel (and the reduce after a split), named as cuobjdump demangles
// them, with the plan's geometry.
void test_linear_launches(db_context *ctx) {
  db_linear_params p{};
  p.x = p.w = p.y = 256;
  p.dtype = DB_DTYPE_BF16;
  db_launch_info info[4];
  int32_t count = -1;
  struct Case {
    int batch, n, k;
    int32_t variant, split_k;
    const char *kernel;
    int launches;
  } cases[] = {
      {1, 4096, 4096, DB_LINEAR_GEMV, 1,
       "(anonymous namespace)::linear_gemv_kernel<__nv_bfloat16, 1, true, 1>", 1},
      {8, 4096, 4096, DB_LINEAR_MMA, 0, "(anonymous namespace)::linear_mma_kernel<__nv_bfloat16, 2>", 1},
      {64, 4096, 4096, DB_LINEAR_TILED, 2,
       "(anonymous namespace)::linear_tiled_kernel<__nv_bfloat16, 64, 4, 2, 4>", 2},
      {1000, 4096, 4096, DB_LINEAR_TILED, 1,
       "(anonymous namespace)::linear_tiled_kernel<__nv_bfloat16, 128, 2, 4, 3>", 1},
  };
  for (const Case &c : cases) {
    p.batch = c.batch;
    p.n = c.n;
    p.k = c.k;
    p.variant = c.variant;
    p.split_k = c.split_k;
    MUST(db_linear_launches(ctx, &p, info, 4, &count));
    EXPECT(count == c.launches, "%s batch %d: %d launches", variant_name(c.variant), c.batch, count);
    if (count < 1) continue;
    EXPECT(std::strcmp(info[0].kernel, c.kernel) == 0, "kernel %s, want %s", info[0].kernel, c.kernel);
    EXPECT(info[0].grid_x >= 1 && info[0].grid_y >= 1 && info[0].grid_z == 1 &&
               info[0].block_threads >= 32 && info[0].smem_bytes >= 0,
           "%s geometry %d,%d,%d x %d, %d bytes", info[0].kernel, info[0].grid_x, info[0].grid_y,
           info[0].grid_z, info[0].block_threads, info[0].smem_bytes);
    if (c.variant == DB_LINEAR_TILED && c.batch == 1000)  // 32 W tiles x 8 batch tiles, 96 KiB
      EXPECT(info[0].grid_x == 256 && info[0].block_threads == 256 && info[0].smem_bytes == 98304,
             "tiled geometry %d x %d, %d bytes", info[0].grid_x, info[0].block_threads,
             info[0].smem_bytes);
    if (count == 2)
      EXPECT(std::strcmp(info[1].kernel,
                         "(anonymous namespace)::linear_splitk_reduce_kernel<__nv_bfloat16>") == 0,
             "second launch %s", info[1].kernel);
  }
  p.variant = DB_LINEAR_TILED;
  p.split_k = 2;
  EXPECT(db_linear_launches(ctx, &p, info, 1, &count) == DB_ERR_INVALID_ARGUMENT,
         "max=1 with two launches");
  p.batch = DB_MAX_BATCH + 1;
  EXPECT(db_linear_launches(ctx, &p, info, 4, &count) == DB_ERR_UNSUPPORTED_SHAPE, "batch 1025");
}

// Decode-sized shapes, on a GPU (the host reference is the slow part: ~1e9 multiply-adds); under
// emulation with DB_TEST_LARGE=1 (about a minute).
void test_linear_large(db_context *ctx) {
  struct Shape {
    int batch, n, k;
  };
  const Shape shapes[] = {{1, 4096, 4096}, {4, 1024, 4096}, {16, 4096, 4096}, {64, 1024, 4096},
                          {256, 512, 2048}, {7, 14336, 512}, {1024, 512, 4096}};
  for (const Shape &s : shapes)
    for (int32_t variant : {DB_LINEAR_AUTO, DB_LINEAR_GEMV, DB_LINEAR_MMA, DB_LINEAR_TILED})
      check_linear(ctx, s.batch % 2 ? DB_DTYPE_FP16 : DB_DTYPE_BF16, s.batch, s.n, s.k, variant,
                   0);
  std::printf("linear (decode sizes): %zu runs\n", sizeof shapes / sizeof shapes[0] * 4);
}

void test_linear_errors(db_context *ctx) {
  Buffer buf(ctx, 1 << 16);
  db_linear_params p{};
  p.x = p.w = p.y = buf.ptr;
  p.batch = 2;
  p.n = 4;
  p.k = 1001;
  p.dtype = DB_DTYPE_BF16;
  int status = db_linear(ctx, &p);
  EXPECT(status == DB_ERR_UNSUPPORTED_SHAPE, "k=1001: %d", status);
  EXPECT(last_error().find("k=1001 is not a multiple of 8") != std::string::npos, "message: %s",
         last_error().c_str());
  p.k = 64;
  p.batch = DB_MAX_BATCH + 1;
  status = db_linear(ctx, &p);
  EXPECT(status == DB_ERR_UNSUPPORTED_SHAPE, "batch=%d: %d", p.batch, status);
  EXPECT(last_error().find("batch=1025 is over the 1024 supported") != std::string::npos,
         "message: %s", last_error().c_str());
  p.batch = 0;
  EXPECT(db_linear(ctx, &p) == DB_ERR_INVALID_ARGUMENT, "batch=0");
  p.batch = 2;
  p.dtype = DB_DTYPE_F32;
  EXPECT(db_linear(ctx, &p) == DB_ERR_INVALID_ARGUMENT, "f32");
  p.dtype = DB_DTYPE_BF16;
  p.x = buf.ptr + 8;
  EXPECT(db_linear(ctx, &p) == DB_ERR_INVALID_ARGUMENT, "misaligned x");
  p.x = buf.ptr;
  p.variant = DB_LINEAR_MMA;
  p.split_k = 2;
  EXPECT(db_linear(ctx, &p) == DB_ERR_INVALID_ARGUMENT, "mma split");
  p.variant = DB_LINEAR_TILED;
  p.split_k = DB_MAX_SPLIT_K + 1;
  status = db_linear(ctx, &p);
  EXPECT(status == DB_ERR_INVALID_ARGUMENT && last_error().find("split_k=65") != std::string::npos,
         "tiled split 65: %d %s", status, last_error().c_str());
  p.variant = 4 + 100;
  p.split_k = 0;
  status = db_linear(ctx, &p);
  EXPECT(status == DB_ERR_INVALID_ARGUMENT && last_error().find("variant=104") != std::string::npos,
         "variant 104: %d %s", status, last_error().c_str());
  p.variant = DB_LINEAR_GEMV;
  p.split_k = 4;
  p.workspace_bytes = 0;
  status = db_linear(ctx, &p);
  EXPECT(status == DB_ERR_WORKSPACE, "no workspace: %d", status);
  EXPECT(last_error().find("needs 128 bytes") != std::string::npos, "message: %s",
         last_error().c_str());
  p.workspace = buf.ptr;
  p.workspace_bytes = 127;
  EXPECT(db_linear(ctx, &p) == DB_ERR_WORKSPACE, "small workspace");
  p.workspace_bytes = 128;
  status = db_linear(ctx, &p);
  EXPECT(status == DB_OK, "workspace: %s", last_error().c_str());
}

/* ---- probes ----------------------------------------------------------------------------------- */

void test_probes(db_context *ctx) {
  const uint64_t words = 4 * 1000 + 4 * 37;  // not a multiple of the threads x unroll sweep
  Buffer a(ctx, words * 4), b(ctx, words * 4), c(ctx, words * 4), result(ctx, 1 << 22);
  std::vector<uint32_t> host(words), got(words);

  // READ: the exact uint32 wrap-around sum.
  MUST(db_fill_hash(ctx, a.ptr, words, DB_DTYPE_U32, 5, 1.0f));
  uint32_t want = 0;
  for (uint64_t i = 0; i < words; ++i) want += host[i] = (uint32_t)(db_hash64(5, i) >> 32);
  for (int32_t threads : {0, 64}) {
    db_probe_params p{};
    p.kind = DB_PROBE_READ;
    p.a = a.ptr;
    p.words = words;
    p.result = result.ptr;
    p.threads = threads;
    MUST(db_probe(ctx, &p));
    uint32_t sum = 0;
    MUST(db_copy_to_host(ctx, &sum, result.ptr, 4));
    EXPECT(sum == want, "READ sum 0x%08x, want 0x%08x", sum, want);
    EXPECT(p.bytes_moved == words * 4.0 && p.blocks_used > 0 && p.threads_used > 0,
           "READ work %g %d %d", p.bytes_moved, p.blocks_used, p.threads_used);
  }

  // WRITE: word i = db_write_word(seed, i).
  db_probe_params p{};
  p.kind = DB_PROBE_WRITE;
  p.a = b.ptr;
  p.words = words;
  p.seed = 77;
  MUST(db_probe(ctx, &p));
  MUST(db_copy_to_host(ctx, got.data(), b.ptr, words * 4));
  int bad = 0;
  for (uint64_t i = 0; i < words; ++i) bad += got[i] != db_write_word(77, i);
  EXPECT(bad == 0, "WRITE: %d wrong words", bad);

  // COPY: b = a.
  p = db_probe_params{};
  p.kind = DB_PROBE_COPY;
  p.a = a.ptr;
  p.b = c.ptr;
  p.words = words;
  p.blocks = 3;
  MUST(db_probe(ctx, &p));
  MUST(db_copy_to_host(ctx, got.data(), c.ptr, words * 4));
  EXPECT(std::memcmp(got.data(), host.data(), words * 4) == 0, "COPY differs");
  EXPECT(p.bytes_moved == 2.0 * words * 4 && p.blocks_used == 3, "COPY work");

  // TRIAD: a = b + s * c with one rounding (fmaf).
  MUST(db_fill_hash(ctx, b.ptr, words, DB_DTYPE_F32, 8, 3.0f));
  MUST(db_fill_hash(ctx, c.ptr, words, DB_DTYPE_F32, 9, 2.0f));
  p = db_probe_params{};
  p.kind = DB_PROBE_TRIAD;
  p.a = a.ptr;
  p.b = b.ptr;
  p.c = c.ptr;
  p.words = words;
  p.scalar = 0.75f;
  MUST(db_probe(ctx, &p));
  std::vector<float> triad(words);
  MUST(db_copy_to_host(ctx, triad.data(), a.ptr, words * 4));
  bad = 0;
  for (uint64_t i = 0; i < words; ++i) {
    const float bv = db_hash_uniform(8, i) * 3.0f, cv = db_hash_uniform(9, i) * 2.0f;
    bad += triad[i] != std::fma(0.75f, cv, bv);
  }
  EXPECT(bad == 0, "TRIAD: %d wrong elements", bad);
  EXPECT(p.bytes_moved == 3.0 * words * 4 && p.flops == 2.0 * words, "TRIAD work");

  // FMA and MMA: finite values, one per thread; plan first to size the result.
  for (int32_t kind : {DB_PROBE_FMA_F32, DB_PROBE_MMA_BF16}) {
    p = db_probe_params{};
    p.kind = kind;
    p.result = result.ptr;
    p.iterations = 3;
    p.blocks = kind == DB_PROBE_MMA_BF16 ? 4 : 0;
    MUST(db_probe_plan(ctx, &p));
    const uint64_t threads = (uint64_t)p.blocks_used * p.threads_used;
    EXPECT(threads * 4 <= (1u << 22), "result too small for %llu threads",
           (unsigned long long)threads);
    MUST(db_memset(ctx, result.ptr, 0xff, threads * 4));
    MUST(db_probe(ctx, &p));
    std::vector<float> values(threads);
    MUST(db_copy_to_host(ctx, values.data(), result.ptr, threads * 4));
    int nonfinite = 0;
    for (float v : values) nonfinite += !std::isfinite(v) || v == 0.0f;
    EXPECT(nonfinite == 0, "probe %d: %d non-finite or zero results", kind, nonfinite);
    const double want_flops = kind == DB_PROBE_FMA_F32 ? 2.0 * 8 * 16 * 3 * threads
                                                       : 4096.0 * 4 * 8 * 3 * (threads / 32);
    EXPECT(p.flops == want_flops, "probe %d flops %g want %g", kind, p.flops, want_flops);
  }

  // Errors.
  p = db_probe_params{};
  p.kind = DB_PROBE_READ;
  p.a = a.ptr;
  p.result = result.ptr;
  p.words = 10;
  EXPECT(db_probe(ctx, &p) == DB_ERR_UNSUPPORTED_SHAPE, "words=10");
  EXPECT(last_error().find("words=10") != std::string::npos, "message: %s", last_error().c_str());
  p.words = 8;
  p.threads = 100;
  EXPECT(db_probe(ctx, &p) == DB_ERR_INVALID_ARGUMENT, "threads=100");
  p.threads = 0;
  p.kind = 42;
  EXPECT(db_probe(ctx, &p) == DB_ERR_INVALID_ARGUMENT, "kind=42");
}

void test_api(db_context *ctx) {
  int32_t count = 0;
  MUST(db_device_count(&count));
  db_device_props props{};
  MUST(db_device_props_get(0, &props));
  std::printf("backend %s, device 0: %s, cc %d.%d, %d SMs, L2 %lld bytes, %llu bytes free\n",
              db_backend_name(), props.name, props.cc_major, props.cc_minor, props.sm_count,
              (long long)props.l2_bytes, (unsigned long long)props.mem_free_bytes);
  if (g_emu) {
    EXPECT(count == 1, "count %d", count);
    EXPECT(std::strcmp(props.name, "decodebench host emulation") == 0, "name %s", props.name);
    EXPECT(props.sm_count == 8 && props.l2_bytes == 4 << 20, "props");
  }
  EXPECT(props.sm_count > 0 && props.max_threads_per_block >= 1024 && props.mem_total_bytes > 0,
         "props");
  EXPECT(db_device_props_get(count, &props) == DB_ERR_NO_DEVICE, "device %d", count);
  uint64_t huge = 0;
  EXPECT(db_buffer_alloc(ctx, 1ull << 40, &huge) == DB_ERR_OUT_OF_MEMORY, "1 TiB");
  // Fill: float dtypes round the scaled hash; spot-check bf16 and f32.
  Buffer buf(ctx, 4096);
  MUST(db_fill_hash(ctx, buf.ptr, 1000, DB_DTYPE_BF16, 3, 0.5f));
  std::vector<uint16_t> h(1000);
  MUST(db_copy_to_host(ctx, h.data(), buf.ptr, 2000));
  int bad = 0;
  for (int i = 0; i < 1000; ++i) bad += h[i] != to_bf16(db_hash_uniform(3, i) * 0.5f);
  EXPECT(bad == 0, "fill bf16: %d", bad);
  MUST(db_fill_hash(ctx, buf.ptr, 1000, DB_DTYPE_FP16, 3, 0.5f));
  MUST(db_copy_to_host(ctx, h.data(), buf.ptr, 2000));
  bad = 0;
  for (int i = 0; i < 1000; ++i) bad += h[i] != to_fp16(db_hash_uniform(3, i) * 0.5f);
  EXPECT(bad == 0, "fill fp16: %d", bad);
  db_timer *timer = nullptr;
  MUST(db_timer_create(ctx, &timer));
  float ms = -1;
  EXPECT(db_timer_elapsed_ms(timer, &ms) == DB_ERR_INVALID_ARGUMENT, "unstarted timer");
  MUST(db_timer_start(timer));
  MUST(db_timer_stop(timer));
  MUST(db_timer_elapsed_ms(timer, &ms));
  EXPECT(ms >= 0, "ms %g", ms);
  MUST(db_timer_destroy(timer));
}

// The Go side may call from several OS threads at once: launches serialize, results stay right.
void test_threads() {
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([t] {
      db_context *ctx = nullptr;
      MUST(db_context_create(0, &ctx));
      for (int i = 0; i < 4; ++i)
        check_linear(ctx, t == 1 ? DB_DTYPE_FP16 : DB_DTYPE_BF16, 5 + t, 40 + i, 136,
                     i % 3 == 0 ? DB_LINEAR_GEMV : i % 3 == 1 ? DB_LINEAR_MMA : DB_LINEAR_TILED, 0);
      MUST(db_context_destroy(ctx));
    });
  for (std::thread &t : threads) t.join();
}

}  // namespace

int main() {
  g_emu = std::strcmp(db_backend_name(), "emu") == 0;
  db_context *ctx = nullptr;
  MUST(db_context_create(0, &ctx));
  test_api(ctx);
  test_probes(ctx);
  test_linear_errors(ctx);
  test_linear_launches(ctx);
  test_linear(ctx);
  if (!g_emu || std::getenv("DB_TEST_LARGE")) test_linear_large(ctx);
  MUST(db_context_destroy(ctx));
  test_threads();
  if (g_failures) {
    std::printf("linear_test: %d failure(s)\n", g_failures.load());
    return 1;
  }
  std::printf("linear_test: ok\n");
  return 0;
}
