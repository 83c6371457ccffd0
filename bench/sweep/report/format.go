package report

import (
	"fmt"
	"math"
	"strconv"
)

// fmtNum writes a value with about three significant digits, no exponent for the sizes a
// report shows: 0.0123, 1.23, 123, 12345.
func fmtNum(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "–"
	case v == 0:
		return "0"
	}
	a := math.Abs(v)
	switch {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a >= 0.001:
		return strconv.FormatFloat(v, 'f', 3-int(math.Floor(math.Log10(a))), 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func fmtNumOrDash(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmtNum(v)
}

// pct writes a fraction as a percentage; an unknown (zero) fraction is a dash.
func pct(f float64) string {
	if f <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", f*100)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func mhz(v uint32) string {
	if v == 0 {
		return "?"
	}
	return strconv.FormatUint(uint64(v), 10)
}

func watts(w float64) string {
	if w <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f W", w)
}

func celsius(c int) string {
	if c == 0 {
		return "–"
	}
	return fmt.Sprintf("%d °C", c)
}

func onOff(on, known bool) string {
	switch {
	case !known:
		return "unknown (no NVML)"
	case on:
		return "enabled"
	}
	return "disabled"
}
