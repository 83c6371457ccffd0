package cgo

// The recurrent layers' decode ops (decodebench.h's recurrent section): the conv1d update, the
// Gated DeltaNet and Mamba-2 state steps, the gated RMSNorm, the sigmoid output gate and relu².
// Optional functions of the one function table (shim.c): a library without them answers
// ErrNotExported, naming the function.

/*
#include "shim.h"
*/
import "C"

// The recurrent kernels' limits (decodebench.h).
const (
	ConvMaxKernel    = int(C.DB_CONV_MAX_KERNEL)
	GDNMaxHeadDim    = int(C.DB_GDN_MAX_HEAD_DIM)
	Mamba2MaxState   = int(C.DB_MAMBA2_MAX_STATE)
	Mamba2MaxHeadDim = int(C.DB_MAMBA2_MAX_HEAD_DIM)
	ConvActNone      = int(C.DB_CONV_ACT_NONE)
	ConvActSiLU      = int(C.DB_CONV_ACT_SILU)
)

// Conv1DUpdateParams mirrors db_conv1d_update_params: one new input a sequence through a
// depthwise causal conv of Kernel taps, its rolling state shifted in place.
type Conv1DUpdateParams struct {
	X, State, Weight, Bias, Out uint64 // Bias 0 = none; Weight tap-major [Kernel, Channels]
	Batch, Channels, Kernel     int
	XRowStride, OutRowStride    int // 0 = Channels
	Activation                  int // ConvActNone or ConvActSiLU
	DType                       DType
}

// Conv1DUpdate runs db_conv1d_update.
func (d *Device) Conv1DUpdate(p Conv1DUpdateParams) error {
	const op = "db_conv1d_update"
	var c C.db_conv1d_update_params
	c.x, c.state, c.weight, c.bias, c.out = C.uint64_t(p.X), C.uint64_t(p.State), C.uint64_t(p.Weight), C.uint64_t(p.Bias), C.uint64_t(p.Out)
	if err := int32s(op, "batch", p.Batch, &c.batch, "channels", p.Channels, &c.channels, "kernel", p.Kernel, &c.kernel,
		"x_row_stride", p.XRowStride, &c.x_row_stride, "out_row_stride", p.OutRowStride, &c.out_row_stride,
		"activation", p.Activation, &c.activation); err != nil {
		return err
	}
	c.dtype = C.int32_t(p.DType)
	return d.Do(func() error { return d.check(op, C.dbshim_conv1d_update(d.lib.api, d.ctx, &c)) })
}

// GDNStepParams mirrors db_gdn_step_params: the gated delta rule for one token.
type GDNStepParams struct {
	Q, K, V, A, BGate uint64 // 16-bit activations (see decodebench.h for the layouts)
	ALog, DtBias      uint64 // f32 [VHeads]
	State             uint64 // f32 [Batch, VHeads, HeadK, HeadV], in place
	Out               uint64 // [Batch, VHeads, HeadV]
	Batch             int
	KHeads, VHeads    int
	HeadK, HeadV      int
	QKVRowStride      int     // 0 = packed
	ABRowStride       int     // 0 = VHeads
	Scale             float32 // 0 = 1/sqrt(HeadK)
	DType             DType
}

func (p GDNStepParams) toC(op string) (C.db_gdn_step_params, error) {
	var c C.db_gdn_step_params
	c.q, c.k, c.v, c.a, c.b_gate = C.uint64_t(p.Q), C.uint64_t(p.K), C.uint64_t(p.V), C.uint64_t(p.A), C.uint64_t(p.BGate)
	c.A_log, c.dt_bias, c.state, c.out = C.uint64_t(p.ALog), C.uint64_t(p.DtBias), C.uint64_t(p.State), C.uint64_t(p.Out)
	err := int32s(op, "batch", p.Batch, &c.batch, "k_heads", p.KHeads, &c.k_heads, "v_heads", p.VHeads, &c.v_heads,
		"head_k_dim", p.HeadK, &c.head_k_dim, "head_v_dim", p.HeadV, &c.head_v_dim,
		"qkv_row_stride", p.QKVRowStride, &c.qkv_row_stride, "ab_row_stride", p.ABRowStride, &c.ab_row_stride)
	c.scale, c.dtype = C.float(p.Scale), C.int32_t(p.DType)
	return c, err
}

// GDNStep runs db_gdn_step.
func (d *Device) GDNStep(p GDNStepParams) error {
	const op = "db_gdn_step"
	c, err := p.toC(op)
	if err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_gdn_step(d.lib.api, d.ctx, &c)) })
}

// GDNStepLaunches lists the launch one GDNStep call makes (nothing runs).
func (d *Device) GDNStepLaunches(p GDNStepParams) ([]LaunchInfo, error) {
	const op = "db_gdn_step_launches"
	c, err := p.toC(op)
	if err != nil {
		return nil, err
	}
	return d.launches(op, func(out *C.db_launch_info, count *C.int32_t) C.int {
		return C.dbshim_gdn_step_launches(d.lib.api, d.ctx, &c, out, maxLaunches, count)
	})
}

// GatedRMSNormParams mirrors db_gated_rmsnorm_params.
type GatedRMSNormParams struct {
	X, Z, Weight, Out uint64
	Batch             int
	Groups, GroupSize int
	ZRowStride        int  // 0 = Groups x GroupSize
	SharedWeight      bool // Weight [GroupSize] for every group (Qwen3-Next) instead of [width] (Mamba-2)
	NormBeforeGate    bool // Qwen3-Next: norm, then silu(z); Mamba-2: x silu(z), then norm
	Eps               float32
	DType             DType
}

