package cgo_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/ref"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// The routings of DeepSeek-V3 / Kimi-K2 / GLM-4.5 (sigmoid, correction bias, groups, scaling)
// and Llama 4 (top k, sigmoid weight on the input), gpt-oss's clamped SwiGLU, the weighted
// gather and the unweighted combine, against bench/ref at odd shapes, outputs poisoned.

// soScaled is soFilled with the hash's values times scale.
func soScaled(t *testing.T, dev *cgo.Device, d ref.DType, n int, seed uint64, scale float32) (*cgo.Buffer, []float32) {
	t.Helper()
	b := mustAlloc(t, dev, uint64(n*d.Bytes()))
	if err := b.FillHash(cgo.DType(d), uint64(n), seed, scale); err != nil {
		t.Fatal(err)
	}
	return b, ref.Fill(d, seed, scale, n)
}

// soEncoded is a device buffer holding values rounded to d.
func soEncoded(t *testing.T, dev *cgo.Device, d ref.DType, values []float32) (*cgo.Buffer, []float32) {
	t.Helper()
	b := mustAlloc(t, dev, uint64(len(values)*d.Bytes()))
	if err := b.CopyFromHost(soEncode(d, values)); err != nil {
		t.Fatal(err)
	}
	exact := make([]float32, len(values))
	for i, v := range values {
		exact[i] = ref.Round(d, v)
	}
	return b, exact
}

// routeAndCheck runs db_moe_route on logits lv (in buffer logits) with r's configuration and
// compares every expert id exactly and every weight within its bound; a NaN weight the
// reference expects must be NaN.
func routeAndCheck(t *testing.T, dev *cgo.Device, d ref.DType, logits *cgo.Buffer, lv []float32, bias *cgo.Buffer,
	r ref.MoERouter, batch, experts, topK int) {
	t.Helper()
	slots := batch * topK
	ids, weights := soPoisoned(t, dev, 4*slots), soPoisoned(t, dev, 4*slots)
	p := cgo.MoERouteParams{Logits: logits.Ptr, TopKIDs: ids.Ptr, TopKWeights: weights.Ptr, Batch: batch, Experts: experts,
		TopK: topK, Mode: cgo.MoERouting(r.Mode), Renormalize: r.Renormalize, DType: cgo.DType(d), Groups: r.Groups,
		GroupsKept: r.GroupsKept, Scaling: float32(r.Scaling)}
	if bias != nil {
		p.CorrectionBias = bias.Ptr
	}
	if err := dev.MoERoute(p); err != nil {
		t.Fatal(err)
	}
	r.DType = d
	wantIDs, wantW, boundW := r.Route(lv, experts, topK)
	gotIDs := soReadInts(t, ids, slots)
	for s := range wantIDs {
		if gotIDs[s] != wantIDs[s] {
			t.Fatalf("slot %d: expert %d, want %d (ids %v, want %v)", s, gotIDs[s], wantIDs[s], gotIDs, wantIDs)
		}
	}
	gotW := soReadFloats(t, weights, ref.F32, slots)
	for s, w := range wantW {
		g := float64(gotW[s])
		if math.IsNaN(w) != math.IsNaN(g) || (!math.IsNaN(w) && !(math.Abs(g-w) <= boundW[s])) {
			t.Fatalf("slot %d (expert %d): weight %g, want %g within %g", s, gotIDs[s], g, w, boundW[s])
		}
	}
}

func TestSmallOpMoESigmoidRouting(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		name                 string
		batch, experts, topK int
		groups, kept         int
		renorm, bias         bool
		scaling              float64
		d                    ref.DType
	}{
		{"DeepSeek-V3", 17, 256, 8, 8, 4, true, true, 2.5, ref.BF16},
		{"Kimi-K2", 3, 384, 8, 0, 0, true, true, 2.827, ref.BF16},
		{"GLM-4.5-Air", 1, 128, 8, 1, 1, true, true, 1, ref.FP16},
		{"groups of 2, 1 kept, k = 2", 17, 64, 2, 32, 1, false, true, 0, ref.FP16},
		{"8 of 8, unbiased", 3, 8, 8, 0, 0, false, false, 0, ref.BF16},
		{"odd groups", 3, 24, 3, 3, 2, true, true, 1.5, ref.BF16},
	} {
		t.Run(fmt.Sprintf("%s batch%d experts%d top%d groups%d/%d %v", tc.name, tc.batch, tc.experts, tc.topK, tc.groups, tc.kept, tc.d), func(t *testing.T) {
			logits, lv := soScaled(t, dev, tc.d, tc.batch*tc.experts, 95, 3)
			r := ref.MoERouter{Mode: ref.MoESigmoidTopK, Renormalize: tc.renorm, Groups: tc.groups, GroupsKept: tc.kept, Scaling: tc.scaling}
			var bias *cgo.Buffer
			if tc.bias {
				bias, r.Bias = soScaled(t, dev, ref.F32, tc.experts, 96, 0.1)
			}
			routeAndCheck(t, dev, tc.d, logits, lv, bias, r, tc.batch, tc.experts, tc.topK)
		})
	}
}

