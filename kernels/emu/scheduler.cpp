// scheduler.cpp: runs an emulated launch, the threads of each block as cooperative fibers on the
// calling OS thread.
//
// Why fibers and not OS threads: a block barrier or a warp shuffle then costs a context switch of
// a few nanoseconds instead of a futex round trip, static shared memory can be `static`, the run
// is deterministic, and deadlock detection is exact: when a block has no ready fiber while some
// of its threads are still alive, nothing can ever wake them (no emulated block waits for
// another).
//
// Hazard modes (emu.h: DB_EMU_SCHEDULE, DB_EMU_HAZARDS) change the order in which released
// fibers resume, defer cp.async copies to their wait_group, and poison shared memory per block.
// The default (forward, no hazards) runs one block at a time, in grid order, its fibers in FIFO
// order. The interleave schedule keeps several blocks resident at once (kResidentBlocks slots,
// dispatched in grid order as a GPU does, so a block may spin on a flag an earlier block sets)
// and switches between their fibers, chosen by a seeded generator, at barriers, warp
// collectives, atomics, __nanosleep and the 16-byte global wrappers; it also runs the
// cross-block write check (write-protected device memory, below).
//
// Memory faults: device allocations have PROT_NONE guard pages (runtime.cpp), fiber stacks one
// below each. A SIGSEGV or SIGBUS raised by a running fiber is turned into a launch error: the
// handler (on an alternate signal stack) records the address and resumes the fiber in
// fault_trampoline on a fresh frame at the top of its stack, which ends the launch as
// fail_launch does. Faults anywhere else go to the handler installed before ours (the Go
// runtime's, or the default action).
//
// The switch is a hand-written x86-64 one (callee-saved registers, MXCSR and the x87 control word:
// what the System V ABI says a call preserves). Elsewhere, or with -DDB_EMU_UCONTEXT, it is
// ucontext's swapcontext (a signal-mask system call per switch: correct, slower). The fault
// handler and the write check need x86-64 Linux (they edit the interrupted registers); elsewhere
// a fault stays a crash and interleave runs without the write check.
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "emu.h"

#if !defined(__x86_64__) && !defined(DB_EMU_UCONTEXT)
#define DB_EMU_UCONTEXT 1
#endif
#if defined(DB_EMU_UCONTEXT)
#include <ucontext.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <ucontext.h>
#define DB_EMU_FAULTS 1
#else
#define DB_EMU_FAULTS 0
#endif

uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace db_emu {
bool g_defer_cp_async = false;
bool g_track_writes = false;
bool g_interleave = false;
uintptr_t g_global_lo = 1, g_global_hi = 0;  // empty: the first check takes the slow path
}  // namespace db_emu

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
// Interleave: blocks resident at once (a GPU holds several per SM; four are enough for any
// ordering between blocks to show), and the odds, in 1/256ths, that the running block gives way
// to another (through the scheduler) when a barrier releases it, when a warp collective
// completes, and at a 16-byte global access; and that a thread gives way to the next ready
// thread of its own block at a 16-byte global access. Block switches are kept rare: each ends a
// slice of the write check, which costs a fault per page the next slice writes.
constexpr unsigned kResidentBlocks = 4;
constexpr unsigned kBlockYieldAtBarrier = 128;
constexpr unsigned kBlockYieldAtWarp = 4;
constexpr unsigned kBlockYieldAtLoad = 2;
constexpr unsigned kThreadYieldAtLoad = 32;
constexpr unsigned kBlockYieldAtAtomic = 64;

enum class State : uint8_t { Ready, Running, AtBarrier, AtWarp, Exited };

struct Context {
#if defined(DB_EMU_UCONTEXT)
  ucontext_t uc;
#else
  void *sp = nullptr;
#endif
};

struct Block;

struct Fiber {
  Context ctx;
  char *stack = nullptr;  // lowest usable byte; kStackBytes long
  Block *block = nullptr;
  int index = 0;  // in its block
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
  // DB_EMU_HAZARDS=warp: the block's shared memory (dynamic, then each static array) as it was
  // when the first lane reached the pending ldmatrix
  std::vector<unsigned char> smem_copy;
};

// One resident block: its threads, warps, ready queue, barrier and shared memory.
struct Block {
  bool active = false;
  uint3 idx{};
  uint64_t linear = 0;  // x + gridDim.x * (y + gridDim.y * z)
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  std::vector<int> ready;  // ring of fiber indices, run from its front
  unsigned ready_head = 0, ready_count = 0;
  unsigned live = 0;
  unsigned barrier_arrived = 0;
  const char *barrier_file = nullptr;
  int barrier_line = 0;
  bool barrier_mismatch = false;
  unsigned char *smem = nullptr;  // dynamic shared memory
  // interleave: the static shared arrays' contents while another block's fibers run (one entry
  // per DB_SHARED array met so far; a missing entry is an array this block has not written)
  std::vector<std::vector<unsigned char>> static_save;
};

