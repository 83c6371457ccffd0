// Package axes parses the value lists of a sweep's axes (batch sizes, context lengths, model
// dimensions) from the command line.
package axes

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/decodebench/decodebench/bench/internal/textdist"
)

// Syntax is the accepted list syntax in one line, for --help and for error messages.
const Syntax = `comma-separated items: N; A-B (every value); A-B*F (A, A*F, A*F*F, ... up to B, F >= 2); ` +
	`A-B+S (A, A+S, ... up to B, S >= 1); a k suffix multiplies by 1024 (32k = 32768); ` +
	`positive integers only, at most 10000 values; e.g. "1,8-64*2,100" or "1k-128k*2"`

// MaxValues is the most values one list may expand to.
const MaxValues = 10000

// MaxPoints is the most points the lists of one command line may span together: the product
// of their lengths (a batch list times a context list is that many rows to compute, hold and
// print, or configurations to measure). Each list alone may have MaxValues values, so the cap on
// each list does not bound the product: 10000 batches x 10000 contexts is 1e8 rows, enough to
// run the process out of memory. 100000 rows of predict are about 40 MB of JSON; 100000 sweep
// configurations are days of measuring.
const MaxPoints = 100000

// MaxValue is the largest value accepted, so that sizes derived from a value (a context times
// the KV bytes per token) stay far from integer overflow.
const MaxValue = 1<<31 - 1

// ParseIntList expands a list such as "1,2,4", "1-256*2" (1, 2, 4, ..., 256), "1-8" (1 to 8),
// "1-9+2" (1, 3, 5, 7, 9), "32k" (32768: k is 1024, as context lengths count tokens in powers
// of two) or "1,8-64*2,100" into its values, sorted and without duplicates. A range's end is
// included only when the progression lands on it: "1-100*2" stops at 64.
//
// It rejects zero, negative and non-integer values, empty items, a range whose end is below its
// start, a factor below 2 after '*', a step below 1 after '+', values above MaxValue and lists
// of more than MaxValues values. Errors name the item and end with Syntax.
func ParseIntList(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty list; accepted: %s", Syntax)
	}
	seen := map[int]bool{}
	for _, item := range strings.Split(s, ",") {
		values, err := parseItem(strings.TrimSpace(item))
		if err != nil {
			return nil, fmt.Errorf("item %q of %q: %v; accepted: %s", strings.TrimSpace(item), s, err, Syntax)
		}
		for _, v := range values {
			seen[v] = true
		}
		if len(seen) > MaxValues {
			return nil, fmt.Errorf("%q expands to more than %d values; accepted: %s", s, MaxValues, Syntax)
		}
	}
	out := make([]int, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil
}

// parseItem expands one item: N, A-B, A-B*F or A-B+S.
func parseItem(item string) ([]int, error) {
	if item == "" {
		return nil, fmt.Errorf("empty item")
	}
	if strings.HasPrefix(item, "-") {
		return nil, fmt.Errorf("negative values are not accepted")
	}
	startText, rest, isRange := strings.Cut(item, "-")
	if !isRange {
		if strings.ContainsAny(item, "*+") {
			return nil, fmt.Errorf("a step needs a range, as in 1-256*2 or 1-9+2")
		}
		v, err := parseValue(item)
		if err != nil {
			return nil, err
		}
		return []int{v}, nil
	}
	endText, op, stepText := rest, byte(0), ""
	if i := strings.IndexAny(rest, "*+"); i >= 0 {
		endText, op, stepText = rest[:i], rest[i], rest[i+1:]
	}
	start, err := parseValue(startText)
	if err != nil {
		return nil, fmt.Errorf("range start: %v", err)
	}
	end, err := parseValue(endText)
	if err != nil {
		return nil, fmt.Errorf("range end: %v", err)
	}
	if end < start {
		return nil, fmt.Errorf("range end %d is below its start %d", end, start)
	}
	step := 1
	if op != 0 {
		if step, err = parseValue(stepText); err != nil {
			return nil, fmt.Errorf("step after %q: %v", op, err)
		}
	}
	if op == '*' {
		if step < 2 {
			return nil, fmt.Errorf("factor %d after '*' must be at least 2", step)
		}
		var values []int
		for v := start; v <= end; v *= step { // v <= MaxValue and step <= MaxValue: no overflow in int64
			values = append(values, v)
		}
		return values, nil
	}
	if n := (end-start)/step + 1; n > MaxValues {
		return nil, fmt.Errorf("expands to %d values, more than %d", n, MaxValues)
	}
	var values []int
	for v := start; v <= end; v += step {
		values = append(values, v)
	}
	return values, nil
}

// parseValue reads a positive decimal integer with an optional k (x1024) suffix.
func parseValue(text string) (int, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return 0, fmt.Errorf("missing number")
	}
	digits, kilo := strings.CutSuffix(strings.ToLower(text), "k")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		if strings.HasPrefix(digits, "-") {
			return 0, fmt.Errorf("%q: negative values are not accepted", text)
		}
		return 0, fmt.Errorf("%q is not a whole number", text)
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || v > MaxValue {
		return 0, fmt.Errorf("%q is too large (at most %d)", text, MaxValue)
	}
	if kilo {
		v *= 1024
	}
	if v == 0 {
		return 0, fmt.Errorf("%q: values must be positive", text)
	}
	if v > MaxValue {
		return 0, fmt.Errorf("%q is too large (at most %d)", text, MaxValue)
	}
	return int(v), nil
}

// Axis is one list of a command line as the user gave it, for CheckPoints.
type Axis struct {
	Name   string // what the list is, as the user knows it: "--batch", "models"
	Values int    // how many values it expands to
}

// CheckPoints refuses axes whose product of lengths exceeds limit (MaxPoints, or a command's
// own smaller cap), before anything that size is built. what names a point ("rows",
// "configurations", "models"). The error names each axis with its length, the product and
// the limit.
func CheckPoints(limit int, what string, axes ...Axis) error {
	product, saturated := int64(1), false
	for _, a := range axes {
		v := int64(max(a.Values, 1))
		if product > math.MaxInt64/v {
			saturated = true
			break
		}
		product *= v
	}
	if !saturated && product <= int64(limit) {
		return nil
	}
	parts := make([]string, len(axes))
	for i, a := range axes {
		unit := "values"
		if a.Values == 1 {
			unit = "value"
		}
		parts[i] = fmt.Sprintf("%s (%d %s)", a.Name, a.Values, unit)
	}
	total := strconv.FormatInt(product, 10)
	if saturated {
		total = fmt.Sprintf("more than %d", int64(math.MaxInt64))
	}
	return fmt.Errorf("%s = %s %s, more than the %d one command may cover: shorten a list", strings.Join(parts, " x "), total, what, limit)
}

// Nearest is the known name closest to a mistyped one (--modle: model), or "" when none is
// close: within two edits, or a third of the name's length for longer names, or the one known
// name that starts with it.
func Nearest(name string, known []string) string {
	best, bestDist := "", -1
	for _, k := range known {
		if d := textdist.Levenshtein(name, k); bestDist < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" && bestDist <= max(2, len(name)/3) {
		return best
	}
	prefixed := ""
	for _, k := range known {
		if strings.HasPrefix(k, name) {
			if prefixed != "" {
				return ""
			}
			prefixed = k
		}
	}
	return prefixed
}
