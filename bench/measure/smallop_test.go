package measure

import (
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// A small op verified on the emulator: every output compared on its own, the Check summing
// them; a shape the library refuses is skipped naming the value; small ops are not timed.
func TestSmallOpOnTheEmulator(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	o := fastOptions()
	s := SmallOpSpec{Op: "rmsnorm", DType: cgo.DTypeBF16, Batch: 3, Hidden: 136, Residual: true}
	c := Verify(dev, s.Spec(), o)
	if c.Status != StatusOK || !c.Passed || c.Kernel != "smallop:rmsnorm" {
		t.Fatalf("Verify %+v: status %s kernel %s, want a pass", c.Verification, c.Status, c.Kernel)
	}
	if len(c.Outputs) != 2 || c.Outputs[0].Output != "out" || c.Outputs[1].Output != "residual (the sum)" {
		t.Fatalf("outputs %+v, want out and the residual sum", c.Outputs)
	}
	if c.Checked != 2*3*136 || c.Outputs[0].Count != 3*136 {
		t.Errorf("checked %d (out %d), want %d", c.Checked, c.Outputs[0].Count, 2*3*136)
	}

	refused := Verify(dev, SmallOpSpec{Op: "rmsnorm", DType: cgo.DTypeBF16, Batch: 1, Hidden: 4100}.Spec(), o)
	if refused.Status != StatusSkipped || !strings.Contains(refused.Reason, "4100") {
		t.Errorf("hidden 4100: status %s, reason %q; want skipped naming 4100", refused.Status, refused.Reason)
	}
	unknown := Verify(dev, SmallOpSpec{Op: "softmax", DType: cgo.DTypeBF16, Batch: 1, Hidden: 8}.Spec(), o)
	if unknown.Status != StatusFailed || !strings.Contains(unknown.Reason, `"softmax"`) {
		t.Errorf("op softmax: status %s, reason %q; want failed naming it", unknown.Status, unknown.Reason)
	}
	if out := Measure(dev, s.Spec(), o); out.Status != StatusFailed || !strings.Contains(out.Reason, "not timed") {
		t.Errorf("Measure of a small op = %s (%s), want failed: not timed", out.Status, out.Reason)
	}
	if k := s.Spec().Key(); k != "smallop rmsnorm bf16 b=3 hidden=136" {
		t.Errorf("Key %q", k)
	}
}
