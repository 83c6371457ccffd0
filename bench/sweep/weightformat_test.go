package sweep

import (
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/cgo"
)

func llama8B(t *testing.T) model.Shape {
	t.Helper()
	s, err := model.Lookup("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every name of the table sets a shape that WeightDTypeOf and WeightFormatOf read back as the
// same name, group and kernel format: one table, its inverse exact.
func TestWeightDTypeRoundTrip(t *testing.T) {
	base := llama8B(t)
	for _, name := range WeightDTypeNames() {
		f, _, err := cgo.ParseWeightDType(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		groups := []int{0}
		if f == cgo.WeightINT4 || f == cgo.WeightINT4ZeroPt {
			groups = []int{32, 64, 128}
		}
		for _, g := range groups {
			w, err := ParseWeightDType(name, g, g > 0)
			if err != nil {
				t.Fatalf("%s g%d: %v", name, g, err)
			}
			s := w.Apply(base)
			if err := s.Validate(); err != nil {
				t.Fatalf("%s: %v", w, err)
			}
			back, ok := WeightDTypeOf(s)
			if !ok || back != w {
				t.Errorf("%s: read back as %+v (ok %v)", w, back, ok)
			}
			if got, group, _ := WeightFormatOf(s); got != f || (f.Grouped() && group != w.GroupSize) {
				t.Errorf("%s: WeightFormatOf %s g%d", w, got, group)
			}
			if (s.Quant == nil) != (f == cgo.WeightDense) || s.ActivationDType() != s.WeightDType {
				t.Errorf("%s: weight dtype %s, quant %v", w, s.WeightDType, s.Quant)
			}
		}
	}
}

// The bytes the shape prices for one matrix are the bytes the kernel's layout reads, scales
// and zero points included; int4 (gptq) alone also prices the zero points its checkpoint
// stores and the symmetric kernel does not read.
func TestWeightDTypeBytesAreTheLayouts(t *testing.T) {
	const n, k = 4096, 14336
	for _, c := range []struct {
		name  string
		group int
	}{{"fp8", 0}, {"fp8-tensor", 0}, {"int8", 0}, {"int4", 64}, {"int4", 128}, {"int4-zp", 32}, {"int4-zp", 128}, {"mxfp4", 0}} {
		w, err := ParseWeightDType(c.name, c.group, c.group > 0)
		if err != nil {
			t.Fatal(err)
		}
		q := w.Apply(llama8B(t)).Quant
		priced := q.BitsPerWeight(n, k) * n * k / 8
		layout := float64(w.Format().Layout(n, k, w.GroupSize).Bytes())
		if w.Format() == cgo.WeightINT4 {
			layout += float64(n) * float64(k/w.GroupSize) / 2 // gptq's qzeros, 4 bits per group and row
		}
		if priced != layout {
			t.Errorf("%s: priced %.0f bytes, the layout has %.0f", w, priced, layout)
		}
	}
}

func TestWeightDTypeRefusals(t *testing.T) {
	for _, c := range []struct {
		name       string
		group      int
		groupGiven bool
		want       []string
	}{
		{"int5", 0, false, []string{`"int5"`, strings.Join(WeightDTypeNames(), ", ")}},
		{"fp8", 64, true, []string{"--group-size 64", "fp8", "no groups"}},
		{"bf16", 32, true, []string{"--group-size 32", "dense bf16"}},
		{"int4", 48, true, []string{"--group-size 48", "32, 64 or 128"}},
		{"mxfp4", 64, true, []string{"--group-size 64", "32"}},
	} {
		_, err := ParseWeightDType(c.name, c.group, c.groupGiven)
		if err == nil {
			t.Errorf("%s g%d: accepted", c.name, c.group)
			continue
		}
		for _, want := range c.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s g%d: %q does not say %q", c.name, c.group, err, want)
			}
		}
	}
	// gpt-oss-20b's hidden size 2880 is 22.5 groups of 128: the first linear with K 2880 is named.
	s := llama8B(t)
	s.Hidden = 2880
	w, _ := ParseWeightDType("int4", 0, false)
	err := CheckShape(w.Apply(s))
	if err == nil || !strings.Contains(err.Error(), "qkv_proj (N 6144, K 2880)") || !strings.Contains(err.Error(), "group size 128") {
		t.Errorf("int4 g128 at hidden 2880: %v, want qkv_proj named with its K and the group", err)
	}
	if w, _ := ParseWeightDType("int4", 64, true); CheckShape(w.Apply(s)) != nil {
		t.Errorf("int4 g64 at hidden 2880 (45 groups): %v", CheckShape(w.Apply(s)))
	}
}

// Two formats of one model are two keys (--resume tells their records apart), one family.
func TestWeightFormatKeys(t *testing.T) {
	base := llama8B(t)
	keys := map[string]string{}
	for _, name := range WeightDTypeNames() {
		w, _ := ParseWeightDType(name, 0, false)
		s := NamedByFormat(w.Apply(base))
		if other, dup := keys[ModelKey(s)]; dup {
			t.Errorf("%s and %s share the key %s", name, other, ModelKey(s))
		}
		keys[ModelKey(s)] = name
		if FormatFamily(s) != FormatFamily(base) {
			t.Errorf("%s: family %s, want %s", name, FormatFamily(s), FormatFamily(base))
		}
	}
}
