#include "shim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every function of decodebench.h: X(name). Resolved in this order, after db_abi_version. */
#define DBSHIM_FUNCTIONS(X)                                                                         \
  X(db_status_string) X(db_last_error_message) X(db_abi_version) X(db_backend_name)               \
  X(db_device_count) X(db_device_props_get) X(db_context_create) X(db_context_destroy)            \
  X(db_synchronize) X(db_buffer_alloc) X(db_buffer_free) X(db_memset) X(db_copy_to_host)          \
  X(db_copy_to_device) X(db_fill_hash) X(db_timer_create) X(db_timer_destroy) X(db_timer_start)   \
  X(db_timer_stop) X(db_timer_elapsed_ms) X(db_linear_plan) X(db_linear) X(db_probe)              \
  X(db_probe_plan)                                                                                  \
  X(db_attention_plan) X(db_attention) X(db_kv_append)                                            \
  X(db_argmax_plan) X(db_embedding) X(db_rmsnorm) X(db_rope_kv_append) X(db_gated_act) X(db_bias_add) X(db_argmax) X(db_moe_route) X(db_moe_group) X(db_moe_combine)

/* The optional functions: resolved into the same table, NULL where the library lacks them (a
 * kernel family a library does not build, or the test fake). */
#define DBSHIM_OPTIONAL(X)                                                                          \
  X(db_fill_quantized) X(db_linear_launches) X(db_attention_launches) X(db_empty_kernel)           \
  X(db_graph_begin) X(db_graph_end) X(db_graph_launch) X(db_graph_destroy) X(db_add_i32)          \
  X(db_grouped_linear) X(db_mla_attention_plan) X(db_mla_attention) X(db_mla_attention_launches)  \
  X(db_mla_kv_append) X(db_mla_rope_append)                                                       \
  X(db_conv1d_update) X(db_gdn_step) X(db_gdn_step_launches) X(db_gated_rmsnorm)                   \
  X(db_sigmoid_gate) X(db_relu2) X(db_mamba2_step) X(db_mamba2_step_launches)

db_api *dbshim_load(const char *path, char *err, size_t errlen) {
  dlerror(); /* clear a stale message */
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(err, errlen, "%s", e ? e : "dlopen failed without a message");
    return NULL;
  }
  void *version_sym = dlsym(h, "db_abi_version");
  if (!version_sym) {
    snprintf(err, errlen, "%s does not export db_abi_version: not a decodebench kernels library", path);
    dlclose(h);
    return NULL;
  }
  int version = ((int (*)(void))version_sym)();
  if (version != DB_ABI_VERSION) {
    snprintf(err, errlen, "%s speaks ABI version %d but this decodebench speaks %d: rebuild one to match", path,
             version, DB_ABI_VERSION);
    dlclose(h);
    return NULL;
  }
  db_api *a = calloc(1, sizeof *a);
  if (!a) {
    snprintf(err, errlen, "out of host memory");
    dlclose(h);
    return NULL;
  }
