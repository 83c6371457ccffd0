package measure

import (
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// Verify compares every output on the emulator: linear at odd shapes, attention contiguous and
// paged, with the last token written by the KV append kernel, and a softmax scale of its own.
func TestVerifyOnTheEmulator(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	o := fastOptions()
	for _, s := range []Spec{
		LinearSpec{Batch: 3, N: 200, K: 24, DType: cgo.DTypeBF16}.Spec(), // 200 rows: more than a sweep samples
		LinearSpec{Batch: 17, N: 40, K: 64, DType: cgo.DTypeFP16, Variant: cgo.LinearMMA}.Spec(),
		AttentionSpec{Batch: 2, QHeads: 4, KVHeads: 2, HeadDim: 64, Contexts: []int{9, 70}, DType: cgo.DTypeBF16, Append: true}.Spec(),
		AttentionSpec{Batch: 3, QHeads: 2, KVHeads: 1, HeadDim: 128, Contexts: []int{33}, PageSize: 16, DType: cgo.DTypeFP16, Append: true, Scale: 0.05}.Spec(),
		ProbeSpec{Kind: cgo.ProbeTriad, Bytes: 1 << 14}.Spec(),
	} {
		c := Verify(dev, s, o)
		if c.Status != StatusOK || !c.Passed || !c.Emulated || c.Checked < 1 || c.NonFinite != 0 {
			t.Errorf("%s: %s, %+v", s.Key(), c.Status, c.Verification)
		}
		if s.Kind == KindLinear && c.Checked != s.Linear.Batch*s.Linear.N {
			t.Errorf("%s: %d of %d outputs compared", s.Key(), c.Checked, s.Linear.Batch*s.Linear.N)
		}
		if s.Kind == KindAttention && (c.Checked != s.Attention.Batch*s.Attention.QHeads*s.Attention.HeadDim || c.Plan.Variant == "") {
			t.Errorf("%s: %d outputs compared, plan %+v", s.Key(), c.Checked, c.Plan)
		}
	}
}

// Verify fails a kernel that leaves one element unwritten, wherever it is, and names it.
func TestVerifyFindsTheElement(t *testing.T) {
	dev := fakeDevice(t, "FAKE_LINEAR_SKIP=203") // sequence 1, feature 3 of n 200
	c := Verify(dev, LinearSpec{Batch: 2, N: 200, K: 16, DType: cgo.DTypeBF16}.Spec(), fastOptions())
	if c.Status != StatusOK || c.Passed || c.NonFinite != 1 || c.Worst.Index != 203 || len(c.Mismatches) != 1 ||
		c.Mismatches[0].Index != 203 || !strings.Contains(c.Reason, "sequence 1, feature 3") {
		t.Errorf("%s %+v worst %+v mismatches %+v", c.Status, c.Verification, c.Worst, c.Mismatches)
	}
	if c := Verify(dev, LinearSpec{Batch: 2000, N: 8, K: 16, DType: cgo.DTypeBF16}.Spec(), fastOptions()); c.Status != StatusSkipped ||
		!strings.Contains(c.Reason, "batch 2000") {
		t.Errorf("a refused shape: %s %q", c.Status, c.Reason)
	}
}
