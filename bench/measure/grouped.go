package measure

import (
	"fmt"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
)

// KindLinearGrouped is the kind of a Spec of a grouped linear without routing: Groups
// independent products in one call (MLA's absorbed per-head W_UK and W_UV).
const KindLinearGrouped = "linear_grouped"

// GroupedSpec is one db_grouped_linear call of Groups groups of Rows rows each: for every group
// g, Y_g[Rows x N] = X_g[Rows x K] · W_gᵀ, W [Groups, N, K]. The strides (elements, 0 for the
// dense layout) place each group's rows as the MLA step holds them: q_absorb reads q_nope inside
// q_b_proj's rows and writes the latent part of the attention's q, v_absorb reads the attention's
// output and writes o_proj's input.
type GroupedSpec struct {
	Groups int       `json:"groups"`
	Rows   int       `json:"rows"`
	N      int       `json:"n"`
	K      int       `json:"k"`
	DType  cgo.DType `json:"dtype"`

	XRowStride   int `json:"x_row_stride,omitempty"`
	XGroupStride int `json:"x_group_stride,omitempty"`
	YRowStride   int `json:"y_row_stride,omitempty"`
	YGroupStride int `json:"y_group_stride,omitempty"`
}

// Spec wraps s.
func (s GroupedSpec) Spec() Spec { return Spec{Kind: KindLinearGrouped, Grouped: &s} }

// maxGroupedRefGroups is how many groups the float64 reference computes: 8 of DeepSeek-V3's 128
// q_absorb groups at batch 64 are 34M products. Every output element the call owns is still
// checked for NaN and for the poison of an unwritten one.
const maxGroupedRefGroups = 8

func (s GroupedSpec) inputs(seed uint64) ref.GroupedLinearInputs {
	return ref.GroupedLinearInputs{DType: ref.DType(s.DType), Rows: s.Rows, Experts: s.Groups, N: s.N, K: s.K,
		SeedX: ref.Hash64(seed, 1), SeedW: ref.Hash64(seed, 2), ScaleX: 1, ScaleW: ref.LinearWeightScale(s.K),
		XRowStride: s.XRowStride, XGroupStride: s.XGroupStride, YRowStride: s.YRowStride, YGroupStride: s.YGroupStride}
}

// Bytes is the least a call moves: every group's W, X and Y once.
func (s GroupedSpec) Bytes() float64 {
	g, e := float64(s.Groups), float64(s.DType.Bytes())
	n, k, m := float64(s.N), float64(s.K), float64(s.Rows)
	return g * (n*k + m*k + m*n) * e
}

// FLOPs of a call: 2·Groups·Rows·N·K.
func (s GroupedSpec) FLOPs() float64 {
	return 2 * float64(s.Groups) * float64(s.Rows) * float64(s.N) * float64(s.K)
}

func (s GroupedSpec) weightBytes() uint64 {
	return uint64(s.Groups) * uint64(s.N) * uint64(s.K) * s.DType.Bytes()
}

// MinDeviceBytes is the device memory of one copy of W with X and Y as the strides lay them.
func (s GroupedSpec) MinDeviceBytes() uint64 {
	if status, _ := s.check(); status != "" {
		return 0
	}
	in, e := s.inputs(0), s.DType.Bytes()
	return roundUp(s.weightBytes(), copyAlign) + uint64(in.XElements())*e + uint64(in.YElements())*e
}

