// emu_test.cpp: tests of the host emulation itself (make emu-test): the mma.sync wrapper against
// a plain matrix product, deadlock detection, warp shuffles and votes with partial warps, dynamic
// shared memory, the hazard modes (schedules, deferred cp.async, shared-memory poisoning: tiny
// kernels with deliberate synchronisation bugs that pass by default and fail under their mode),
// the 16-bit float conversions. Test kernels are written as CUDA and launched with
// DB_LAUNCH, as kernels/*.cu are.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "../common.cuh"

#include "test_check.h"

namespace {


// Device memory holding a copy of a host vector: what the checked 16-byte wrappers accept (they
// reject host memory as outside every allocation, as a GPU would fault on it).
template <class T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T> &host) : n_(host.size()) {
    if (cudaMalloc(reinterpret_cast<void **>(&p_), n_ * sizeof(T)) != cudaSuccess) std::abort();
    cudaMemcpyAsync(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice);
  }
  explicit DeviceVector(size_t n) : DeviceVector(std::vector<T>(n)) {}
  ~DeviceVector() { cudaFree(p_); }
  DeviceVector(const DeviceVector &) = delete;
  DeviceVector &operator=(const DeviceVector &) = delete;
  T *get() const { return p_; }
  std::vector<T> read() const {
    std::vector<T> host(n_);
    cudaMemcpyAsync(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }

 private:
  size_t n_;
  T *p_ = nullptr;
};

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
  DB_SHARED(int, partial, 8);
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
  cudaFuncSetAttribute(reverse_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 48 << 10);
  status = DB_LAUNCH(reverse_kernel, dim3(1), dim3(threads), 64 << 10, nullptr, in.data(),
                     out.data());
  EXPECT(status == DB_ERR_LAUNCH, "status %d", status);
  EXPECT(cudaFuncSetAttribute(reverse_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              64 << 10) == cudaSuccess,
         "set attribute");
  status = DB_LAUNCH(reverse_kernel, dim3(1), dim3(threads), 64 << 10, nullptr, in.data(),
                     out.data());
  EXPECT(status == DB_OK, "status %d: %s", status, last_error().c_str());

  std::vector<uint4> vin(64);
  for (unsigned i = 0; i < 64; ++i) vin[i] = make_uint4(i, 2 * i, 3 * i, 4 * i);
  DeviceVector<uint4> din(vin), dout(64);
  status = DB_LAUNCH(cp_async_kernel, dim3(1), dim3(64), 64 * sizeof(uint4), nullptr, din.get(),
                     dout.get());
  EXPECT(status == DB_OK, "cp.async: status %d: %s", status, last_error().c_str());
  const std::vector<uint4> vout = dout.read();
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

/* ---- hazard modes (DB_EMU_SCHEDULE, DB_EMU_HAZARDS) ------------------------------------------ */

// Sets the two variables for the launches in its scope (null: unset) and restores the caller's,
// so the whole test can also run under a mode set from outside.
class ScopedModes {
 public:
  ScopedModes(const char *schedule, const char *hazards) {
    save("DB_EMU_SCHEDULE", schedule, saved_[0]);
    save("DB_EMU_HAZARDS", hazards, saved_[1]);
  }
  ~ScopedModes() {
    restore("DB_EMU_SCHEDULE", saved_[0]);
    restore("DB_EMU_HAZARDS", saved_[1]);
  }

