// scheduler.h: the emulated launch's state, shared by the files that run it (not part of the
// kernels' view of the emulator, which is emu.h):
//   fibers.cpp     the fibers: stacks, the context switch, which fiber runs next, abandoning a launch
//   scheduler.cpp  barriers and warp collectives, dispatching blocks, running a grid
//   hazards.cpp    the hazard modes (emu.h: DB_EMU_SCHEDULE, DB_EMU_HAZARDS): reordered release,
//                  interleave points, deferred cp.async, the warp's shared-memory snapshot
//   faults.cpp     memory faults, bounds checks and the interleave schedule's cross-block write check
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
// cross-block write check (write-protected device memory, faults.cpp).
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
//
// Every file that includes this one is built with the same DB_EMU_UCONTEXT (kernels.mk builds
// all four again for emu_test_ucontext): Context, and so Fiber and Launch, depend on it.
#ifndef DB_EMU_SCHEDULER_H
#define DB_EMU_SCHEDULER_H

#include <atomic>
#include <mutex>
#include <string>
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

#if !defined(DB_EMU_UCONTEXT)
// void db_emu_swap(void **save_sp, void *load_sp): saves the caller's callee-saved state on its
// stack and its stack pointer in *save_sp, then restores the state saved at load_sp (fibers.cpp).
extern "C" void db_emu_swap(void **save_sp, void *load_sp);
#endif
extern "C" [[noreturn]] void db_emu_fiber_entry();
#if DB_EMU_FAULTS
extern "C" [[noreturn]] void db_emu_fault_trampoline();
#endif

// The scheduler's internals: db_emu::sched, visible to its four files only.
namespace db_emu {
namespace sched {

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

extern std::mutex g_launch_mutex;  // one emulated launch at a time, process-wide
extern Launch *g_launch;
extern std::vector<char *> g_stacks;  // grown on demand, kept for the life of the process
extern std::vector<unsigned char> g_smem_storage;
extern std::vector<std::pair<void *, size_t>> g_static_smem;  // DB_SHARED arrays met so far
extern std::atomic<long> g_launch_tid;  // the OS thread running a launch, for the fault handler
extern size_t g_page;

// fibers.cpp
char *new_stack();
const char *base_name(const char *path);
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void context_init(Fiber &f);
void switch_static_smem(Launch &L, Block *to);
void switch_away(Launch &L);
void yield_released(Launch &L, unsigned block_yield_odds);
void give_way(Launch &L);
[[noreturn]] void abandon(Launch &L, LaunchResult result, std::string message);
std::string block_label(const Launch &L);
std::string describe_waits(const Block &B);

// hazards.cpp
void release_block(Launch &L, Block &B);
void release_warp(Launch &L, Block &B, int base, unsigned lanes);
bool read_modes(Modes &m, std::string &error);

// faults.cpp
std::string describe_address(const Launch &L, uintptr_t a, size_t bytes);
#if DB_EMU_FAULTS
void install_fault_handler();
void ensure_alt_stack();
#endif
bool protect_allocations(const Launch &L, int prot);
void end_slice(Launch &L, const Block &B);
bool begin_write_check(Launch &L);

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

}  // namespace sched
using namespace sched;
}  // namespace db_emu

#endif  // DB_EMU_SCHEDULER_H
