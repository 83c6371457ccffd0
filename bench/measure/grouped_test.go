package measure

import (
	"fmt"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// The grouped linear measured on the emulator, laid out as MLA's q_absorb and v_absorb are in
// the step: verified (every group with Verify, a sample when timed), then timed.
func TestGroupedOnTheEmulator(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	o := fastOptions()
	cases := []GroupedSpec{
		// q_absorb at 16 heads of 128 + 64, batch 3: q_nope in q_b_proj's rows, the latent of q.
		{Groups: 16, Rows: 3, N: 512, K: 128, DType: cgo.DTypeBF16, XRowStride: 16 * 192, XGroupStride: 192, YRowStride: 16 * 576, YGroupStride: 576},
		// v_absorb at 9 heads, batch 9 (the tensor-core kernel): out heads of 512 into values of 24.
		{Groups: 9, Rows: 9, N: 24, K: 512, DType: cgo.DTypeFP16, XRowStride: 9 * 512, XGroupStride: 512, YRowStride: 9 * 24, YGroupStride: 24},
		// dense groups
		{Groups: 3, Rows: 5, N: 40, K: 64, DType: cgo.DTypeBF16},
	}
	for _, s := range cases {
		out := Grouped(dev, s, o)
		checkOK(t, "linear_grouped", out, o)
		if out.Bytes != s.Bytes() || out.FLOPs != s.FLOPs() || out.Spec.Key() == "" {
			t.Errorf("%+v: bytes %g flops %g", s, out.Bytes, out.FLOPs)
		}
		if c := Verify(dev, s.Spec(), o); !c.Passed || c.Kernel != "linear_grouped" || c.Checked != s.Groups*s.Rows*s.N {
			t.Errorf("%+v: Verify %+v, want every output checked and passed", s, c.Verification)
		}
	}
	if got, want := cases[0].Bytes(), 16.0*(512*128+3*128+3*512)*2; got != want {
		t.Errorf("bytes %g, want %g", got, want)
	}
	if k := cases[0].Spec().Key(); k != "linear_grouped bf16 groups=16 m=3 n=512 k=128 strides=3072,192,9216,576" {
		t.Errorf("key %q", k)
	}
}

func TestGroupedBadSpecs(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		spec   GroupedSpec
		status string
		text   string
	}{
		{GroupedSpec{Groups: 0, Rows: 1, N: 8, K: 8, DType: cgo.DTypeBF16}, StatusFailed, "groups 0"},
		{GroupedSpec{Groups: cgo.MoEMaxExperts + 1, Rows: 1, N: 8, K: 8, DType: cgo.DTypeBF16}, StatusSkipped, fmt.Sprintf("%d groups", cgo.MoEMaxExperts+1)},
		{GroupedSpec{Groups: 2, Rows: 1, N: 8, K: 12, DType: cgo.DTypeBF16}, StatusSkipped, "k 12"},
		{GroupedSpec{Groups: 2, Rows: 1, N: 8, K: 8, DType: cgo.DTypeF32}, StatusSkipped, "dtype f32"},
		{GroupedSpec{Groups: 2, Rows: 1, N: 8, K: 8, DType: cgo.DTypeBF16, XRowStride: -8}, StatusFailed, "invalid strides"},
		// A stride the kernel refuses fails the measurement with the kernel's words.
		{GroupedSpec{Groups: 2, Rows: 2, N: 8, K: 16, DType: cgo.DTypeBF16, XRowStride: 20}, StatusFailed, "multiples of 8"},
	} {
		out := Measure(dev, tc.spec.Spec(), fastOptions())
		if out.Status != tc.status || !strings.Contains(out.Reason, tc.text) {
			t.Errorf("%+v: %s %q, want %s naming %q", tc.spec, out.Status, out.Reason, tc.status, tc.text)
		}
	}
}