// check reports a spec that cannot run: invalid values fail, shapes the kernel does not take
// are skipped (db_grouped_linear's limits).
func (s GroupedSpec) check() (status, reason string) {
	switch {
	case s.Groups < 1 || s.Rows < 1 || s.N < 1 || s.K < 1:
		return StatusFailed, fmt.Sprintf("invalid shape groups %d, rows %d, n %d, k %d: each must be >= 1", s.Groups, s.Rows, s.N, s.K)
	case s.XRowStride < 0 || s.XGroupStride < 0 || s.YRowStride < 0 || s.YGroupStride < 0:
		return StatusFailed, "invalid strides: each must be 0 (dense) or more"
	case s.DType != cgo.DTypeBF16 && s.DType != cgo.DTypeFP16:
		return StatusSkipped, fmt.Sprintf("unsupported: dtype %v (the grouped linear takes bf16 or fp16)", s.DType)
	case s.Groups > cgo.MoEMaxExperts:
		return StatusSkipped, fmt.Sprintf("unsupported: %d groups (the grouped linear takes 1..%d)", s.Groups, cgo.MoEMaxExperts)
	case s.Rows > cgo.MaxBatch*cgo.MoEMaxTopK:
		return StatusSkipped, fmt.Sprintf("unsupported: %d rows a group (at most %d)", s.Rows, cgo.MaxBatch*cgo.MoEMaxTopK)
	case s.K%cgo.LinearKMultiple != 0:
		return StatusSkipped, fmt.Sprintf("unsupported: k %d (a multiple of %d)", s.K, cgo.LinearKMultiple)
	}
	return "", ""
}

// Grouped verifies, then times, a grouped linear. W rotates through enough copies that the
// timed calls read it from HBM; X and Y stay put, as activations do between a step's layers.
func Grouped(dev *cgo.Device, s GroupedSpec, o Options) Outcome {
	out, _ := grouped(dev, s, o)
	return out
}

func grouped(dev *cgo.Device, s GroupedSpec, o Options) (Outcome, Check) {
	return measureSpec(dev, "linear_grouped", s, o, func(o Options, info deviceInfo, out Outcome) (Outcome, Check) {
		return groupedRun(dev, s, o, info, out)
	})
}

// groupedRun is the linear_grouped kernel's part of the measurement: out has what measureSpec filled.
func groupedRun(dev *cgo.Device, s GroupedSpec, o Options, info deviceInfo, out Outcome) (Outcome, Check) {
	const kernel = "linear_grouped"
	in := s.inputs(o.Seed)
	variant := "cuda-core"
	if s.Rows >= 8 {
		variant = "mma" // db_grouped_linear's tensor-core kernel from 8 rows a group
	}
	out.Plan = Plan{Variant: variant}

	elem := s.DType.Bytes()
	xBytes, yBytes := uint64(in.XElements())*elem, uint64(in.YElements())*elem
	wStride := roundUp(s.weightBytes(), copyAlign)
	if ok, why := Fits(dev, wStride+xBytes+yBytes); !ok {
		return merge(out, skipped(kernel, "does not fit: %s", why)), noCheck
	}
	out.Rotation = planRotation(float64(s.weightBytes()), float64(wStride), float64(info.props.L2Bytes), o.RotateFactor, rotateCap(o, info, xBytes+yBytes))

	bufs := &buffers{dev: dev}
	defer bufs.close()
	x, err := bufs.alloc("X", xBytes)
	if err != nil {
		return merge(out, fromError(kernel, "X", err)), noCheck
	}
	w, err := bufs.alloc(fmt.Sprintf("%d copies of W", out.Rotation.Copies), uint64(out.Rotation.Copies)*wStride)
	if err != nil {
		return merge(out, fromError(kernel, "W", err)), noCheck
	}
	y, err := bufs.alloc("Y", yBytes)
	if err != nil {
		return merge(out, fromError(kernel, "Y", err)), noCheck
	}
	if err := x.FillHash(s.DType, uint64(in.XElements()), in.SeedX, in.ScaleX); err != nil {
		return merge(out, failed(kernel, "filling X: %v", err)), noCheck
	}
	// One fill over every copy: copy 0 holds exactly the W the reference sees.
	if err := w.FillHash(s.DType, w.Bytes/elem, in.SeedW, in.ScaleW); err != nil {
		return merge(out, failed(kernel, "filling W: %v", err)), noCheck
	}
	params := cgo.GroupedLinearParams{X: x.Ptr, W: w.Ptr, Y: y.Ptr, Rows: s.Rows, Experts: s.Groups, N: s.N, K: s.K, DType: s.DType,
		XRowStride: s.XRowStride, XGroupStride: s.XGroupStride, YRowStride: s.YRowStride, YGroupStride: s.YGroupStride}
	return verifyThenTime(dev, o, out, kernel,
		func() Check { return verifyGrouped(dev, params, y, in, o.Seed, o.checkOnly) },
		func(call int) error {
			p := params
			p.W = w.Ptr + uint64(call%out.Rotation.Copies)*wStride
			return dev.GroupedLinear(p)
		})
}

