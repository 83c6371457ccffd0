// emu_test.cpp: tests of the host emulation itself (make emu-test): the mma.sync wrapper against
// a plain matrix product, deadlock detection, warp shuffles and votes with partial warps, dynamic
// shared memory, the 16-bit float conversions. Test kernels are written as CUDA and launched with
// DB_LAUNCH, as kernels/*.cu are.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../common.cuh"

namespace {

int g_failures = 0;

#define EXPECT(cond, ...)                                            \
  do {                                                               \
    if (!(cond)) {                                                   \
      ++g_failures;                                                  \
      std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
      std::printf(__VA_ARGS__);                                      \
      std::printf("\n");                                             \
    }                                                                \
  } while (0)

std::string last_error() {
  char buf[1024];
  db_last_error_message(buf, sizeof buf);
  return buf;
}

/* ---- mma.sync m16n8k16 against a plain product ------------------------------------------------ */

// Fragment positions spelled out as the PTX ISA's figures draw them (not the formulas the wrapper
// uses), so the test does not share the wrapper's arithmetic.
struct Pos {
  int row, col;
};
Pos a_position(int lane, int i) {  // A 16x16: a0..a7
  const int g = lane / 4, t = lane % 4;
  switch (i) {
    case 0: return {g, 2 * t};
    case 1: return {g, 2 * t + 1};
    case 2: return {g + 8, 2 * t};
    case 3: return {g + 8, 2 * t + 1};
    case 4: return {g, 2 * t + 8};
    case 5: return {g, 2 * t + 9};
    case 6: return {g + 8, 2 * t + 8};
    default: return {g + 8, 2 * t + 9};
  }
}
Pos b_position(int lane, int i) {  // B 16x8: b0..b3, (row = k, col = n)
  const int g = lane / 4, t = lane % 4;
  switch (i) {
    case 0: return {2 * t, g};
    case 1: return {2 * t + 1, g};
    case 2: return {2 * t + 8, g};
    default: return {2 * t + 9, g};
  }
}
Pos c_position(int lane, int i) {  // C/D 16x8: c0..c3
  const int g = lane / 4, t = lane % 4;
  switch (i) {
    case 0: return {g, 2 * t};
    case 1: return {g, 2 * t + 1};
    case 2: return {g + 8, 2 * t};
    default: return {g + 8, 2 * t + 1};
  }
}

// A (16x16) and B (16x8, stored [k][n]) as 16-bit bits, C and D as float [16][8].
template <bool Bf16>
__global__ void mma_kernel(const uint16_t *A, const uint16_t *B, const float *C, float *D) {
  const int lane = threadIdx.x;
  uint32_t a[4], b[2];
  float acc[4];
  for (int r = 0; r < 4; ++r) {
    const Pos lo = a_position(lane, 2 * r), hi = a_position(lane, 2 * r + 1);
    a[r] = (uint32_t)A[lo.row * 16 + lo.col] | (uint32_t)A[hi.row * 16 + hi.col] << 16;
  }
  for (int r = 0; r < 2; ++r) {
    const Pos lo = b_position(lane, 2 * r), hi = b_position(lane, 2 * r + 1);
    b[r] = (uint32_t)B[lo.row * 8 + lo.col] | (uint32_t)B[hi.row * 8 + hi.col] << 16;
  }
  for (int i = 0; i < 4; ++i) acc[i] = C[c_position(lane, i).row * 8 + c_position(lane, i).col];
  if (Bf16)
    db_mma_m16n8k16_bf16(acc, a, b);
  else
    db_mma_m16n8k16_f16(acc, a, b);
  for (int i = 0; i < 4; ++i) D[c_position(lane, i).row * 8 + c_position(lane, i).col] = acc[i];
}

template <bool Bf16>
void test_mma() {
  std::mt19937 rng(Bf16 ? 1 : 2);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<uint16_t> A(256), B(128);
  std::vector<double> Af(256), Bf(128);
  std::vector<float> C(128), D(128, NAN);
  auto make = [&](float v, double *value) {
    uint16_t bits = Bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v))
                         : __half_as_ushort(__float2half_rn(v));
    *value = Bf16 ? __bfloat162float(__ushort_as_bfloat16(bits))
                  : __half2float(__ushort_as_half(bits));
    return bits;
  };
  for (int i = 0; i < 256; ++i) A[i] = make(dist(rng), &Af[i]);
  for (int i = 0; i < 128; ++i) B[i] = make(dist(rng), &Bf[i]);
  for (int i = 0; i < 128; ++i) C[i] = dist(rng);
  const int status = DB_LAUNCH(mma_kernel<Bf16>, dim3(1), dim3(32), 0, nullptr, A.data(), B.data(),
                               C.data(), D.data());
  EXPECT(status == DB_OK, "status %d: %s", status, last_error().c_str());
  double worst = 0;
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      double want = C[m * 8 + n];
      for (int k = 0; k < 16; ++k) want += Af[m * 16 + k] * Bf[k * 8 + n];
      worst = std::max(worst, std::fabs(want - D[m * 8 + n]));
    }
  EXPECT(worst < 1e-5, "%s mma: worst error %g", Bf16 ? "bf16" : "f16", worst);
}