 private:
  struct Saved {
    bool set = false;
    std::string value;
  };
  static void save(const char *name, const char *value, Saved &saved) {
    if (const char *old = std::getenv(name)) saved.set = true, saved.value = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  static void restore(const char *name, const Saved &saved) {
    saved.set ? setenv(name, saved.value.c_str(), 1) : unsetenv(name);
  }
  Saved saved_[2];
};

// The order in which threads start and resume after a barrier: each takes a ticket.
__global__ void order_kernel(int *tickets, int *counter) {
  const int n = blockDim.x;
  tickets[threadIdx.x] = atomicAdd(counter, 1);
  __syncthreads();
  tickets[n + threadIdx.x] = atomicAdd(counter, 1) - n;
}

std::vector<int> run_order(const char *schedule) {
  ScopedModes modes(schedule, nullptr);
  std::vector<int> tickets(128, -1);
  int counter = 0;
  const int status =
      DB_LAUNCH(order_kernel, dim3(1), dim3(64), 0, nullptr, tickets.data(), &counter);
  EXPECT(status == DB_OK, "%s: status %d: %s", schedule, status, last_error().c_str());
  return tickets;
}

std::vector<int> run_order_expecting_failure(const char *schedule) {
  ScopedModes modes(schedule, nullptr);
  std::vector<int> tickets(128, -1);
  int counter = 0;
  const int status =
      DB_LAUNCH(order_kernel, dim3(1), dim3(64), 0, nullptr, tickets.data(), &counter);
  EXPECT(status == DB_ERR_LAUNCH && last_error().find("DB_EMU_SCHEDULE") != std::string::npos,
         "%s: status %d: %s", schedule, status, last_error().c_str());
  return tickets;
}

void test_schedules() {
  const std::vector<int> forward = run_order("forward");
  const std::vector<int> reverse = run_order("reverse");
  const std::vector<int> shuffle1 = run_order("shuffle:1");
  const std::vector<int> shuffle2 = run_order("shuffle:2");
  for (int t = 0; t < 64; ++t) {
    EXPECT(forward[t] == t, "forward: thread %d started %d-th", t, forward[t]);
    EXPECT(reverse[t] == 63 - t && reverse[64 + t] == 63 - t, "reverse: thread %d: %d, %d", t,
           reverse[t], reverse[64 + t]);
  }
  for (int phase = 0; phase < 2; ++phase) {  // a permutation of 0..63 in each phase
    std::vector<int> seen(64, 0);
    for (int t = 0; t < 64; ++t) {
      const int k = shuffle1[64 * phase + t];
      if (k >= 0 && k < 64) ++seen[k];
    }
    EXPECT(std::count(seen.begin(), seen.end(), 1) == 64, "shuffle:1 phase %d: not a permutation",
           phase);
  }
  EXPECT(shuffle1 != forward && std::vector<int>(shuffle1.begin(), shuffle1.begin() + 64) !=
                                    std::vector<int>(shuffle1.begin() + 64, shuffle1.end()),
         "shuffle:1 runs in thread order or repeats its order after the barrier");
  EXPECT(shuffle1 != shuffle2, "the seeds 1 and 2 give one order");
  EXPECT(run_order("shuffle:1") == shuffle1, "shuffle:1 is not reproducible");

  for (const char *bad : {"sideways", "shuffle:", "shuffle:x1"}) {
    run_order_expecting_failure(bad);
  }
}

/* Deliberately hazardous kernels: each passes under the default modes and must give wrong values
 * under the mode that models its hazard. */

// Missing __syncthreads: a thread reads what its lower neighbour just wrote to shared memory.
__global__ void missing_barrier_kernel(const int *in, int *out) {
  DB_EXTERN_SHARED(int, buf);
  buf[threadIdx.x] = in[threadIdx.x];
  /* BUG (deliberate): no __syncthreads() here */
  out[threadIdx.x] = buf[threadIdx.x == 0 ? 0 : threadIdx.x - 1];
}

// Reuses shared slots without a barrier first: a warp that runs ahead overwrites its slot before
// the slower warps have read the first round (a write-after-read race).
__global__ void missing_reuse_barrier_kernel(const int *in, int *out) {
  DB_SHARED(int, slots, 4);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int v = db_warp_sum(in[threadIdx.x]);
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  out[threadIdx.x] = slots[0] + slots[1] + slots[2] + slots[3];
  /* BUG (deliberate): no __syncthreads() before the slots are written again */
  v = db_warp_sum(in[128 + threadIdx.x]);
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  out[128 + threadIdx.x] = slots[0] + slots[1] + slots[2] + slots[3];
}

// Reads its cp.async destination before cp.async.wait_group.
__global__ void cp_async_early_read_kernel(const uint4 *in, uint4 *out) {
  DB_EXTERN_SHARED(uint4, staged);
  db_cp_async_16(&staged[threadIdx.x], &in[threadIdx.x]);
  db_cp_async_commit();
  out[threadIdx.x] = staged[threadIdx.x]; /* BUG (deliberate): before the wait */
  db_cp_async_wait<0>();
}

// A barrier is not a wait: a neighbour's copy is read after __syncthreads alone.
__global__ void cp_async_barrier_only_kernel(const uint4 *in, uint4 *out) {
  DB_EXTERN_SHARED(uint4, staged);
  db_cp_async_16(&staged[threadIdx.x], &in[threadIdx.x]);
  db_cp_async_commit();
  __syncthreads(); /* BUG (deliberate): no db_cp_async_wait<0>() before it */
  out[threadIdx.x] = staged[(threadIdx.x + 1) % blockDim.x];
  db_cp_async_wait<0>();
}

// wait_group 1 completes the older of two groups only: the second half is read too early.
__global__ void cp_async_wait_one_kernel(const uint4 *in, uint4 *out) {
  DB_EXTERN_SHARED(uint4, staged);
  const unsigned n = blockDim.x;
  db_cp_async_16(&staged[threadIdx.x], &in[threadIdx.x]);
  db_cp_async_commit();
  db_cp_async_16(&staged[n + threadIdx.x], &in[n + threadIdx.x]);
  db_cp_async_commit();
  db_cp_async_wait<1>();
  out[threadIdx.x] = staged[threadIdx.x];         /* right: the first group is complete */
  out[n + threadIdx.x] = staged[n + threadIdx.x]; /* BUG (deliberate): still in flight */
  db_cp_async_wait<0>();
}

// Only block 0 fills the tables; the other blocks read shared memory they never wrote.
__global__ void unwritten_smem_kernel(const int *in, int *out) {
  DB_SHARED(int, table, 64);
  DB_EXTERN_SHARED(int, dyn);
  if (blockIdx.x == 0) { /* BUG (deliberate): every block must fill its own */
    table[threadIdx.x] = in[threadIdx.x];
    dyn[threadIdx.x] = in[64 + threadIdx.x];
  }
  __syncthreads();
  out[blockIdx.x * 128 + threadIdx.x] = table[threadIdx.x];
  out[blockIdx.x * 128 + 64 + threadIdx.x] = dyn[threadIdx.x];
}

// Runs the hazardous kernels under one set of modes; the counts of wrong values per kernel.
struct HazardCounts {
  int missing_barrier = 0, missing_reuse_barrier = 0, early_read = 0, barrier_only = 0, wait_one_old = 0, wait_one_new = 0,
      unwritten_static = 0, unwritten_dynamic = 0;
};

HazardCounts run_hazards(const char *schedule, const char *hazards, unsigned salt) {
  ScopedModes modes(schedule, hazards);
  HazardCounts c;
  const int n = 64;
  std::vector<int> in(2 * n), out(4 * n, 0);
  for (int i = 0; i < 2 * n; ++i) in[i] = (int)(salt * 1000 + i);  // new values every run
  int status = DB_LAUNCH(missing_barrier_kernel, dim3(1), dim3(n), n * sizeof(int), nullptr,
                         in.data(), out.data());
  EXPECT(status == DB_OK, "status %d: %s", status, last_error().c_str());
  for (int t = 0; t < n; ++t) c.missing_barrier += out[t] != in[t == 0 ? 0 : t - 1];

  {
    std::vector<int> rin(256), rout(256, 0);
    int round[2] = {0, 0};
    for (int i = 0; i < 256; ++i) round[i / 128] += rin[i] = (int)(salt * 7 + i % 13);
    status = DB_LAUNCH(missing_reuse_barrier_kernel, dim3(1), dim3(128), 0, nullptr, rin.data(),
                       rout.data());
    EXPECT(status == DB_OK, "status %d: %s", status, last_error().c_str());
    for (int i = 0; i < 256; ++i) c.missing_reuse_barrier += rout[i] != round[i / 128];
  }

  std::vector<uint4> vin(2 * n), vout;
  for (int i = 0; i < 2 * n; ++i) vin[i] = make_uint4(salt, i, 2 * i, 3 * i);
  DeviceVector<uint4> din(vin), dout(2 * n);
  auto same = [](uint4 a, uint4 b) { return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w; };
  status = DB_LAUNCH(cp_async_early_read_kernel, dim3(1), dim3(n), n * sizeof(uint4), nullptr,
                     din.get(), dout.get());
  EXPECT(status == DB_OK, "status %d: %s", status, last_error().c_str());
  vout = dout.read();
  for (int t = 0; t < n; ++t) c.early_read += !same(vout[t], vin[t]);
  status = DB_LAUNCH(cp_async_barrier_only_kernel, dim3(1), dim3(n), n * sizeof(uint4), nullptr,
                     din.get(), dout.get());
  EXPECT(status == DB_OK, "status %d: %s", status, last_error().c_str());
  vout = dout.read();
  for (int t = 0; t < n; ++t) c.barrier_only += !same(vout[t], vin[(t + 1) % n]);
  status = DB_LAUNCH(cp_async_wait_one_kernel, dim3(1), dim3(n), 2 * n * sizeof(uint4), nullptr,
                     din.get(), dout.get());
  EXPECT(status == DB_OK, "status %d: %s", status, last_error().c_str());
  vout = dout.read();
  for (int t = 0; t < n; ++t) {
    c.wait_one_old += !same(vout[t], vin[t]);
    c.wait_one_new += !same(vout[n + t], vin[n + t]);
  }

  const int blocks = 3;
  std::vector<int> tables(blocks * 2 * n, 0);
  status = DB_LAUNCH(unwritten_smem_kernel, dim3(blocks), dim3(n), n * sizeof(int), nullptr,
                     in.data(), tables.data());
  EXPECT(status == DB_OK, "status %d: %s", status, last_error().c_str());
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < n; ++t) {
      c.unwritten_static += tables[b * 2 * n + t] != in[t];
      c.unwritten_dynamic += tables[b * 2 * n + n + t] != in[n + t];
    }
  return c;
}

