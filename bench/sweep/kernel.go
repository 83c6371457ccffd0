package sweep

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/telemetry"
	"github.com/decodebench/decodebench/cgo"
)

// SpecOf is the measurement a step's kernel needs: two configurations (or two layers of one)
// whose kernels have one Key share one measurement. A dtype the kernels do not take maps to
// no cgo dtype, and the measurement says so (skipped).
func SpecOf(k model.Kernel, s model.Shape) measure.Spec {
	switch k.Kind {
	case model.KindLinear:
		l := measure.LinearSpec{Batch: k.M, N: k.N, K: k.K, DType: kernelDType(s.ActivationDType()), Variant: cgo.LinearAuto}
		if k.WeightFormat != "" {
			l.WeightFormat, l.GroupSize, _ = WeightFormatOf(s)
		}
		return l.Spec()
	case model.KindAttention:
		// A span's kernel runs over the whole cache with its window or chunk, so that the
		// kernel finds its span as in the step, rather than over a cache cut to the span.
		context := k.Context
		if k.CachedContext > 0 {
			context = k.CachedContext
		}
		a := measure.AttentionSpec{Batch: k.Batch, QHeads: k.QHeads, KVHeads: k.KVHeads, HeadDim: k.HeadDim,
			Contexts: []int{context}, DType: kernelDType(s.KVDType), Window: k.Window, Chunk: k.Chunk, Sinks: k.Sinks}
		if s.KVDType == model.FP8 { // an fp8 e4m3 cache beside the step's 16-bit activations
			a.DType, a.KVDType = kernelDType(s.ActivationDType()), cgo.DTypeFP8E4M3
		}
		return a.Spec()
	case model.KindAttentionMLA:
		return measure.MLASpec{Batch: k.Batch, QHeads: k.QHeads, Contexts: []int{k.Context}, DType: kernelDType(s.KVDType),
			Scale: MLAScale(s)}.Spec()
	}
	return measure.Spec{Kind: k.Kind}
}

// PeerSpec is the measurement of the peer variant (cuBLAS) beside a linear spec of ours: the
// same shape and dtype, the peer's own split. ok is false for a spec that is not a linear one.
func PeerSpec(s measure.Spec, peer cgo.LinearVariant) (measure.Spec, bool) {
	if s.Kind != measure.KindLinear || s.Linear == nil || peer == cgo.LinearAuto {
		return measure.Spec{}, false
	}
	l := *s.Linear
	l.Variant, l.SplitK = peer, 0
	return l.Spec(), true
}

// stepSpecs are the measurements one step needs, in launch order: each kernel's spec, and
// after each linear one its peer's when peer is a variant (not LinearAuto).
func stepSpecs(cfg Config, peer cgo.LinearVariant) []measure.Spec {
	var specs []measure.Spec
	for _, k := range cfg.Model.Kernels(cfg.Batch, cfg.Context) {
		spec := SpecOf(k, cfg.Model)
		specs = append(specs, spec)
		if p, ok := PeerSpec(spec, peer); ok {
			specs = append(specs, p)
		}
	}
	return specs
}

// MLAScale is the softmax scale the sweep gives an MLA model's attention: 1/sqrt of the query
// head's QK width (nope + rope, 192 for DeepSeek-V3). The model shape does not carry the yarn
// mscale that DeepSeek multiplies in; the scale changes the softmax's values, not the kernel's
// time.
func MLAScale(s model.Shape) float64 { return 1 / math.Sqrt(float64(s.HeadDim)) }

// MissingKernel names what the kernel library lacks to run k of shape s, "" when it has the
// kernel: a variant (model.Kernel.Variant: a grouped linear, a linear with quantized weights; MLA
// attention of widths other than the kernel's 576 and 512 or with more than its heads; attention
// with sinks is built), or a linear or attention of a weight or KV dtype the kernels do not take
// (KernelDTypes). A step with such a kernel is skipped naming it, and
// `bench linear` and `bench attention` skip the kernel itself: timing an mxfp4 or fp8 linear as
// a bf16 one, or an MLA model's attention as grouped-query attention, would time another model.
func MissingKernel(k model.Kernel, s model.Shape) string {
	if k.Kind == model.KindAttentionMLA {
		switch {
		case k.HeadDim != cgo.MLAQKDim || k.VHeadDim != cgo.MLAVDim:
			return k.Variant()
		case k.QHeads > cgo.MLAMaxHeads:
			return fmt.Sprintf("MLA attention with %d query heads (the kernel takes up to %d)", k.QHeads, cgo.MLAMaxHeads)
		case !slices.Contains(KernelDTypes, s.KVDType):
			return fmt.Sprintf("MLA attention over a %s latent cache", s.KVDType)
		}
		return ""
	}
	if k.Kind == model.KindLinear && k.WeightFormat != "" {
		f, group, ok := WeightFormatOf(s)
		switch {
		case !ok:
			return k.Variant()
		case f.CheckShape(k.N, k.K, group) != nil:
			return fmt.Sprintf("linear with %s weights at N %d, K %d (%v)", k.WeightFormat, k.N, k.K, f.CheckShape(k.N, k.K, group))
		}
		return ""
	}
	if v := k.Variant(); v != "" && !(k.Kind == model.KindAttention && k.Sinks) {
		return v
	}
	switch k.Kind {
	case model.KindLinear, model.KindLinearGrouped:
		if !slices.Contains(KernelDTypes, s.WeightDType) {
			return fmt.Sprintf("linear with %s weights", s.WeightDType)
		}
	case model.KindAttention:
		if !slices.Contains(KernelDTypes, s.KVDType) && s.KVDType != model.FP8 { // fp8: the e4m3 cache
			return fmt.Sprintf("attention over a %s KV cache", s.KVDType)
		}
	}
	return ""
}

