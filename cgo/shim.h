/*
 * shim.h: the C half of package cgo. The kernels library is opened at run time (dlopen), never
 * linked, so `go build` works on a machine without it; every function of decodebench.h is
 * resolved into a db_api table and called through a dbshim_* trampoline (cgo cannot call a C
 * function pointer itself).
 */
#ifndef DECODEBENCH_CGO_SHIM_H
#define DECODEBENCH_CGO_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include "decodebench.h"

/* One pointer per function of decodebench.h, typed from its prototype so a signature that
 * changes in the header changes here too. */
#define DBSHIM_FN(name) __typeof__(&name) name
typedef struct {
  DBSHIM_FN(db_status_string);
  DBSHIM_FN(db_last_error_message);
  DBSHIM_FN(db_abi_version);
  DBSHIM_FN(db_backend_name);
  DBSHIM_FN(db_device_count);
  DBSHIM_FN(db_device_props_get);
  DBSHIM_FN(db_context_create);
  DBSHIM_FN(db_context_destroy);
  DBSHIM_FN(db_synchronize);
  DBSHIM_FN(db_buffer_alloc);
  DBSHIM_FN(db_buffer_free);
  DBSHIM_FN(db_memset);
  DBSHIM_FN(db_copy_to_host);
  DBSHIM_FN(db_copy_to_device);
  DBSHIM_FN(db_fill_hash);
  DBSHIM_FN(db_timer_create);
  DBSHIM_FN(db_timer_destroy);
  DBSHIM_FN(db_timer_start);
  DBSHIM_FN(db_timer_stop);
  DBSHIM_FN(db_timer_elapsed_ms);
  DBSHIM_FN(db_linear_plan);
  DBSHIM_FN(db_linear);
  DBSHIM_FN(db_probe);
  DBSHIM_FN(db_probe_plan);
  DBSHIM_FN(db_attention_plan);
  DBSHIM_FN(db_attention);
  DBSHIM_FN(db_kv_append);
  /* small ops */
  DBSHIM_FN(db_argmax_plan);
  DBSHIM_FN(db_embedding);
  DBSHIM_FN(db_rmsnorm);
  DBSHIM_FN(db_rope_kv_append);
  DBSHIM_FN(db_gated_act);
  DBSHIM_FN(db_bias_add);
  DBSHIM_FN(db_argmax);
  DBSHIM_FN(db_moe_route);
  DBSHIM_FN(db_moe_group);
  DBSHIM_FN(db_moe_combine);
  /* optional: NULL where the library lacks them (dbshim_load resolves them without failing) */
  DBSHIM_FN(db_fill_quantized);
  DBSHIM_FN(db_linear_launches);
  DBSHIM_FN(db_attention_launches);
  DBSHIM_FN(db_empty_kernel);
  DBSHIM_FN(db_graph_begin);
  DBSHIM_FN(db_graph_end);
  DBSHIM_FN(db_graph_launch);
  DBSHIM_FN(db_graph_destroy);
  DBSHIM_FN(db_add_i32);
  DBSHIM_FN(db_grouped_linear);
  DBSHIM_FN(db_mla_attention_plan);
  DBSHIM_FN(db_mla_attention);
  DBSHIM_FN(db_mla_attention_launches);
  DBSHIM_FN(db_mla_kv_append);
  DBSHIM_FN(db_mla_rope_append);
  DBSHIM_FN(db_conv1d_update);
  DBSHIM_FN(db_gdn_step);
  DBSHIM_FN(db_gdn_step_launches);
  DBSHIM_FN(db_gated_rmsnorm);
  DBSHIM_FN(db_sigmoid_gate);
  DBSHIM_FN(db_relu2);
  DBSHIM_FN(db_mamba2_step);
  DBSHIM_FN(db_mamba2_step_launches);
} db_api;

/* What an optional function's trampoline returns when the library lacks it: no db_status
 * (package cgo turns it into a NotExportedError naming the function). */
#define DBSHIM_NOT_EXPORTED (-1)

/* Opens the library at path (RTLD_NOW | RTLD_LOCAL), checks db_abi_version against
 * DB_ABI_VERSION and resolves every function (an optional one may be missing: NULL). On success returns a table that lives as long as
 * the process (the library is never closed: neither the CUDA runtime nor a running emulator
 * survives dlclose safely). On failure returns NULL with the reason in err (NUL-terminated);
 * dlerror is read inside this one call, so on the thread that failed. */
db_api *dbshim_load(const char *path, char *err, size_t errlen);

/* The device goroutine marks its OS thread with its device's id, so a nested call can tell it
 * already runs there. */
void dbshim_set_thread_owner(uint64_t id);
uint64_t dbshim_thread_owner(void);

/* Trampolines, one per function. */
const char *dbshim_status_string(const db_api *a, int status);
int dbshim_last_error_message(const db_api *a, char *buf, size_t len);
const char *dbshim_backend_name(const db_api *a);
int dbshim_device_count(const db_api *a, int32_t *count);
int dbshim_device_props_get(const db_api *a, int32_t device, db_device_props *out);
int dbshim_context_create(const db_api *a, int32_t device, db_context **out);
int dbshim_context_destroy(const db_api *a, db_context *ctx);
int dbshim_synchronize(const db_api *a, db_context *ctx);
int dbshim_buffer_alloc(const db_api *a, db_context *ctx, uint64_t bytes, uint64_t *dptr);
int dbshim_buffer_free(const db_api *a, db_context *ctx, uint64_t dptr);
int dbshim_memset(const db_api *a, db_context *ctx, uint64_t dptr, int32_t byte_value, uint64_t bytes);
int dbshim_copy_to_host(const db_api *a, db_context *ctx, void *host_dst, uint64_t src, uint64_t bytes);
int dbshim_copy_to_device(const db_api *a, db_context *ctx, uint64_t dst, const void *host_src, uint64_t bytes);
int dbshim_fill_hash(const db_api *a, db_context *ctx, uint64_t dptr, uint64_t count, int32_t dtype,
                     uint64_t seed, float scale);