void test_hazard_modes() {
  // Default modes (and forward with no hazards, spelled out): every hazard goes unseen.
  for (const char *forward : {(const char *)nullptr, "forward"}) {
    const HazardCounts c = run_hazards(forward, forward ? "none" : nullptr, 1);
    EXPECT(c.missing_barrier == 0 && c.missing_reuse_barrier == 0 && c.early_read == 0 &&
               c.barrier_only == 0 &&
               c.wait_one_old == 0 && c.wait_one_new == 0 && c.unwritten_static == 0 &&
               c.unwritten_dynamic == 0,
           "%s: the default modes should not see the hazards: %d %d %d %d %d %d %d %d",
           forward ? forward : "unset", c.missing_barrier, c.missing_reuse_barrier, c.early_read, c.barrier_only,
           c.wait_one_old, c.wait_one_new, c.unwritten_static, c.unwritten_dynamic);
  }
  // Each mode sees its own hazard.
  unsigned salt = 2;
  for (const char *order : {"reverse", "shuffle:1", "shuffle:2"}) {
    const HazardCounts c = run_hazards(order, nullptr, salt++);
    EXPECT(c.missing_barrier > 0, "%s: the missing __syncthreads went unseen", order);
    EXPECT(c.missing_reuse_barrier > 0, "%s: the write-after-read race went unseen", order);
  }
  {
    const HazardCounts c = run_hazards(nullptr, "cp_async", salt++);
    EXPECT(c.early_read == 64, "cp_async: %d of 64 early reads seen", c.early_read);
    // 63: the last thread to arrive at the barrier runs on and completes its own copy first
    EXPECT(c.barrier_only >= 63, "cp_async: %d of 64 barrier-only reads seen", c.barrier_only);
    EXPECT(c.wait_one_old == 0 && c.wait_one_new == 64,
           "cp_async: wait_group 1: %d wrong in the completed group, %d of 64 in flight seen",
           c.wait_one_old, c.wait_one_new);
    EXPECT(c.missing_barrier == 0 && c.unwritten_static == 0, "cp_async alone: %d %d",
           c.missing_barrier, c.unwritten_static);
  }
  {
    const HazardCounts c = run_hazards(nullptr, "smem", salt++);
    EXPECT(c.unwritten_static == 2 * 64 && c.unwritten_dynamic == 2 * 64,
           "smem: %d of 128 static and %d of 128 dynamic unwritten reads seen", c.unwritten_static,
           c.unwritten_dynamic);
    EXPECT(c.early_read == 0, "smem alone: early reads %d", c.early_read);
  }
  {
    const HazardCounts c = run_hazards("shuffle:3", "all", salt++);
    EXPECT(c.missing_barrier > 0 && c.early_read == 64 && c.barrier_only > 0 &&
               c.wait_one_new == 64 && c.unwritten_static == 128 && c.unwritten_dynamic == 128,
           "shuffle:3 + all: %d %d %d %d %d %d", c.missing_barrier, c.early_read, c.barrier_only,
           c.wait_one_new, c.unwritten_static, c.unwritten_dynamic);
  }
  // Correct kernels stay correct under every mode.
  for (const char *order : {"reverse", "shuffle:1", "shuffle:5"}) {
    ScopedModes modes(order, "all");
    test_shared_memory();
    test_shuffles();
    test_mma<true>();
  }
}


