package model

import (
	"strings"
	"testing"
)

func TestParseDType(t *testing.T) {
	tests := []struct {
		desc  string
		in    string
		want  DType
		bytes float64
	}{
		{"canonical bf16", "bf16", BF16, 2},
		{"PyTorch name, any case", "BFloat16", BF16, 2},
		{"half", "half", FP16, 2},
		{"fp32", "float32", FP32, 4},
		{"fp8 e4m3 spelling", "float8_e4m3fn", FP8, 1},
		{"int8 with spaces", " int8 ", INT8, 1},
	}
	for _, tc := range tests {
		got, err := ParseDType(tc.in)
		if err != nil || got != tc.want || got.Bytes() != tc.bytes {
			t.Errorf("%s: ParseDType(%q) = %q (%g bytes), %v; want %q (%g bytes)", tc.desc, tc.in, got, got.Bytes(), err, tc.want, tc.bytes)
		}
	}
}

func TestParseDTypeRejects(t *testing.T) {
	for _, in := range []string{"", "int4", "fp64"} {
		_, err := ParseDType(in)
		if err == nil {
			t.Fatalf("ParseDType(%q) succeeded", in)
		}
		for _, want := range []string{`"` + in + `"`, "bf16, fp16, fp32, fp8, int8"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("ParseDType(%q) error %q does not mention %s", in, err, want)
			}
		}
	}
	if DType("int4").Bytes() != 0 {
		t.Error("an unknown DType should have 0 bytes")
	}
}