int dbshim_timer_create(const db_api *a, db_context *ctx, db_timer **out);
int dbshim_timer_destroy(const db_api *a, db_timer *t);
int dbshim_timer_start(const db_api *a, db_timer *t);
int dbshim_timer_stop(const db_api *a, db_timer *t);
int dbshim_timer_elapsed_ms(const db_api *a, db_timer *t, float *ms);
int dbshim_linear_plan(const db_api *a, db_context *ctx, db_linear_params *p, uint64_t *workspace_bytes);
int dbshim_linear(const db_api *a, db_context *ctx, const db_linear_params *p);
int dbshim_probe(const db_api *a, db_context *ctx, db_probe_params *p);
int dbshim_probe_plan(const db_api *a, db_context *ctx, db_probe_params *p);
int dbshim_attention_plan(const db_api *a, db_context *ctx, db_attention_params *p, uint64_t *workspace_bytes);
int dbshim_attention(const db_api *a, db_context *ctx, const db_attention_params *p);
int dbshim_kv_append(const db_api *a, db_context *ctx, const db_kv_append_params *p);

/* small ops */
int dbshim_argmax_plan(const db_api *a, db_context *ctx, db_argmax_params *p, uint64_t *workspace_bytes);
int dbshim_embedding(const db_api *a, db_context *ctx, const db_embedding_params *p);
int dbshim_rmsnorm(const db_api *a, db_context *ctx, const db_rmsnorm_params *p);
int dbshim_rope_kv_append(const db_api *a, db_context *ctx, const db_rope_append_params *p);
int dbshim_gated_act(const db_api *a, db_context *ctx, const db_gated_act_params *p);
int dbshim_bias_add(const db_api *a, db_context *ctx, const db_bias_add_params *p);
int dbshim_argmax(const db_api *a, db_context *ctx, const db_argmax_params *p);
int dbshim_moe_route(const db_api *a, db_context *ctx, const db_moe_route_params *p);
int dbshim_moe_group(const db_api *a, db_context *ctx, const db_moe_group_params *p);
int dbshim_moe_combine(const db_api *a, db_context *ctx, const db_moe_combine_params *p);

/* Whether the library has the function of decodebench.h called name (a required one always). */
int dbshim_has(const db_api *a, const char *name);

/* optional functions: DBSHIM_NOT_EXPORTED where the library lacks them */
int dbshim_fill_quantized(const db_api *a, db_context *ctx, const db_quant_fill_params *p);
int dbshim_linear_launches(const db_api *a, db_context *ctx, const db_linear_params *p, db_launch_info *out,
                           int32_t max, int32_t *count);
int dbshim_attention_launches(const db_api *a, db_context *ctx, const db_attention_params *p,
                              db_launch_info *out, int32_t max, int32_t *count);
int dbshim_empty_kernel(const db_api *a, db_context *ctx, int32_t launches);
int dbshim_graph_begin(const db_api *a, db_context *ctx);
int dbshim_graph_end(const db_api *a, db_context *ctx, db_graph **out);
int dbshim_graph_launch(const db_api *a, db_context *ctx, db_graph *g);
int dbshim_graph_destroy(const db_api *a, db_context *ctx, db_graph *g);
int dbshim_add_i32(const db_api *a, db_context *ctx, uint64_t dptr, int32_t count, int32_t delta);
int dbshim_grouped_linear(const db_api *a, db_context *ctx, const db_grouped_linear_params *p);
int dbshim_mla_attention_plan(const db_api *a, db_context *ctx, db_mla_attention_params *p,
                              uint64_t *workspace_bytes);
int dbshim_mla_attention(const db_api *a, db_context *ctx, const db_mla_attention_params *p);
int dbshim_mla_attention_launches(const db_api *a, db_context *ctx, const db_mla_attention_params *p,
                                  db_launch_info *out, int32_t max, int32_t *count);
int dbshim_mla_kv_append(const db_api *a, db_context *ctx, const db_mla_kv_append_params *p);
int dbshim_mla_rope_append(const db_api *a, db_context *ctx, const db_mla_rope_append_params *p);
int dbshim_conv1d_update(const db_api *a, db_context *ctx, const db_conv1d_update_params *p);
int dbshim_gdn_step(const db_api *a, db_context *ctx, const db_gdn_step_params *p);
int dbshim_gdn_step_launches(const db_api *a, db_context *ctx, const db_gdn_step_params *p, db_launch_info *out, int32_t max,
                     int32_t *count);
int dbshim_gated_rmsnorm(const db_api *a, db_context *ctx, const db_gated_rmsnorm_params *p);
int dbshim_sigmoid_gate(const db_api *a, db_context *ctx, const db_sigmoid_gate_params *p);
int dbshim_relu2(const db_api *a, db_context *ctx, const db_relu2_params *p);
int dbshim_mamba2_step(const db_api *a, db_context *ctx, const db_mamba2_step_params *p);
int dbshim_mamba2_step_launches(const db_api *a, db_context *ctx, const db_mamba2_step_params *p, db_launch_info *out, int32_t max,
                     int32_t *count);

#endif