/* ---- memory checks: bounds and alignment, guard pages, sparse allocations -------------------- */

__global__ void load_at_kernel(const unsigned char *base, long long offset, uint4 *out) {
  out[threadIdx.x] = db_ld_stream_v4(reinterpret_cast<const uint4 *>(base + offset));
}
__global__ void load_nc_at_kernel(const unsigned char *base, long long offset, uint4 *out) {
  out[threadIdx.x] = db_ld_nc_v4(reinterpret_cast<const uint4 *>(base + offset));
}
__global__ void store_at_kernel(unsigned char *base, long long offset) {
  db_st_v4(reinterpret_cast<uint4 *>(base + offset), make_uint4(1, 2, 3, 4));
}
__global__ void cp_async_at_kernel(const unsigned char *src, long long src_offset,
                                   long long dst_offset, uint4 *out) {
  DB_EXTERN_SHARED(unsigned char, staged);
  db_cp_async_16(staged + dst_offset, src + src_offset);
  db_cp_async_commit();
  db_cp_async_wait<0>();
  out[0] = *reinterpret_cast<const uint4 *>(staged);
}
__global__ void plain_read_at_kernel(const float *base, long long index, float *out) {
  out[0] = base[index];
}
__global__ void plain_write_at_kernel(float *base, long long index) { base[index] = 1.0f; }

// Recursion whose frames (1 KiB each, every byte written) outgrow the 256 KiB fiber stack.
__attribute__((noinline)) int deep(int n) {
  volatile char frame[1024];
  for (int i = 0; i < 1024; ++i) frame[i] = (char)(n + i);
  return n == 0 ? frame[7] : deep(n - 1) + frame[n % 1024];
}
__global__ void stack_overflow_kernel(int depth, int *out) { out[0] = deep(depth); }

// Runs a launch expected to fail with DB_ERR_LAUNCH and a message holding every part of want.
template <class F>
void expect_launch_error(const char *what, F launch, std::initializer_list<const char *> want) {
  const int status = launch();
  const std::string message = last_error();
  EXPECT(status == DB_ERR_LAUNCH, "%s: status %d (%s)", what, status, message.c_str());
  for (const char *part : want)
    EXPECT(message.find(part) != std::string::npos, "%s: the message lacks \"%s\": %s", what, part,
           message.c_str());
}

