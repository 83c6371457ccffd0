package ref

import (
	"math"
	"testing"
)

func TestE4M3DecodeExtremes(t *testing.T) {
	for _, tc := range []struct {
		code uint8
		want float64
	}{
		{0x7e, 448}, {0xfe, -448}, {0x01, 0x1p-9}, {0x81, -0x1p-9}, {0x07, 7 * 0x1p-9}, {0x08, 0x1p-6},
		{0x38, 1}, {0x39, 1.125}, {0x00, 0}, {0x77, 240}, {0x78, 256},
	} {
		if got := E4M3(tc.code); got != tc.want {
			t.Errorf("E4M3(%#x) = %g, want %g", tc.code, got, tc.want)
		}
	}
	for _, c := range []uint8{0x7f, 0xff} {
		if !math.IsNaN(E4M3(c)) {
			t.Errorf("E4M3(%#x) = %g, want NaN", c, E4M3(c))
		}
	}
	if !math.Signbit(E4M3(0x80)) {
		t.Error("0x80 is not -0")
	}
}

func TestE4M3EncodeRoundsToNearestEvenAndSaturates(t *testing.T) {
	for _, tc := range []struct {
		x    float32
		want uint8
	}{
		{1, 0x38}, {1.0625, 0x38}, {1.0626, 0x39}, {1.1875, 0x3a}, // ties to the even mantissa
		{448, 0x7e}, {464, 0x7e}, {1e9, 0x7e}, {-1e9, 0xfe}, {float32(math.Inf(1)), 0x7e},
		{float32(math.Inf(-1)), 0xfe}, {0x1p-10, 0x00}, {0x1.01p-10, 0x01}, {3 * 0x1p-10, 0x02},
		{-0x1p-9, 0x81}, {0x1p-20, 0}, {float32(math.Copysign(0, -1)), 0x80}, {15 * 0x1p-10, 0x08},
		{240, 0x77}, {248, 0x78}, {232, 0x76},
	} {
		if got := E4M3Encode(tc.x); got != tc.want {
			t.Errorf("E4M3Encode(%g) = %#x, want %#x", tc.x, got, tc.want)
		}
	}
	if got := E4M3Encode(float32(math.NaN())); got&0x7f != 0x7f {
		t.Errorf("E4M3Encode(NaN) = %#x, want a NaN code", got)
	}
	// every code round-trips
	for c := 0; c < 256; c++ {
		if c&0x7f == 0x7f {
			continue
		}
		if got := E4M3Encode(float32(E4M3(uint8(c)))); got != uint8(c) {
			t.Errorf("E4M3Encode(E4M3(%#x)) = %#x", c, got)
		}
	}
	for _, s := range []float32{0, -1, float32(math.NaN()), float32(math.Inf(1))} {
		if ValidateE4M3Scale("k_scale", s) == nil {
			t.Errorf("scale %g accepted", s)
		}
	}
}

func TestE4M3HeadScales(t *testing.T) {
	spread := E4M3SpreadScales(0.5, 8)
	want := []float32{0.125, 1, 0, 2, 0.5, 0.125, 0, 0.25}
	for h := range want {
		if spread[h] != want[h] {
			t.Fatalf("E4M3SpreadScales(0.5, 8) = %v, want %v", spread, want)
		}
	}
	eff := E4M3HeadScales(8, 3, spread)
	if eff[2] != 3 || eff[6] != 3 || eff[1] != 1 {
		t.Errorf("E4M3HeadScales = %v: the 0 entries take the tensor's 3, the others their own", eff)
	}
	if ValidateE4M3HeadScales("k_scales", 8, spread) != nil {
		t.Error("the spread scales are refused")
	}
	for _, bad := range [][]float32{{1, float32(math.NaN())}, {-1, 1}, {1}, {float32(math.Inf(1)), 0}} {
		if ValidateE4M3HeadScales("k_scales", 2, bad) == nil {
			t.Errorf("per-head scales %v accepted for 2 KV heads", bad)
		}
	}
	// the head of every element: contiguous [batch, kv_heads, capacity, d], paged [page, kv_heads, page, d]
	for _, s := range []AttentionShape{
		{Batch: 2, QHeads: 3, KVHeads: 3, HeadDim: 64, Context: []int{5, 9}, Capacity: 9},
		{Batch: 2, QHeads: 3, KVHeads: 3, HeadDim: 64, Context: []int{5, 40}, Layout: KVPaged, PageSize: 16},
	} {
		s = s.WithDefaults()
		codes := make([]byte, s.CacheElements())
		for i := range codes {
			codes[i] = 0x38 // 1
		}
		scales := []float32{1, 2, 4}
		got := E4M3DequantizeHeads(s, codes, scales)
		table := s.ShuffledPageTable(7)
		for b := 0; b < s.Batch; b++ {
			for h := 0; h < s.KVHeads; h++ {
				for tok := 0; tok < s.Context[b]; tok++ {
					if x := got[s.KVOffset(table, b, h, tok)+63]; x != scales[h] {
						t.Fatalf("%v: sequence %d head %d token %d dequantised to %g, want %g", s.Layout, b, h, tok, x, scales[h])
					}
				}
			}
		}
	}
}