// Ties (equal logits and biases go to the lower expert, equal groups to the lower group) and
// NaN logits (ranked above every number, as torch.topk ranks them; their weights NaN).
func TestSmallOpMoERoutingTiesAndNaN(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	nan := float32(math.NaN())
	rows := []float32{
		0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, // every expert and group tied
		1, -1, 0, 2, nan, 0, 0.25, 0.25, // a NaN: chosen first, its group kept
		-3, -3, 2, 2, 2, 2, -3, -3, // groups 1 and 2 tied
	}
	for _, d := range soDTypes {
		logits, lv := soEncoded(t, dev, d, rows)
		for _, r := range []ref.MoERouter{
			{Mode: ref.MoESigmoidTopK, Renormalize: true, Groups: 4, GroupsKept: 2, Scaling: 2.5},
			{Mode: ref.MoESigmoidTopK},
			{Mode: ref.MoETopKSigmoid},
			{Mode: ref.MoESoftmaxTopK, Renormalize: true},
			{Mode: ref.MoETopKSoftmax},
		} {
			t.Run(fmt.Sprintf("%v mode%d groups%d", d, r.Mode, r.Groups), func(t *testing.T) {
				routeAndCheck(t, dev, d, logits, lv, nil, r, 3, 8, 3)
			})
		}
	}
}

// Llama 4: top k of the logits, weight sigmoid(logit) rounded to the dtype; the gather weighs
// each token's row by its slot's weight, and the combine sums unweighted.
func TestSmallOpMoELlama4(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		batch, experts, topK, hidden int
		d                            ref.DType
	}{{1, 16, 1, 4096, ref.BF16}, {17, 128, 1, 136, ref.FP16}, {3, 8, 2, 136, ref.BF16}} {
		t.Run(fmt.Sprintf("batch%d experts%d top%d %v", tc.batch, tc.experts, tc.topK, tc.d), func(t *testing.T) {
			d, slots := tc.d, tc.batch*tc.topK
			logits, lv := soScaled(t, dev, d, tc.batch*tc.experts, 97, 4)
			r := ref.MoERouter{Mode: ref.MoETopKSigmoid}
			routeAndCheck(t, dev, d, logits, lv, nil, r, tc.batch, tc.experts, tc.topK)
			r.DType = d
			wantIDs, wantW, _ := r.Route(lv, tc.experts, tc.topK)
			ids := soInts(t, dev, wantIDs)
			w32 := make([]float32, slots)
			for s, w := range wantW {
				w32[s] = float32(w)
			}
			weights := mustAlloc(t, dev, uint64(4*slots))
			if err := cgo.Write(weights, w32); err != nil {
				t.Fatal(err)
			}
			x, xv := soFilled(t, dev, d, tc.batch*tc.hidden, 98)
			counts, offsets := soPoisoned(t, dev, 4*tc.experts), soPoisoned(t, dev, 4*(tc.experts+1))
			sorted, rows := soPoisoned(t, dev, 4*slots), soPoisoned(t, dev, 4*slots)
			xs := soPoisoned(t, dev, slots*tc.hidden*d.Bytes())
			if err := dev.MoEGroup(cgo.MoEGroupParams{TopKIDs: ids.Ptr, ExpertCounts: counts.Ptr, ExpertOffsets: offsets.Ptr,
				SortedSlots: sorted.Ptr, SlotRows: rows.Ptr, X: x.Ptr, XSorted: xs.Ptr, Batch: tc.batch, TopK: tc.topK,
				Experts: tc.experts, Hidden: tc.hidden, DType: cgo.DType(d), RowWeights: weights.Ptr}); err != nil {
				t.Fatal(err)
			}
			g := ref.MoEGroup(wantIDs, tc.experts)
			want, bounds := ref.MoEGatherWeighted(d, xv, g.SortedSlots, w32, tc.topK, tc.hidden)
			soCheck(t, "weighted gather", soReadFloats(t, xs, d, len(want)), want, bounds)

			y, yv := soFilled(t, dev, d, slots*tc.hidden, 99)
			out := soPoisoned(t, dev, tc.batch*tc.hidden*d.Bytes())
			if err := dev.MoECombine(cgo.MoECombineParams{YSorted: y.Ptr, SlotRows: rows.Ptr, Out: out.Ptr, Batch: tc.batch,
				TopK: tc.topK, Hidden: tc.hidden, DType: cgo.DType(d)}); err != nil {
				t.Fatal(err)
			}
			ones := make([]float32, slots)
			for s := range ones {
				ones[s] = 1
			}
			wantC, boundC := ref.MoECombine(d, yv, g.SlotRows, ones, tc.topK, tc.hidden)
			soCheck(t, "unweighted combine", soReadFloats(t, out, d, len(wantC)), wantC, boundC)
		})
	}
}