void test_memory_checks() {
  const size_t bytes = 1000;  // not a multiple of 16 or 256: the last 16-byte vector is partial
  DeviceVector<unsigned char> buf(bytes);
  DeviceVector<uint4> out(64);
  unsigned char *b = buf.get();
  uint4 *o = out.get();
  // In bounds, every wrapper: no error.
  int status = DB_LAUNCH(load_at_kernel, dim3(1), dim3(1), 0, nullptr, b, 976LL, o);
  EXPECT(status == DB_OK, "in-bounds load: %s", last_error().c_str());
  status = DB_LAUNCH(cp_async_at_kernel, dim3(1), dim3(1), 64, nullptr, b, 0LL, 48LL, o);
  EXPECT(status == DB_OK, "in-bounds cp.async: %s", last_error().c_str());
  status = DB_LAUNCH(store_at_kernel, dim3(1), dim3(1), 0, nullptr, b, 16LL);
  EXPECT(status == DB_OK, "in-bounds store: %s", last_error().c_str());

  expect_launch_error("misaligned load",
                      [&] { return DB_LAUNCH(load_at_kernel, dim3(1), dim3(1), 0, nullptr, b, 8LL, o); },
                      {"kernel load_at_kernel", "db_ld_stream_v4", "emu_test.cpp", "misaligned",
                       "address mod 16 = 8"});
  expect_launch_error("load past the end",
                      [&] { return DB_LAUNCH(load_nc_at_kernel, dim3(1), dim3(1), 0, nullptr, b, 992LL, o); },
                      {"kernel load_nc_at_kernel", "db_ld_nc_v4", "out of bounds",
                       "last 8 byte(s) lie past the end of the 1000-byte buffer"});
  expect_launch_error("load before the start",
                      [&] { return DB_LAUNCH(load_at_kernel, dim3(1), dim3(1), 0, nullptr, b, -4096LL, o); },
                      {"out of bounds", "before the start of the 1000-byte buffer"});
  expect_launch_error("store past the end",
                      [&] { return DB_LAUNCH(store_at_kernel, dim3(1), dim3(1), 0, nullptr, b, 1008LL); },
                      {"kernel store_at_kernel", "db_st_v4", "8 byte(s) past the end of the 1000-byte buffer"});
  expect_launch_error("misaligned store",
                      [&] { return DB_LAUNCH(store_at_kernel, dim3(1), dim3(1), 0, nullptr, b, 4LL); },
                      {"db_st_v4", "misaligned"});
  expect_launch_error("cp.async from host memory",
                      [&] {
                        static uint4 host[4];
                        return DB_LAUNCH(cp_async_at_kernel, dim3(1), dim3(1), 64, nullptr,
                                         reinterpret_cast<const unsigned char *>(host), 0LL, 0LL, o);
                      },
                      {"db_cp_async_16 (global source)", "outside every device allocation"});
  expect_launch_error("cp.async past the shared memory",
                      [&] { return DB_LAUNCH(cp_async_at_kernel, dim3(1), dim3(1), 64, nullptr, b, 0LL, 64LL, o); },
                      {"db_cp_async_16 (shared destination)", "outside the block's 64 bytes of dynamic shared memory"});
  expect_launch_error("misaligned cp.async destination",
                      [&] { return DB_LAUNCH(cp_async_at_kernel, dim3(1), dim3(1), 64, nullptr, b, 0LL, 4LL, o); },
                      {"db_cp_async_16 (shared destination)", "misaligned"});
  expect_launch_error("misaligned cp.async source",
                      [&] { return DB_LAUNCH(cp_async_at_kernel, dim3(1), dim3(1), 64, nullptr, b, 2LL, 0LL, o); },
                      {"db_cp_async_16 (global source)", "misaligned"});

  // Plain accesses past the guard page: a fault, turned into a launch error; the process lives on.
  DeviceVector<float> floats(256);  // exactly 1 KiB: its end is 256-byte aligned, at the guard
  float *f = floats.get();
  expect_launch_error("plain read past the end",
                      [&] { return DB_LAUNCH(plain_read_at_kernel, dim3(1), dim3(1), 0, nullptr, f, 256LL, f); },
                      {"kernel plain_read_at_kernel", "invalid memory access", "SIGSEGV",
                       "0 byte(s) past the end of the 1024-byte buffer"});
  expect_launch_error("plain write far before the start",
                      [&] { return DB_LAUNCH(plain_write_at_kernel, dim3(1), dim3(1), 0, nullptr, f, -1024LL); },
                      {"kernel plain_write_at_kernel", "invalid memory access"});
  DeviceVector<int> deep_out(1);
  status = DB_LAUNCH(stack_overflow_kernel, dim3(1), dim3(2), 0, nullptr, 100, deep_out.get());
  EXPECT(status == DB_OK, "100 KiB of stack: %s", last_error().c_str());
  expect_launch_error("stack overflow",
                      [&] { return DB_LAUNCH(stack_overflow_kernel, dim3(1), dim3(2), 0, nullptr, 400, deep_out.get()); },
                      {"kernel stack_overflow_kernel", ", thread (", "stack overflow", "256 KiB"});
  status = DB_LAUNCH(plain_write_at_kernel, dim3(1), dim3(1), 0, nullptr, f, 255LL);
  EXPECT(status == DB_OK, "the launch after the faults: %s", last_error().c_str());
  EXPECT(floats.read()[255] == 1.0f, "the launch after the faults did not write");

  // A sparse 3 GiB allocation costs only the pages touched: a load and a store past 2 GiB.
  const size_t sparse = size_t(3) << 30;
  unsigned char *big = nullptr;
  EXPECT(cudaMalloc(reinterpret_cast<void **>(&big), sparse) == cudaSuccess, "3 GiB cudaMalloc");
  if (big) {
    const long long far = (long long)(sparse - 4096);
    status = DB_LAUNCH(store_at_kernel, dim3(1), dim3(1), 0, nullptr, big, far);
    EXPECT(status == DB_OK, "store past 2 GiB: %s", last_error().c_str());
    status = DB_LAUNCH(load_at_kernel, dim3(1), dim3(1), 0, nullptr, big, far, o);
    EXPECT(status == DB_OK, "load past 2 GiB: %s", last_error().c_str());
    EXPECT(out.read()[0].x == 1 && out.read()[0].w == 4, "the value stored past 2 GiB");
    expect_launch_error("load just past 3 GiB",
                        [&] { return DB_LAUNCH(load_at_kernel, dim3(1), dim3(1), 0, nullptr, big, (long long)sparse, o); },
                        {"0 byte(s) past the end of the 3221225472-byte buffer"});
    cudaFree(big);
  }
}


