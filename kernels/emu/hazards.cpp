// hazards.cpp: the hazard modes (emu.h: DB_EMU_SCHEDULE, DB_EMU_HAZARDS): the order released
// fibers resume in, the interleave schedule's yield points, cp.async deferred to its
// wait_group, shared memory poisoned per block and a warp's lanes apart at ldmatrix.
#include <cstdlib>
#include <cstring>

#include "scheduler.h"

namespace db_emu {
namespace sched {

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

}  // namespace sched

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

}  // namespace db_emu
