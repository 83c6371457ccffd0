package ref

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestFillValueIsFloat32ProductRounded(t *testing.T) {
	// seed 42, index 2 gives 0x3c831880 (0.0160028934); times 0.1f in float32 gives bits the
	// float64 product does not, so this catches a product taken in the wrong precision.
	u := math.Float32frombits(0x3c831880)
	product := float32(u * float32(0.1))
	if wide := float32(float64(u) * 0.1); wide == product {
		t.Logf("note: float64 and float32 products agree for this input")
	}
	for _, d := range []DType{F32, BF16, FP16} {
		if got, want := FillValue(d, 42, 0.1, 2), Round(d, product); got != want {
			t.Errorf("FillValue(%v, 42, 0.1, 2) = %v, want %v", d, got, want)
		}
	}
}

func TestFillAgreesWithFillBytes(t *testing.T) {
	const n = 1000
	for _, d := range []DType{F32, BF16, FP16} {
		for _, scale := range []float32{1, 0.0625, 3.7, 1e5} {
			values := Fill(d, 99, scale, n)
			decoded, err := Decode(d, FillBytes(d, 99, scale, n))
			if err != nil {
				t.Fatal(err)
			}
			for i := range values {
				if math.Float32bits(values[i]) != math.Float32bits(decoded[i]) {
					t.Fatalf("%v scale %v element %d: Fill %v, FillBytes decodes to %v", d, scale, i, values[i], decoded[i])
				}
				if v := values[i]; Round(d, v) != v {
					t.Fatalf("%v element %d = %v is not a %v value", d, i, v, d)
				}
			}
		}
	}
	// fp16 overflows to infinity, as the device's conversion would, when the scale is huge.
	if v := Fill(FP16, 0, 1e6, 1)[0]; !math.IsInf(float64(v), -1) {
		t.Errorf("fp16 fill of -0.32 * 1e6 = %v, want -Inf", v)
	}
}

func TestFillWords(t *testing.T) {
	words := FillWords(0, 3)
	b := FillBytes(U32, 0, 1, 3)
	for i, w := range words {
		if w != uint32(hashVectors[i].hash>>32) || binary.LittleEndian.Uint32(b[4*i:]) != w {
			t.Errorf("word %d = %#x (bytes %#x), want %#x", i, w, binary.LittleEndian.Uint32(b[4*i:]), hashVectors[i].hash>>32)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	if _, err := Decode(U32, make([]byte, 4)); err == nil {
		t.Error("Decode(U32) succeeded, want an error")
	}
	if _, err := Decode(BF16, make([]byte, 3)); err == nil {
		t.Error("Decode of 3 bytes of bf16 succeeded, want an error")
	}
}

func TestParseDType(t *testing.T) {
	for _, d := range []DType{F32, BF16, FP16, U32} {
		if got, err := ParseDType(d.String()); err != nil || got != d {
			t.Errorf("ParseDType(%q) = %v, %v", d.String(), got, err)
		}
	}
	if _, err := ParseDType("fp8"); err == nil {
		t.Error("ParseDType(fp8) succeeded")
	}
}
