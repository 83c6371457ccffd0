package sweep

import (
	"time"

	"github.com/decodebench/decodebench/bench/telemetry"
)

// Record is one configuration's result: a line of results.jsonl. Its JSON names are the
// documented output (README, "The results"). Times are seconds, rates decimal (1 GB/s = 1e9
// B/s, 1 TFLOP/s = 1e12 FLOP/s). Only a record with Status "ok" carries times and rates; the
// others have them zero and say why in Reason. A time, rate or fraction that is zero (not
// measured, a ceiling unknown) is left out of the JSON line rather than written as a 0 that a
// script would read as "0% of the roofline"; reading it back gives zero again.
type Record struct {
	Key      string `json:"key"` // Config.Key: what --resume matches
	Model    string `json:"model"`
	ModelKey string `json:"model_key"`
	Batch    int    `json:"batch"`
	Context  int    `json:"context"`
	DType    string `json:"dtype"` // weights and activations
	// WeightFormat: how the projections are stored, as --weight-dtype names it ("bf16",
	// "int4 g128", "mxfp4"; a checkpoint's format the kernels lack by its own name).
	WeightFormat string `json:"weight_format"`
	KVDType      string `json:"kv_dtype"`
	TP           int    `json:"tp"`
	// Identity: the card and the software that measured the record, on every record, so that
	// the results of several boxes (or of resumes with another build) can be concatenated.
	Identity

	Status string `json:"status"` // "ok", "failed" or "skipped"
	Reason string `json:"reason"` // why not ok; empty when ok

	// StepSeconds = KernelSeconds + SmallOpsSeconds: one decode step of Batch sequences.
	StepSeconds     float64 `json:"step_seconds,omitzero"`
	KernelSeconds   float64 `json:"kernel_seconds,omitzero"`    // Σ Repeat x median of the measured kernels
	SmallOpsSeconds float64 `json:"small_ops_seconds,omitzero"` // bounded, not measured: see SmallOpsMethod
	// PerRequestTokensPerSec = 1 / StepSeconds; PerServerTokensPerSec = Batch x that, exactly.
	PerRequestTokensPerSec float64 `json:"per_request_tokens_per_s,omitzero"`
	PerServerTokensPerSec  float64 `json:"per_server_tokens_per_s,omitzero"`

	// StepBytes and StepFLOPs: the minimum traffic and work of the step's kernels and small
	// ops (Σ Repeat x per call); AchievedGBps = StepBytes / StepSeconds / 1e9.
	StepBytes      float64 `json:"step_bytes,omitzero"`
	StepFLOPs      float64 `json:"step_flops,omitzero"`
	AchievedGBps   float64 `json:"achieved_gbps,omitzero"`
	AchievedTFLOPs float64 `json:"achieved_tflops,omitzero"`

	// The roofline bound of the step (bench/roofline.StepBound: weights and KV cache over the
	// bandwidth, or FLOPs over the tensor rate) against each ceiling, and the fraction of it
	// reached: bound / StepSeconds (1 = at the roofline). RooflineFraction is the measured one,
	// the card's own best; zero where a ceiling is unknown (the emulator has no datasheet).
	BoundSecondsDatasheet     float64 `json:"bound_step_seconds_datasheet,omitzero"`
	BoundSecondsMeasured      float64 `json:"bound_step_seconds_measured,omitzero"`
	BoundLimit                string  `json:"bound_limit,omitzero"` // "memory" or "compute", against the measured ceiling
	RooflineFraction          float64 `json:"roofline_fraction,omitzero"`
	RooflineFractionDatasheet float64 `json:"roofline_fraction_datasheet,omitzero"`
	RooflineFractionMeasured  float64 `json:"roofline_fraction_measured,omitzero"`

	// Throttled: the card slowed itself down (power, thermal) during a measurement this step
	// is composed of; its times may be slower than the card can do.
	Throttled       bool     `json:"throttled"`
	ThrottleReasons []string `json:"throttle_reasons,omitempty"`
	// Converged: every kernel's samples met the spread target before the timeout.
	Converged bool `json:"converged"`
	// Emulated: the CPU emulator ran the kernels; the times are not a speed.
	Emulated bool `json:"emulated"`

	Kernels         []KernelEntry     `json:"kernels"`
	SmallOps        []SmallOp         `json:"small_ops"`
	SmallOpsMethod  string            `json:"small_ops_method"`
	SmallOpsGBps    float64           `json:"small_ops_bandwidth_gbps,omitzero"` // the bandwidth that bounds them
	Telemetry       telemetry.Summary `json:"telemetry"`                         // over every measurement of the step
	RecordedAt      time.Time         `json:"recorded_at"`
	MeasuredSeconds float64           `json:"measured_seconds"` // wall time of the measurements first made for this record
}

// Identity is who measured a record: the card (NVML's name and UUID, the driver and the CUDA
// version it supports) and decodebench's version, as run.json's card and session say them.
type Identity struct {
	Card        string `json:"card"`
	CardUUID    string `json:"card_uuid"`
	Driver      string `json:"driver"`
	CUDAVersion string `json:"cuda_version"`
	Version     string `json:"decodebench_version"`
}

// IdentityOf is the identity of the records a session of a run writes.
func IdentityOf(info RunInfo, version string) Identity {
	return Identity{Card: info.Card.Name, CardUUID: info.Card.UUID, Driver: info.Card.Driver,
		CUDAVersion: info.Card.CUDAVersion, Version: version}
}

// KernelEntry is one kernel of a step in a Record: which measurement it used and its share.
type KernelEntry struct {
	Name   string  `json:"name"` // "qkv_proj", "attention", ... (model.Kernel.Name)
	Kind   string  `json:"kind"`
	Key    string  `json:"key"` // the Measurement in kernels.jsonl
	Repeat float64 `json:"repeat"`
	Status string  `json:"status"`
	Reason string  `json:"reason,omitempty"`

	MedianSeconds float64 `json:"median_seconds"` // per call
	MinSeconds    float64 `json:"min_seconds"`
	Q1Seconds     float64 `json:"q1_seconds"`
	Q3Seconds     float64 `json:"q3_seconds"`
	Spread        float64 `json:"spread"` // (Q3 - Q1) / median
	Samples       int     `json:"samples"`
	Converged     bool    `json:"converged"`

	StepSeconds    float64  `json:"step_seconds"` // Repeat x MedianSeconds
	Share          float64  `json:"share"`        // of the record's StepSeconds
	Bytes          float64  `json:"bytes"`        // per call
	FLOPs          float64  `json:"flops"`
	AchievedGBps   float64  `json:"achieved_gbps"`
	AchievedTFLOPs float64  `json:"achieved_tflops"`
	Throttled      bool     `json:"throttled"`
	Rotation       string   `json:"rotation,omitempty"`
	Verified       bool     `json:"verified"`
	RelError       *float64 `json:"rel_error"`            // null where no error is defined: NonFinite > 0, or not verified
	NonFinite      int      `json:"non_finite,omitempty"` // outputs that were NaN or infinite
}
