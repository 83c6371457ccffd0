package format

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// nanAsString writes NaN as a string, as a json.Marshaler may.
type nanAsString float64

func (f nanAsString) MarshalJSON() ([]byte, error) { return []byte(`"NaN"`), nil }

// The JSON guard names the field that is not a finite number and writes nothing; a finite
// value is written as encoding/json would.
func TestWriteJSONRefusesNonFinite(t *testing.T) {
	type option struct {
		Cost float64 `json:"cost_per_million_tokens"`
	}
	type plan struct {
		Chosen     option             `json:"chosen"`
		Neighbours []option           `json:"neighbours"`
		Ratios     map[string]float64 `json:"ratios"`
	}
	tests := []struct {
		desc string
		v    any
		want string // in the error; "" for none
	}{
		{"finite", plan{Chosen: option{1.5}}, ""},
		{"+Inf in a struct", plan{Chosen: option{math.Inf(1)}}, "chosen.cost_per_million_tokens is +Inf"},
		{"NaN in a slice", &plan{Neighbours: []option{{1}, {math.NaN()}}}, "neighbours[1].cost_per_million_tokens is NaN"},
		{"-Inf in a map", plan{Ratios: map[string]float64{"b/a": math.Inf(-1)}}, "ratios[b/a] is -Inf"},
		{"a float that writes its own JSON", []nanAsString{nanAsString(math.NaN())}, ""},
	}
	for _, tc := range tests {
		var b bytes.Buffer
		err := WriteJSON(&b, tc.v)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.desc, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v; want one naming %q", tc.desc, err, tc.want)
		case tc.want != "" && b.Len() > 0:
			t.Errorf("%s: wrote %q before refusing", tc.desc, b.String())
		}
	}
}