#define DBSHIM_RESOLVE(name)                                                                        \
  *(void **)(&a->name) = dlsym(h, #name);                                                           \
  if (!a->name) {                                                                                   \
    snprintf(err, errlen, "%s does not export %s: it was built from an older decodebench.h; rebuild it", \
             path, #name);                                                                          \
    free(a);                                                                                        \
    dlclose(h);                                                                                     \
    return NULL;                                                                                    \
  }
  DBSHIM_FUNCTIONS(DBSHIM_RESOLVE)
#undef DBSHIM_RESOLVE
#define DBSHIM_RESOLVE_OPTIONAL(name) *(void **)(&a->name) = dlsym(h, #name);
  DBSHIM_OPTIONAL(DBSHIM_RESOLVE_OPTIONAL)
#undef DBSHIM_RESOLVE_OPTIONAL
  return a;
}

int dbshim_has(const db_api *a, const char *name) {
#define DBSHIM_HAS(fn)                                                                              \
  if (strcmp(name, #fn) == 0) return a->fn != NULL;
  DBSHIM_FUNCTIONS(DBSHIM_HAS)
  DBSHIM_OPTIONAL(DBSHIM_HAS)
#undef DBSHIM_HAS
  return 0;
}

static __thread uint64_t dbshim_owner;
void dbshim_set_thread_owner(uint64_t id) { dbshim_owner = id; }
uint64_t dbshim_thread_owner(void) { return dbshim_owner; }

const char *dbshim_status_string(const db_api *a, int status) { return a->db_status_string(status); }
int dbshim_last_error_message(const db_api *a, char *buf, size_t len) {
  return a->db_last_error_message(buf, len);
}
const char *dbshim_backend_name(const db_api *a) { return a->db_backend_name(); }
int dbshim_device_count(const db_api *a, int32_t *count) { return a->db_device_count(count); }
int dbshim_device_props_get(const db_api *a, int32_t device, db_device_props *out) {
  return a->db_device_props_get(device, out);
}
int dbshim_context_create(const db_api *a, int32_t device, db_context **out) {
  return a->db_context_create(device, out);
}
int dbshim_context_destroy(const db_api *a, db_context *ctx) { return a->db_context_destroy(ctx); }
int dbshim_synchronize(const db_api *a, db_context *ctx) { return a->db_synchronize(ctx); }
int dbshim_buffer_alloc(const db_api *a, db_context *ctx, uint64_t bytes, uint64_t *dptr) {
  return a->db_buffer_alloc(ctx, bytes, dptr);
}
int dbshim_buffer_free(const db_api *a, db_context *ctx, uint64_t dptr) { return a->db_buffer_free(ctx, dptr); }
int dbshim_memset(const db_api *a, db_context *ctx, uint64_t dptr, int32_t byte_value, uint64_t bytes) {
  return a->db_memset(ctx, dptr, byte_value, bytes);
}
int dbshim_copy_to_host(const db_api *a, db_context *ctx, void *host_dst, uint64_t src, uint64_t bytes) {
  return a->db_copy_to_host(ctx, host_dst, src, bytes);
}
int dbshim_copy_to_device(const db_api *a, db_context *ctx, uint64_t dst, const void *host_src, uint64_t bytes) {
  return a->db_copy_to_device(ctx, dst, host_src, bytes);
}
int dbshim_fill_hash(const db_api *a, db_context *ctx, uint64_t dptr, uint64_t count, int32_t dtype,
                     uint64_t seed, float scale) {
  return a->db_fill_hash(ctx, dptr, count, dtype, seed, scale);
}
int dbshim_timer_create(const db_api *a, db_context *ctx, db_timer **out) { return a->db_timer_create(ctx, out); }
int dbshim_timer_destroy(const db_api *a, db_timer *t) { return a->db_timer_destroy(t); }
int dbshim_timer_start(const db_api *a, db_timer *t) { return a->db_timer_start(t); }
int dbshim_timer_stop(const db_api *a, db_timer *t) { return a->db_timer_stop(t); }
int dbshim_timer_elapsed_ms(const db_api *a, db_timer *t, float *ms) { return a->db_timer_elapsed_ms(t, ms); }
int dbshim_linear_plan(const db_api *a, db_context *ctx, db_linear_params *p, uint64_t *workspace_bytes) {
  return a->db_linear_plan(ctx, p, workspace_bytes);
}
int dbshim_linear(const db_api *a, db_context *ctx, const db_linear_params *p) { return a->db_linear(ctx, p); }
int dbshim_probe(const db_api *a, db_context *ctx, db_probe_params *p) { return a->db_probe(ctx, p); }
int dbshim_probe_plan(const db_api *a, db_context *ctx, db_probe_params *p) { return a->db_probe_plan(ctx, p); }
int dbshim_attention_plan(const db_api *a, db_context *ctx, db_attention_params *p, uint64_t *workspace_bytes) {
  return a->db_attention_plan(ctx, p, workspace_bytes);
}
int dbshim_attention(const db_api *a, db_context *ctx, const db_attention_params *p) {
  return a->db_attention(ctx, p);
}
int dbshim_kv_append(const db_api *a, db_context *ctx, const db_kv_append_params *p) {
  return a->db_kv_append(ctx, p);
}

/* small ops */
int dbshim_argmax_plan(const db_api *a, db_context *ctx, db_argmax_params *p, uint64_t *workspace_bytes) {
  return a->db_argmax_plan(ctx, p, workspace_bytes);
}
int dbshim_embedding(const db_api *a, db_context *ctx, const db_embedding_params *p) { return a->db_embedding(ctx, p); }
int dbshim_rmsnorm(const db_api *a, db_context *ctx, const db_rmsnorm_params *p) { return a->db_rmsnorm(ctx, p); }
int dbshim_rope_kv_append(const db_api *a, db_context *ctx, const db_rope_append_params *p) { return a->db_rope_kv_append(ctx, p); }
int dbshim_gated_act(const db_api *a, db_context *ctx, const db_gated_act_params *p) { return a->db_gated_act(ctx, p); }
int dbshim_bias_add(const db_api *a, db_context *ctx, const db_bias_add_params *p) { return a->db_bias_add(ctx, p); }
int dbshim_argmax(const db_api *a, db_context *ctx, const db_argmax_params *p) { return a->db_argmax(ctx, p); }
int dbshim_moe_route(const db_api *a, db_context *ctx, const db_moe_route_params *p) { return a->db_moe_route(ctx, p); }
int dbshim_moe_group(const db_api *a, db_context *ctx, const db_moe_group_params *p) { return a->db_moe_group(ctx, p); }
int dbshim_moe_combine(const db_api *a, db_context *ctx, const db_moe_combine_params *p) { return a->db_moe_combine(ctx, p); }

/* optional functions */
#define DBSHIM_OPTIONAL_CALL(name, ...) return a->name ? a->name(__VA_ARGS__) : DBSHIM_NOT_EXPORTED
int dbshim_fill_quantized(const db_api *a, db_context *ctx, const db_quant_fill_params *p) {
  DBSHIM_OPTIONAL_CALL(db_fill_quantized, ctx, p);
}
int dbshim_linear_launches(const db_api *a, db_context *ctx, const db_linear_params *p, db_launch_info *out,
                           int32_t max, int32_t *count) {
  DBSHIM_OPTIONAL_CALL(db_linear_launches, ctx, p, out, max, count);
}
int dbshim_attention_launches(const db_api *a, db_context *ctx, const db_attention_params *p,
                              db_launch_info *out, int32_t max, int32_t *count) {
  DBSHIM_OPTIONAL_CALL(db_attention_launches, ctx, p, out, max, count);
}
int dbshim_empty_kernel(const db_api *a, db_context *ctx, int32_t launches) {
  DBSHIM_OPTIONAL_CALL(db_empty_kernel, ctx, launches);
}
int dbshim_graph_begin(const db_api *a, db_context *ctx) { DBSHIM_OPTIONAL_CALL(db_graph_begin, ctx); }
int dbshim_graph_end(const db_api *a, db_context *ctx, db_graph **out) {
  DBSHIM_OPTIONAL_CALL(db_graph_end, ctx, out);
}
int dbshim_graph_launch(const db_api *a, db_context *ctx, db_graph *g) {
  DBSHIM_OPTIONAL_CALL(db_graph_launch, ctx, g);
}
int dbshim_graph_destroy(const db_api *a, db_context *ctx, db_graph *g) {
  DBSHIM_OPTIONAL_CALL(db_graph_destroy, ctx, g);
}
int dbshim_add_i32(const db_api *a, db_context *ctx, uint64_t dptr, int32_t count, int32_t delta) {
  DBSHIM_OPTIONAL_CALL(db_add_i32, ctx, dptr, count, delta);
}
int dbshim_grouped_linear(const db_api *a, db_context *ctx, const db_grouped_linear_params *p) {
  DBSHIM_OPTIONAL_CALL(db_grouped_linear, ctx, p);
}
int dbshim_mla_attention_plan(const db_api *a, db_context *ctx, db_mla_attention_params *p,
                              uint64_t *workspace_bytes) {
  DBSHIM_OPTIONAL_CALL(db_mla_attention_plan, ctx, p, workspace_bytes);
}
int dbshim_mla_attention(const db_api *a, db_context *ctx, const db_mla_attention_params *p) {
  DBSHIM_OPTIONAL_CALL(db_mla_attention, ctx, p);
}
int dbshim_mla_attention_launches(const db_api *a, db_context *ctx, const db_mla_attention_params *p,
                                  db_launch_info *out, int32_t max, int32_t *count) {
  DBSHIM_OPTIONAL_CALL(db_mla_attention_launches, ctx, p, out, max, count);
}
int dbshim_mla_kv_append(const db_api *a, db_context *ctx, const db_mla_kv_append_params *p) {
  DBSHIM_OPTIONAL_CALL(db_mla_kv_append, ctx, p);
}
int dbshim_mla_rope_append(const db_api *a, db_context *ctx, const db_mla_rope_append_params *p) {
  DBSHIM_OPTIONAL_CALL(db_mla_rope_append, ctx, p);
}
int dbshim_conv1d_update(const db_api *a, db_context *ctx, const db_conv1d_update_params *p) {
  DBSHIM_OPTIONAL_CALL(db_conv1d_update, ctx, p);
}
int dbshim_gdn_step(const db_api *a, db_context *ctx, const db_gdn_step_params *p) {
  DBSHIM_OPTIONAL_CALL(db_gdn_step, ctx, p);
}
int dbshim_gdn_step_launches(const db_api *a, db_context *ctx, const db_gdn_step_params *p, db_launch_info *out, int32_t max,
                     int32_t *count) {
  DBSHIM_OPTIONAL_CALL(db_gdn_step_launches, ctx, p, out, max, count);
}
int dbshim_gated_rmsnorm(const db_api *a, db_context *ctx, const db_gated_rmsnorm_params *p) {
  DBSHIM_OPTIONAL_CALL(db_gated_rmsnorm, ctx, p);
}
int dbshim_sigmoid_gate(const db_api *a, db_context *ctx, const db_sigmoid_gate_params *p) {
  DBSHIM_OPTIONAL_CALL(db_sigmoid_gate, ctx, p);
}
int dbshim_relu2(const db_api *a, db_context *ctx, const db_relu2_params *p) {
  DBSHIM_OPTIONAL_CALL(db_relu2, ctx, p);
}
int dbshim_mamba2_step(const db_api *a, db_context *ctx, const db_mamba2_step_params *p) {
  DBSHIM_OPTIONAL_CALL(db_mamba2_step, ctx, p);
}
int dbshim_mamba2_step_launches(const db_api *a, db_context *ctx, const db_mamba2_step_params *p, db_launch_info *out, int32_t max,
                     int32_t *count) {
  DBSHIM_OPTIONAL_CALL(db_mamba2_step_launches, ctx, p, out, max, count);
}
#undef DBSHIM_OPTIONAL_CALL
