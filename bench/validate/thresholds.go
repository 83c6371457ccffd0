package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/decodebench/decodebench/bench/fileio"
	"github.com/decodebench/decodebench/bench/roofline"
)

// Gates, by the name they carry in checks ("performance.<gate>", "outlier.<gate>"), reports
// and thresholds files.
const (
	GateReadBandwidth = "read_bandwidth" // read probe, B/s, against the datasheet bandwidth
	GateTensor        = "tensor"         // bf16 mma.sync probe, FLOP/s, against the datasheet dense rate
	GateLinearBatch1  = "linear_batch1"  // batch-1 decode linear, B/s, against the measured read bandwidth
	GateAttentionLong = "attention_long" // long-context decode attention, B/s, against the measured read bandwidth
	GateModelStep     = "model_step"     // reference model decode step, tokens/s, against its datasheet roofline bound
)

// Gates lists every gate in the order a report shows them.
var Gates = []string{GateReadBandwidth, GateTensor, GateLinearBatch1, GateAttentionLong, GateModelStep}

// GateThreshold is what a gate requires: at least MinFraction of its reference (the datasheet
// bandwidth or rate, the card's measured read bandwidth, or the roofline bound; see Gates), or,
// when MinValue is above 0, at least MinValue in the gate's own unit (B/s, FLOP/s, tokens/s),
// which then replaces the fraction. MinValue is how a thresholds file states the expectation
// for a card that has no spec row in bench/roofline.
type GateThreshold struct {
	MinFraction float64 `json:"min_fraction"`
	MinValue    float64 `json:"min_value,omitempty"`
}

// OutlierThreshold flags a card more than BelowMedian (a fraction: 0.05 = 5%) below the median
// of its identical peers on any gate, with Verdict.
type OutlierThreshold struct {
	BelowMedian float64 `json:"below_median"`
	Verdict     Verdict `json:"verdict"`
}

// HealthThresholds tune the health checks.
type HealthThresholds struct {
	// TemperatureMarginC: a card that came within this many °C of its slowdown temperature
	// during the run is a WARN; at or above it, a FAIL.
	TemperatureMarginC int `json:"temperature_margin_c"`
	// RetiredPagesFail: this many retired pages or more is a FAIL (NVIDIA's RMA criterion is
	// 60); fewer, but some, is a WARN.
	RetiredPagesFail int `json:"retired_pages_fail"`
	// PowerOverLimit: drawing more than (1 + this) x the enforced power limit is a WARN (the
	// power sensor or the limit is wrong).
	PowerOverLimit float64 `json:"power_over_limit"`
	// PowerLimitBelowDefault is the verdict for an enforced power limit below the card's
	// default (someone ran nvidia-smi -pl): WARN, or PASS where a site caps power on purpose.
	PowerLimitBelowDefault Verdict `json:"power_limit_below_default"`
	// CorrectedECCWarn: this many corrected ECC errors since the driver loaded, or more, is a
	// WARN (memory that keeps needing correction is wearing out). 100 is a first guess, not
	// yet set from a fleet: a healthy card corrects a handful, if any.
	CorrectedECCWarn int `json:"corrected_ecc_warn"`
}

// Thresholds are every number a verdict depends on, for one kind of card.
type Thresholds struct {
	ReadBandwidth GateThreshold    `json:"read_bandwidth"`
	Tensor        GateThreshold    `json:"tensor"`
	LinearBatch1  GateThreshold    `json:"linear_batch1"`
	AttentionLong GateThreshold    `json:"attention_long"`
	ModelStep     GateThreshold    `json:"model_step"`
	Outlier       OutlierThreshold `json:"outlier"`
	Health        HealthThresholds `json:"health"`
}

// DefaultThresholds are the built-in requirements, the same fractions for every kind of card;
// the references they are fractions of come from the card's bench/roofline row.
//
// The model step's 60% of the datasheet bound follows from the others: a card at exactly 85%
// of its datasheet bandwidth whose linear layers reach exactly 80% of that is at 68%, and a
// step's small kernels (the QKV and O projections of an 8B model move under 50 MB each, ~10 µs
// on an H100) lose a few percent more to launch gaps.
//
// The tensor probe is mma.sync: BuiltinThresholds lowers the tensor gate for the cards whose
// datasheet rate needs another instruction (mmaSyncTensorFloor).
func DefaultThresholds() Thresholds {
	return Thresholds{
		ReadBandwidth: GateThreshold{MinFraction: 0.85},
		Tensor:        GateThreshold{MinFraction: 0.70},
		LinearBatch1:  GateThreshold{MinFraction: 0.80},
		AttentionLong: GateThreshold{MinFraction: 0.75},
		ModelStep:     GateThreshold{MinFraction: 0.60},
		Outlier:       OutlierThreshold{BelowMedian: 0.05, Verdict: Warn},
		Health: HealthThresholds{
			TemperatureMarginC: 5, RetiredPagesFail: 60, PowerOverLimit: 0.05,
			PowerLimitBelowDefault: Warn, CorrectedECCWarn: 100,
		},
	}
}