// MissingKernels says why the library cannot run a step made of kernels, "" when it can:
// "the kernel library has no kernel yet for linear with mxfp4 weights (gate_up_proj,
// down_proj);", each missing kernel once with the calls that need it.
func MissingKernels(kernels []model.Kernel, s model.Shape) string {
	var missing []string
	callsOf := map[string]string{}
	for _, k := range kernels {
		v := MissingKernel(k, s)
		switch {
		case v == "":
		case callsOf[v] == "":
			missing, callsOf[v] = append(missing, v), k.Name
		default:
			callsOf[v] += ", " + k.Name
		}
	}
	if len(missing) == 0 {
		return ""
	}
	why := "the kernel library has no kernel yet for"
	for _, v := range missing {
		why += " " + v + " (" + callsOf[v] + ");"
	}
	return why
}

// kernelDType is the cgo element type of a model dtype the kernels take (-1 for another).
func kernelDType(d model.DType) cgo.DType {
	switch d {
	case model.BF16:
		return cgo.DTypeBF16
	case model.FP16:
		return cgo.DTypeFP16
	}
	return -1
}

// The probes the sweep runs first: the measured ceiling is the read bandwidth (what a decode
// step does with its weights and KV cache) and the tensor-core bf16 rate.
func readProbe(bytes uint64) measure.Spec {
	return measure.ProbeSpec{Kind: cgo.ProbeRead, Bytes: bytes}.Spec()
}
func mmaProbe() measure.Spec { return measure.ProbeSpec{Kind: cgo.ProbeMMABF16}.Spec() }

// Measurement is one kernel call measured on the device, a line of kernels.jsonl: the
// measure.Outcome and where and when the sweep took it.
type Measurement struct {
	Key string `json:"key"` // Outcome.Spec.Key(): what a resume and the records match
	measure.Outcome
	Telemetry   telemetry.Summary `json:"telemetry"`
	Started     time.Time         `json:"started"`
	WallSeconds float64           `json:"wall_seconds"` // everything: allocation, verification, timing
}

// UnmarshalJSON also reads the lines of earlier decodebench versions, whose rates were
// achieved_gbps and achieved_tflops (decimal GB/s and TFLOP/s) and whose spec was flat (it is
// left empty: the key still names the call).
func (m *Measurement) UnmarshalJSON(data []byte) error {
	type plain Measurement
	var v struct {
		plain
		Spec   json.RawMessage `json:"spec"`
		GBps   float64         `json:"achieved_gbps"`
		TFLOPs float64         `json:"achieved_tflops"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*m = Measurement(v.plain)
	if len(v.Spec) > 0 && json.Unmarshal(v.Spec, &m.Spec) != nil {
		m.Spec = measure.Spec{}
	}
	if m.AchievedBytesPerSec == 0 && v.GBps > 0 {
		m.AchievedBytesPerSec = v.GBps * 1e9
	}
	if m.AchievedFLOPsPerSec == 0 && v.TFLOPs > 0 {
		m.AchievedFLOPsPerSec = v.TFLOPs * 1e12
	}
	return nil
}

// OK reports whether the measurement has a time.
func (m Measurement) OK() bool { return m.Status == measure.StatusOK && m.Stats.Median > 0 }

// Measurer measures kernel calls on one device. bench/measure on a cgo.Device implements it
// (see DeviceMeasurer); tests fake it.
type Measurer interface {
	// Fits says whether the buffers of one call of s can be allocated now, and if not why;
	// it allocates nothing.
	Fits(s measure.Spec) (bool, string)
	// Measure verifies and times s.
	Measure(s measure.Spec) measure.Outcome
	// Healthy reports whether the device still works after a failure; an error means the
	// CUDA context is lost and the sweep must stop.
	Healthy() error
}

// LaunchMeasurer is a Measurer that also measures the launch baseline; the sweep records it in
// run.json once per session. A Measurer without it leaves the baseline "not measured".
type LaunchMeasurer interface {
	MeasureLaunch() Launch
}

// WeightFormatOf is the kernels' weight format for a shape's quantized projections (its
// quantization_config) and its group size; ok is false where no kernel takes the format: fp8
// with block scales other than DeepSeek-V3's and Kimi-K2's 128 x 128 (fp8-block), or a method
// or width the kernels lack. GPTQ's
// desc_act reordering (g_idx) is not modelled: the time is the same bytes read in order.
func WeightFormatOf(s model.Shape) (f cgo.WeightFormat, group int, ok bool) {
	q := s.Quant
	if q == nil {
		return cgo.WeightDense, 0, false
	}
	switch {
	case q.Method == model.QuantMXFP4:
		return cgo.WeightMXFP4, 32, true
	case q.Method == model.QuantFP8 && q.BlockN == 0 && q.BlockK == 0:
		return cgo.WeightFP8, 0, true
	case q.Method == model.QuantFP8 && q.BlockN == cgo.FP8Block && q.BlockK == cgo.FP8Block:
		return cgo.WeightFP8Block, 0, true
	case q.Method == model.QuantAWQ && q.Bits == 4:
		return cgo.WeightINT4ZeroPt, q.GroupSize, true
	case q.Method == model.QuantGPTQ && q.Bits == 4:
		return cgo.WeightINT4, q.GroupSize, true
	}
	return cgo.WeightDense, 0, false
}
