// scheduler.cpp: runs an emulated launch, the threads of each block as cooperative fibers on the
// calling OS thread (scheduler.h says why, and how the files divide the work): block barriers
// and warp collectives, blocks dispatched to their slots, the grid run to its end.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "scheduler.h"

namespace db_emu {

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

namespace sched {

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

}  // namespace sched

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
