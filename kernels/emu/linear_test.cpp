// linear_test.cpp: checks the kernels through decodebench.h alone, the way the Go side will:
// inputs from db_fill_hash, references recomputed on the host from dbhash.h in double precision.
// make emu-test runs it on the emulation library (a few seconds); make cuda-test builds the same
// program against the CUDA library for a GPU machine, where it adds decode-sized shapes.
//
//   linear: both variants (and GEMV split-K) at awkward shapes, bf16 and fp16;
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

namespace {

std::atomic<int> g_failures{0};

#define EXPECT(cond, ...)                                          \
  do {                                                             \
    if (!(cond)) {                                                 \
      ++g_failures;                                                \
      std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                                    \
      std::printf("\n");                                           \
    }                                                              \
  } while (0)

std::string last_error() {
  char buf[1024];
  db_last_error_message(buf, sizeof buf);
  return buf;
}

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
  EXPECT((p.split_k > 1) == (ws_bytes > 0), "split_k %d workspace %llu", p.split_k,
         (unsigned long long)ws_bytes);
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

void test_linear(db_context *ctx) {
  int runs = 0;
  for (int32_t dtype : {DB_DTYPE_BF16, DB_DTYPE_FP16})
    for (int batch : {1, 3, 8, 17, 64})
      for (int n : {1, 7, 300})
        for (int k : {8, 24, 200}) {
          check_linear(ctx, dtype, batch, n, k, DB_LINEAR_GEMV, 0);
          check_linear(ctx, dtype, batch, n, k, DB_LINEAR_MMA, 0);
          runs += 2;
          if (k == 200 && batch <= 17) {  // split-K with uneven and empty splits (25 chunks)
            check_linear(ctx, dtype, batch, n, k, DB_LINEAR_GEMV, 3);
            check_linear(ctx, dtype, batch, n, k, DB_LINEAR_GEMV, 30);
            runs += 2;
          }
        }
  for (int32_t variant : {DB_LINEAR_GEMV, DB_LINEAR_MMA}) {
    check_linear(ctx, DB_DTYPE_BF16, 256, 7, 24, variant, 0);
    check_linear(ctx, DB_DTYPE_FP16, 256, 33, 72, variant, 0);
    runs += 2;
  }
  // AUTO, including an automatic split-K (7 rows cannot fill even the emulated 8 SMs).
  check_linear(ctx, DB_DTYPE_BF16, 3, 7, 2048, DB_LINEAR_AUTO, 0);
  check_linear(ctx, DB_DTYPE_BF16, 40, 100, 136, DB_LINEAR_AUTO, 0);
  runs += 2;
  std::printf("linear: %d runs\n", runs);

  db_linear_params p{};
  p.x = p.w = p.y = 256;
  p.batch = 3;
  p.n = 7;
  p.k = 2048;
  p.dtype = DB_DTYPE_BF16;
  uint64_t ws = 0;
  MUST(db_linear_plan(ctx, &p, &ws));
  EXPECT(p.variant == DB_LINEAR_GEMV && p.split_k > 1 && ws == (uint64_t)p.split_k * 3 * 7 * 4,
         "auto plan: variant %d split %d ws %llu", p.variant, p.split_k, (unsigned long long)ws);
  p.batch = 64;
  p.variant = DB_LINEAR_AUTO;
  p.split_k = 0;
  MUST(db_linear_plan(ctx, &p, &ws));
  EXPECT(p.variant == DB_LINEAR_MMA && p.split_k == 1 && ws == 0, "auto plan b=64: %d %d %llu",
         p.variant, p.split_k, (unsigned long long)ws);
}

// Decode-sized shapes, on a GPU (the host reference is the slow part: ~1e9 multiply-adds); under
// emulation with DB_TEST_LARGE=1 (about a minute).
void test_linear_large(db_context *ctx) {
  struct Shape {
    int batch, n, k;
  };
  const Shape shapes[] = {{1, 4096, 4096}, {4, 1024, 4096}, {16, 4096, 4096}, {64, 1024, 4096},
                          {256, 512, 2048}, {7, 14336, 512}};
  for (const Shape &s : shapes)
    for (int32_t variant : {DB_LINEAR_AUTO, DB_LINEAR_GEMV, DB_LINEAR_MMA})
      check_linear(ctx, s.batch % 2 ? DB_DTYPE_FP16 : DB_DTYPE_BF16, s.batch, s.n, s.k, variant,
                   0);
  std::printf("linear (decode sizes): %zu runs\n", sizeof shapes / sizeof shapes[0] * 3);
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
  p.batch = 257;
  EXPECT(db_linear(ctx, &p) == DB_ERR_UNSUPPORTED_SHAPE, "batch=257");
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
                     i % 2 ? DB_LINEAR_MMA : DB_LINEAR_GEMV, 0);
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
