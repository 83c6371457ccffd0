package step

import (
	"slices"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/cgo"
)

// longSplits splits the attention only past 8192 cached tokens, past what the check runs.
type longSplits struct{ fakePlanner }

func (l longSplits) AttentionPlan(p cgo.AttentionParams) (cgo.AttentionParams, uint64, error) {
	p.NumSplits = 1
	if p.MaxContext > 8192 {
		p.NumSplits = 4
	}
	return p, 0, nil
}

// TestUncheckedInstances: the check names a kernel instance the timed step runs and it does
// not (an attention split only past its capped context), and none where it runs them all.
func TestUncheckedInstances(t *testing.T) {
	s := Tiny()[0]
	s.MaxPositions = 0
	for _, tc := range []struct {
		context int
		want    []string
	}{
		{1024, nil},
		{20000, []string{"attention auto head_dim=64 kv=bf16 split=true window=false chunk=false sinks=false"}},
	} {
		c := Config{Model: s, Batch: 4, Context: tc.context, Steps: 32, Seed: 1}
		vc, _ := VerifyConfig(c)
		full, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		checked, err := New(vc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := uncovered(longSplits{}, full, checked)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("context %d: unchecked %q, want %q", tc.context, got, tc.want)
		}
		v := Verification{Verified: true, Modes: Modes, Layers: 1, ModelLayers: 3, Batch: 4, Sequences: 2, Context: vc.Context, Steps: 2, Unchecked: got}
		if how := v.How(); (len(got) > 0) != strings.Contains(how, "not launched by the check: attention") {
			t.Errorf("How() = %q", how)
		}
	}
}
