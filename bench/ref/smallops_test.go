package ref

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// The small-op references against values worked out by hand or by an identity they must keep.

func TestRopeInvFreq(t *testing.T) {
	llama3 := Rope{Theta: 500000, Scaling: RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4,
		OriginalMaxPositions: 8192, RotaryDim: 128}
	plain := func(theta float64, i, d int) float64 { return math.Pow(theta, -2*float64(i)/float64(d)) }
	for _, tc := range []struct {
		name      string
		r         Rope
		i, seqLen int
		want      float64
	}{
		{"default pair 0", Rope{Theta: 10000, RotaryDim: 128}, 0, 1, 1},
		{"default pair 1", Rope{Theta: 10000, RotaryDim: 128}, 1, 1, math.Pow(10000, -1.0/64)},
		{"linear", Rope{Theta: 10000, Scaling: RopeLinear, Factor: 4, RotaryDim: 64}, 5, 1, plain(10000, 5, 64) / 4},
		// wavelength 2 pi < 8192/4: kept
		{"llama3 high frequency", llama3, 0, 1, 1},
		// wavelength 2 pi / 500000^(-126/128) is far past 8192: divided by 8
		{"llama3 low frequency", llama3, 63, 1, plain(500000, 63, 128) / 8},
		{"dynamic within the original", Rope{Theta: 10000, Scaling: RopeDynamicNTK, Factor: 2, OriginalMaxPositions: 2048,
			RotaryDim: 64}, 7, 2048, plain(10000, 7, 64)},
		// L = 4096: theta' = 10000 * (2*4096/2048 - 1)^(64/62) = 10000 * 3^(32/31)
		{"dynamic past the original", Rope{Theta: 10000, Scaling: RopeDynamicNTK, Factor: 2, OriginalMaxPositions: 2048,
			RotaryDim: 64}, 7, 4096, plain(10000*math.Pow(3, 32.0/31), 7, 64)},
	} {
		if got := tc.r.InvFreq(tc.i, tc.seqLen); math.Abs(got-tc.want) > 1e-15*tc.want {
			t.Errorf("%s: InvFreq(%d, %d) = %.17g, want %.17g", tc.name, tc.i, tc.seqLen, got, tc.want)
		}
	}
	// Llama 3's medium band lies between the two ends, and moves smoothly into both
	for i := 0; i < 64; i++ {
		inv, got := plain(500000, i, 128), llama3.InvFreq(i, 1)
		if got > inv*(1+1e-15) || got < inv/8*(1-1e-15) {
			t.Errorf("llama3 pair %d: %g outside [inv/8, inv] = [%g, %g]", i, got, inv/8, inv)
		}
	}
}

func TestRopeHead(t *testing.T) {
	r := Rope{Theta: 10000, RotaryDim: 6}
	head := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	want, bounds := RopeHead(r, BF16, head, 3)
	for i := 0; i < 3; i++ {
		angle := 3 * r.InvFreq(i, 4)
		x1, x2 := float64(head[i]), float64(head[i+3])
		if math.Abs(want[i]-(x1*math.Cos(angle)-x2*math.Sin(angle))) > 1e-12 || math.Abs(want[i+3]-(x2*math.Cos(angle)+x1*math.Sin(angle))) > 1e-12 {
			t.Errorf("pair %d: (%g, %g) is not (%g, %g) turned by %g", i, want[i], want[i+3], x1, x2, angle)
		}
		if bounds[i] <= 0 {
			t.Errorf("pair %d has no bound", i)
		}
	}
	if want[6] != 7 || want[7] != 8 || bounds[6] != 0 || bounds[7] != 0 {
		t.Errorf("elements past rotary_dim must pass through exactly: %v %v", want[6:], bounds[6:])
	}
	if w, _ := RopeHead(r, BF16, head, 0); fmt.Sprint(w) != "[1 2 3 4 5 6 7 8]" {
		t.Errorf("position 0 turned the head: %v", w)
	}
}

