package validate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExampleThresholdsFile(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "thresholds.example.json")
	set, err := LoadThresholds(path)
	if err != nil {
		t.Fatal(err)
	}
	if set.Default != DefaultThresholds() {
		t.Errorf("the example's default section differs from the built-in defaults:\n%+v\n%+v", set.Default, DefaultThresholds())
	}
	h100 := set.For("h100-sxm")
	if h100.ReadBandwidth.MinFraction != 0.88 || h100.Outlier.Verdict != Fail || h100.Outlier.BelowMedian != 0.05 ||
		h100.Tensor.MinFraction != 0.70 {
		t.Errorf("h100-sxm = %+v: want read 0.88, outlier FAIL at 5%%, the rest default", h100)
	}
	if l40s := set.For("l40s"); l40s.ModelStep != (GateThreshold{MinFraction: 0.60, MinValue: 30}) || l40s.Health.PowerLimitBelowDefault != Pass {
		t.Errorf("l40s = %+v", l40s)
	}
	if a100 := set.For("a100-80gb"); a100 != DefaultThresholds() {
		t.Errorf("a GPU the file does not name gets %+v, want the default", a100)
	}
}

func TestParseThresholdsErrors(t *testing.T) {
	tests := []struct{ desc, file, want string }{
		{"a misspelt field", `{"default": {"read_bandwith": {"min_fraction": 0.9}}}`, `unknown field "read_bandwith"`},
		{"an unknown GPU", `{"gpus": {"h900": {}}}`, `unknown GPU "h900"`},
		{"a percentage for a fraction", `{"default": {"tensor": {"min_fraction": 70}}}`, "tensor.min_fraction 70"},
		{"an outlier verdict of PASS", `{"default": {"outlier": {"verdict": "PASS"}}}`, "outlier.verdict"},
		{"another schema", `{"schema": "decodebench.thresholds/v9"}`, "this build reads"},
		{"two names for one GPU", `{"gpus": {"h100": {}, "h100-sxm": {}}}`, "both h100-sxm"},
		{"not JSON", `read_bandwidth: 0.9`, "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := ParseThresholds([]byte(tt.file), "th.json")
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "th.json") {
				t.Errorf("err = %v, want one naming th.json and %q", err, tt.want)
			}
		})
	}
	dir := t.TempDir()
	yaml := filepath.Join(dir, "th.yaml")
	os.WriteFile(yaml, []byte("default: {}\n"), 0o644)
	if _, err := LoadThresholds(yaml); err == nil || !strings.Contains(err.Error(), "JSON only") {
		t.Errorf("YAML file: err = %v, want a JSON-only message", err)
	}
}

// mma.sync cannot reach Hopper's or Blackwell's datasheet tensor rate: their built-in tensor
// gate is lower, and stays so under a file that does not name them.
func TestTensorGateOfMMASyncLimitedCards(t *testing.T) {
	set := BuiltinThresholds()
	if got := set.For("h200").Tensor.MinFraction; got != 0.55 {
		t.Errorf("h200 tensor gate %g, want 0.55", got)
	}
	if got := set.For("a100-80gb").Tensor.MinFraction; got != DefaultThresholds().Tensor.MinFraction {
		t.Errorf("a100-80gb tensor gate %g, want the default", got)
	}
	file, err := ParseThresholds([]byte(`{"default": {"read_bandwidth": {"min_fraction": 0.9}}, "gpus": {"h100-sxm": {"tensor": {"min_fraction": 0.6}}}}`), "test.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := file.For("h200"); got.Tensor.MinFraction != 0.55 || got.ReadBandwidth.MinFraction != 0.9 {
		t.Errorf("h200 under the file: tensor %g read %g, want 0.55 and the file's 0.9", got.Tensor.MinFraction, got.ReadBandwidth.MinFraction)
	}
	if got := file.For("h100-sxm").Tensor.MinFraction; got != 0.6 {
		t.Errorf("h100-sxm named by the file: tensor %g, want the file's 0.6", got)
	}
}

func TestThresholdsFileShapes(t *testing.T) {
	for in, want := range map[string]string{"": "t.json is empty: a thresholds file is a JSON object", "  \n": "is empty",
		"[1, 2]": "t.json holds a JSON array: a thresholds file is a JSON object", `"x"`: "holds a JSON string",
		`{"default": {"read_bandwidth": {"min_fraction": 0.9}, "read_bandwidth": {"min_fraction": 0.5}}}`: "t.json: default.read_bandwidth is given twice",
		`{"gpus": {"h100-sxm": {"tensor": {"min_fraction": 0.5, "min_fraction": 0.6}}}}`:                  "gpus.h100-sxm.tensor.min_fraction is given twice",
		`{"schema": "decodebench.thresholds/v1", "schema": "decodebench.thresholds/v1"}`:                  "schema is given twice"} {
		if _, err := ParseThresholds([]byte(in), "t.json"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}