/* ---- a paged KV cache whose pages sit past 4 GiB ---------------------------------------------- */

// The same attention (and KV append) on two paged caches holding the same tokens: a compact one
// (pages 0..P-1) and a sparse 4.5 GiB one whose used pages are its last P, so every byte offset
// into it is past 2^32. The kernels must give bit-identical outputs; a byte offset computed in
// 32 bits reads (or writes) the wrong page, or outside the buffer (a launch error).
struct PagedCase {
  int batch, q_heads, kv_heads, head_dim, page_size, pages_per_seq;
  int lens[2];
};

void test_kv_cache_past_4gib() {
  const PagedCase pc{2, 8, 2, 128, 16, 8, {100, 37}};
  db_context *ctx = nullptr;
  if (db_context_create(0, &ctx) != DB_OK) {
    EXPECT(false, "db_context_create: %s", last_error().c_str());
    return;
  }
  const size_t page_elems = (size_t)pc.kv_heads * pc.page_size * pc.head_dim;
  const size_t page_bytes = page_elems * 2;
  const int used = pc.batch * pc.pages_per_seq;
  const size_t far_bytes = (size_t(9) << 29);  // 4.5 GiB
  const int far_pages = (int)(far_bytes / page_bytes);
  const int far_base = far_pages - used;
  EXPECT((size_t)far_base * page_bytes > (size_t(1) << 32), "the far pages start below 4 GiB");

  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto random_bf16 = [&](size_t n) {
    std::vector<uint16_t> v(n);
    for (auto &x : v) x = __bfloat16_as_ushort(__float2bfloat16_rn(uni(rng)));
    return v;
  };
  std::vector<int> perm(used);
  for (int i = 0; i < used; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> table_near(used), table_far(used);
  for (int i = 0; i < used; ++i) table_near[i] = perm[i], table_far[i] = far_base + perm[i];

  const size_t q_elems = (size_t)pc.batch * pc.q_heads * pc.head_dim;
  const size_t new_elems = (size_t)pc.batch * pc.kv_heads * pc.head_dim;
  DeviceVector<uint16_t> q(random_bf16(q_elems)), k_new(random_bf16(new_elems)),
      v_new(random_bf16(new_elems)), out_near(q_elems), out_far(q_elems);
  DeviceVector<uint16_t> k_near(used * page_elems), v_near(used * page_elems);
  DeviceVector<int32_t> t_near(table_near), t_far(table_far), lens(std::vector<int32_t>{pc.lens[0], pc.lens[1]}),
      positions(std::vector<int32_t>{pc.lens[0], pc.lens[1]});
  unsigned char *k_far = nullptr, *v_far = nullptr;
  EXPECT(cudaMalloc(reinterpret_cast<void **>(&k_far), far_bytes) == cudaSuccess &&
             cudaMalloc(reinterpret_cast<void **>(&v_far), far_bytes) == cudaSuccess,
         "two sparse 4.5 GiB caches");
  if (!k_far || !v_far) return;
  for (int j = 0; j < used; ++j) {  // logical page j: the same tokens in both caches
    const std::vector<uint16_t> kp = random_bf16(page_elems), vp = random_bf16(page_elems);
    cudaMemcpyAsync(k_near.get() + (size_t)perm[j] * page_elems, kp.data(), page_bytes, cudaMemcpyHostToDevice);
    cudaMemcpyAsync(v_near.get() + (size_t)perm[j] * page_elems, vp.data(), page_bytes, cudaMemcpyHostToDevice);
    cudaMemcpyAsync(k_far + (size_t)table_far[j] * page_bytes, kp.data(), page_bytes, cudaMemcpyHostToDevice);
    cudaMemcpyAsync(v_far + (size_t)table_far[j] * page_bytes, vp.data(), page_bytes, cudaMemcpyHostToDevice);
  }
  auto cache = [&](bool far) {
    db_kv_cache c{};
    c.k = (uint64_t)(uintptr_t)(far ? (void *)k_far : (void *)k_near.get());
    c.v = (uint64_t)(uintptr_t)(far ? (void *)v_far : (void *)v_near.get());
    c.page_table = (uint64_t)(uintptr_t)(far ? t_far.get() : t_near.get());
    c.layout = DB_KV_PAGED;
    c.dtype = DB_DTYPE_BF16;
    c.kv_heads = pc.kv_heads;
    c.head_dim = pc.head_dim;
    c.page_size = pc.page_size;
    c.num_pages = far ? far_pages : used;
    c.pages_per_seq = pc.pages_per_seq;
    return c;
  };
  auto run = [&](bool far, int variant, int splits) -> std::vector<uint16_t> {
    const DeviceVector<uint16_t> &out = far ? out_far : out_near;
    cudaMemsetAsync(out.get(), 0xff, q_elems * 2);
    db_attention_params p{};
    p.q = (uint64_t)(uintptr_t)q.get();
    p.out = (uint64_t)(uintptr_t)out.get();
    p.context_lens = (uint64_t)(uintptr_t)lens.get();
    p.cache = cache(far);
    p.batch = pc.batch;
    p.q_heads = pc.q_heads;
    p.max_context = pc.pages_per_seq * pc.page_size;
    p.num_splits = splits;
    p.variant = variant;
    uint64_t ws_bytes = 0;
    int status = db_attention_plan(ctx, &p, &ws_bytes);
    EXPECT(status == DB_OK, "plan: %s", last_error().c_str());
    void *ws = nullptr;
    if (ws_bytes) cudaMalloc(&ws, ws_bytes);
    p.workspace = (uint64_t)(uintptr_t)ws;
    p.workspace_bytes = ws_bytes;
    status = db_attention(ctx, &p);
    EXPECT(status == DB_OK, "%s cache, variant %d, %d splits: %s", far ? "far" : "near", variant,
           splits, last_error().c_str());
    cudaFree(ws);
    return out.read();
  };
  auto compare = [&](const char *what) {
    for (int variant : {DB_ATTENTION_SIMT, DB_ATTENTION_MMA})
      for (int splits : {1, 3}) {
        const std::vector<uint16_t> near = run(false, variant, splits), far = run(true, variant, splits);
        int differ = 0;
        for (size_t i = 0; i < q_elems; ++i) differ += near[i] != far[i] || near[i] == 0xffff;
        EXPECT(differ == 0, "%s: variant %d, %d splits: %d of %zu outputs differ between the caches "
               "near 0 and past 4 GiB", what, variant, splits, differ, q_elems);
      }
  };
  compare("attention");
  for (bool far : {false, true}) {  // one more token per sequence, through the append kernel
    db_kv_append_params a{};
    a.k_new = (uint64_t)(uintptr_t)k_new.get();
    a.v_new = (uint64_t)(uintptr_t)v_new.get();
    a.positions = (uint64_t)(uintptr_t)positions.get();
    a.cache = cache(far);
    a.batch = pc.batch;
    const int status = db_kv_append(ctx, &a);
    EXPECT(status == DB_OK, "append to the %s cache: %s", far ? "far" : "near", last_error().c_str());
  }
  cudaMemcpyAsync(lens.get(), std::vector<int32_t>{pc.lens[0] + 1, pc.lens[1] + 1}.data(), 8,
                  cudaMemcpyHostToDevice);
  compare("append, then attention");
  cudaFree(k_far);
  cudaFree(v_far);
  db_context_destroy(ctx);
}

/* ---- the interleave schedule: blocks in flight at once, the cross-block write check ---------- */

// Every block adds its count into *total: with an atomic (right) or a plain += (a lost update on
// a GPU, which the write check reports).
template <bool Atomic>
__global__ void total_kernel(const int *in, int *total) {
  const int v = db_warp_sum(in[blockIdx.x * blockDim.x + threadIdx.x]);
  if (threadIdx.x == 0) {
    if (Atomic)
      atomicAdd(total, v);
    else
      *total += v; /* BUG (deliberate) when not Atomic: a read-modify-write across blocks */
  }
}

// Blocks 1.. read what block 0 writes, with no ordering between blocks.
__global__ void read_block0_kernel(int *flag, int *out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *flag = 42;
  __syncthreads();
  if (blockIdx.x != 0 && threadIdx.x == 0) out[blockIdx.x] = *flag; /* BUG (deliberate) */
}

// Each block waits for the one before it (a chain, as a stream-K fixup or a decoupled look-back
// waits for an earlier block), spinning with __nanosleep on an atomic read.
__global__ void chain_kernel(int *flags, int *order, int *counter) {
  if (threadIdx.x == 0) {
    if (blockIdx.x > 0)
      while (atomicAdd(&flags[blockIdx.x - 1], 0) == 0) __nanosleep(100);
    order[blockIdx.x] = atomicAdd(counter, 1);
    atomicExch(&flags[blockIdx.x], 1);
  }
}

// Static shared memory per block: each block sums its own values through it, the barriers
// giving the interleave schedule its chances to run other blocks in between.
__global__ void static_smem_per_block_kernel(const int *in, int *out) {
  DB_SHARED(int, slot, 64);
  slot[threadIdx.x] = in[blockIdx.x * 64 + threadIdx.x];
  __syncthreads();
  int s = 0;
  for (int i = 0; i < 64; ++i) s += slot[i];
  __syncthreads();
  slot[threadIdx.x] = s;
  __syncthreads();
  out[blockIdx.x * 64 + threadIdx.x] = slot[(threadIdx.x + 1) % 64];
}

void test_interleave() {
  const int blocks = 16, threads = 32;
  std::vector<int> values(blocks * threads);
  int want = 0;
  for (size_t i = 0; i < values.size(); ++i) want += values[i] = (int)(i % 7 + 1);
  DeviceVector<int> in(values), total(1);
  for (const char *schedule : {"forward", "shuffle:1", "interleave:1", "interleave:2"}) {
    ScopedModes modes(schedule, "all");
    cudaMemsetAsync(total.get(), 0, sizeof(int));
    int status = DB_LAUNCH((total_kernel<true>), dim3(blocks), dim3(threads), 0, nullptr, in.get(),
                           total.get());
    EXPECT(status == DB_OK && total.read()[0] == want, "%s: atomic total: status %d (%s), %d want %d",
           schedule, status, last_error().c_str(), total.read()[0], want);
    cudaMemsetAsync(total.get(), 0, sizeof(int));
    status = DB_LAUNCH((total_kernel<false>), dim3(blocks), dim3(threads), 0, nullptr, in.get(),
                       total.get());
    if (std::strncmp(schedule, "interleave", 10) != 0) {
      EXPECT(status == DB_OK && total.read()[0] == want, "%s: the plain += should pass unseen: %d (%s)",
             schedule, status, last_error().c_str());
    } else {
      const std::string m = last_error();
      EXPECT(status == DB_ERR_LAUNCH && m.find("kernel total_kernel<false>: blocks (") != std::string::npos &&
                 m.find("both wrote byte") != std::string::npos &&
                 m.find("offset 0 of the 4-byte buffer") != std::string::npos,
             "%s: the plain += across blocks went unseen: status %d: %s", schedule, status, m.c_str());
    }
  }

  // Block order: under the sequential schedules block 0 always runs first.
  DeviceVector<int> flag(1), seen(blocks);
  int wrong_interleaved = 0;
  for (const char *schedule : {"forward", "reverse", "interleave:1", "interleave:3"}) {
    ScopedModes modes(schedule, nullptr);
    cudaMemsetAsync(flag.get(), 0, sizeof(int));
    const int status = DB_LAUNCH(read_block0_kernel, dim3(blocks), dim3(threads), 0, nullptr,
                                 flag.get(), seen.get());
    EXPECT(status == DB_OK, "%s: %s", schedule, last_error().c_str());
    const std::vector<int> got = seen.read();
    int wrong = 0;
    for (int b = 1; b < blocks; ++b) wrong += got[b] != 42;
    if (std::strncmp(schedule, "interleave", 10) == 0)
      wrong_interleaved += wrong;
    else
      EXPECT(wrong == 0, "%s: blocks run in order, yet %d read before block 0 wrote", schedule, wrong);
  }
  EXPECT(wrong_interleaved > 0, "interleave: every block read block 0's flag after it was written");

  // Correct kernels stay correct with blocks interleaved (per-block shared memory).
  std::vector<int> v(blocks * 64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (int)(i * 3 % 11);
  DeviceVector<int> vin(v), vout(blocks * 64);
  for (const char *schedule : {"interleave:1", "interleave:4"}) {
    ScopedModes modes(schedule, "all");
    const int status = DB_LAUNCH(static_smem_per_block_kernel, dim3(blocks), dim3(64), 0, nullptr,
                                 vin.get(), vout.get());
    EXPECT(status == DB_OK, "%s: %s", schedule, last_error().c_str());
    const std::vector<int> got = vout.read();
    for (int b = 0; b < blocks; ++b) {
      int s = 0;
      for (int i = 0; i < 64; ++i) s += v[b * 64 + i];
      for (int t = 0; t < 64; ++t)
        EXPECT(got[b * 64 + t] == s, "%s: block %d thread %d: %d want %d", schedule, b, t, got[b * 64 + t], s);
    }
    test_shared_memory();
    test_shuffles();
  }
  // A block spinning on an earlier block's flag lets it run (blocks start in grid order).
  for (const char *schedule : {"forward", "interleave:1", "interleave:5"}) {
    ScopedModes modes(schedule, "all");
    const int chain = 24;
    DeviceVector<int> flags(chain), order(chain), counter(1);
    const int status = DB_LAUNCH(chain_kernel, dim3(chain), dim3(64), 0, nullptr, flags.get(),
                                 order.get(), counter.get());
    EXPECT(status == DB_OK, "%s: chain: %s", schedule, last_error().c_str());
    const std::vector<int> got = order.read();
    for (int b = 0; b < chain; ++b) EXPECT(got[b] == b, "%s: block %d ran %d-th", schedule, b, got[b]);
  }
  for (const char *bad : {"interleave:", "interleave:x"}) run_order_expecting_failure(bad);
  // The same seed gives the same order.
  EXPECT(run_order("interleave:7") == run_order("interleave:7"), "interleave:7 is not reproducible");
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
  test_schedules();
  test_hazard_modes();
  test_memory_checks();
  test_kv_cache_past_4gib();
  test_interleave();
  test_conversions();
  if (g_failures) {
    std::printf("emu_test: %d failure(s)\n", g_failures.load());
    return 1;
  }
  std::printf("emu_test: ok\n");
  return 0;
}