// GatedRMSNorm runs db_gated_rmsnorm.
func (d *Device) GatedRMSNorm(p GatedRMSNormParams) error {
	const op = "db_gated_rmsnorm"
	var c C.db_gated_rmsnorm_params
	c.x, c.z, c.weight, c.out = C.uint64_t(p.X), C.uint64_t(p.Z), C.uint64_t(p.Weight), C.uint64_t(p.Out)
	if err := int32s(op, "batch", p.Batch, &c.batch, "groups", p.Groups, &c.groups, "group_size", p.GroupSize, &c.group_size,
		"z_row_stride", p.ZRowStride, &c.z_row_stride); err != nil {
		return err
	}
	if p.SharedWeight {
		c.shared_weight = 1
	}
	if p.NormBeforeGate {
		c.norm_before_gate = 1
	}
	c.eps, c.dtype = C.float(p.Eps), C.int32_t(p.DType)
	return d.Do(func() error { return d.check(op, C.dbshim_gated_rmsnorm(d.lib.api, d.ctx, &c)) })
}

// SigmoidGateParams mirrors db_sigmoid_gate_params: Out = O · sigmoid(gate).
type SigmoidGateParams struct {
	O, Gate, Out                  uint64
	Batch, Heads, HeadDim         int
	GateRowStride, GateHeadStride int // 0, 0 = packed like O
	DType                         DType
}

// SigmoidGate runs db_sigmoid_gate.
func (d *Device) SigmoidGate(p SigmoidGateParams) error {
	const op = "db_sigmoid_gate"
	var c C.db_sigmoid_gate_params
	c.o, c.gate, c.out = C.uint64_t(p.O), C.uint64_t(p.Gate), C.uint64_t(p.Out)
	if err := int32s(op, "batch", p.Batch, &c.batch, "heads", p.Heads, &c.heads, "head_dim", p.HeadDim, &c.head_dim,
		"gate_row_stride", p.GateRowStride, &c.gate_row_stride, "gate_head_stride", p.GateHeadStride, &c.gate_head_stride); err != nil {
		return err
	}
	c.dtype = C.int32_t(p.DType)
	return d.Do(func() error { return d.check(op, C.dbshim_sigmoid_gate(d.lib.api, d.ctx, &c)) })
}

// ReLU2 runs db_relu2: Out = relu(X)² over Batch rows of N.
func (d *Device) ReLU2(x, out uint64, batch, n int, dtype DType) error {
	const op = "db_relu2"
	var c C.db_relu2_params
	c.x, c.out, c.dtype = C.uint64_t(x), C.uint64_t(out), C.int32_t(dtype)
	if err := int32s(op, "batch", batch, &c.batch, "n", n, &c.n); err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_relu2(d.lib.api, d.ctx, &c)) })
}

// Mamba2StepParams mirrors db_mamba2_step_params: the selective-state update for one token.
type Mamba2StepParams struct {
	X, B, C, Dt        uint64 // 16-bit activations (see decodebench.h for the layouts)
	ALog, D, DtBias    uint64 // f32 [Heads]
	State              uint64 // f32 [Batch, Heads, HeadDim, StateSize], in place
	Y                  uint64 // [Batch, Heads, HeadDim]
	Batch              int
	Heads, Groups      int
	HeadDim, StateSize int
	XRowStride         int     // 0 = packed
	DtRowStride        int     // 0 = Heads
	DtMin, DtMax       float32 // time_step_limit (DtMax may be +Inf)
	DType              DType
}

func (p Mamba2StepParams) toC(op string) (C.db_mamba2_step_params, error) {
	var c C.db_mamba2_step_params
	c.x, c.B, c.C, c.dt = C.uint64_t(p.X), C.uint64_t(p.B), C.uint64_t(p.C), C.uint64_t(p.Dt)
	c.A_log, c.D, c.dt_bias = C.uint64_t(p.ALog), C.uint64_t(p.D), C.uint64_t(p.DtBias)
	c.state, c.y = C.uint64_t(p.State), C.uint64_t(p.Y)
	err := int32s(op, "batch", p.Batch, &c.batch, "heads", p.Heads, &c.heads, "n_groups", p.Groups, &c.n_groups,
		"head_dim", p.HeadDim, &c.head_dim, "state_size", p.StateSize, &c.state_size,
		"x_row_stride", p.XRowStride, &c.x_row_stride, "dt_row_stride", p.DtRowStride, &c.dt_row_stride)
	c.dt_min, c.dt_max, c.dtype = C.float(p.DtMin), C.float(p.DtMax), C.int32_t(p.DType)
	return c, err
}

// Mamba2Step runs db_mamba2_step.
func (d *Device) Mamba2Step(p Mamba2StepParams) error {
	const op = "db_mamba2_step"
	c, err := p.toC(op)
	if err != nil {
		return err
	}
	return d.Do(func() error { return d.check(op, C.dbshim_mamba2_step(d.lib.api, d.ctx, &c)) })
}

// Mamba2StepLaunches lists the launch one Mamba2Step call makes (nothing runs).
func (d *Device) Mamba2StepLaunches(p Mamba2StepParams) ([]LaunchInfo, error) {
	const op = "db_mamba2_step_launches"
	c, err := p.toC(op)
	if err != nil {
		return nil, err
	}
	return d.launches(op, func(out *C.db_launch_info, count *C.int32_t) C.int {
		return C.dbshim_mamba2_step_launches(d.lib.api, d.ctx, &c, out, maxLaunches, count)
	})
}