// The hazard modes, read from the environment at each launch (see emu.h).
enum class Order : uint8_t { Forward, Reverse, Shuffle, Interleave };
struct Modes {
  Order order = Order::Forward;
  uint64_t seed = 0;
  bool defer_cp_async = false;
  bool poison_blocks = false;
  bool warp_apart = false;
};

// Interleave: the write check's record of device pages one slice (a run of one block's fibers)
// has written. Pages start read-only; the first write to one faults, the handler copies it here
// and makes it writable; when the slice ends, the bytes that changed are the block's.
struct DirtyPage {
  uintptr_t page;
  unsigned char *before;  // null when the pool was full: the page is not checked
};
constexpr size_t kDirtyMax = size_t(1) << 20;
constexpr size_t kBeforePages = 16384;  // 64 MiB of page copies per slice, reserved lazily

struct Launch {
  const char *name = nullptr;
  Modes modes;
  uint64_t rng = 0;  // shuffle and interleave: splitmix64 state, seeded per launch
  size_t smem_bytes = 0;
  KernelBody *body = nullptr;
  unsigned threads = 0;
  std::vector<Block> slots;  // one, or kResidentBlocks under interleave
  Block *blk = nullptr;      // the block whose fibers run and whose data the static arrays hold
  Fiber *current = nullptr;
  Context scheduler;
  std::vector<Allocation> allocs;  // the live allocations at the launch's start, by base
  // outcome
  LaunchResult result = LAUNCH_OK;
  std::string message;
  // the write check (interleave)
  bool tracking = false;
  DirtyPage *dirty = nullptr;
  size_t dirty_count = 0;
  unsigned char *before_pool = nullptr;
  size_t before_used = 0;
  std::unordered_map<uintptr_t, std::vector<uint32_t>> owners;  // page -> writer block + 1 a byte
  std::unordered_set<uintptr_t> atomic_bytes;
};

std::mutex g_launch_mutex;  // one emulated launch at a time, process-wide
Launch *g_launch = nullptr;
std::vector<char *> g_stacks;  // grown on demand, kept for the life of the process
std::vector<unsigned char> g_smem_storage;
std::vector<std::pair<void *, size_t>> g_static_smem;  // DB_SHARED arrays met so far
std::atomic<long> g_launch_tid{0};  // the OS thread running a launch, for the fault handler

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

inline bool shuffled(const Launch &L) {
  return L.modes.order == Order::Shuffle || L.modes.order == Order::Interleave;
}

// A block's ready fibers: a ring, run from its front.
inline void push_ready(Block &B, int index) {
  const unsigned n = (unsigned)B.fibers.size();
  B.ready[(B.ready_head + B.ready_count) % n] = index;
  ++B.ready_count;
}

inline void push_ready_front(Block &B, int index) {
  const unsigned n = (unsigned)B.fibers.size();
  B.ready_head = (B.ready_head + n - 1) % n;
  B.ready[B.ready_head] = index;
  ++B.ready_count;
}

inline Fiber *pop_ready(Block &B) {
  if (B.ready_count == 0) return nullptr;
  const int index = B.ready[B.ready_head];
  B.ready_head = (B.ready_head + 1) % (unsigned)B.fibers.size();
  --B.ready_count;
  return &B.fibers[index];
}

// Reordered modes: the whole block (at its start or a barrier, none else ready) queues in the
// launch's order: descending, or a fresh random permutation.
void release_block(Launch &L, Block &B) {
  int *order = B.ready.data();
  B.ready_head = 0;
  B.ready_count = L.threads;
  for (unsigned i = 0; i < L.threads; ++i) {
    order[i] = L.modes.order == Order::Reverse ? (int)(L.threads - 1 - i) : (int)i;
    B.fibers[i].state = State::Ready;
  }
  if (shuffled(L))
    for (unsigned i = L.threads; i > 1; --i) std::swap(order[i - 1], order[next_random(L) % i]);
}

// Reordered modes: the lanes a warp collective released (the caller among them) run next, ahead
// of the other ready fibers (the warp races ahead, as a warp may on a GPU), highest lane first or
// in a random order.
void release_warp(Launch &L, Block &B, int base, unsigned lanes) {
  int order[32];
  unsigned n = 0;
  for (int lane = 0; lane < 32; ++lane)
    if (lanes >> lane & 1u) order[n++] = base + lane;
  if (shuffled(L))
    for (unsigned i = n; i > 1; --i) std::swap(order[i - 1], order[next_random(L) % i]);
  for (unsigned i = 0; i < n; ++i) {  // pushed to the front: the last pushed runs first
    B.fibers[order[i]].state = State::Ready;
    push_ready_front(B, order[i]);
  }
}

// Interleave: the static shared arrays hold one block's data at a time; switching blocks saves
// the running one's and loads the next one's (all-ones bytes for arrays it has not met).
void switch_static_smem(Launch &L, Block *to) {
  const size_t n = g_static_smem.size();
  if (L.blk) {
    L.blk->static_save.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const auto &[p, bytes] = g_static_smem[i];
      auto &save = L.blk->static_save[i];
      save.resize(bytes);
      std::memcpy(save.data(), p, bytes);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const auto &[p, bytes] = g_static_smem[i];
    if (i < to->static_save.size() && to->static_save[i].size() == bytes)
      std::memcpy(p, to->static_save[i].data(), bytes);
    else
      std::memset(p, 0xff, bytes);
  }
}

