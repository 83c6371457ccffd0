// attention_plan_test.cpp: the attention planner as an H200 would run it. The emulated context's
// SM count is set to 132 by hand (the plan reads nothing else of the device but the shared
// memory limit, which the emulator gives as sm_90's), so the plan, its occupancy figures (sm_90's,
// from the kernels' ptxas registers) and db_attention_launches are the card's. Checks, at the
// Llama-3-8B and -70B attention shapes (32 or 64 query heads, 8 KV heads, head dim 128), batch
// 1 to 1024 and contexts 512 to 32k, both kernels:
//   - one launch, named as cuobjdump names it, with the plan's grid, block and shared memory;
//   - splits of whole tiles covering the context;
//   - the wave rule: the launch fills at least 90% of its waves' slots wherever some split
//     count of whole tiles does (best_fill below, an exhaustive search); where none does (too
//     few tiles for a wave, or whole tiles that land between waves) the row says so;
//   - determinism: the same params plan the same splits twice;
// and prints the predicted waves (make emu-test's log; kernels/README.md quotes it). Then the
// span layers (gpt-oss-120b's 128-token window, Gemma-3-27B's 1024, Llama-4-Scout's 8192-token
// chunk): the splits cover the span from its first tile, never the context, and are never more
// than the whole context's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common.cuh"

#include "emu/test_check.h"

namespace {


/* The best fill any split count of whole tiles gives: s = ceil(tiles / k) splits for some k. */
double best_fill(double blocks, int tiles, double slots, int *best_s) {
  double best = 0;
  for (int k = 1; k <= tiles; ++k) {
    const int s = (tiles + k - 1) / k;
    if (s > 1024) continue;
    const double b = blocks * s, f = b / (std::ceil(b / slots) * slots);
    if (f > best) best = f, *best_s = s;
  }
  return best;
}

db_attention_params llama_params(int q_heads, int batch, int context, int variant) {
  db_attention_params p;
  std::memset(&p, 0, sizeof p);
  p.q = p.out = 0x100000; /* never read: the plan does not touch device memory */
  p.context_lens = 0x200000;
  p.cache.k = 0x300000, p.cache.v = 0x400000;
  p.cache.layout = DB_KV_CONTIGUOUS;
  p.cache.dtype = DB_DTYPE_BF16;
  p.cache.kv_heads = 8;
  p.cache.head_dim = 128;
  p.cache.capacity = context;
  p.batch = batch;
  p.q_heads = q_heads;
  p.max_context = context;
  p.variant = variant;
  return p;
}

}  // namespace

