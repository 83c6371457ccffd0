package units

import (
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "500ms", want: 500 * time.Millisecond}, {in: " 2s", want: 2 * time.Second}, {in: "1m30s", want: 90 * time.Second},
		{in: "0", want: 0}, {in: "5", bad: true}, {in: "0.5", bad: true}, {in: "2 s", bad: true}, {in: "", bad: true}, {in: "fast", bad: true},
	} {
		got, err := ParseDuration(tc.in)
		switch {
		case tc.bad && (err == nil || !strings.Contains(err.Error(), "e.g. 500ms or 2s")):
			t.Errorf("ParseDuration(%q) = %v, %v; want the error with its example", tc.in, got, err)
		case !tc.bad && (err != nil || got != tc.want):
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseFraction(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		bad  bool
	}{
		{in: "3%", want: 0.03}, {in: "0.03", want: 0.03}, {in: "20 %", want: 0.2}, {in: "0", want: 0}, {in: "95%", want: 0.95},
		{in: "%", bad: true}, {in: "three", bad: true}, {in: "NaN", bad: true}, {in: "Inf%", bad: true}, {in: "", bad: true},
	} {
		got, err := ParseFraction(tc.in)
		switch {
		case tc.bad && (err == nil || !strings.Contains(err.Error(), "0.03 or a percentage such as 3%")):
			t.Errorf("ParseFraction(%q) = %v, %v; want the error with its example", tc.in, got, err)
		case !tc.bad && (err != nil || got < tc.want-1e-12 || got > tc.want+1e-12):
			t.Errorf("ParseFraction(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseQuantity(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		bad  bool
	}{
		{in: "20", want: 20}, {in: "5k", want: 5000}, {in: "2.5K", want: 2500}, {in: "1M", want: 1e6}, {in: " 2.50 ", want: 2.5},
		{in: "k", bad: true}, {in: "5m", bad: true}, {in: "5kk", bad: true}, {in: "NaN", bad: true}, {in: "", bad: true},
	} {
		got, err := ParseQuantity(tc.in)
		switch {
		case tc.bad && (err == nil || !strings.Contains(err.Error(), "e.g. 20, 2.5k or 1M")):
			t.Errorf("ParseQuantity(%q) = %v, %v; want the error with its example", tc.in, got, err)
		case !tc.bad && (err != nil || got != tc.want):
			t.Errorf("ParseQuantity(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