inline void make_current(Launch &L, Fiber *f) {
  if (f->block != L.blk) {
    if (L.slots.size() > 1) switch_static_smem(L, f->block);
    L.blk = f->block;
    blockIdx = f->block->idx;
  }
  L.current = f;
  f->state = State::Running;
  threadIdx = f->tid;
}

// Interleave: whether the running fiber gives way to the scheduler here (odds in 1/256ths).
inline bool yield_now(Launch &L, unsigned odds) {
  return L.modes.order == Order::Interleave && (next_random(L) & 255u) < odds;
}

// The current fiber stops running (it waits or has exited): run the next ready one of its block,
// or return to the scheduler when none is ready.
void switch_away(Launch &L) {
  Fiber *self = L.current;
  Fiber *next = pop_ready(*self->block);
  if (next) {
    make_current(L, next);
    context_switch(self->ctx, next->ctx);
  } else {
    L.current = nullptr;
    context_switch(self->ctx, L.scheduler);
  }
}

// Reordered modes: the current fiber was released with others and queued among them; run
// whichever comes first (perhaps itself), or, under interleave by chance, let the scheduler
// choose.
void yield_released(Launch &L, unsigned block_yield_odds) {
  Fiber *self = L.current;
  if (yield_now(L, block_yield_odds)) {
    L.current = nullptr;
    context_switch(self->ctx, L.scheduler);
    return;
  }
  Fiber *next = pop_ready(*self->block);  // never null: self is queued
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
std::string describe_waits(const Block &B) {
  struct Site {
    const char *what, *file;
    int line;
    unsigned count;
    int first_thread;
  };
  std::vector<Site> sites;
  unsigned exited = 0;
  for (size_t i = 0; i < B.fibers.size(); ++i) {
    const Fiber &f = B.fibers[i];
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
  --L.current->block->live;
  switch_away(L);
  std::abort();  // an exited fiber is never resumed
}

// Where address a (an access of `bytes`) lies relative to the launch's allocations.
std::string describe_address(const Launch &L, uintptr_t a, size_t bytes) {
  if (L.allocs.empty()) return "no device memory is allocated";
  auto above = std::upper_bound(L.allocs.begin(), L.allocs.end(), a,
                                [](uintptr_t v, const Allocation &x) { return v < x.base; });
  std::string out;
  if (above != L.allocs.begin()) {
    const Allocation &b = *(above - 1);
    const uintptr_t end = b.base + b.bytes;
    if (a < end)  // starts inside, runs past the end
      return format("its last %zu byte(s) lie past the end of the %zu-byte buffer at 0x%llx "
                    "(offset %llu)",
                    (size_t)(a + bytes - end), b.bytes, (unsigned long long)b.base,
                    (unsigned long long)(a - b.base));
    out = format("%llu byte(s) past the end of the %zu-byte buffer at 0x%llx",
                 (unsigned long long)(a - end), b.bytes, (unsigned long long)b.base);
  }
  if (above != L.allocs.end()) {
    const std::string before = format("%llu byte(s) before the start of the %zu-byte buffer at 0x%llx",
                                      (unsigned long long)(above->base - a), above->bytes,
                                      (unsigned long long)above->base);
    if (out.empty()) return "outside every device allocation: " + before;
    out += "; " + before;
  }
  return "outside every device allocation: " + out;
}

// A fiber's stack guard, when a lies in one: the fiber's index.
bool in_stack_guard(const Launch &L, uintptr_t a) {
  for (const Block &B : L.slots)
    for (const Fiber &f : B.fibers) {
      const uintptr_t lo = reinterpret_cast<uintptr_t>(f.stack);
      if (a >= lo - kGuardBytes && a < lo) return true;
    }
  return false;
}

}  // namespace

/* ---- memory faults and the cross-block write check ---------------------------------------------- */

#if DB_EMU_FAULTS
extern "C" [[noreturn]] void db_emu_fault_trampoline();
#endif

namespace {

size_t g_page = 4096;

// The allocation whose pages hold a (including the part of its first page before its base).
const Allocation *allocation_page_of(const Launch &L, uintptr_t a) {
  auto above = std::upper_bound(L.allocs.begin(), L.allocs.end(), a,
                                [](uintptr_t v, const Allocation &x) { return v < x.base; });
  if (above != L.allocs.end() && a >= (above->base & ~(g_page - 1))) return &*above;
  if (above == L.allocs.begin()) return nullptr;
  const Allocation &b = *(above - 1);
  return a < b.base + b.rounded ? &b : nullptr;
}

#if DB_EMU_FAULTS
volatile uintptr_t g_fault_addr = 0;
volatile int g_fault_signal = 0;
struct sigaction g_previous_segv, g_previous_bus;

// Runs on the alternate signal stack; touches only the launch's own, already-allocated state.
void on_fault(int sig, siginfo_t *info, void *uc_void) {
  ucontext_t *uc = static_cast<ucontext_t *>(uc_void);
  Launch *L = g_launch;
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  if (L && g_launch_tid.load(std::memory_order_relaxed) == (long)syscall(SYS_gettid)) {
    if (sig == SIGSEGV && L->tracking && info->si_code == SEGV_ACCERR &&
        (uc->uc_mcontext.gregs[REG_ERR] & 2) && allocation_page_of(*L, a)) {
      // A first write to a read-only device page in this slice: keep a copy, let it through.
      const uintptr_t page = a & ~(g_page - 1);
      if (L->dirty_count < kDirtyMax) {
        DirtyPage &d = L->dirty[L->dirty_count++];
        d.page = page;
        d.before = nullptr;
        if (L->before_used < kBeforePages) {
          d.before = L->before_pool + L->before_used++ * g_page;
          std::memcpy(d.before, reinterpret_cast<void *>(page), g_page);
        }
      }
      mprotect(reinterpret_cast<void *>(page), g_page, PROT_READ | PROT_WRITE);
      return;
    }
    if (L->current) {
      // Resume the fiber in the trampoline, on a fresh frame at the top of its stack (the fault
      // may be a stack overflow); rsp = 8 (mod 16) at entry, as after a call.
      g_fault_addr = a;
      g_fault_signal = sig;
      uintptr_t sp = (reinterpret_cast<uintptr_t>(L->current->stack) + kStackBytes - 64) &
                     ~uintptr_t(15);
      sp -= 8;
      *reinterpret_cast<uint64_t *>(sp) = 0;
      uc->uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
      uc->uc_mcontext.gregs[REG_RIP] = (greg_t)reinterpret_cast<uintptr_t>(&db_emu_fault_trampoline);
      return;
    }
  }
  // Not a fiber's fault: the previous handler's, or the default action (restored, so the access
  // faults again on return and the process ends as it would have without us).
  const struct sigaction &previous = sig == SIGSEGV ? g_previous_segv : g_previous_bus;
  if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction) {
    previous.sa_sigaction(sig, info, uc_void);
    return;
  }
  if (!(previous.sa_flags & SA_SIGINFO) && previous.sa_handler != SIG_DFL &&
      previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
    return;
  }
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
}

void install_fault_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa{};
    sa.sa_sigaction = &on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;  // SA_ONSTACK: the Go runtime requires it of C handlers
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_previous_segv);
    sigaction(SIGBUS, &sa, &g_previous_bus);
  });
}

