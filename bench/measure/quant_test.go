package measure

import (
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/cgo/cgotest"
)

// A quantized W's bytes are its packed values, its scales and its zero points; the activations
// stay 16-bit.
func TestLinearQuantBytes(t *testing.T) {
	const n, k = 4096, 4096
	xy := float64(2*k + 2*n) // batch 1, bf16 X and Y
	for _, c := range []struct {
		f     cgo.WeightFormat
		group int
		w     float64
	}{
		{cgo.WeightDense, 0, 2 * n * k},
		{cgo.WeightFP8, 0, n*k + 4*n},
		{cgo.WeightFP8Tensor, 0, n*k + 4},
		{cgo.WeightINT8, 0, n*k + 4*n},
		{cgo.WeightINT4, 128, n*k/2 + 2*n*k/128},
		{cgo.WeightINT4ZeroPt, 32, n*k/2 + 2*n*k/32 + n/2*k/32},
		{cgo.WeightMXFP4, 32, n*k/2 + n*k/32},
	} {
		s := LinearSpec{Batch: 1, N: n, K: k, DType: cgo.DTypeBF16, WeightFormat: c.f, GroupSize: c.group}
		if got := s.Bytes(); got != c.w+xy {
			t.Errorf("%v: Bytes %g, want %g", c.f, got, c.w+xy)
		}
		if s.MinDeviceBytes() < uint64(c.w+xy) {
			t.Errorf("%v: MinDeviceBytes %d under the bytes it reads", c.f, s.MinDeviceBytes())
		}
	}
}

// Each format measured end to end on the emulator: verified against the exact reference, its
// bytes counted, and a shape the format does not take skipped with the reason.
func TestLinearQuantOnTheEmulator(t *testing.T) {
	dev := cgotest.EmuDevice(t)
	o := fastOptions()
	for _, s := range []LinearSpec{
		{Batch: 1, N: 66, K: 256, DType: cgo.DTypeBF16, WeightFormat: cgo.WeightINT4, GroupSize: 128},
		{Batch: 3, N: 33, K: 160, DType: cgo.DTypeFP16, WeightFormat: cgo.WeightFP8},
		{Batch: 20, N: 40, K: 96, DType: cgo.DTypeBF16, WeightFormat: cgo.WeightINT4ZeroPt, GroupSize: 32},
		{Batch: 2, N: 17, K: 64, DType: cgo.DTypeBF16, WeightFormat: cgo.WeightMXFP4, GroupSize: 32},
	} {
		out := Linear(dev, s, o)
		checkOK(t, "linear", out, o)
		if out.Bytes != s.Bytes() || out.Rotation.Copies < 1 {
			t.Errorf("%+v: bytes %g (want %g), %d copies", s, out.Bytes, s.Bytes(), out.Rotation.Copies)
		}
	}
	out := Linear(dev, LinearSpec{Batch: 1, N: 8, K: 4128, DType: cgo.DTypeBF16, WeightFormat: cgo.WeightINT4, GroupSize: 64}, o)
	if out.Status != StatusSkipped || !strings.Contains(out.Reason, "k 4128") || !strings.Contains(out.Reason, "64") {
		t.Errorf("int4 g64 at k 4128: %s %q, want skipped naming k and the group", out.Status, out.Reason)
	}
}
