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
	for _, f := range []cgo.WeightFormat{cgo.WeightFP8, cgo.WeightFP8Tensor, cgo.WeightINT8, cgo.WeightINT4, cgo.WeightINT4ZeroPt, cgo.WeightMXFP4, cgo.WeightFP8Block} {
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

// fp8-block by hand: 130 x 144 is 2 x 2 tiles (the last row and column of tiles partial), each
// row and element of k taking its tile's scale: tile (i, j) at scales[i * 2 + j].
func TestQuantFP8BlockTiles(t *testing.T) {
	const n, k = 130, 144
	l := cgo.WeightFP8Block.Layout(n, k, 0)
	if l.WBytes != n*k || l.ScaleBytes != 4*2*2 {
		t.Fatalf("layout %+v: want %d bytes of W and 4 scales", l, n*k)
	}
	q := QuantWeights{Format: cgo.WeightFP8Block, N: n, K: k, W: make([]byte, n*k)}
	for i := range q.W {
		q.W[i] = 0x38 // 1.0
	}
	for _, s := range []float32{1, 2, 4, 8} {
		b := math.Float32bits(s)
		q.Scales = append(q.Scales, byte(b), byte(b>>8), byte(b>>16), byte(b>>24))
	}
	row := make([]float64, k)
	for _, r := range []int{0, 127, 128, 129} {
		q.Row(r, row)
		for _, c := range []int{0, 127, 128, 143} {
			want := float64([]float32{1, 2, 4, 8}[(r/128)*2+c/128])
			if row[c] != want {
				t.Errorf("row %d col %d = %v, want %v (tile %d, %d)", r, c, row[c], want, r/128, c/128)
			}
		}
	}
}