// Gate returns the threshold of the named gate.
func (t Thresholds) Gate(name string) GateThreshold {
	switch name {
	case GateReadBandwidth:
		return t.ReadBandwidth
	case GateTensor:
		return t.Tensor
	case GateLinearBatch1:
		return t.LinearBatch1
	case GateAttentionLong:
		return t.AttentionLong
	case GateModelStep:
		return t.ModelStep
	}
	return GateThreshold{}
}

// Validate reports the first number that makes no sense, naming its field.
func (t Thresholds) Validate() error {
	for _, g := range Gates {
		th := t.Gate(g)
		if !(th.MinFraction >= 0 && th.MinFraction <= 1.5) {
			return fmt.Errorf("%s.min_fraction %g: want a fraction of the reference in 0..1.5 (0.85 = 85%%)", g, th.MinFraction)
		}
		if !(th.MinValue >= 0) {
			return fmt.Errorf("%s.min_value %g: want 0 (use min_fraction) or a positive value", g, th.MinValue)
		}
	}
	switch {
	case !(t.Outlier.BelowMedian > 0 && t.Outlier.BelowMedian < 1):
		return fmt.Errorf("outlier.below_median %g: want a fraction in (0, 1), such as 0.05 for 5%%", t.Outlier.BelowMedian)
	case t.Outlier.Verdict != Warn && t.Outlier.Verdict != Fail:
		return fmt.Errorf("outlier.verdict %q: want WARN or FAIL", t.Outlier.Verdict)
	case t.Health.TemperatureMarginC < 0:
		return fmt.Errorf("health.temperature_margin_c %d: want 0 or more", t.Health.TemperatureMarginC)
	case t.Health.RetiredPagesFail < 1:
		return fmt.Errorf("health.retired_pages_fail %d: want 1 or more", t.Health.RetiredPagesFail)
	case !(t.Health.PowerOverLimit >= 0):
		return fmt.Errorf("health.power_over_limit %g: want a fraction >= 0", t.Health.PowerOverLimit)
	case t.Health.CorrectedECCWarn < 1:
		return fmt.Errorf("health.corrected_ecc_warn %d: want 1 or more", t.Health.CorrectedECCWarn)
	case !t.Health.PowerLimitBelowDefault.Valid():
		return fmt.Errorf("health.power_limit_below_default %q: want PASS, WARN or FAIL", t.Health.PowerLimitBelowDefault)
	}
	return nil
}

// ThresholdSchema names the thresholds file format.
const ThresholdSchema = "decodebench.thresholds/v1"

// ThresholdSet holds the thresholds of every kind of card: Default, and per bench/roofline key
// the thresholds that differ.
type ThresholdSet struct {
	Default Thresholds            `json:"default"`
	ByGPU   map[string]Thresholds `json:"gpus,omitempty"`
	Source  string                `json:"source"` // "built-in" or the file they came from
}

// BuiltinThresholds is DefaultThresholds for every kind, but for the tensor gate of the kinds
// whose datasheet rate mma.sync cannot reach.
func BuiltinThresholds() ThresholdSet {
	return ThresholdSet{Default: DefaultThresholds(), ByGPU: builtinByGPU(DefaultThresholds()), Source: "built-in"}
}

// mmaSyncTensorFloor is the tensor gate of the cards whose datasheet dense rate is quoted for an
// instruction the probe does not use: Hopper's wgmma (mma.sync is reported at about two thirds
// of it) and Blackwell's tcgen05 (mma.sync, the Ampere-era instruction, further behind). A 70%
// gate would fail every healthy one of them. First guesses, not yet measured on a card: set
// them from a known-good card's `bench probe mma` (or give the probe a wgmma path).
var mmaSyncTensorFloor = map[string]float64{
	"h100-sxm": 0.55, "h100-pcie": 0.55, "h100-nvl": 0.55, "h200": 0.55, "h200-nvl": 0.55, "h20": 0.55,
	"b200": 0.35,
}

// builtinByGPU is base with the per-kind built-in exceptions applied.
func builtinByGPU(base Thresholds) map[string]Thresholds {
	by := map[string]Thresholds{}
	for key, floor := range mmaSyncTensorFloor {
		t := base
		t.Tensor.MinFraction = min(t.Tensor.MinFraction, floor)
		by[key] = t
	}
	return by
}

// For returns the thresholds of the card kind with this bench/roofline key ("" for a card
// without a row).
func (s ThresholdSet) For(specKey string) Thresholds {
	if t, ok := s.ByGPU[specKey]; ok {
		return t
	}
	return s.Default
}