int main() {
  db_context *ctx = nullptr;
  if (db_context_create(0, &ctx) != DB_OK) {
    std::printf("FATAL: db_context_create: %s\n", last_error().c_str());
    return 1;
  }
  ctx->sm_count = 132; /* an H200 */

  std::printf("attention plan on 132 sm_90 SMs (predicted, not measured):\n");
  std::printf("%-10s %-4s %5s %6s  %-58s %5s %4s %8s %6s %6s %5s\n", "model", "kern", "batch", "ctx",
              "kernel", "smem", "b/SM", "grid", "splits", "waves", "fill");
  const struct {
    const char *name;
    int q_heads;
  } models[] = {{"llama3-8b", 32}, {"llama3-70b", 64}};
  for (const auto &m : models)
    for (int variant : {DB_ATTENTION_SIMT, DB_ATTENTION_MMA})
      for (int batch : {1, 3, 16, 64, 256, 1024})
        for (int context : {512, 1024, 2048, 4096, 8192, 16384, 32768}) {
          db_attention_params p = llama_params(m.q_heads, batch, context, variant);
          uint64_t workspace = 0;
          if (db_attention_plan(ctx, &p, &workspace) != DB_OK) {
            EXPECT(false, "plan %s b%d c%d: %s", m.name, batch, context, last_error().c_str());
            continue;
          }
          db_launch_info l[2];
          int32_t count = -1;
          if (db_attention_launches(ctx, &p, l, 2, &count) != DB_OK || count != 1) {
            EXPECT(false, "launches %s b%d c%d: count %d, %s", m.name, batch, context, count,
                   last_error().c_str());
            continue;
          }
          const int gp = variant == DB_ATTENTION_MMA ? 8 : (m.q_heads / 8 <= 4 ? 4 : 8);
          char want_name[128];
          std::snprintf(want_name, sizeof want_name, "(anonymous namespace)::%s<__nv_bfloat16, 128, %d>",
                        variant == DB_ATTENTION_MMA ? "attention_decode_mma_kernel" : "attention_decode_kernel", gp);
          EXPECT(std::strcmp(l[0].kernel, want_name) == 0, "kernel %s, want %s", l[0].kernel, want_name);
          EXPECT(l[0].grid_x == batch * 8 && l[0].grid_y == p.num_splits && l[0].grid_z == 1,
                 "grid %d,%d,%d for batch %d, %d splits", l[0].grid_x, l[0].grid_y, l[0].grid_z, batch, p.num_splits);
          EXPECT(l[0].block_threads == 128 && l[0].smem_bytes > 0 && l[0].smem_bytes < 227 * 1024,
                 "block %d threads, %d bytes", l[0].block_threads, l[0].smem_bytes);
          const int tile = variant == DB_ATTENTION_MMA ? 64 : 32; /* head dim 128 */
          EXPECT((int64_t)p.num_splits * p.split_tokens >= context && p.split_tokens % tile == 0 &&
                     (int64_t)(p.num_splits - 1) * p.split_tokens < context,
                 "%s b%d c%d: %d splits of %d tokens", m.name, batch, context, p.num_splits, p.split_tokens);
          db_attention_params again = llama_params(m.q_heads, batch, context, variant);
          EXPECT(db_attention_plan(ctx, &again, nullptr) == DB_OK && again.num_splits == p.num_splits &&
                     again.split_tokens == p.split_tokens,
                 "%s b%d c%d: planned %d then %d splits", m.name, batch, context, p.num_splits, again.num_splits);
          EXPECT((p.num_splits > 1) == (workspace > 0), "workspace %llu for %d splits",
                 (unsigned long long)workspace, p.num_splits);

          /* sm_90's blocks per SM for this kernel: what the emulated occupancy answered */
          const int regs = variant == DB_ATTENTION_MMA ? 102 : (gp == 4 ? 126 : 168); /* ptxas, sm_90 */
          const int per_sm = db_sm90_blocks_per_sm(l[0].block_threads, regs, l[0].smem_bytes);
          const double slots = per_sm * 132.0;
          const double blocks = (double)l[0].grid_x * l[0].grid_y;
          const double waves = blocks / slots;
          const double fill = blocks / (std::ceil(waves) * slots);
          int best_s = 1;
          const double best = best_fill(l[0].grid_x, (context + tile - 1) / tile, slots, &best_s);
          EXPECT(fill >= 0.9 || best < 0.9,
                 "%s %s b%d c%d: %d splits, %.2f waves (%.0f%% of the last wave's slots; %d splits fill %.0f%%)",
                 m.name, variant == DB_ATTENTION_MMA ? "mma" : "simt", batch, context, p.num_splits, waves,
                 100 * fill, best_s, 100 * best);
          std::printf("%-10s %-4s %5d %6d  %-58s %5d %4d %8.0f %6d %6.2f %5.2f%s\n", m.name,
                      variant == DB_ATTENTION_MMA ? "mma" : "simt", batch, context, l[0].kernel,
                      l[0].smem_bytes, per_sm, blocks, p.num_splits, waves, fill,
                      best < 0.9 ? " (no split of whole tiles fills 0.9)" : "");
        }

  std::printf("\nspan layers (window or chunk; the splits cover the span, not the context):\n");
  const struct {
    const char *name;
    int q_heads, kv_heads, head_dim, window, chunk;
  } spans[] = {{"gpt-oss-120b local", 64, 8, 64, 128, 0}, {"gemma-3-27b local", 32, 16, 128, 1024, 0},
               {"llama-4-scout chunked", 40, 8, 128, 0, 8192}};
  for (const auto &m : spans)
    for (int batch : {1, 16, 256})
      for (int context : {8192, 32768}) {
        db_attention_params p = llama_params(m.q_heads, batch, context, DB_ATTENTION_SIMT);
        p.cache.kv_heads = m.kv_heads, p.cache.head_dim = m.head_dim;
        db_attention_params full = p;
        p.window = m.window, p.chunk = m.chunk;
        uint64_t workspace = 0;
        if (db_attention_plan(ctx, &p, &workspace) != DB_OK || db_attention_plan(ctx, &full, &workspace) != DB_OK) {
          EXPECT(false, "plan %s b%d c%d: %s", m.name, batch, context, last_error().c_str());
          continue;
        }
        const int tile = m.head_dim <= 64 ? 64 : 32; /* the SIMT kernel's */
        const int limit = m.window > 0 ? m.window + tile - 1 : m.chunk + (m.chunk % tile ? tile - 1 : 0);
        const int64_t covered = (int64_t)p.num_splits * p.split_tokens;
        EXPECT(covered >= std::min(context, limit) && covered < std::min(context, limit) + (int64_t)p.num_splits * tile &&
                   p.num_splits <= full.num_splits,
               "%s b%d c%d: %d splits of %d tokens for a span of at most %d (the context: %d splits)", m.name, batch,
               context, p.num_splits, p.split_tokens, limit, full.num_splits);
        std::printf("%-22s %5d %6d  %4d splits of %5d tokens (whole context: %4d of %5d)\n", m.name, batch, context,
                    p.num_splits, p.split_tokens, full.num_splits, full.split_tokens);
      }

  /* the count alone; too little room is an error that says so */
  {
    db_attention_params p = llama_params(32, 1, 8192, DB_ATTENTION_AUTO);
    int32_t count = -1;
    EXPECT(db_attention_launches(ctx, &p, nullptr, 0, &count) == DB_OK && count == 1, "count %d", count);
    db_launch_info l;
    EXPECT(db_attention_launches(ctx, &p, &l, 0, &count) == DB_ERR_INVALID_ARGUMENT &&
               last_error().find("room for 0 launches") != std::string::npos,
           "max 0: %s", last_error().c_str());
    p.batch = DB_MAX_BATCH + 1;
    EXPECT(db_attention_launches(ctx, &p, &l, 1, &count) == DB_ERR_INVALID_ARGUMENT &&
               last_error().find("batch 1025 out of range 1..1024") != std::string::npos,
           "batch 1025: %s", last_error().c_str());
    p.batch = 1;
    p.cache.head_dim = 112;
    EXPECT(db_attention_launches(ctx, &p, &l, 1, &count) == DB_ERR_UNSUPPORTED_SHAPE &&
               last_error().find("head_dim 112 unsupported") != std::string::npos,
           "head_dim 112: %s", last_error().c_str());
  }

  db_context_destroy(ctx);
  if (g_failures) {
    std::printf("attention_plan_test: %d failure(s)\n", g_failures.load());
    return 1;
  }
  std::printf("attention_plan_test: ok\n");
  return 0;
}
