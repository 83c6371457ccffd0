// fibers.cpp: the emulated threads as fibers on the launching OS thread: their stacks, the
// context switch, which fiber runs next, and abandoning a launch (scheduler.h says why fibers).
#include <sys/mman.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "scheduler.h"

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
namespace sched {

std::mutex g_launch_mutex;  // one emulated launch at a time, process-wide
Launch *g_launch = nullptr;
std::vector<char *> g_stacks;  // grown on demand, kept for the life of the process
std::vector<unsigned char> g_smem_storage;
std::vector<std::pair<void *, size_t>> g_static_smem;  // DB_SHARED arrays met so far
std::atomic<long> g_launch_tid{0};  // the OS thread running a launch, for the fault handler
size_t g_page = 4096;

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

// The running fiber stays ready, and the scheduler chooses the next block (perhaps this one).
void give_way(Launch &L) {
  Fiber *self = L.current;
  self->state = State::Ready;
  push_ready(*self->block, self->index);
  L.current = nullptr;
  context_switch(self->ctx, L.scheduler);
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

}  // namespace sched

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

std::mutex &launch_mutex() { return g_launch_mutex; }

void *dynamic_smem() { return g_launch && g_launch->blk ? g_launch->blk->smem : nullptr; }

[[noreturn]] void fail_launch(const std::string &message) {
  Launch &L = *g_launch;
  abandon(L, LAUNCH_FAILED, block_label(L) + ", thread (" + std::to_string(threadIdx.x) + "," +
                                std::to_string(threadIdx.y) + "," + std::to_string(threadIdx.z) +
                                "): " + message);
}

}  // namespace db_emu
