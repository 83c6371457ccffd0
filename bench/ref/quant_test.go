package ref

import (
	"math"
	"testing"

	"github.com/decodebench/decodebench/cgo"
)

// The decoders at the points the OCP specs name, so that the kernels and the reference cannot
// agree on a wrong decoding (both are tested against each other elsewhere).
func TestQuantDecodersBySpec(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"e4m3 0x7E: largest", E4M3(0x7E), 448}, {"e4m3 0xFE", E4M3(0xFE), -448},
		{"e4m3 0x08: smallest normal", E4M3(0x08), 0x1p-6}, {"e4m3 0x07: largest subnormal", E4M3(0x07), 7 * 0x1p-9},
		{"e4m3 0x01: smallest subnormal", E4M3(0x01), 0x1p-9}, {"e4m3 0x38: one", E4M3(0x38), 1},
		{"e4m3 0x3C", E4M3(0x3C), 1.5}, {"e4m3 0x80: -0", E4M3(0x80), math.Copysign(0, -1)},
		{"e2m1 1", E2M1(1), 0.5}, {"e2m1 2", E2M1(2), 1}, {"e2m1 3", E2M1(3), 1.5}, {"e2m1 4", E2M1(4), 2},
		{"e2m1 5", E2M1(5), 3}, {"e2m1 6", E2M1(6), 4}, {"e2m1 7: largest", E2M1(7), 6}, {"e2m1 15", E2M1(15), -6},
		{"e2m1 8: -0", E2M1(8), math.Copysign(0, -1)}, {"e2m1 9", E2M1(9), -0.5},
		{"e8m0 127", E8M0(127), 1}, {"e8m0 0: smallest", E8M0(0), 0x1p-127}, {"e8m0 254: largest", E8M0(254), 0x1p127},
	} {
		if c.got != c.want || math.Signbit(c.got) != math.Signbit(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	for _, nan := range []float64{E4M3(0x7F), E4M3(0xFF), E8M0(255)} {
		if !math.IsNaN(nan) {
			t.Errorf("a NaN code decoded to %v", nan)
		}
	}
}

// The fill never writes a NaN code, and a row from the hash equals the row from its bytes.
func TestQuantFillRows(t *testing.T) {
	for _, f := range []cgo.WeightFormat{cgo.WeightFP8, cgo.WeightFP8Tensor, cgo.WeightINT8, cgo.WeightINT4, cgo.WeightINT4ZeroPt, cgo.WeightMXFP4} {
		q := QuantFill{Format: f, N: 6, K: 128, GroupSize: f.DefaultGroupSize(), Seed: 3, Scale: 0.05}
		bytes := q.Weights()
		a, b := make([]float64, q.K), make([]float64, q.K)
		for r := range q.N {
			q.Row(r, a)
			bytes.Row(r, b)
			for c := range a {
				if a[c] != b[c] || math.IsNaN(a[c]) {
					t.Fatalf("%v row %d col %d: from the hash %v, from the bytes %v", f, r, c, a[c], b[c])
				}
			}
		}
	}
}