// mma.sync.aligned needs the whole warp: a 16-thread block must fail, not hang.
__global__ void mma_partial_warp_kernel(float *out) {
  uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float acc[4] = {0, 0, 0, 0};
  db_mma_m16n8k16_bf16(acc, a, b);
  out[threadIdx.x] = acc[0];
}

void test_mma_partial_warp() {
  std::vector<float> out(16);
  const int status =
      DB_LAUNCH(mma_partial_warp_kernel, dim3(1), dim3(16), 0, nullptr, out.data());
  EXPECT(status == DB_ERR_LAUNCH, "status %d: %s", status, last_error().c_str());
  EXPECT(last_error().find("32 lanes") != std::string::npos, "message: %s", last_error().c_str());
}

/* ---- deadlocks -------------------------------------------------------------------------------- */

__global__ void deadlock_kernel(int *out) {
  if (threadIdx.x < 32) return;  // half the block leaves; the rest wait forever
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void split_barrier_kernel(int *out) {
  if (threadIdx.x % 2) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

__global__ void warp_divergence_kernel(int *out) {
  if (threadIdx.x & 1)
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
  else
    out[threadIdx.x] = (int)__ballot_sync(0xffffffffu, 1);
}

__global__ void warp_deadlock_kernel(int *out) {
  if (threadIdx.x != 0) return;
  out[0] = __shfl_sync(0xffffffffu, 1, 0);  // lanes 1..31 have exited
}

void test_deadlocks() {
  std::vector<int> out(64);
  int status = DB_LAUNCH(deadlock_kernel, dim3(2), dim3(64), 0, nullptr, out.data());
  std::string msg = last_error();
  EXPECT(status == DB_ERR_EMU_DEADLOCK, "status %d: %s", status, msg.c_str());
  EXPECT(msg.find("deadlock_kernel") != std::string::npos, "kernel not named: %s", msg.c_str());
  EXPECT(msg.find("__syncthreads (emu_test.cpp:") != std::string::npos, "barrier not named: %s",
         msg.c_str());
  EXPECT(msg.find("32 thread(s) have exited") != std::string::npos, "exits not told: %s",
         msg.c_str());

  status = DB_LAUNCH(split_barrier_kernel, dim3(1), dim3(64), 0, nullptr, out.data());
  msg = last_error();
  EXPECT(status == DB_ERR_EMU_DEADLOCK, "status %d: %s", status, msg.c_str());
  EXPECT(msg.find("different barriers") != std::string::npos, "message: %s", msg.c_str());

  status = DB_LAUNCH(warp_deadlock_kernel, dim3(1), dim3(32), 0, nullptr, out.data());
  msg = last_error();
  EXPECT(status == DB_ERR_EMU_DEADLOCK, "status %d: %s", status, msg.c_str());
  EXPECT(msg.find("__shfl_sync") != std::string::npos, "message: %s", msg.c_str());

  status = DB_LAUNCH(warp_divergence_kernel, dim3(1), dim3(32), 0, nullptr, out.data());
  msg = last_error();
  EXPECT(status == DB_ERR_EMU_DEADLOCK, "status %d: %s", status, msg.c_str());
  EXPECT(msg.find("diverged") != std::string::npos, "message: %s", msg.c_str());

  // The emulator is usable again after a deadlock (the abandoned fibers are reset).
  test_mma<true>();
}

/* ---- shuffles and votes, with a partial last warp ---------------------------------------------- */

struct ShuffleOut {
  int xor_sum8, down1, up1, idx0, ballot, any_odd, all_small;
  float warp_total;
};

__global__ void shuffle_kernel(ShuffleOut *out) {
  const int tid = threadIdx.x, lane = tid & 31;
  const unsigned warp_lanes = tid < 32 ? 0xffffffffu : 0xffu;  // block of 40: warp 1 has 8 lanes
  ShuffleOut o;
  int v = tid;
  for (int offset = 4; offset > 0; offset >>= 1) v += __shfl_xor_sync(warp_lanes, v, offset, 8);
  o.xor_sum8 = v;
  o.down1 = __shfl_down_sync(warp_lanes, tid, 1, 8);
  o.up1 = __shfl_up_sync(warp_lanes, tid, 1);
  o.idx0 = __shfl_sync(warp_lanes, tid, 0);
  o.ballot = (int)__ballot_sync(warp_lanes, lane % 3 == 0);
  o.any_odd = __any_sync(warp_lanes, lane == 5);
  o.all_small = __all_sync(warp_lanes, lane < 8);
  __syncwarp(warp_lanes);
  // A full-warp butterfly over a partial warp: on a GPU the missing lanes' values are undefined;
  // the emulator gives the reader its own value, so each of the 5 steps doubles: 32, not 8.
  o.warp_total = db_warp_sum(1.0f);
  out[tid] = o;
}

void test_shuffles() {
  std::vector<ShuffleOut> out(40);
  const int status = DB_LAUNCH(shuffle_kernel, dim3(1), dim3(40), 0, nullptr, out.data());
  EXPECT(status == DB_OK, "status %d: %s", status, last_error().c_str());
  for (int tid = 0; tid < 40; ++tid) {
    const ShuffleOut &o = out[tid];
    const int lane = tid % 32, warp_base = tid - lane, group = tid & ~7;
    const int lanes = tid < 32 ? 32 : 8;
    EXPECT(o.xor_sum8 == 8 * group + 28, "tid %d xor_sum8 %d", tid, o.xor_sum8);
    EXPECT(o.down1 == ((tid & 7) == 7 ? tid : tid + 1), "tid %d down1 %d", tid, o.down1);
    EXPECT(o.up1 == (lane == 0 ? tid : tid - 1), "tid %d up1 %d", tid, o.up1);
    EXPECT(o.idx0 == warp_base, "tid %d idx0 %d", tid, o.idx0);
    unsigned ballot = 0;
    for (int l = 0; l < lanes; ++l)
      if (l % 3 == 0) ballot |= 1u << l;
    EXPECT((unsigned)o.ballot == ballot, "tid %d ballot 0x%x", tid, (unsigned)o.ballot);
    EXPECT(o.any_odd == 1, "tid %d any %d", tid, o.any_odd);
    EXPECT(o.all_small == (lanes == 8), "tid %d all %d", tid, o.all_small);
    EXPECT(o.warp_total == 32.0f, "tid %d warp_total %g", tid, o.warp_total);
  }
}

__global__ void bad_mask_kernel(int *out) {
  out[threadIdx.x] = __shfl_sync(0x1u, 1, 0);  // lane 1 is not in its own mask
}

void test_bad_mask() {
  std::vector<int> out(2);
  const int status = DB_LAUNCH(bad_mask_kernel, dim3(1), dim3(2), 0, nullptr, out.data());
  EXPECT(status == DB_ERR_LAUNCH, "status %d: %s", status, last_error().c_str());
  EXPECT(last_error().find("does not name the calling lane") != std::string::npos, "message: %s",
         last_error().c_str());
}

/* ---- shared memory ---------------------------------------------------------------------------- */

__global__ void reverse_kernel(const float *in, float *out) {
  DB_EXTERN_SHARED(float, buf);
  const int n = blockDim.x, base = blockIdx.x * n;
  buf[threadIdx.x] = in[base + threadIdx.x];
  __syncthreads();
  out[base + threadIdx.x] = buf[n - 1 - threadIdx.x];
}

// Each thread stages 16 bytes with cp.async, then reads its neighbour's.
__global__ void cp_async_kernel(const uint4 *in, uint4 *out) {
  DB_EXTERN_SHARED(uint4, staged);
  db_cp_async_16(&staged[threadIdx.x], &in[threadIdx.x]);
  db_cp_async_commit();
  db_cp_async_wait<0>();
  __syncthreads();
  out[threadIdx.x] = staged[(threadIdx.x + 1) % blockDim.x];
}

__global__ void block_sum_kernel(const int *in, int *out) {
  __shared__ int partial[8];
  const int warp = threadIdx.x / 32;
  int v = db_warp_sum(in[blockIdx.x * blockDim.x + threadIdx.x]);
  if (threadIdx.x % 32 == 0) partial[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    int s = 0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) s += partial[w];
    atomicAdd(out, s);
  }
}

void test_shared_memory() {
  const int threads = 96, blocks = 3;
  std::vector<float> in(threads * blocks), out(threads * blocks);
  for (size_t i = 0; i < in.size(); ++i) in[i] = (float)i;
  int status = DB_LAUNCH(reverse_kernel, dim3(blocks), dim3(threads), threads * sizeof(float),
                         nullptr, in.data(), out.data());
  EXPECT(status == DB_OK, "status %d: %s", status, last_error().c_str());
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < threads; ++t)
      EXPECT(out[b * threads + t] == in[b * threads + threads - 1 - t], "block %d thread %d", b, t);

  // Over the 48 KiB default the launch fails until the kernel opts in, as on a GPU.
  status = DB_LAUNCH(reverse_kernel, dim3(1), dim3(threads), 64 << 10, nullptr, in.data(),
                     out.data());
  EXPECT(status == DB_ERR_LAUNCH, "status %d", status);
  EXPECT(cudaFuncSetAttribute(reverse_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              64 << 10) == cudaSuccess,
         "set attribute");
  status = DB_LAUNCH(reverse_kernel, dim3(1), dim3(threads), 64 << 10, nullptr, in.data(),
                     out.data());
  EXPECT(status == DB_OK, "status %d: %s", status, last_error().c_str());

  std::vector<uint4> vin(64), vout(64);
  for (unsigned i = 0; i < 64; ++i) vin[i] = make_uint4(i, 2 * i, 3 * i, 4 * i);
  status = DB_LAUNCH(cp_async_kernel, dim3(1), dim3(64), 64 * sizeof(uint4), nullptr, vin.data(),
                     vout.data());
  EXPECT(status == DB_OK, "cp.async: status %d: %s", status, last_error().c_str());
  for (unsigned i = 0; i < 64; ++i)
    EXPECT(vout[i].x == (i + 1) % 64 && vout[i].w == 4 * ((i + 1) % 64), "cp.async %u", i);

  std::vector<int> values(256 * 5);
  int want = 0;
  for (size_t i = 0; i < values.size(); ++i) want += values[i] = (int)(i * 7 % 13);
  int total = 0;
  status = DB_LAUNCH(block_sum_kernel, dim3(5), dim3(256), 0, nullptr, values.data(), &total);
  EXPECT(status == DB_OK && total == want, "status %d total %d want %d", status, total, want);

  status = DB_LAUNCH(block_sum_kernel, dim3(1), dim3(2048), 0, nullptr, values.data(), &total);
  EXPECT(status == DB_ERR_LAUNCH, "2048 threads: status %d", status);
}

