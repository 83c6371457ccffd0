package measure

import (
	"fmt"
	"math"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// LinearSpec is one decode linear layer: Y[Batch x N] = X[Batch x K] · Wᵀ, W row-major N x K.
type LinearSpec struct {
	Batch   int               `json:"batch"`
	N       int               `json:"n"`
	K       int               `json:"k"`
	DType   cgo.DType         `json:"dtype"`             // bf16 or fp16
	Variant cgo.LinearVariant `json:"variant"`           // LinearAuto lets the kernel choose
	SplitK  int               `json:"split_k,omitempty"` // 0 lets the kernel choose (gemv and tiled split K)
	// WeightFormat is how W is stored (cgo/quant.go); dense (0) is W of DType. GroupSize is the
	// grouped formats' group along K (int4 32, 64 or 128; mxfp4 32).
	WeightFormat cgo.WeightFormat `json:"weight_format,omitempty"`
	GroupSize    int              `json:"group_size,omitempty"`
}

// quantized reports whether W is stored in a quantized format.
func (s LinearSpec) quantized() bool { return s.WeightFormat != cgo.WeightDense }

// weightBytes is what one call reads of W: its elements, and for a quantized W its packed
// values, scales and zero points.
func (s LinearSpec) weightBytes() uint64 {
	if s.quantized() {
		return s.WeightFormat.Layout(s.N, s.K, s.GroupSize).Bytes()
	}
	return uint64(s.N) * uint64(s.K) * s.DType.Bytes()
}

// maxLinearRefRows is how many output features (rows of W) the float64 reference computes,
// for every sequence of the batch: 64 rows of an LM head of K 4096 at batch 256 is 67M
// products, tens of milliseconds on a few cores. Every output element is still checked for
// NaN and for the poison of an unwritten one.
const maxLinearRefRows = 64

// Bytes is the least a call moves: W, X and Y once each. X and Y are not rotated (activations
// stay in L2 between layers in a real step too), so at batch 256 up to ~10% of the bytes counted
// for a 4096x4096 W may come from L2 rather than HBM; every Bytes counts each input once and each
// output once wherever it comes from, so that bandwidths compare across kernels and cards.
func (s LinearSpec) Bytes() float64 {
	e := float64(s.DType.Bytes())
	b, n, k := float64(s.Batch), float64(s.N), float64(s.K)
	return float64(s.weightBytes()) + (b*k+b*n)*e
}

// FLOPs of a call: 2·Batch·N·K.
func (s LinearSpec) FLOPs() float64 { return 2 * float64(s.Batch) * float64(s.N) * float64(s.K) }

// MinDeviceBytes is the device memory the measurement needs with one copy of W (the split-K
// workspace aside): what a sweep passes to Fits.
func (s LinearSpec) MinDeviceBytes() uint64 {
	if s.Batch < 1 || s.N < 1 || s.K < 1 {
		return 0
	}
	e := s.DType.Bytes()
	b, n, k := uint64(s.Batch), uint64(s.N), uint64(s.K)
	return s.weightStride() + b*k*e + b*n*e
}

// weightStride is one rotated copy of W: for a quantized W, its values, scales and zero points
// in one block (each part copyAlign-aligned), so that every timed call reads all three from
// HBM.
func (s LinearSpec) weightStride() uint64 {
	if !s.quantized() {
		return roundUp(s.weightBytes(), copyAlign)
	}
	l := s.WeightFormat.Layout(s.N, s.K, s.GroupSize)
	return roundUp(l.WBytes, copyAlign) + roundUp(l.ScaleBytes, copyAlign) + roundUp(l.ZeroBytes, copyAlign)
}

// check reports a spec that cannot run: invalid values fail, shapes the kernels do not take
// are skipped (the same limits as db_linear_plan and `verify linear`).
func (s LinearSpec) check() (status, reason string) {
	switch {
	case s.Batch < 1 || s.N < 1 || s.K < 1:
		return StatusFailed, fmt.Sprintf("invalid shape batch %d, n %d, k %d: each must be >= 1", s.Batch, s.N, s.K)
	case s.SplitK < 0:
		return StatusFailed, fmt.Sprintf("invalid split-k %d: want 0 (auto) or >= 1", s.SplitK)
	case !s.Variant.Valid():
		return StatusFailed, fmt.Sprintf("invalid variant %v", s.Variant)
	case s.Batch > cgo.MaxBatch:
		return StatusSkipped, fmt.Sprintf("unsupported: batch %d (the linear kernels take 1..%d)", s.Batch, cgo.MaxBatch)
	case s.K%cgo.LinearKMultiple != 0:
		return StatusSkipped, fmt.Sprintf("unsupported: k %d is not a multiple of %d (rows are read as 16-byte vectors)", s.K, cgo.LinearKMultiple)
	case s.SplitK > cgo.MaxSplitK:
		return StatusSkipped, fmt.Sprintf("unsupported: split-k %d (at most %d)", s.SplitK, cgo.MaxSplitK)
	case s.N > math.MaxInt32 || s.K > math.MaxInt32:
		return StatusSkipped, fmt.Sprintf("unsupported: n %d or k %d above 2^31-1", s.N, s.K)
	case s.DType != cgo.DTypeBF16 && s.DType != cgo.DTypeFP16:
		return StatusSkipped, fmt.Sprintf("unsupported: dtype %v (the linear kernels take bf16 or fp16)", s.DType)
	case s.Variant == cgo.LinearMMA && s.SplitK > 1:
		return StatusSkipped, fmt.Sprintf("unsupported: split-k %d with the mma variant (gemv and tiled split K)", s.SplitK)
	case !s.WeightFormat.Valid():
		return StatusFailed, fmt.Sprintf("invalid weight format %v", s.WeightFormat)
	case s.quantized():
		if err := s.WeightFormat.CheckShape(s.N, s.K, s.GroupSize); err != nil {
			return StatusSkipped, "unsupported: " + err.Error()
		}
	}
	return "", ""
}

// linearInputs are the hashed inputs of a measurement, as `verify linear` makes them: unit X
// and W scaled by 1/sqrt(k), so outputs stay near 1/3 whatever k is.
func linearInputs(s LinearSpec, seed uint64) ref.LinearInputs {
	in := ref.LinearInputs{
		DType: ref.DType(s.DType), Batch: s.Batch, N: s.N, K: s.K,
		SeedX: ref.Hash64(seed, 0), SeedW: ref.Hash64(seed, 1),
		ScaleX: 1, ScaleW: float32(1 / math.Sqrt(float64(s.K))),
	}
	if s.quantized() {
		in.Weights = ref.QuantFill{Format: s.WeightFormat, N: s.N, K: s.K, GroupSize: s.GroupSize, Seed: in.SeedW, Scale: in.ScaleW}
	}
	return in
}

// Linear verifies, then times, one decode linear layer. W rotates through enough copies that
// the timed calls read it from HBM; X and Y stay put, as activations do between layers.
func Linear(dev *cgo.Device, s LinearSpec, o Options) Outcome {
	out, _ := linear(dev, s, o)
	return out
}

func linear(dev *cgo.Device, s LinearSpec, o Options) (Outcome, Check) {
	return measureSpec(dev, "linear", s, o, func(o Options, info deviceInfo, out Outcome) (Outcome, Check) {
		return linearRun(dev, s, o, info, out)
	})
}

// linearRun is the linear kernel's part of the measurement: out has what measureSpec filled.
func linearRun(dev *cgo.Device, s LinearSpec, o Options, info deviceInfo, out Outcome) (Outcome, Check) {
	const kernel = "linear"

	params := cgo.LinearParams{X: planAddress, W: planAddress, Y: planAddress,
		Batch: s.Batch, N: s.N, K: s.K, DType: s.DType, Variant: s.Variant, SplitK: s.SplitK,
		WeightFormat: s.WeightFormat, GroupSize: s.GroupSize}
	if s.quantized() {
		params.Scales = planAddress
		if s.WeightFormat == cgo.WeightINT4ZeroPt {
			params.Zeros = planAddress
		}
	}
	plan, workspace, err := dev.LinearPlan(params)
	if err != nil {
		return merge(out, fromError(kernel, "planning", err)), noCheck
	}
	out.Plan = Plan{Variant: plan.Variant.String(), SplitK: plan.SplitK, WorkspaceBytes: workspace}

	elem := s.DType.Bytes()
	wBytes := s.weightBytes()
	wStride := s.weightStride()
	other := uint64(s.Batch)*uint64(s.K)*elem + uint64(s.Batch)*uint64(s.N)*elem + workspace
	if ok, why := Fits(dev, wStride+other); !ok {
		return merge(out, skipped(kernel, "does not fit: %s", why)), noCheck
	}
	out.Rotation = planRotation(float64(wBytes), float64(wStride), float64(info.props.L2Bytes), o.RotateFactor, rotateCap(o, info, other))

	bufs := &buffers{dev: dev}
	defer bufs.close()
	in := linearInputs(s, o.Seed)
	x, err := bufs.alloc("X", uint64(s.Batch)*uint64(s.K)*elem)
	if err != nil {
		return merge(out, fromError(kernel, "X", err)), noCheck
	}
	w, err := bufs.alloc(fmt.Sprintf("%d copies of W", out.Rotation.Copies), uint64(out.Rotation.Copies)*wStride)
	if err != nil {
		return merge(out, fromError(kernel, "W", err)), noCheck
	}
	y, err := bufs.alloc("Y", uint64(s.Batch)*uint64(s.N)*elem)
	if err != nil {
		return merge(out, fromError(kernel, "Y", err)), noCheck
	}
	plan.X, plan.W, plan.Y = x.Ptr, w.Ptr, y.Ptr
	if workspace > 0 {
		ws, err := bufs.alloc("the split-K workspace", workspace)
		if err != nil {
			return merge(out, fromError(kernel, "workspace", err)), noCheck
		}
		plan.Workspace, plan.WorkspaceBytes = ws.Ptr, ws.Bytes
	}
	if err := x.FillHash(s.DType, uint64(s.Batch)*uint64(s.K), in.SeedX, in.ScaleX); err != nil {
		return merge(out, failed(kernel, "filling X: %v", err)), noCheck
	}
	// atCopy places plan's W (and a quantized W's scales and zeros) at copy c of the rotation.
	atCopy := func(p cgo.LinearParams, c int) cgo.LinearParams {
		p.W = w.Ptr + uint64(c)*wStride
		if s.quantized() {
			l := s.WeightFormat.Layout(s.N, s.K, s.GroupSize)
			p.Scales = p.W + roundUp(l.WBytes, copyAlign)
			if l.ZeroBytes > 0 {
				p.Zeros = p.Scales + roundUp(l.ScaleBytes, copyAlign)
			}
		}
		return p
	}
	plan = atCopy(plan, 0)
	if s.quantized() {
		// Every copy filled alike from the reference's seed (the values do not change the time).
		for c := range out.Rotation.Copies {
			p := atCopy(plan, c)
			if err := dev.FillQuantized(cgo.QuantFill{W: p.W, Scales: p.Scales, Zeros: p.Zeros, Format: s.WeightFormat,
				N: s.N, K: s.K, GroupSize: s.GroupSize, Seed: in.SeedW, Scale: in.ScaleW}); err != nil {
				return merge(out, failed(kernel, "filling W: %v", err)), noCheck
			}
		}
	} else if err := w.FillHash(s.DType, w.Bytes/elem, in.SeedW, in.ScaleW); err != nil {
		// One fill over every copy: copy 0 holds exactly the W the reference sees; the others
		// hold more of the same hash stream (the values do not change the time).
		return merge(out, failed(kernel, "filling W: %v", err)), noCheck
	}

	return verifyThenTime(dev, o, out, kernel,
		func() Check { return verifyLinear(dev, plan, y, in, o.Seed, o.checkOnly) },
		func(call int) error { return dev.Linear(atCopy(plan, call%out.Rotation.Copies)) })
}

// merge keeps what out already knows (bytes, plan, rotation, verification) and takes the
// status and reason of o.
func merge(out, o Outcome) Outcome {
	out.Status, out.Reason = o.Status, o.Reason
	return out
}

// verifyLinear poisons Y, runs the planned call once on copy 0 of W, checks every output for
// NaN (the poison of an unwritten element, or a computed one) and output rows, for every
// sequence, against the float64 reference: a sample of them, or with every set all of them.
func verifyLinear(dev *cgo.Device, plan cgo.LinearParams, y *cgo.Buffer, in ref.LinearInputs, seed uint64, every bool) Check {
	c := checkOf(Verification{Tolerance: ref.LinearTolerance(in.DType)})
	got, reason := runPoisoned(dev, func() error { return dev.Linear(plan) }, y, in.DType)
	if reason != "" {
		c.Reason = reason
		return c
	}
	rows := maxLinearRefRows
	if every {
		rows = in.N
	}
	return compareLinear(got, in, sampleIndices(in.N, rows, seed))
}

// compareLinear checks got (all of Y) for NaN, and the chosen output rows against the
// reference.
func compareLinear(got []float32, in ref.LinearInputs, rows []int) Check {
	r := ref.LinearRows(in, rows)
	want, absDot := r.Want, r.AbsDot
	sub := make([]float32, len(want))
	bounds := make([]float64, len(want))
	for b := 0; b < in.Batch; b++ {
		for r, j := range rows {
			i := b*len(rows) + r
			sub[i] = got[b*in.N+j]
			bounds[i] = ref.LinearElementBound(in.DType, in.K, want[i], absDot[i])
		}
	}
	cmp := ref.Compare(sub, want, bounds, ref.LinearTolerance(in.DType))
	c := Check{Verification: Verification{Passed: cmp.Passed, RelError: cmp.RelError, Tolerance: cmp.Tolerance, Checked: cmp.Count}, OutOfBound: cmp.OutOfBound}
	c.Worst, c.Mismatches = elementsOf(cmp, func(i int) int { return i/len(rows)*in.N + rows[i%len(rows)] })
	v := &c.Verification
	if count, first := nonFinite(got); count > 0 {
		v.Passed, v.RelError, v.NonFinite, v.Checked = false, 0, count, len(got)
		v.Reason = fmt.Sprintf("%d of %d outputs are NaN or infinite (first: sequence %d, feature %d = %v; NaN is the poison of an unwritten output)",
			count, len(got), first/in.N, first%in.N, got[first])
		return c
	}
	if !cmp.Passed {
		v.Reason = cmp.Reason()
		if e := cmp.Mismatches; len(e) > 0 {
			i := e[0].Index
			v.Reason += fmt.Sprintf(" (at sequence %d, feature %d)", i/len(rows), rows[i%len(rows)])
		}
	} else if len(rows) < in.N {
		v.Reason = fmt.Sprintf("all %d outputs finite; %d of %d output features checked against the float64 reference for every sequence", len(got), len(rows), in.N)
	}
	return c
}

// runPoisoned is the run half of a verification: it fills out and every extra buffer with 0xFF
// bytes (NaN in bf16, fp16 and f32 alike, so an element the kernel never writes fails), runs
// the call once, waits for it and gives out back decoded. A failure comes back as the reason.
func runPoisoned(dev *cgo.Device, run func() error, out *cgo.Buffer, dtype ref.DType, extra ...*cgo.Buffer) ([]float32, string) {
	for _, b := range append([]*cgo.Buffer{out}, extra...) {
		if b == nil {
			continue
		}
		if err := b.Memset(0xFF); err != nil {
			return nil, fmt.Sprintf("poisoning: %v", err)
		}
	}
	if err := run(); err != nil {
		return nil, fmt.Sprintf("running: %v", err)
	}
	if err := dev.Synchronize(); err != nil {
		return nil, fmt.Sprintf("running: %v", err)
	}
	raw := make([]byte, out.Bytes)
	if err := out.CopyToHost(raw); err != nil {
		return nil, fmt.Sprintf("copying the output back: %v", err)
	}
	got, err := ref.Decode(dtype, raw)
	if err != nil {
		return nil, err.Error()
	}
	return got, ""
}