// verifyGrouped poisons Y, runs the call once on copy 0 of W, checks every element the call
// owns for NaN, the rest of Y (the strides' gaps) for staying poisoned, and a sample of the
// groups (all of them with every) against the float64 reference.
func verifyGrouped(dev *cgo.Device, p cgo.GroupedLinearParams, y *cgo.Buffer, in ref.GroupedLinearInputs, seed uint64, every bool) Check {
	d := in.DType
	c := checkOf(Verification{Tolerance: ref.LinearTolerance(d)})
	raw, reason := runPoisoned(dev, func() error { return dev.GroupedLinear(p) }, y, d)
	if reason != "" {
		c.Reason = reason
		return c
	}
	groups := sampleIndices(in.Experts, maxGroupedRefGroups, seed)
	if every {
		groups = sampleIndices(in.Experts, in.Experts, seed)
	}
	in.Groups = groups
	want, err := ref.GroupedLinear(in)
	if err != nil {
		c.Reason = err.Error()
		return c
	}
	rows := in.LogicalRows()
	owned := make([]bool, len(raw))
	got := make([]float32, rows*in.N)
	for r := 0; r < rows; r++ {
		for j := 0; j < in.N; j++ {
			at := in.YIndex(r, j)
			got[r*in.N+j], owned[at] = raw[at], true
		}
	}
	where := func(i int) string {
		return fmt.Sprintf("group %d, row %d, feature %d", i/in.N/in.Rows, i/in.N%in.Rows, i%in.N)
	}
	var sub []float32
	var wantSub, bounds []float64
	var index []int
	for r := 0; r < rows; r++ {
		if !want.Covered[r] {
			continue
		}
		for j := 0; j < in.N; j++ {
			i := r*in.N + j
			sub, wantSub, bounds, index = append(sub, got[i]), append(wantSub, want.Want[i]), append(bounds, want.Bound[i]), append(index, i)
		}
	}
	cmp := ref.Compare(sub, wantSub, bounds, ref.LinearTolerance(d))
	c = Check{Verification: Verification{Passed: cmp.Passed, RelError: cmp.RelError, Tolerance: cmp.Tolerance, Checked: cmp.Count}, OutOfBound: cmp.OutOfBound}
	c.Worst, c.Mismatches = elementsOf(cmp, func(i int) int { return index[i] })
	v := &c.Verification
	if count, first := nonFinite(got); count > 0 {
		v.Passed, v.RelError, v.NonFinite, v.Checked = false, 0, count, len(got)
		v.Reason = fmt.Sprintf("%d of %d outputs are NaN or infinite (first: %s = %v; NaN is the poison of an unwritten output)",
			count, len(got), where(first), got[first])
		return c
	}
	for i, x := range raw {
		if !owned[i] && x == x {
			v.Passed = false
			v.Reason = fmt.Sprintf("Y element %d lies between the strides' rows, which no group owns, but was written (%v)", i, x)
			return c
		}
	}
	if !cmp.Passed {
		v.Reason = cmp.Reason()
		if m := cmp.Mismatches; len(m) > 0 {
			v.Reason += " (at " + where(index[m[0].Index]) + ")"
		}
	} else if len(groups) < in.Experts {
		v.Reason = fmt.Sprintf("all %d outputs finite; every row of %d of %d groups checked against the float64 reference", len(got), len(groups), in.Experts)
	}
	return c
}