/* ---- 16-bit conversions ----------------------------------------------------------------------- */

// Independent round-to-nearest-even through double: the two neighbours and the tie rule.
uint16_t reference_round(float f, bool bf16) {
  if (std::isnan(f)) return 0x7fff;
  // Enumerate candidates by decoding every finite value near f would be slow; instead search the
  // monotone encoding of the non-negative values by bisection.
  const double a = std::fabs((double)f);
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  auto decode = [&](uint32_t bits) {
    return bf16 ? (double)__bfloat162float(__ushort_as_bfloat16((uint16_t)bits))
                : (double)__half2float(__ushort_as_half((uint16_t)bits));
  };
  const uint32_t inf = bf16 ? 0x7f80 : 0x7c00;
  uint32_t lo = 0, hi = inf;  // decode(lo) <= a < decode(hi) once bisected (or a >= max)
  if (a >= decode(inf)) return (uint16_t)(sign | inf);
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (decode(mid) <= a)
      lo = mid;
    else
      hi = mid;
  }
  const double dlo = a - decode(lo);
  double dhi = decode(hi) - a;
  if (hi == inf) {  // overflow threshold: halfway between max finite and the next power of two
    const double max = decode(inf - 1), next = 2 * max - decode(inf - 2);
    dhi = next - a;
  }
  uint32_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  return (uint16_t)(sign | pick);
}

