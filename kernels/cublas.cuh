// cublas.cuh: the cuBLASLt peer of the linear layer (DB_LINEAR_CUBLAS), implemented in cublas.cu
// and routed to by linear.cu's plan and dispatch.
#ifndef DECODEBENCH_CUBLAS_CUH
#define DECODEBENCH_CUBLAS_CUH

#include "common.cuh"

// Checks p for cuBLASLt (opening the library and choosing its algorithm for the shape on first
// use, then cached) and gives the workspace the call needs. DB_ERR_UNSUPPORTED_SHAPE with a
// one-line reason on the emulator, where libcublasLt cannot be opened, or where cuBLASLt has no
// algorithm for the shape. p is validated by linear.cu first (dtype, sizes, pointers).
int db_cublas_plan(const db_context *ctx, const db_linear_params *p, uint64_t *workspace_bytes);
// Y = X * W^T through cuBLASLt on the context's stream, with the plan's algorithm.
int db_cublas_linear(const db_context *ctx, const db_linear_params *p);

#endif
