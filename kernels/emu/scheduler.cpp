// scheduler.cpp: runs an emulated launch, one block at a time, the block's threads as cooperative
// fibers on the calling OS thread.
//
// Why fibers and not OS threads: a block barrier or a warp shuffle then costs a context switch of
// a few nanoseconds instead of a futex round trip, static shared memory can be `static`, the run
// is deterministic, and deadlock detection is exact: when the ready queue is empty while threads
// are still alive, nothing can ever wake them.
//
// Hazard modes (emu.h: DB_EMU_SCHEDULE, DB_EMU_HAZARDS) change the order in which released
// fibers resume, defer cp.async copies to their wait_group, and poison shared memory per block.
// The default (forward, no hazards) keeps the plain FIFO order and the immediate copies.
//
// The switch is a hand-written x86-64 one (callee-saved registers, MXCSR and the x87 control word:
// what the System V ABI says a call preserves). Elsewhere, or with -DDB_EMU_UCONTEXT, it is
// ucontext's swapcontext (a signal-mask system call per switch: correct, slower).
#include <sys/mman.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <stdexcept>
#include <vector>

#include "emu.h"

#if !defined(__x86_64__) && !defined(DB_EMU_UCONTEXT)
#define DB_EMU_UCONTEXT 1
#endif
#if defined(DB_EMU_UCONTEXT)
#include <ucontext.h>
#endif

uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace db_emu {
bool g_defer_cp_async = false;
}

#if !defined(DB_EMU_UCONTEXT)
// void db_emu_swap(void **save_sp, void *load_sp): saves the caller's callee-saved state on its
// stack and its stack pointer in *save_sp, then restores the state saved at load_sp.
extern "C" void db_emu_swap(void **save_sp, void *load_sp);
asm(R"(
  .text
  .p2align 4
  .globl db_emu_swap
  .hidden db_emu_swap
  .type db_emu_swap,@function
db_emu_swap:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size db_emu_swap, .-db_emu_swap
  .section .note.GNU-stack,"",@progbits
  .text
)");
#endif