// swigluClamp is gpt-oss's clamped SwiGLU as the kernel takes it.
var swigluClamp = cgo.GatedActParams{Activation: cgo.ActSwiGLUClamp, Limit: 7, Alpha: 1.702}

// gpt-oss's clamped SwiGLU on values within and beyond the clamp on both sides (the hash
// times 10 reaches +-10 past the limit of 7), and at the limit itself; a NaN stays NaN.
func TestSmallOpSwiGLUClamp(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for i, s := range soRows {
		d := soDTypes[i%2]
		t.Run(fmt.Sprintf("batch%d ffn%d %v", s.batch, s.hidden, d), func(t *testing.T) {
			gu, guv := soScaled(t, dev, d, 2*s.batch*s.hidden, 43, 10)
			got, want, bounds := soGatedAct(t, dev, d, gu, guv, s.batch, s.hidden, swigluClamp)
			soCheck(t, "clamped SwiGLU", got, want, bounds)
		})
	}
	// gate | up for one row of 8: gates past the limit, at it, below -limit; ups past both sides
	nan := float32(math.NaN())
	vals := []float32{-20, -7.5, -7, 0.5, 7, 7.5, 20, nan, 20, -20, 7.5, -7.5, 7, -7, 0.25, 1}
	for _, d := range soDTypes {
		gu, guv := soEncoded(t, dev, d, vals)
		got, want, bounds := soGatedAct(t, dev, d, gu, guv, 1, 8, swigluClamp)
		if !math.IsNaN(float64(got[7])) || !math.IsNaN(want[7]) {
			t.Errorf("%v: a NaN gate gives %g (reference %g), want NaN", d, got[7], want[7])
		}
		soCheck(t, fmt.Sprintf("%v clamp edges", d), got[:7], want[:7], bounds[:7])
		// gate 20 clamps to 7 (up 0.25): (0.25 + 1) 7 sigmoid(1.702 * 7); gate -7.5 with up -20
		// clamped to -7: (-7 + 1) (-7.5) sigmoid(1.702 * -7.5)
		if e := 1.25 * 7 / (1 + math.Exp(-ref.SwiGLUAlpha*7)); math.Abs(want[6]-e) > 1e-12 {
			t.Errorf("reference at (20, 0.25): %g, want %g", want[6], e)
		}
		if e := -6 * -7.5 / (1 + math.Exp(ref.SwiGLUAlpha*7.5)); math.Abs(want[1]-e) > 1e-12 {
			t.Errorf("reference at (-7.5, -20): %g, want %g", want[1], e)
		}
	}
	p := mustAlloc(t, dev, 1<<12).Ptr
	err := dev.GatedAct(cgo.GatedActParams{GateUp: p, Out: p, Batch: 1, FFN: 8, Activation: cgo.ActSwiGLUClamp, DType: cgo.DTypeBF16})
	if !errors.Is(err, cgo.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), "limit 0") {
		t.Errorf("clamped SwiGLU without a limit: %v", err)
	}
}
