// faults.cpp: memory faults (SIGSEGV and SIGBUS of a running fiber become a launch error), the
// bounds checks of global and shared accesses, and the interleave schedule's cross-block write
// check (write-protected device memory; scheduler.h).
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "scheduler.h"

namespace db_emu {
namespace sched {

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

namespace {

// A fiber's stack guard, when a lies in one: the fiber's index.
bool in_stack_guard(const Launch &L, uintptr_t a) {
  for (const Block &B : L.slots)
    for (const Fiber &f : B.fibers) {
      const uintptr_t lo = reinterpret_cast<uintptr_t>(f.stack);
      if (a >= lo - kGuardBytes && a < lo) return true;
    }
  return false;
}

// The allocation whose pages hold a (including the part of its first page before its base).
const Allocation *allocation_page_of(const Launch &L, uintptr_t a) {
  auto above = std::upper_bound(L.allocs.begin(), L.allocs.end(), a,
                                [](uintptr_t v, const Allocation &x) { return v < x.base; });
  if (above != L.allocs.end() && a >= (above->base & ~(g_page - 1))) return &*above;
  if (above == L.allocs.begin()) return nullptr;
  const Allocation &b = *(above - 1);
  return a < b.base + b.rounded ? &b : nullptr;
}

}  // namespace

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

namespace {

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

}  // namespace

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

}  // namespace sched

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

namespace {
[[noreturn]] void fail_misaligned(const char *space, uintptr_t a, size_t bytes, const char *what, const char *file,
                                  int line) {
  fail_launch(format("%s (%s:%d): the %zu-byte %s access at 0x%llx is misaligned (address mod %zu = %llu)", what,
                     base_name(file), line, bytes, space, (unsigned long long)a, bytes,
                     (unsigned long long)(a & (bytes - 1))));
}
}  // namespace

void check_global_slow(const void *p, size_t bytes, const char *what, const char *file, int line) {
  if (!g_launch) return;
  Launch &L = *g_launch;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a & (bytes - 1)) fail_misaligned("global", a, bytes, what, file, line);
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
  if (a & (bytes - 1)) fail_misaligned("shared", a, bytes, what, file, line);
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

}  // namespace db_emu