// The handler must not run on the faulting fiber's stack (it may have overflowed): give the
// launching thread an alternate signal stack unless it has one (Go's threads do).
void ensure_alt_stack() {
  static thread_local bool done = false;
  if (done) return;
  stack_t current{};
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) {
    done = true;
    return;
  }
  const size_t bytes = 64 * 1024;
  void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;
  stack_t ss{};
  ss.ss_sp = p;
  ss.ss_size = bytes;
  ss.ss_flags = 0;
  if (sigaltstack(&ss, nullptr) == 0) done = true;  // kept for the thread's life
}
#endif

// Interleave: makes every device page of the launch read-only (the write check), or back.
bool protect_allocations(const Launch &L, int prot) {
  for (const Allocation &x : L.allocs) {
    const uintptr_t lo = x.base & ~(g_page - 1);
    if (mprotect(reinterpret_cast<void *>(lo), x.base + x.rounded - lo, prot) != 0) return false;
  }
  return true;
}

std::string grid_index(const Launch &L, uint64_t linear) {
  (void)L;
  return format("(%llu,%llu,%llu)", (unsigned long long)(linear % gridDim.x),
                (unsigned long long)(linear / gridDim.x % gridDim.y),
                (unsigned long long)(linear / ((uint64_t)gridDim.x * gridDim.y)));
}

// One changed byte at a, written by block B in the slice that just ended.
void record_write(Launch &L, const Block &B, uintptr_t a) {
  const Allocation *x = allocation_page_of(L, a);
  if (!x) return;
  if (a < x->base || a >= x->base + x->bytes) {
    L.result = LAUNCH_FAILED;
    L.message = format("kernel %s, block %s: a plain store wrote byte 0x%llx: %s", L.name,
                       grid_index(L, B.linear).c_str(), (unsigned long long)a,
                       describe_address(L, a, 1).c_str());
    return;
  }
  if (L.atomic_bytes.count(a)) return;
  const uintptr_t page = a & ~(g_page - 1);
  std::vector<uint32_t> &owner = L.owners[page];
  if (owner.empty()) owner.assign(g_page, 0);
  const uint32_t me = (uint32_t)(B.linear + 1);
  uint32_t &slot = owner[a - page];
  if (slot != 0 && slot != me) {
    L.result = LAUNCH_FAILED;
    L.message = format(
        "kernel %s: blocks %s and %s both wrote byte 0x%llx (offset %llu of the %zu-byte buffer "
        "at 0x%llx) with plain stores: on a GPU the blocks run at once and one of the updates can "
        "be lost (a read-modify-write across blocks needs an atomic); seen by the interleave "
        "schedule's cross-block write check",
        L.name, grid_index(L, slot - 1).c_str(), grid_index(L, B.linear).c_str(),
        (unsigned long long)a, (unsigned long long)(a - x->base), x->bytes,
        (unsigned long long)x->base);
    return;
  }
  slot = me;
}