// LoadThresholds reads a thresholds file (JSON; see docs/thresholds.example.json).
func LoadThresholds(path string) (ThresholdSet, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		return ThresholdSet{}, fmt.Errorf("%s: this build reads thresholds files in JSON only (see docs/thresholds.example.json)", path)
	}
	data, err := fileio.ReadInput(path, fileio.ConfigBytes)
	if err != nil {
		return ThresholdSet{}, err
	}
	return ParseThresholds(data, path)
}

// ParseThresholds reads a thresholds file:
//
//	{"schema": "decodebench.thresholds/v1",
//	 "default": {<Thresholds, any subset of fields>},
//	 "gpus": {"<roofline key or name>": {<Thresholds, any subset of fields>}}}
//
// Every field left out keeps its built-in value; a GPU's section starts from the file's
// default. An unknown field, GPU or schema is an error, so a misspelt threshold cannot be
// silently ignored.
func ParseThresholds(data []byte, source string) (ThresholdSet, error) {
	var file struct {
		Schema  string                     `json:"schema"`
		Comment any                        `json:"comment"`
		Default json.RawMessage            `json:"default"`
		GPUs    map[string]json.RawMessage `json:"gpus"`
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return ThresholdSet{}, fmt.Errorf("%s is empty: a thresholds file is a JSON object (see docs/thresholds.example.json)", source)
	}
	if key := duplicateKey(data); key != "" {
		return ThresholdSet{}, fmt.Errorf("%s: %s is given twice: JSON keeps only one of them, so say it once", source, key)
	}
	if err := strictDecode(data, &file); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "" {
			return ThresholdSet{}, fmt.Errorf("%s holds a JSON %s: a thresholds file is a JSON object (see docs/thresholds.example.json)", source, typeErr.Value)
		}
		return ThresholdSet{}, fmt.Errorf("%s: %w", source, err)
	}
	if file.Schema != "" && file.Schema != ThresholdSchema {
		return ThresholdSet{}, fmt.Errorf("%s: schema %q: this build reads %q", source, file.Schema, ThresholdSchema)
	}
	set := ThresholdSet{Default: DefaultThresholds(), Source: source}
	if len(file.Default) > 0 {
		if err := strictDecode(file.Default, &set.Default); err != nil {
			return ThresholdSet{}, fmt.Errorf("%s: default: %w", source, err)
		}
	}
	if err := set.Default.Validate(); err != nil {
		return ThresholdSet{}, fmt.Errorf("%s: default: %w", source, err)
	}
	// The built-in exceptions (mmaSyncTensorFloor) hold on top of the file's default for every
	// kind the file does not name; a kind the file names starts from the file's default alone.
	builtin := builtinByGPU(set.Default)
	for _, name := range slices.Sorted(maps.Keys(file.GPUs)) {
		if g, err := roofline.LookupGPU(name); err == nil {
			delete(builtin, g.Key)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(file.GPUs)) {
		g, err := roofline.LookupGPU(name)
		if err != nil {
			return ThresholdSet{}, fmt.Errorf("%s: gpus: %w", source, err)
		}
		if _, dup := set.ByGPU[g.Key]; dup {
			return ThresholdSet{}, fmt.Errorf("%s: gpus: %q and another entry are both %s", source, name, g.Key)
		}
		t := set.Default
		if err := strictDecode(file.GPUs[name], &t); err != nil {
			return ThresholdSet{}, fmt.Errorf("%s: gpus.%s: %w", source, name, err)
		}
		if err := t.Validate(); err != nil {
			return ThresholdSet{}, fmt.Errorf("%s: gpus.%s: %w", source, name, err)
		}
		if set.ByGPU == nil {
			set.ByGPU = map[string]Thresholds{}
		}
		set.ByGPU[g.Key] = t
	}
	for key, t := range builtin {
		if set.ByGPU == nil {
			set.ByGPU = map[string]Thresholds{}
		}
		set.ByGPU[key] = t
	}
	return set, nil
}

// duplicateKey finds the first key given twice in one object of data, as a dotted path
// ("default.read_bandwidth.min_fraction"); "" when there is none or data is not JSON (the
// decoder then says what is wrong).
func duplicateKey(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func(path string) (string, bool)
	walk = func(path string) (string, bool) {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				keyTok, err := dec.Token()
				if err != nil {
					return "", false
				}
				key, _ := keyTok.(string)
				full := key
				if path != "" {
					full = path + "." + key
				}
				if seen[key] {
					return full, true
				}
				seen[key] = true
				if dup, ok := walk(full); ok || dup != "" {
					return dup, ok
				}
			}
			dec.Token() // }
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if dup, ok := walk(fmt.Sprintf("%s[%d]", path, i)); ok {
					return dup, ok
				}
			}
			dec.Token() // ]
		}
		return "", false
	}
	dup, _ := walk("")
	return dup
}

// strictDecode decodes data onto v, refusing unknown fields and trailing data.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}
