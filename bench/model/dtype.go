package model

import (
	"fmt"
	"strings"
)

// DType is the storage type of the weights or of the KV cache.
type DType string

const (
	BF16 DType = "bf16"
	FP16 DType = "fp16"
	FP32 DType = "fp32"
	FP8  DType = "fp8" // e4m3 or e5m2: one byte either way
	INT8 DType = "int8"
)

// DTypes lists every accepted DType, in the order error messages name them.
func DTypes() []DType { return []DType{BF16, FP16, FP32, FP8, INT8} }

var dtypeBytes = map[DType]float64{BF16: 2, FP16: 2, FP32: 4, FP8: 1, INT8: 1}

// dtypeNames maps what users and PyTorch call a type to the DType.
var dtypeNames = map[string]DType{
	"bf16": BF16, "bfloat16": BF16,
	"fp16": FP16, "float16": FP16, "half": FP16, "f16": FP16,
	"fp32": FP32, "float32": FP32, "float": FP32, "f32": FP32,
	"fp8": FP8, "float8": FP8, "e4m3": FP8, "e5m2": FP8, "fp8_e4m3": FP8, "fp8_e5m2": FP8,
	"float8_e4m3fn": FP8, "float8_e5m2": FP8,
	"int8": INT8, "i8": INT8,
}

// ParseDType reads a dtype name, case-insensitively; PyTorch spellings such as
// "bfloat16" and "float8_e4m3fn" are accepted too.
func ParseDType(s string) (DType, error) {
	if d, ok := dtypeNames[strings.ToLower(strings.TrimSpace(s))]; ok {
		return d, nil
	}
	return "", fmt.Errorf("unknown dtype %q: accepted are %s", s, dtypeList())
}

// Bytes is the size of one element; 0 for a DType that is not one of DTypes().
func (d DType) Bytes() float64 { return dtypeBytes[d] }

func (d DType) valid() bool { _, ok := dtypeBytes[d]; return ok }

func dtypeList() string {
	names := make([]string, 0, len(dtypeBytes))
	for _, d := range DTypes() {
		names = append(names, string(d))
	}
	return strings.Join(names, ", ")
}