// The end of a slice of block B: attributes the bytes it changed, write-protects its pages again.
void end_slice(Launch &L, const Block &B) {
  if (!L.tracking) return;
  for (size_t i = 0; i < L.dirty_count; ++i) {
    const DirtyPage &d = L.dirty[i];
    const unsigned char *now = reinterpret_cast<const unsigned char *>(d.page);
    if (d.before && L.result == LAUNCH_OK) {
      for (size_t off = 0; off < g_page && L.result == LAUNCH_OK; off += 64) {
        if (std::memcmp(now + off, d.before + off, 64) == 0) continue;
        for (size_t j = off; j < off + 64 && L.result == LAUNCH_OK; ++j)
          if (now[j] != d.before[j]) record_write(L, B, d.page + j);
      }
    }
    mprotect(reinterpret_cast<void *>(d.page), g_page, PROT_READ);
  }
  L.dirty_count = 0;
  L.before_used = 0;
}

}  // namespace

#if DB_EMU_FAULTS
extern "C" [[noreturn]] void db_emu_fault_trampoline() {
  Launch &L = *g_launch;
  const uintptr_t a = g_fault_addr;
  if (in_stack_guard(L, a))
    fail_launch(format("stack overflow: the thread ran past its %zu KiB emulated stack (fault at "
                       "0x%llx)",
                       kStackBytes / 1024, (unsigned long long)a));
  fail_launch(format("invalid memory access at 0x%llx (%s in a plain load or store): %s",
                     (unsigned long long)a, g_fault_signal == SIGBUS ? "SIGBUS" : "SIGSEGV",
                     describe_address(L, a, 1).c_str()));
}
#endif

void check_global_slow(const void *p, size_t bytes, const char *what, const char *file, int line) {
  if (!g_launch) return;
  Launch &L = *g_launch;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a & (bytes - 1))
    fail_launch(format("%s (%s:%d): the %zu-byte global access at 0x%llx is misaligned (address mod "
                       "%zu = %llu)",
                       what, base_name(file), line, bytes, (unsigned long long)a, bytes,
                       (unsigned long long)(a & (bytes - 1))));
  auto above = std::upper_bound(L.allocs.begin(), L.allocs.end(), a,
                                [](uintptr_t v, const Allocation &x) { return v < x.base; });
  if (above != L.allocs.begin()) {
    const Allocation &x = *(above - 1);
    if (a + bytes <= x.base + x.bytes) {
      g_global_lo = x.base;
      g_global_hi = x.base + x.bytes;
      return;
    }
  }
  fail_launch(format("%s (%s:%d): the %zu-byte global access at 0x%llx is out of bounds: %s", what,
                     base_name(file), line, bytes, (unsigned long long)a,
                     describe_address(L, a, bytes).c_str()));
}

void check_shared(const void *p, size_t bytes, const char *what, const char *file, int line) {
  if (!g_launch) return;
  Launch &L = *g_launch;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a & (bytes - 1))
    fail_launch(format("%s (%s:%d): the %zu-byte shared access at 0x%llx is misaligned (address mod "
                       "%zu = %llu)",
                       what, base_name(file), line, bytes, (unsigned long long)a, bytes,
                       (unsigned long long)(a & (bytes - 1))));
  const uintptr_t dyn = reinterpret_cast<uintptr_t>(L.blk->smem);
  if (a >= dyn && a + bytes <= dyn + L.smem_bytes) return;
  for (const auto &[q, n] : g_static_smem) {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(q);
    if (a >= lo && a + bytes <= lo + n) return;
  }
  std::string where;
  if (a >= dyn && a < dyn + L.smem_bytes + 4096)
    where = format("; it reaches %llu byte(s) past the end of the dynamic shared memory",
                   (unsigned long long)(a + bytes - dyn - L.smem_bytes));
  fail_launch(format("%s (%s:%d): the %zu-byte shared access at 0x%llx lies outside the block's %zu "
                     "bytes of dynamic shared memory (at 0x%llx) and every static shared array%s",
                     what, base_name(file), line, bytes, (unsigned long long)a, L.smem_bytes,
                     (unsigned long long)dyn, where.c_str()));
}

namespace {
// The running fiber stays ready, and the scheduler chooses the next block (perhaps this one).
void give_way(Launch &L) {
  Fiber *self = L.current;
  self->state = State::Ready;
  push_ready(*self->block, self->index);
  L.current = nullptr;
  context_switch(self->ctx, L.scheduler);
}
}  // namespace

