package report

import (
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/model"
)

// Two runs of one model in different formats (a bf16 KV cache against an fp8 one) are not
// matched by batch and context: there is nothing to compare, an error names what each run
// measured, and no verdict (SLOWER, exit 1) comes of it.
func TestCompareRefusesDifferentFormats(t *testing.T) {
	base := sampledRun(t)
	a := writeRun(t, base)
	fp8 := base
	fp8.Model.KVDType = model.FP8
	fp8.Scale, fp8.Seed = 1.10, 2
	b := writeRun(t, fp8)
	c, err := Compare(a, b)
	if err == nil || !strings.Contains(err.Error(), "not comparable") || !strings.Contains(err.Error(), "fp8 KV") {
		t.Errorf("bf16 KV against fp8 KV: %d pairs, regressed %v, error %v; want an error naming both formats", len(c.Pairs), c.Regressed(), err)
	}
}
