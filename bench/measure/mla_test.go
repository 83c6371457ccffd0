package measure

import (
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// MLA decode measured on the emulator: verified (a sample of sequences, every head of each),
// then timed; its bytes are the latent cache once for all heads.
func TestMLAOnTheEmulator(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	o := fastOptions()
	cases := []MLASpec{
		{Batch: 2, QHeads: 16, Contexts: []int{40}, DType: cgo.DTypeBF16, Scale: 0.09},
		{Batch: 3, QHeads: 3, Contexts: []int{1, 100, 37}, PageSize: 16, DType: cgo.DTypeFP16, Scale: 0.1, Append: true},
		{Batch: 1, QHeads: 128, Contexts: []int{70}, Splits: 3, DType: cgo.DTypeBF16, Scale: 0.07, Append: true},
	}
	for _, s := range cases {
		out := MLA(dev, s, o)
		checkOK(t, "attention_mla", out, o)
		if out.Kernel != "attention_mla" || out.Bytes != s.Bytes() || out.FLOPs != s.FLOPs() {
			t.Errorf("%+v: kernel %q bytes %g flops %g", s, out.Kernel, out.Bytes, out.FLOPs)
		}
		if (s.Splits > 0 && out.Plan.Splits != s.Splits) || (s.PageSize > 0) != (out.Plan.Layout == "paged") {
			t.Errorf("%+v: plan %v", s, out.Plan)
		}
		if c := Verify(dev, s.Spec(), o); !c.Passed || c.Kernel != "attention_mla" || c.Checked != s.Batch*s.QHeads*cgo.MLAVDim {
			t.Errorf("%+v: Verify %+v, want every output checked and passed", s, c.Verification)
		}
	}
	// 2 sequences x 40 tokens x 576 x 2 bytes: one latent row a token, whatever the heads.
	if got := cases[0].KVBytes(); got != 2*40*576*2 {
		t.Errorf("KV bytes %g", got)
	}
	if got, want := cases[0].FLOPs(), 2.0*2*40*16*(576+512); got != want {
		t.Errorf("FLOPs %g, want %g", got, want)
	}
}

func TestMLABadSpecs(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	for _, tc := range []struct {
		spec   MLASpec
		status string
		text   string
	}{
		{MLASpec{Batch: 1, QHeads: 16, Contexts: []int{8}, DType: cgo.DTypeBF16}, StatusFailed, "invalid scale 0"},
		{MLASpec{Batch: 1, QHeads: 129, Contexts: []int{8}, DType: cgo.DTypeBF16, Scale: 1}, StatusSkipped, "129 query heads"},
		{MLASpec{Batch: 2, QHeads: 16, Contexts: []int{8, 9, 10}, DType: cgo.DTypeBF16, Scale: 1}, StatusFailed, "3 lengths for a batch of 2"},
		{MLASpec{Batch: 1, QHeads: 16, Contexts: []int{8}, DType: cgo.DTypeF32, Scale: 1}, StatusSkipped, "dtype f32"},
		{MLASpec{Batch: 1, QHeads: 16, Contexts: []int{8}, PageSize: 24, DType: cgo.DTypeBF16, Scale: 1}, StatusSkipped, "page size 24"},
	} {
		out := Measure(dev, tc.spec.Spec(), fastOptions())
		if out.Status != tc.status || !strings.Contains(out.Reason, tc.text) {
			t.Errorf("%+v: %s %q, want %s naming %q", tc.spec, out.Status, out.Reason, tc.status, tc.text)
		}
	}
	if k := (MLASpec{Batch: 8, QHeads: 16, Contexts: []int{4096}, PageSize: 64, DType: cgo.DTypeBF16, Scale: 0.1875}).Spec().Key(); k != "attention_mla bf16 b=8 q=16 ctx=4096 scale=0.1875 page=64" {
		t.Errorf("key %q", k)
	}
}