void interleave_point() {
  Launch &L = *g_launch;
  Fiber *self = L.current;
  if (!self) return;
  const unsigned r = (unsigned)(next_random(L) & 0xffffu);
  if ((r & 255u) < kBlockYieldAtLoad) {
    give_way(L);
  } else if ((r >> 8) < kThreadYieldAtLoad) {  // the next ready thread of this block runs first
    Block &B = *self->block;
    if (B.ready_count == 0) return;
    self->state = State::Ready;
    push_ready(B, self->index);
    Fiber *next = pop_ready(B);
    make_current(L, next);
    context_switch(self->ctx, next->ctx);
  }
}

void atomic_point() {
  Launch *L = g_launch;
  if (L && L->current && yield_now(*L, kBlockYieldAtAtomic)) give_way(*L);
}

void yield_block() {
  Launch *L = g_launch;
  if (L && L->current) give_way(*L);
}

void note_atomic(const void *p, size_t bytes) {
  if (!g_launch) return;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  for (size_t i = 0; i < bytes; ++i) g_launch->atomic_bytes.insert(a + i);
}

std::mutex &launch_mutex() { return g_launch_mutex; }

void *dynamic_smem() { return g_launch && g_launch->blk ? g_launch->blk->smem : nullptr; }

void warp_smem_snapshot() {
  Launch &L = *g_launch;
  if (!L.modes.warp_apart) return;
  Fiber *self = L.current;
  Block &B = *self->block;
  Warp &W = B.warps[self->warp];
  if (W.arrived != 0) return;  // a later lane: the copy is the first lane's
  W.smem_copy.assign(B.smem, B.smem + L.smem_bytes);
  for (const auto &[p, bytes] : g_static_smem) {
    const unsigned char *s = static_cast<const unsigned char *>(p);
    W.smem_copy.insert(W.smem_copy.end(), s, s + bytes);
  }
}

const void *warp_smem_view(const void *p) {
  Launch &L = *g_launch;
  if (!L.modes.warp_apart) return p;
  Fiber *self = L.current;
  Block &B = *self->block;
  const Warp &W = B.warps[self->warp];
  const unsigned char *c = static_cast<const unsigned char *>(p);
  if (c >= B.smem && c < B.smem + L.smem_bytes) return W.smem_copy.data() + (c - B.smem);
  size_t at = L.smem_bytes;
  for (const auto &[q, bytes] : g_static_smem) {
    const unsigned char *s = static_cast<const unsigned char *>(q);
    if (c >= s && c < s + bytes && at + bytes <= W.smem_copy.size()) return W.smem_copy.data() + at + (c - s);
    at += bytes;
  }
  return p;
}

bool register_static_smem(void *p, size_t bytes) {
  g_static_smem.emplace_back(p, bytes);  // under the launch mutex: a kernel is running
  if (g_launch && (g_launch->modes.poison_blocks || g_launch->slots.size() > 1))
    std::memset(p, 0xff, bytes);
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
  Block &B = *self->block;
  if (B.barrier_arrived == 0) {
    B.barrier_file = file;
    B.barrier_line = line;
    B.barrier_mismatch = false;
  } else if (line != B.barrier_line || std::strcmp(file, B.barrier_file) != 0) {
    B.barrier_mismatch = true;
  }
  self->state = State::AtBarrier;
  self->wait_what = "__syncthreads";
  self->wait_file = file;
  self->wait_line = line;
  if (++B.barrier_arrived < L.threads) {
    switch_away(L);
    return;
  }
  // Every thread of the block has arrived.
  if (B.barrier_mismatch)
    abandon(L, LAUNCH_DEADLOCK,
            "emulation deadlock in " + block_label(L) +
                ": the threads wait at different barriers: " + describe_waits(B));
  B.barrier_arrived = 0;
  if (L.modes.order != Order::Forward) {
    // Every thread is here, so none is ready: the next phase starts in the launch's order.
    release_block(L, B);
    yield_released(L, kBlockYieldAtBarrier);
    return;
  }
  for (unsigned i = 0; i < L.threads; ++i) {
    Fiber &f = B.fibers[i];
    if (&f != self && f.state == State::AtBarrier) {
      f.state = State::Ready;
      push_ready(B, (int)i);
    }
  }
  self->state = State::Running;
}

