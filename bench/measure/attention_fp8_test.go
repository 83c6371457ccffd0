package measure

import (
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// An fp8 cache counts one byte an element (and its two scales); the key names it; q and the
// output stay 16-bit.
func TestAttentionFP8Bytes(t *testing.T) {
	s := AttentionSpec{Batch: 2, QHeads: 8, KVHeads: 2, HeadDim: 128, Contexts: []int{100, 300}, DType: cgo.DTypeBF16}
	f := s
	f.KVDType = cgo.DTypeFP8E4M3
	if got, want := f.KVBytes(), 2*400*2*128*1.0+8; got != want {
		t.Errorf("fp8 KV bytes %g, want %g", got, want)
	}
	if got, want := s.Bytes()-f.Bytes(), s.KVBytes()-f.KVBytes(); got != want {
		t.Errorf("fp8 saves %g bytes, want the KV's %g (q and out stay bf16)", got, want)
	}
	if key := f.Spec().Key(); !strings.HasSuffix(key, " kv=fp8") {
		t.Errorf("key %q does not name the fp8 cache", key)
	}
	h := f
	h.KVScales = KVScalesHead
	if got, want := h.KVBytes(), f.KVBytes()+8*2; got != want {
		t.Errorf("fp8 KV bytes with per-head scales %g, want %g (two f32 a KV head, none a token)", got, want)
	}
	if key := h.Spec().Key(); !strings.HasSuffix(key, " kv=fp8 kv_scales=head") {
		t.Errorf("key %q does not name the per-head scales", key)
	}
	for _, c := range []struct {
		edit func(*AttentionSpec)
		want string
	}{
		{func(a *AttentionSpec) { a.KVScales = "channel" }, `invalid KV scales "channel": want tensor or head`},
		{func(a *AttentionSpec) { a.KVDType = 0 }, "per-head scales are an fp8 cache's"},
	} {
		b := h
		c.edit(&b)
		if status, why := b.check(); status != StatusFailed || !strings.Contains(why, c.want) {
			t.Errorf("%+v: %s %q, want failed naming %q", b, status, why, c.want)
		}
	}
	bad := s
	bad.KVDType = cgo.DTypeFP16
	if status, why := bad.check(); status != StatusSkipped || !strings.Contains(why, "KV cache dtype fp16 with bf16 activations") {
		t.Errorf("fp16 cache with bf16 activations: %s %q", status, why)
	}
}

// The measurement over an fp8 cache, every output against the reference: both kernels, both
// layouts, one split and several, the appended token quantised by the append kernel.
func TestAttentionFP8OnTheEmulator(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	o := fastOptions()
	for _, s := range []AttentionSpec{
		{Batch: 2, QHeads: 4, KVHeads: 2, HeadDim: 64, Contexts: []int{9, 170}, DType: cgo.DTypeBF16, Append: true},
		{Batch: 3, QHeads: 8, KVHeads: 1, HeadDim: 128, Contexts: []int{64, 65, 130}, PageSize: 16, DType: cgo.DTypeFP16,
			Splits: 2, Variant: cgo.AttentionMMA, Append: true},
		{Batch: 2, QHeads: 7, KVHeads: 1, HeadDim: 80, Contexts: []int{200, 3}, DType: cgo.DTypeBF16, Window: 64, Splits: 3},
		// per-head scales: 3 and 8 KV heads, appended, paged, forced splits
		{Batch: 3, QHeads: 6, KVHeads: 3, HeadDim: 64, Contexts: []int{5, 140, 77}, PageSize: 32, DType: cgo.DTypeFP16,
			Splits: 3, Append: true, KVScales: KVScalesHead},
		{Batch: 1, QHeads: 32, KVHeads: 8, HeadDim: 128, Contexts: []int{300}, DType: cgo.DTypeBF16,
			Variant: cgo.AttentionMMA, Append: true, KVScales: KVScalesHead},
	} {
		s.KVDType = cgo.DTypeFP8E4M3
		c := Verify(dev, s.Spec(), o)
		if c.Status != StatusOK || !c.Passed || c.NonFinite != 0 || c.Checked != s.Batch*s.QHeads*s.HeadDim {
			t.Errorf("%s: %s, %+v", s.Spec().Key(), c.Status, c.Verification)
		}
	}
}
