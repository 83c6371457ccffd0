package model

import (
	"bytes"
	"strconv"
)

// pythonJSON turns the non-standard numbers Python's json module writes (allow_nan, its
// default) into standard JSON, so that a config.json saved by transformers reads as it was
// meant: Infinity and -Infinity become the largest float64 (Mamba-2's default time_step_limit
// is (0.0, inf)), NaN becomes null. Strings are left alone; everything else is copied as is.
func pythonJSON(data []byte) []byte {
	largest := []byte(strconv.FormatFloat(1.7976931348623157e308, 'g', -1, 64))
	tokens := []struct{ from, to []byte }{
		{[]byte("-Infinity"), append([]byte("-"), largest...)},
		{[]byte("Infinity"), largest},
		{[]byte("NaN"), []byte("null")},
	}
	if !bytes.Contains(data, []byte("Infinity")) && !bytes.Contains(data, []byte("NaN")) {
		return data
	}
	out := make([]byte, 0, len(data)+64)
	inString, escaped := false, false
next:
	for i := 0; i < len(data); i++ {
		b := data[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			out = append(out, b)
			continue
		}
		if b == '"' {
			inString = true
			out = append(out, b)
			continue
		}
		for _, t := range tokens {
			if bytes.HasPrefix(data[i:], t.from) {
				out = append(out, t.to...)
				i += len(t.from) - 1
				continue next
			}
		}
		out = append(out, b)
	}
	return out
}