void warp_collective(unsigned mask, const char *what, CollectiveFn fn, void *in, void *out,
                     const char *file, int line) {
  Launch &L = *g_launch;
  Fiber *self = L.current;
  Block &B = *self->block;
  Warp &W = B.warps[self->warp];
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
    ins[lane] = B.fibers[base + lane].in;
    outs[lane] = B.fibers[base + lane].out;
  }
  W.arrived = 0;
  fn(ins, outs, effective);
  if (L.modes.order != Order::Forward) {
    release_warp(L, B, base, effective);
    yield_released(L, kBlockYieldAtWarp);
    return;
  }
  for (int lane = 0; lane < 32; ++lane) {
    if (!(effective >> lane & 1u) || lane == self->lane) continue;
    B.fibers[base + lane].state = State::Ready;
    push_ready(B, base + lane);
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
// "name" or "name:seed" (decimal): the seed, 1 when absent. False when the text after the colon
// is not a decimal number.
bool parse_seeded(const std::string &v, const std::string &name, uint64_t &seed) {
  seed = 1;
  if (v == name) return true;
  const size_t at = name.size() + 1;
  if (v.size() == at || v[at] == '-' || v[at] == '+' || v[at] == ' ') return false;
  char *end = nullptr;
  seed = std::strtoull(v.c_str() + at, &end, 10);
  return *end == 0;
}

// DB_EMU_SCHEDULE=forward|reverse|shuffle[:seed]|interleave[:seed],
// DB_EMU_HAZARDS=none|all|cp_async,smem (comma separated). An unknown value is an error, not a
// silent default.
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
      if (!parse_seeded(v, "shuffle", m.seed)) {
        error = "DB_EMU_SCHEDULE=" + v + ": the seed after shuffle: must be a decimal number";
        return false;
      }
    } else if (v == "interleave" || v.rfind("interleave:", 0) == 0) {
      m.order = Order::Interleave;
      if (!parse_seeded(v, "interleave", m.seed)) {
        error = "DB_EMU_SCHEDULE=" + v + ": the seed after interleave: must be a decimal number";
        return false;
      }
    } else {
      error = "DB_EMU_SCHEDULE=" + v + ": want forward, reverse, shuffle[:seed] or interleave[:seed]";
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
      } else if (word == "warp") {
        m.warp_apart = true;
      } else if (word != "none" && !word.empty()) {
        error = "DB_EMU_HAZARDS=" + v + ": want none, all, or a comma list of cp_async, smem and warp";
        return false;
      }
      at = comma + 1;
    }
  }
  return true;
}

// Block `linear` of the grid takes slot B: fresh fibers, queued in the launch's order.
void start_block(Launch &L, Block &B, uint64_t linear) {
  B.active = true;
  B.linear = linear;
  B.idx = uint3{(unsigned)(linear % gridDim.x), (unsigned)(linear / gridDim.x % gridDim.y),
                (unsigned)(linear / ((uint64_t)gridDim.x * gridDim.y))};
  // make_current sets blockIdx (and, interleaved, loads the static arrays) at the first switch.
  if (L.blk == &B) L.blk = nullptr;
  B.static_save.clear();  // interleave: a new block's static arrays start as all-ones bytes
  if (L.modes.poison_blocks) {
    // Shared memory holds garbage at a block's start on a GPU, not the previous block's values.
    std::memset(B.smem, 0xff, L.smem_bytes);
    if (L.slots.size() == 1)
      for (const auto &[p, bytes] : g_static_smem) std::memset(p, 0xff, bytes);
  }
  for (unsigned i = 0; i < L.threads; ++i) {
    Fiber &f = B.fibers[i];
    f.in = f.out = nullptr;
    f.copies.clear();  // copies a thread never waited for die with its block
    f.group_ends.clear();
    context_init(f);
    f.state = State::Ready;
    B.ready[i] = (int)i;
  }
  B.ready_head = 0;
  B.ready_count = L.threads;
  if (L.modes.order != Order::Forward) release_block(L, B);
  B.live = L.threads;
  B.barrier_arrived = 0;
  B.barrier_mismatch = false;
  for (Warp &w : B.warps) w.arrived = 0;
}

// The write check's buffers: reserved once, touched only as pages are written.
DirtyPage *g_dirty = nullptr;
unsigned char *g_before_pool = nullptr;