func TestRMSNorm(t *testing.T) {
	// a row of one value c: s / rms(s) = sign(c) (eps aside), times w' = w or 1 + w
	x := []float32{-3, -3, -3, -3}
	w := []float32{1, 0.5, 0, -2}
	r := RMSNorm(BF16, x, nil, w, 4, 0, false)
	if fmt.Sprint(r.Want) != "[-1 -0.5 -0 2]" || r.Sum != nil {
		t.Errorf("RMSNorm = %v (sum %v)", r.Want, r.Sum)
	}
	r = RMSNorm(BF16, x, nil, w, 4, 0, true)
	if fmt.Sprint(r.Want) != "[-2 -1.5 -1 1]" {
		t.Errorf("RMSNorm with 1 + w = %v", r.Want)
	}
	// the residual sum is rounded to the dtype before the norm: 1 + 2^-9 is 1 in bf16
	r = RMSNorm(BF16, []float32{1, 1}, []float32{0x1p-9, -3}, []float32{1, 1}, 2, 0, false)
	if r.Sum[0] != 1 || r.Sum[1] != -2 {
		t.Errorf("residual sum %v, want [1 -2]", r.Sum)
	}
}

func TestGatedAct(t *testing.T) {
	want, _ := GatedAct(FP16, ActSiLU, []float32{0, 20, 3, 2}, 2)
	if want[0] != 0 || math.Abs(want[1]-40) > 1e-6 {
		t.Errorf("silu(0)*3, silu(20)*2 = %v, want [0 ~40]", want)
	}
	want, _ = GatedAct(FP16, ActGeLUTanh, []float32{0, -20, 3, 2}, 2)
	if want[0] != 0 || math.Abs(want[1]) > 1e-12 {
		t.Errorf("gelu(0)*3, gelu(-20)*2 = %v, want [0 ~0]", want)
	}
}

func TestArgmax(t *testing.T) {
	nan := float32(math.NaN())
	got := Argmax([]float32{1, 5, 5, 2, -1, -1, -1, -1, 3, nan, 9, nan}, 4)
	if fmt.Sprint(got) != "[1 0 1]" {
		t.Errorf("Argmax = %v, want [1 0 1] (ties to the lower index, NaN above all)", got)
	}
}

func TestMoERoute(t *testing.T) {
	logits := []float32{0.5, 2, -1, 2, 0}
	ids, w, _ := MoERoute(logits, 5, 2, MoESoftmaxTopK, false)
	if fmt.Sprint(ids) != "[1 3]" {
		t.Fatalf("ids %v, want [1 3] (the tie to the lower expert)", ids)
	}
	var all float64
	for _, l := range logits {
		all += math.Exp(float64(l) - 2)
	}
	if math.Abs(w[0]-1/all) > 1e-15 || w[0] != w[1] {
		t.Errorf("softmax weights %v, want both %g", w, 1/all)
	}
	// renormalised softmax-then-top-k is top-k-then-softmax
	_, wr, _ := MoERoute(logits, 5, 3, MoESoftmaxTopK, true)
	_, wt, _ := MoERoute(logits, 5, 3, MoETopKSoftmax, false)
	for j := range wr {
		if math.Abs(wr[j]-wt[j]) > 1e-15 {
			t.Errorf("weight %d: renormalised %g, top-k softmax %g", j, wr[j], wt[j])
		}
	}
}

