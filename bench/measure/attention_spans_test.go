package measure

import (
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// A span's call counts the tokens it reads, not the cache it holds; the key names the span and
// the sinks; a bad span is refused by name.
func TestAttentionSpanBytes(t *testing.T) {
	full := AttentionSpec{Batch: 3, QHeads: 8, KVHeads: 2, HeadDim: 64, Contexts: []int{10, 100, 300}, PageSize: 32, DType: cgo.DTypeBF16}
	window, chunk, sinks := full, full, full
	window.Window, chunk.Chunk, sinks.Sinks = 64, 128, true
	// window 64: 10 + 64 + 64 tokens; chunk 128: 10, 100, 300 - 256 = 44
	for _, c := range []struct {
		spec          AttentionSpec
		tokens, pages float64
	}{
		{full, 410, 1 + 4 + 10},
		{window, 138, 1 + (3 - 1 + 1) + (9 - 7 + 1)}, // 100: tokens 36..99 on pages 1..3; 300: 236..299 on 7..9
		{chunk, 154, 1 + 4 + (9 - 8 + 1)},            // 300: tokens 256..299 on pages 8..9
		{sinks, 410, 1 + 4 + 10 + 8},                 // + the 8 f32 sinks
	} {
		kv := 2 * c.tokens * 2 * 64 * 2
		if got := c.spec.KVBytes(); got != kv {
			t.Errorf("%s: KV bytes %g, want %g", c.spec.Spec().Key(), got, kv)
		}
		if got, want := c.spec.Bytes(), kv+2*3*8*64*2+4*3+4*c.pages; got != want {
			t.Errorf("%s: bytes %g, want %g", c.spec.Spec().Key(), got, want)
		}
		if got := c.spec.FLOPs(); got != 4*c.tokens*8*64 {
			t.Errorf("%s: FLOPs %g", c.spec.Spec().Key(), got)
		}
	}
	for spec, want := range map[*AttentionSpec]string{&window: " window=64", &chunk: " chunk=128", &sinks: " sinks"} {
		if key := spec.Spec().Key(); !strings.HasSuffix(key, want) {
			t.Errorf("key %q does not end in %q", key, want)
		}
	}
	for _, c := range []struct {
		window, chunk int
		want          string
	}{{-1, 0, "invalid window -1"}, {0, -4, "invalid window 0 or chunk -4"}, {8, 16, "window 8 and chunk 16 are both set"}} {
		bad := full
		bad.Window, bad.Chunk = c.window, c.chunk
		if status, why := bad.check(); status != StatusFailed || !strings.Contains(why, c.want) {
			t.Errorf("window %d chunk %d: %s %q, want failed naming %q", c.window, c.chunk, status, why, c.want)
		}
	}
}

// Spans and sinks through the measurement, every output against the reference: contiguous
// and paged, both kernels, one split and several, the appended token inside the window.
func TestAttentionSpansOnTheEmulator(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	o := fastOptions()
	for _, s := range []AttentionSpec{
		{Batch: 2, QHeads: 4, KVHeads: 2, HeadDim: 64, Contexts: []int{9, 170}, DType: cgo.DTypeBF16, Window: 50, Append: true},
		{Batch: 3, QHeads: 8, KVHeads: 1, HeadDim: 128, Contexts: []int{64, 65, 130}, PageSize: 16, DType: cgo.DTypeFP16, Chunk: 64,
			Splits: 2, Variant: cgo.AttentionMMA},
		{Batch: 2, QHeads: 7, KVHeads: 1, HeadDim: 80, Contexts: []int{200, 3}, DType: cgo.DTypeBF16, Sinks: true, Splits: 3},
		{Batch: 1, QHeads: 16, KVHeads: 2, HeadDim: 96, Contexts: []int{150}, PageSize: 32, DType: cgo.DTypeBF16, Window: 33, Sinks: true,
			Variant: cgo.AttentionMMA},
	} {
		c := Verify(dev, s.Spec(), o)
		if c.Status != StatusOK || !c.Passed || c.NonFinite != 0 || c.Checked != s.Batch*s.QHeads*s.HeadDim {
			t.Errorf("%s: %s, %+v", s.Spec().Key(), c.Status, c.Verification)
		}
	}
}