bool begin_write_check(Launch &L) {
#if DB_EMU_FAULTS
  if (!g_dirty) {
    void *d = mmap(nullptr, kDirtyMax * sizeof(DirtyPage), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *b = mmap(nullptr, kBeforePages * g_page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (d == MAP_FAILED || b == MAP_FAILED) {
      if (d != MAP_FAILED) munmap(d, kDirtyMax * sizeof(DirtyPage));
      if (b != MAP_FAILED) munmap(b, kBeforePages * g_page);
      return false;
    }
    g_dirty = static_cast<DirtyPage *>(d);
    g_before_pool = static_cast<unsigned char *>(b);
  }
  L.dirty = g_dirty;
  L.before_pool = g_before_pool;
  if (!protect_allocations(L, PROT_READ)) {
    protect_allocations(L, PROT_READ | PROT_WRITE);
    return false;
  }
  return true;
#else
  (void)L;
  return false;
#endif
}

// Runs every block of the grid through the slots until all have exited or the launch failed.
void run_blocks(Launch &L) {
  const uint64_t blocks = (uint64_t)gridDim.x * gridDim.y * gridDim.z;
  uint64_t next = 0;  // blocks start in grid order, as a GPU dispatches them
  auto dispatch = [&](Block &B) {
    if (next < blocks) {
      start_block(L, B, next);
      ++next;
    } else {
      B.active = false;
    }
  };
  for (Block &B : L.slots) dispatch(B);
  std::vector<Block *> runnable;
  Block *slice = nullptr;  // the block whose writes the open slice of the write check collects
  while (L.result == LAUNCH_OK) {
    Block *B = nullptr;
    if (L.slots.size() == 1) {
      if (L.slots[0].active) B = &L.slots[0];
    } else {
      runnable.clear();
      for (Block &S : L.slots)
        if (S.active && S.ready_count > 0) runnable.push_back(&S);
      if (!runnable.empty()) B = runnable[next_random(L) % runnable.size()];
      else
        for (Block &S : L.slots)
          if (S.active && !B) B = &S;  // none can run: a deadlock, reported below
    }
    if (!B) break;  // every block has exited
    Fiber *f = pop_ready(*B);
    if (f) {
      if (slice != B) {
        if (slice) end_slice(L, *slice);
        slice = B;
        if (L.result != LAUNCH_OK) break;
      }
      make_current(L, f);
      context_switch(L.scheduler, f->ctx);
      // Back here when the block has no ready fiber, a fiber gave way, or the launch failed.
      if (L.result != LAUNCH_OK) break;
    }
    if (B->live == 0) {
      if (slice == B) {  // its slot's next block is another writer
        end_slice(L, *B);
        slice = nullptr;
        if (L.result != LAUNCH_OK) break;
      }
      dispatch(*B);
    } else if (B->ready_count == 0) {
      blockIdx = B->idx;
      L.result = LAUNCH_DEADLOCK;
      L.message = "emulation deadlock in " + block_label(L) + ": " + describe_waits(*B);
      break;
    }
  }
  if (slice) end_slice(L, *slice);
}

}  // namespace

LaunchResult check_launch(const char *name, const void *kernel_id, dim3 grid, dim3 block,
                          size_t smem, std::string &message) {
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
  return LAUNCH_OK;
}

LaunchResult run_grid(const char *name, const void *kernel_id, dim3 grid, dim3 block, size_t smem,
                      KernelBody &body, std::string &message) {
  std::lock_guard<std::mutex> lock(g_launch_mutex);
  if (check_launch(name, kernel_id, grid, block, smem, message) != LAUNCH_OK) return LAUNCH_FAILED;
  Modes modes;
  read_modes(modes, message);  // check_launch has parsed them already
  const uint64_t threads = (uint64_t)block.x * block.y * block.z;
  g_page = (size_t)sysconf(_SC_PAGESIZE);
#if DB_EMU_FAULTS
  install_fault_handler();
  ensure_alt_stack();
#endif
  const uint64_t blocks = (uint64_t)grid.x * grid.y * grid.z;
  const size_t slots =
      modes.order == Order::Interleave ? (size_t)std::min<uint64_t>(blocks, kResidentBlocks) : 1;
  while (g_stacks.size() < threads * slots) g_stacks.push_back(new_stack());
  // Shared memory holds garbage on a GPU; all-ones bytes are NaN in every float type.
  const size_t smem_stride = ((smem + 15) & ~size_t(15)) + 16;
  if (g_smem_storage.size() < smem_stride * slots) g_smem_storage.resize(smem_stride * slots);
  std::memset(g_smem_storage.data(), 0xff, g_smem_storage.size());

  Launch L;
  L.name = name;
  L.modes = modes;
  L.rng = modes.seed;
  L.smem_bytes = smem;
  L.body = &body;
  L.threads = (unsigned)threads;
  L.allocs = allocations();
  L.slots.resize(slots);
  const uintptr_t smem_at = (reinterpret_cast<uintptr_t>(g_smem_storage.data()) + 15) & ~uintptr_t(15);
  for (size_t s = 0; s < slots; ++s) {
    Block &B = L.slots[s];
    B.fibers.resize(threads);
    B.ready.resize(threads);
    B.warps.resize((threads + 31) / 32);
    B.smem = reinterpret_cast<unsigned char *>(smem_at + s * smem_stride);
    for (unsigned i = 0; i < threads; ++i) {
      Fiber &f = B.fibers[i];
      f.stack = g_stacks[s * threads + i];
      f.block = &B;
      f.index = (int)i;
      f.tid = uint3{i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
      f.warp = (int)(i / 32);
      f.lane = (int)(i % 32);
      B.warps[i / 32].existing |= 1u << (i % 32);
    }
  }

  blockDim = block;
  gridDim = grid;
  g_global_lo = 1;
  g_global_hi = 0;
  g_defer_cp_async = modes.defer_cp_async;
  g_interleave = modes.order == Order::Interleave;
  L.tracking = g_interleave && begin_write_check(L);
  g_track_writes = L.tracking;
  g_launch_tid.store((long)syscall(SYS_gettid), std::memory_order_relaxed);
  g_launch = &L;
  run_blocks(L);
  if (L.tracking) {
    // A failed launch leaves its last slice open; the pages it dirtied are writable already.
    L.dirty_count = 0;
    protect_allocations(L, PROT_READ | PROT_WRITE);
  }
  g_launch = nullptr;
  g_launch_tid.store(0, std::memory_order_relaxed);
  g_defer_cp_async = g_track_writes = g_interleave = false;
  message = L.message;
  return L.result;
}

}  // namespace db_emu