func TestMoEGroupAndCombine(t *testing.T) {
	// 3 tokens, top 2, 3 experts; slot 4 names no expert
	ids := []int32{2, 0, 0, 2, 7, 2}
	g := MoEGroup(ids, 3)
	if fmt.Sprint(g.Counts, g.Offsets, g.SortedSlots, g.SlotRows) != "[2 0 3] [0 2 2 5] [1 2 0 3 5 -1] [2 0 1 3 -1 4]" {
		t.Fatalf("grouping %v %v %v %v", g.Counts, g.Offsets, g.SortedSlots, g.SlotRows)
	}
	// rows of one element: y[r] = r + 1
	y := []float32{1, 2, 3, 4, 5, 6}
	weights := []float32{0.5, 0.25, 1, 2, 3, 4}
	want, _ := MoECombine(BF16, y, g.SlotRows, weights, 2, 1)
	// token 0: 0.5*y[2] + 0.25*y[0]; token 1: 1*y[1] + 2*y[3]; token 2: (dropped) + 4*y[4]
	if fmt.Sprint(want) != "[1.75 10 20]" {
		t.Errorf("combine %v, want [1.75 10 20]", want)
	}
}

// DeepSeek-V3's choice by hand: 8 experts in 4 groups of 2, 2 groups kept, top 2.
func TestMoERouterSigmoidGroups(t *testing.T) {
	logits := []float32{2, -2, 0, 0, 1, 1, -1, 3}
	bias := []float32{0, 0, 0.3, 0.3, 0, 0, 0, -0.9}
	// biased scores .881 .119 | .8 .8 | .731 .731 | .269 .053: group sums 1.0, 1.6, 1.46, 0.32
	r := MoERouter{Mode: MoESigmoidTopK, Renormalize: true, Bias: bias, Groups: 4, GroupsKept: 2, Scaling: 2.5}
	ids, w, _ := r.Route(logits, 8, 2)
	if fmt.Sprint(ids) != "[2 3]" || math.Abs(w[0]-1.25) > 1e-15 || math.Abs(w[1]-1.25) > 1e-15 {
		t.Errorf("grouped: ids %v weights %v, want [2 3] (groups 1 and 2, the tie to the lower) and 0.5/(0.5+0.5)*2.5 each", ids, w)
	}
	// without the bias the groups are 2 and 3 (expert 7's .953, then 4's .731)
	nb := r
	nb.Bias = nil
	if ids, _, _ := nb.Route(logits, 8, 2); fmt.Sprint(ids) != "[7 4]" {
		t.Errorf("unbiased: ids %v, want [7 4]", ids)
	}
	// without the group limit: expert 0 (.881) then 2 (.8); unnormalised weights are the scores
	ng := MoERouter{Mode: MoESigmoidTopK, Bias: bias}
	ids, w, _ = ng.Route(logits, 8, 2)
	if s0 := 1 / (1 + math.Exp(-2)); fmt.Sprint(ids) != "[0 2]" || math.Abs(w[0]-s0) > 1e-15 || math.Abs(w[1]-0.5) > 1e-15 {
		t.Errorf("ungrouped: ids %v weights %v, want [0 2] and %g, 0.5", ids, w, s0)
	}
	// Llama 4: the top 1 logit, its sigmoid rounded to bf16
	l4 := MoERouter{Mode: MoETopKSigmoid, DType: BF16}
	ids, w, _ = l4.Route(logits, 8, 1)
	if want := float64(Round(BF16, float32(1/(1+math.Exp(-3))))); fmt.Sprint(ids) != "[7]" || w[0] != want {
		t.Errorf("Llama 4: ids %v weights %v, want [7] and %g", ids, w, want)
	}
	// admissibility: the engine's other tie order is fine, a dropped group is not
	tol := make([]float64, 8)
	if err := r.Admissible(logits, tol, []int32{3, 2}); err != nil {
		t.Errorf("tie order refused: %v", err)
	}
	if err := r.Admissible(logits, tol, []int32{7, 4}); err == nil || !strings.Contains(err.Error(), "clearly below") {
		t.Errorf("the unbiased choice accepted: %v", err)
	}
	if r.Close(logits, tol, []int32{2, 3}) {
		t.Errorf("a choice clear of every other reported close")
	}
	for e := range tol {
		tol[e] = 0.1 // logit sigmas that blur 2 and 3 (.8) with 4 and 5 (.731)
	}
	if !r.Close(logits, tol, []int32{2, 3}) {
		t.Errorf("a choice within the sigmas not reported close")
	}
}