void test_conversions() {
  std::mt19937 rng(7);
  std::vector<float> samples = {0.0f, -0.0f, 1.0f, 1.00390625f, 1.01171875f, 65504.0f, 65519.99f,
                                65520.0f, 70000.0f, 5.96e-8f, 2.98e-8f, 2.9802322e-8f,
                                6.1035156e-5f, 6.1e-5f, 3.0e38f, INFINITY, -INFINITY, NAN};
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) samples.push_back(__uint_as_float(bits(rng)));
  std::uniform_real_distribution<float> small(-70000.0f, 70000.0f);
  for (int i = 0; i < 200000; ++i) samples.push_back(small(rng));
  std::uniform_real_distribution<float> tiny(-1e-4f, 1e-4f);
  for (int i = 0; i < 100000; ++i) samples.push_back(tiny(rng));
  int bad_bf16 = 0, bad_half = 0;
  for (float f : samples) {
    const uint16_t b = __bfloat16_as_ushort(__float2bfloat16_rn(f));
    const uint16_t h = __half_as_ushort(__float2half_rn(f));
    if (b != reference_round(f, true) && bad_bf16++ < 5)
      std::printf("bf16(%.9g) = 0x%04x, want 0x%04x\n", f, b, reference_round(f, true));
    if (h != reference_round(f, false) && bad_half++ < 5)
      std::printf("half(%.9g) = 0x%04x, want 0x%04x\n", f, h, reference_round(f, false));
  }
  EXPECT(bad_bf16 == 0, "%d bf16 conversions differ", bad_bf16);
  EXPECT(bad_half == 0, "%d half conversions differ", bad_half);
  // Round trips of every 16-bit pattern that is not NaN.
  for (uint32_t u = 0; u < 65536; ++u) {
    const float fb = __bfloat162float(__ushort_as_bfloat16((uint16_t)u));
    const float fh = __half2float(__ushort_as_half((uint16_t)u));
    if (!std::isnan(fb))
      EXPECT(__bfloat16_as_ushort(__float2bfloat16_rn(fb)) == u, "bf16 0x%04x", u);
    if (!std::isnan(fh)) EXPECT(__half_as_ushort(__float2half_rn(fh)) == u, "half 0x%04x", u);
  }
}

}  // namespace

int main() {
  test_mma<true>();
  test_mma<false>();
  test_mma_partial_warp();
  test_deadlocks();
  test_shuffles();
  test_bad_mask();
  test_shared_memory();
  test_conversions();
  if (g_failures) {
    std::printf("emu_test: %d failure(s)\n", g_failures);
    return 1;
  }
  std::printf("emu_test: ok\n");
  return 0;
}
