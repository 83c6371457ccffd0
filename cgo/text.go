package cgo

import "fmt"

// Text forms of the seam's enums, for JSON: a measurement's spec says "bf16" and "gemv", not
// the ABI's numbers (which another ABI version may renumber).

var dtypeNames = map[DType]string{DTypeF32: "f32", DTypeBF16: "bf16", DTypeFP16: "fp16", DTypeU32: "u32"}

// ParseDType reads a DType's name: f32, bf16, fp16 or u32.
func ParseDType(s string) (DType, error) {
	for t, name := range dtypeNames {
		if s == name {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q (want bf16, fp16, f32 or u32)", s)
}

func (t DType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }
func (t *DType) UnmarshalText(b []byte) error {
	v, err := ParseDType(string(b))
	*t = v
	return err
}

func (v LinearVariant) MarshalText() ([]byte, error) { return []byte(v.String()), nil }
func (v *LinearVariant) UnmarshalText(b []byte) error {
	x, err := ParseLinearVariant(string(b))
	*v = x
	return err
}

func (v AttentionVariant) MarshalText() ([]byte, error) { return []byte(v.String()), nil }
func (v *AttentionVariant) UnmarshalText(b []byte) error {
	x, err := ParseAttentionVariant(string(b))
	*v = x
	return err
}

func (k ProbeKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }
func (k *ProbeKind) UnmarshalText(b []byte) error {
	x, err := ParseProbeKind(string(b))
	*k = x
	return err
}