namespace db_emu {
namespace {

constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kGuardBytes = 4096;  // PROT_NONE below each stack: an overflow faults at once
constexpr unsigned kMaxThreadsPerBlock = 1024;

enum class State : uint8_t { Ready, Running, AtBarrier, AtWarp, Exited };

struct Context {
#if defined(DB_EMU_UCONTEXT)
  ucontext_t uc;
#else
  void *sp = nullptr;
#endif
};

struct Fiber {
  Context ctx;
  char *stack = nullptr;  // lowest usable byte; kStackBytes long
  uint3 tid{};
  int warp = 0, lane = 0;
  State state = State::Ready;
  // where the fiber waits, for the deadlock report
  const char *wait_what = nullptr;
  const char *wait_file = nullptr;
  int wait_line = 0;
  // the fiber's operands at a pending warp collective (they live on its own stack)
  void *in = nullptr;
  void *out = nullptr;
  // deferred cp.async (DB_EMU_HAZARDS=cp_async): issued copies, oldest first, and where each
  // committed group ends in them; copies past the last end belong to the open group
  struct Copy {
    void *dst;
    const void *src;
    size_t bytes;
  };
  std::vector<Copy> copies;
  std::vector<size_t> group_ends;
};

struct Warp {
  unsigned existing = 0;  // lanes the block has (a partial last warp has fewer than 32)
  unsigned arrived = 0;   // lanes waiting at the pending collective
  unsigned mask = 0;
  CollectiveFn fn = nullptr;
  const char *what = nullptr;
  const char *file = nullptr;
  int line = 0;
};

// The hazard modes, read from the environment at each launch (see emu.h).
enum class Order : uint8_t { Forward, Reverse, Shuffle };
struct Modes {
  Order order = Order::Forward;
  uint64_t seed = 0;
  bool defer_cp_async = false;
  bool poison_blocks = false;
};

struct Launch {
  const char *name = nullptr;
  Modes modes;
  uint64_t rng = 0;  // shuffle: splitmix64 state, seeded per launch
  size_t smem_bytes = 0;
  KernelBody *body = nullptr;
  unsigned threads = 0;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  std::vector<int> ready;  // FIFO ring of fiber indices
  unsigned ready_head = 0, ready_count = 0;
  unsigned live = 0;
  Fiber *current = nullptr;
  Context scheduler;
  // the block barrier
  unsigned barrier_arrived = 0;
  const char *barrier_file = nullptr;
  int barrier_line = 0;
  bool barrier_mismatch = false;
  // outcome
  LaunchResult result = LAUNCH_OK;
  std::string message;
  unsigned char *smem = nullptr;
};

std::mutex g_launch_mutex;  // one emulated launch at a time, process-wide
Launch *g_launch = nullptr;
std::vector<char *> g_stacks;  // grown on demand, kept for the life of the process
std::vector<unsigned char> g_smem_storage;
std::vector<std::pair<void *, size_t>> g_static_smem;  // DB_SHARED arrays met so far

char *new_stack() {
  void *p = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  if (mprotect(p, kGuardBytes, PROT_NONE) != 0) {
    munmap(p, kStackBytes + kGuardBytes);
    throw std::bad_alloc();
  }
  return static_cast<char *>(p) + kGuardBytes;
}

const char *base_name(const char *path) {
  const char *slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

extern "C" [[noreturn]] void db_emu_fiber_entry();

void context_init(Fiber &f) {
#if defined(DB_EMU_UCONTEXT)
  getcontext(&f.ctx.uc);
  f.ctx.uc.uc_stack.ss_sp = f.stack;
  f.ctx.uc.uc_stack.ss_size = kStackBytes;
  f.ctx.uc.uc_link = nullptr;
  makecontext(&f.ctx.uc, reinterpret_cast<void (*)()>(&db_emu_fiber_entry), 0);
#else
  // The frame db_emu_swap pops: [csr][r15][r14][r13][r12][rbx][rbp][return address], then a fake
  // return address for the entry function, which so starts with rsp = 8 (mod 16) like any callee.
  uint64_t *top = reinterpret_cast<uint64_t *>(f.stack + kStackBytes);
  uint32_t csr[2] = {0, 0};
  asm volatile("stmxcsr %0" : "=m"(csr[0]));
  asm volatile("fnstcw %0" : "=m"(csr[1]));
  top[-1] = 0;
  top[-2] = reinterpret_cast<uint64_t>(&db_emu_fiber_entry);
  for (int i = 3; i <= 8; ++i) top[-i] = 0;
  top[-9] = (uint64_t)csr[0] | ((uint64_t)(csr[1] & 0xffffu) << 32);
  f.ctx.sp = &top[-9];
#endif
}

inline void context_switch(Context &from, Context &to) {
#if defined(DB_EMU_UCONTEXT)
  swapcontext(&from.uc, &to.uc);
#else
  db_emu_swap(&from.sp, to.sp);
#endif
}

inline uint64_t next_random(Launch &L) {  // splitmix64
  uint64_t z = (L.rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The ready fibers: a ring, run from its front.
inline void push_ready(Launch &L, int index) {
  L.ready[(L.ready_head + L.ready_count) % L.threads] = index;
  ++L.ready_count;
}

inline void push_ready_front(Launch &L, int index) {
  L.ready_head = (L.ready_head + L.threads - 1) % L.threads;
  L.ready[L.ready_head] = index;
  ++L.ready_count;
}

inline Fiber *pop_ready(Launch &L) {
  if (L.ready_count == 0) return nullptr;
  const int index = L.ready[L.ready_head];
  L.ready_head = (L.ready_head + 1) % L.threads;
  --L.ready_count;
  return &L.fibers[index];
}

// Reordered modes: the whole block (at its start or a barrier, none else ready) queues in the
// launch's order: descending, or a fresh random permutation.
void release_block(Launch &L) {
  int *order = L.ready.data();
  L.ready_head = 0;
  L.ready_count = L.threads;
  for (unsigned i = 0; i < L.threads; ++i) {
    order[i] = L.modes.order == Order::Reverse ? (int)(L.threads - 1 - i) : (int)i;
    L.fibers[i].state = State::Ready;
  }
  if (L.modes.order == Order::Shuffle)
    for (unsigned i = L.threads; i > 1; --i) std::swap(order[i - 1], order[next_random(L) % i]);
}

// Reordered modes: the lanes a warp collective released (the caller among them) run next, ahead
// of the other ready fibers (the warp races ahead, as a warp may on a GPU), highest lane first or
// in a random order.
void release_warp(Launch &L, int base, unsigned lanes) {
  int order[32];
  unsigned n = 0;
  for (int lane = 0; lane < 32; ++lane)
    if (lanes >> lane & 1u) order[n++] = base + lane;
  if (L.modes.order == Order::Shuffle)
    for (unsigned i = n; i > 1; --i) std::swap(order[i - 1], order[next_random(L) % i]);
  for (unsigned i = 0; i < n; ++i) {  // pushed to the front: the last pushed runs first
    L.fibers[order[i]].state = State::Ready;
    push_ready_front(L, order[i]);
  }
}

inline void make_current(Launch &L, Fiber *f) {
  L.current = f;
  f->state = State::Running;
  threadIdx = f->tid;
}

// The current fiber stops running (it waits or has exited): run the next ready one, or return to
// the scheduler when none is ready.
void switch_away(Launch &L) {
  Fiber *self = L.current;
  Fiber *next = pop_ready(L);
  if (next) {
    make_current(L, next);
    context_switch(self->ctx, next->ctx);
  } else {
    L.current = nullptr;
    context_switch(self->ctx, L.scheduler);
  }
}

// Reordered modes: the current fiber was released with others and queued among them; run
// whichever comes first (perhaps itself).
void yield_released(Launch &L) {
  Fiber *self = L.current;
  Fiber *next = pop_ready(L);  // never null: self is queued
  make_current(L, next);
  if (next != self) context_switch(self->ctx, next->ctx);
}

[[noreturn]] void abandon(Launch &L, LaunchResult result, std::string message) {
  if (L.result == LAUNCH_OK) {
    L.result = result;
    L.message = std::move(message);
  }
  Fiber *self = L.current;
  L.current = nullptr;
  context_switch(self->ctx, L.scheduler);
  std::abort();  // the scheduler never resumes an abandoned fiber
}

std::string block_label(const Launch &L) {
  return format("kernel %s, block (%u,%u,%u) of grid (%u,%u,%u) x (%u,%u,%u) threads", L.name,
                blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y, gridDim.z, blockDim.x,
                blockDim.y, blockDim.z);
}

// "32 thread(s) wait at __syncthreads (emu_test.cpp:40); 32 thread(s) have exited"
std::string describe_waits(const Launch &L) {
  struct Site {
    const char *what, *file;
    int line;
    unsigned count;
    int first_thread;
  };
  std::vector<Site> sites;
  unsigned exited = 0;
  for (unsigned i = 0; i < L.threads; ++i) {
    const Fiber &f = L.fibers[i];
    if (f.state == State::Exited) {
      ++exited;
      continue;
    }
    if (f.state != State::AtBarrier && f.state != State::AtWarp) continue;
    bool found = false;
    for (Site &s : sites) {
      if (s.what == f.wait_what && s.file == f.wait_file && s.line == f.wait_line) {
        ++s.count;
        found = true;
        break;
      }
    }
    if (!found) sites.push_back(Site{f.wait_what, f.wait_file, f.wait_line, 1, (int)i});
  }
  std::string out;
  for (const Site &s : sites) {
    if (!out.empty()) out += "; ";
    out += format("%u thread(s) wait at %s (%s:%d), the first thread %d", s.count, s.what,
                  base_name(s.file), s.line, s.first_thread);
  }
  if (exited) {
    if (!out.empty()) out += "; ";
    out += format("%u thread(s) have exited", exited);
  }
  return out;
}

extern "C" [[noreturn]] void db_emu_fiber_entry() {
  Launch &L = *g_launch;
  try {
    L.body->run();
  } catch (const std::exception &e) {
    abandon(L, LAUNCH_FAILED, block_label(L) + ": the kernel threw: " + e.what());
  } catch (...) {
    abandon(L, LAUNCH_FAILED, block_label(L) + ": the kernel threw");
  }
  L.current->state = State::Exited;
  --L.live;
  switch_away(L);
  std::abort();  // an exited fiber is never resumed
}

void run_block(Launch &L) {
  if (L.modes.poison_blocks) {
    // Shared memory holds garbage at a block's start on a GPU, not the previous block's values.
    std::memset(L.smem, 0xff, L.smem_bytes);
    for (const auto &[p, bytes] : g_static_smem) std::memset(p, 0xff, bytes);
  }
  for (unsigned i = 0; i < L.threads; ++i) {
    Fiber &f = L.fibers[i];
    f.in = f.out = nullptr;
    f.copies.clear();  // copies a thread never waited for die with its block
    f.group_ends.clear();
    context_init(f);
    L.ready[i] = (int)i;
  }
  L.ready_head = 0;
  L.ready_count = L.threads;
  for (unsigned i = 0; i < L.threads; ++i) L.fibers[i].state = State::Ready;
  if (L.modes.order != Order::Forward) release_block(L);
  L.live = L.threads;
  L.barrier_arrived = 0;
  L.barrier_mismatch = false;
  for (Warp &w : L.warps) w.arrived = 0;

  Fiber *first = pop_ready(L);
  make_current(L, first);
  context_switch(L.scheduler, first->ctx);
  // Back here when no fiber is ready: all exited, the launch failed, or a deadlock.
  if (L.result != LAUNCH_OK || L.live == 0) return;
  L.result = LAUNCH_DEADLOCK;
  L.message = "emulation deadlock in " + block_label(L) + ": " + describe_waits(L);
}

}  // namespace

void *dynamic_smem() { return g_launch ? g_launch->smem : nullptr; }

bool register_static_smem(void *p, size_t bytes) {
  g_static_smem.emplace_back(p, bytes);  // under the launch mutex: a kernel is running
  if (g_launch && g_launch->modes.poison_blocks) std::memset(p, 0xff, bytes);
  return true;
}

void cp_async_issue(void *dst, const void *src, size_t bytes) {
  Fiber &f = *g_launch->current;
  f.copies.push_back(Fiber::Copy{dst, src, bytes});
  // Until the wait, the destination holds no defined value: all-ones bytes (NaN) expose a read.
  std::memset(dst, 0xff, bytes);
}

void cp_async_commit() {
  Fiber &f = *g_launch->current;
  f.group_ends.push_back(f.copies.size());  // an empty group is a group too, as in PTX
}

void cp_async_wait(int newest_pending) {
  Fiber &f = *g_launch->current;
  const size_t groups = f.group_ends.size();
  if (newest_pending < 0) newest_pending = 0;
  if (groups <= (size_t)newest_pending) return;
  const size_t done_groups = groups - (size_t)newest_pending;
  const size_t done = f.group_ends[done_groups - 1];
  for (size_t i = 0; i < done; ++i) std::memcpy(f.copies[i].dst, f.copies[i].src, f.copies[i].bytes);
  f.copies.erase(f.copies.begin(), f.copies.begin() + (ptrdiff_t)done);
  f.group_ends.erase(f.group_ends.begin(), f.group_ends.begin() + (ptrdiff_t)done_groups);
  for (size_t &end : f.group_ends) end -= done;
}

[[noreturn]] void fail_launch(const std::string &message) {
  Launch &L = *g_launch;
  abandon(L, LAUNCH_FAILED, block_label(L) + ", thread (" + std::to_string(threadIdx.x) + "," +
                                std::to_string(threadIdx.y) + "," + std::to_string(threadIdx.z) +
                                "): " + message);
}

void block_barrier(const char *file, int line) {
  Launch &L = *g_launch;
  Fiber *self = L.current;
  if (L.barrier_arrived == 0) {
    L.barrier_file = file;
    L.barrier_line = line;
    L.barrier_mismatch = false;
  } else if (line != L.barrier_line || std::strcmp(file, L.barrier_file) != 0) {
    L.barrier_mismatch = true;
  }
  self->state = State::AtBarrier;
  self->wait_what = "__syncthreads";
  self->wait_file = file;
  self->wait_line = line;
  if (++L.barrier_arrived < L.threads) {
    switch_away(L);
    return;
  }
  // Every thread of the block has arrived.
  if (L.barrier_mismatch)
    abandon(L, LAUNCH_DEADLOCK,
            "emulation deadlock in " + block_label(L) +
                ": the threads wait at different barriers: " + describe_waits(L));
  L.barrier_arrived = 0;
  if (L.modes.order != Order::Forward) {
    // Every thread is here, so none is ready: the next phase starts in the launch's order.
    release_block(L);
    yield_released(L);
    return;
  }
  for (unsigned i = 0; i < L.threads; ++i) {
    Fiber &f = L.fibers[i];
    if (&f != self && f.state == State::AtBarrier) {
      f.state = State::Ready;
      push_ready(L, (int)i);
    }
  }
  self->state = State::Running;
}

void warp_collective(unsigned mask, const char *what, CollectiveFn fn, void *in, void *out,
                     const char *file, int line) {
  Launch &L = *g_launch;
  Fiber *self = L.current;
  Warp &W = L.warps[self->warp];
  const unsigned bit = 1u << self->lane;
  if (!(mask & bit))
    fail_launch(format("%s (%s:%d): mask 0x%08x does not name the calling lane %d", what,
                       base_name(file), line, mask, self->lane));
  const unsigned effective = mask & W.existing;
  if (W.arrived == 0) {
    W.fn = fn;
    W.mask = mask;
    W.what = what;
    W.file = file;
    W.line = line;
  } else if (W.fn != fn || W.mask != mask || std::strcmp(W.what, what) != 0) {
    // Lanes of one warp wait at different collectives: none of them can complete.
    abandon(L, LAUNCH_DEADLOCK,
            "emulation deadlock in " + block_label(L) +
                format(": warp %d diverged: lane %d reached %s (%s:%d) with mask 0x%08x while "
                       "lanes 0x%08x wait at %s (%s:%d) with mask 0x%08x (the emulator runs one "
                       "collective per warp at a time)",
                       self->warp, self->lane, what, base_name(file), line, mask, W.arrived, W.what,
                       base_name(W.file), W.line, W.mask));
  }
  self->in = in;
  self->out = out;
  self->wait_what = what;
  self->wait_file = file;
  self->wait_line = line;
  W.arrived |= bit;
  if ((W.arrived & effective) != effective) {
    self->state = State::AtWarp;
    switch_away(L);
    return;
  }
  // The last lane to arrive completes the collective for all of them.
  void *ins[32] = {};
  void *outs[32] = {};
  const int base = self->warp * 32;
  for (int lane = 0; lane < 32; ++lane) {
    if (!(effective >> lane & 1u)) continue;
    ins[lane] = L.fibers[base + lane].in;
    outs[lane] = L.fibers[base + lane].out;
  }
  W.arrived = 0;
  fn(ins, outs, effective);
  if (L.modes.order != Order::Forward) {
    release_warp(L, base, effective);
    yield_released(L);
    return;
  }
  for (int lane = 0; lane < 32; ++lane) {
    if (!(effective >> lane & 1u) || lane == self->lane) continue;
    L.fibers[base + lane].state = State::Ready;
    push_ready(L, base + lane);
  }
}

namespace {
void vote_complete(void *const *in, void *const *out, unsigned mask) {
  unsigned ballot = 0;
  for (int lane = 0; lane < 32; ++lane)
    if ((mask >> lane & 1u) && *static_cast<const int *>(in[lane])) ballot |= 1u << lane;
  for (int lane = 0; lane < 32; ++lane)
    if (mask >> lane & 1u) *static_cast<uint64_t *>(out[lane]) = (uint64_t)mask << 32 | ballot;
}
}  // namespace

uint64_t vote(unsigned mask, int predicate, const char *what, const char *file, int line) {
  int in = predicate != 0;
  uint64_t out = 0;
  warp_collective(mask, what, &vote_complete, &in, &out, file, line);
  return out;
}

namespace {
// DB_EMU_SCHEDULE=forward|reverse|shuffle[:seed], DB_EMU_HAZARDS=none|all|cp_async,smem (comma
// separated). An unknown value is an error, not a silent default.
bool read_modes(Modes &m, std::string &error) {
  m = Modes{};
  const char *schedule = std::getenv("DB_EMU_SCHEDULE");
  if (schedule && *schedule) {
    const std::string v = schedule;
    if (v == "forward") {
      m.order = Order::Forward;
    } else if (v == "reverse") {
      m.order = Order::Reverse;
    } else if (v == "shuffle" || v.rfind("shuffle:", 0) == 0) {
      m.order = Order::Shuffle;
      m.seed = 1;
      if (v != "shuffle") {
        char *end = nullptr;
        m.seed = std::strtoull(v.c_str() + 8, &end, 10);
        if (v.size() == 8 || *end || v[8] == '-' || v[8] == '+' || v[8] == ' ') {
          error = "DB_EMU_SCHEDULE=" + v + ": the seed after shuffle: must be a decimal number";
          return false;
        }
      }
    } else {
      error = "DB_EMU_SCHEDULE=" + v + ": want forward, reverse or shuffle[:seed]";
      return false;
    }
  }
  const char *hazards = std::getenv("DB_EMU_HAZARDS");
  if (hazards && *hazards) {
    const std::string v = hazards;
    size_t at = 0;
    while (at <= v.size()) {
      size_t comma = v.find(',', at);
      if (comma == std::string::npos) comma = v.size();
      const std::string word = v.substr(at, comma - at);
      if (word == "all") {
        m.defer_cp_async = m.poison_blocks = true;
      } else if (word == "cp_async") {
        m.defer_cp_async = true;
      } else if (word == "smem") {
        m.poison_blocks = true;
      } else if (word != "none" && !word.empty()) {
        error = "DB_EMU_HAZARDS=" + v + ": want none, all, or a comma list of cp_async and smem";
        return false;
      }
      at = comma + 1;
    }
  }
  return true;
}
}  // namespace

LaunchResult run_grid(const char *name, const void *kernel_id, dim3 grid, dim3 block, size_t smem,
                      KernelBody &body, std::string &message) {
  std::lock_guard<std::mutex> lock(g_launch_mutex);
  Modes modes;
  if (!read_modes(modes, message)) {
    message = "launch of " + std::string(name) + ": " + message;
    return LAUNCH_FAILED;
  }
  const uint64_t threads = (uint64_t)block.x * block.y * block.z;
  if (threads == 0 || threads > kMaxThreadsPerBlock || block.z > 64 || grid.x == 0 || grid.y == 0 ||
      grid.z == 0 || grid.y > 65535 || grid.z > 65535 || grid.x > 0x7fffffffu) {
    message = format("launch of %s: invalid configuration: grid (%u,%u,%u), block (%u,%u,%u)", name,
                     grid.x, grid.y, grid.z, block.x, block.y, block.z);
    return LAUNCH_FAILED;
  }
  const size_t smem_limit = max_dynamic_smem(kernel_id);
  if (smem > smem_limit) {
    message = format("launch of %s: %zu bytes of dynamic shared memory exceed the kernel's limit of "
                     "%zu (raise it with cudaFuncSetAttribute)",
                     name, smem, smem_limit);
    return LAUNCH_FAILED;
  }
  while (g_stacks.size() < threads) g_stacks.push_back(new_stack());
  // Shared memory holds garbage on a GPU; all-ones bytes are NaN in every float type.
  if (g_smem_storage.size() < smem + 16) g_smem_storage.resize(smem + 16);
  std::memset(g_smem_storage.data(), 0xff, g_smem_storage.size());

  Launch L;
  L.name = name;
  L.modes = modes;
  L.rng = modes.seed;
  L.smem_bytes = smem;
  L.body = &body;
  L.threads = (unsigned)threads;
  L.fibers.resize(threads);
  L.ready.resize(threads);
  L.warps.resize((threads + 31) / 32);
  uintptr_t smem_at = reinterpret_cast<uintptr_t>(g_smem_storage.data());
  L.smem = reinterpret_cast<unsigned char *>((smem_at + 15) & ~uintptr_t(15));
  for (unsigned i = 0; i < threads; ++i) {
    Fiber &f = L.fibers[i];
    f.stack = g_stacks[i];
    f.tid = uint3{i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
    f.warp = (int)(i / 32);
    f.lane = (int)(i % 32);
    L.warps[i / 32].existing |= 1u << (i % 32);
  }

  g_launch = &L;
  g_defer_cp_async = modes.defer_cp_async;
  blockDim = block;
  gridDim = grid;
  for (unsigned z = 0; z < grid.z && L.result == LAUNCH_OK; ++z)
    for (unsigned y = 0; y < grid.y && L.result == LAUNCH_OK; ++y)
      for (unsigned x = 0; x < grid.x && L.result == LAUNCH_OK; ++x) {
        blockIdx = uint3{x, y, z};
        run_block(L);
      }
  g_launch = nullptr;
  g_defer_cp_async = false;
  message = L.message;
  return L.result;
}

}  // namespace db_emu
