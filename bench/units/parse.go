package units

// The parsers of the values a user types: a duration, a fraction or percentage, and a number
// with a k or M suffix. Every flag of decodebench that takes one reads it through these, so
// that "3%", "500ms" and "5k" mean the same wherever they are accepted and are refused with
// the same example.

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// DurationExample is what a duration error offers.
const DurationExample = "want a duration with a unit, e.g. 500ms or 2s"

// ParseDuration reads a duration with its unit (500ms, 2s, 1m30s; Go's syntax). A bare number
// is refused, 0 aside: "5" could be seconds or milliseconds, and a timing rule off by a
// thousand is worse than an error.
func ParseDuration(text string) (time.Duration, error) {
	text = strings.TrimSpace(text)
	d, err := time.ParseDuration(text)
	if err != nil {
		return 0, fmt.Errorf("%s", DurationExample)
	}
	return d, nil
}

// FractionExample is what a fraction error offers.
const FractionExample = "want a fraction such as 0.03 or a percentage such as 3%"

// ParseFraction reads a fraction given as a number (0.03) or a percentage (3%). NaN and the
// infinities are refused; the range each flag accepts is its caller's to check.
func ParseFraction(text string) (float64, error) {
	text = strings.TrimSpace(text)
	number, scale := text, 1.0
	if cut, ok := strings.CutSuffix(text, "%"); ok {
		number, scale = strings.TrimSpace(cut), 0.01
	}
	v, err := strconv.ParseFloat(number, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s", FractionExample)
	}
	return v * scale, nil
}

// QuantityExample is what a quantity error offers.
const QuantityExample = "want a number, optionally with k (x1000) or M (x1000000), e.g. 20, 2.5k or 1M"

// ParseQuantity reads a number with an optional k (x1e3) or M (x1e6) suffix: 5k is 5000. The
// units are decimal, as every rate decodebench prints; context lengths, which count tokens in
// powers of two, are lists (bench/axes) where k is 1024.
func ParseQuantity(text string) (float64, error) {
	text = strings.TrimSpace(text)
	number, scale := text, 1.0
	switch {
	case strings.HasSuffix(text, "k"), strings.HasSuffix(text, "K"):
		number, scale = text[:len(text)-1], 1e3
	case strings.HasSuffix(text, "M"):
		number, scale = text[:len(text)-1], 1e6
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(number), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s", QuantityExample)
	}
	return v * scale, nil
}
