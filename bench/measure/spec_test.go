package measure

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
)

// The keys a sweep matches on resume: settings left to the kernel are not written, so a key
// of an earlier run directory still names the same call.
func TestSpecKey(t *testing.T) {
	tests := []struct {
		spec Spec
		want string
	}{
		{LinearSpec{Batch: 8, N: 6144, K: 4096, DType: cgo.DTypeBF16}.Spec(), "linear bf16 m=8 n=6144 k=4096"},
		{LinearSpec{Batch: 8, N: 6144, K: 4096, DType: cgo.DTypeBF16, Variant: cgo.LinearGEMV, SplitK: 4}.Spec(), "linear bf16 m=8 n=6144 k=4096 variant=gemv split_k=4"},
		{AttentionSpec{Batch: 8, QHeads: 32, KVHeads: 8, HeadDim: 128, Contexts: []int{4096}, DType: cgo.DTypeFP16}.Spec(), "attention fp16 b=8 q=32 kv=8 d=128 ctx=4096"},
		{AttentionSpec{Batch: 2, QHeads: 4, KVHeads: 1, HeadDim: 64, Contexts: []int{9, 70}, PageSize: 16, Variant: cgo.AttentionMMA, DType: cgo.DTypeBF16}.Spec(),
			"attention bf16 b=2 q=4 kv=1 d=64 ctx=9,70 page=16 variant=mma"},
		{ProbeSpec{Kind: cgo.ProbeRead, Bytes: 1 << 30}.Spec(), "probe read 1073741824 B"},
		{ProbeSpec{Kind: cgo.ProbeMMABF16}.Spec(), "probe mma"},
	}
	for _, tc := range tests {
		if got := tc.spec.Key(); got != tc.want {
			t.Errorf("key %q, want %q", got, tc.want)
		}
	}
}

// An Outcome written as JSON reads back the same, its spec and typed plan included; a spec
// without its description is a failed outcome, not a panic.
func TestOutcomeJSON(t *testing.T) {
	dev := fakeDevice(t)
	for _, s := range []Spec{
		LinearSpec{Batch: 2, N: 16, K: 32, DType: cgo.DTypeBF16, Variant: cgo.LinearGEMV, SplitK: 2}.Spec(),
		ProbeSpec{Kind: cgo.ProbeRead, Bytes: 1 << 12}.Spec(),
	} {
		out := Measure(dev, s, fastOptions())
		if out.Status != StatusOK || !reflect.DeepEqual(out.Spec, s) {
			t.Fatalf("%s: %s %q, spec %+v", s.Key(), out.Status, out.Reason, out.Spec)
		}
		data, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		var back Outcome
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("%s", data)
		}
		if !reflect.DeepEqual(back, out) {
			t.Errorf("round trip of %s:\n%+v\n%+v", data, back, out)
		}
		if !strings.Contains(string(data), `"dtype":"bf16"`) && s.Kind == KindLinear {
			t.Errorf("the spec's dtype is not written by name: %s", data)
		}
	}
	if out := Measure(dev, Spec{Kind: KindLinear}, fastOptions()); out.Status != StatusFailed || !strings.Contains(out.Reason, "without its linear description") {
		t.Errorf("empty linear spec: %s %q", out.Status, out.Reason)
	}
}
