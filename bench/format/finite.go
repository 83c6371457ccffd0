package format

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
)

// WriteJSON writes v to w as indented JSON, after Finite has passed it: the guard every JSON
// writer of the commands goes through, so that a number gone to +Inf or NaN is one sentence
// naming its field, not encoding/json's "unsupported value" halfway through a file.
func WriteJSON(w io.Writer, v any) error {
	if err := Finite(v); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Finite returns an error naming the first float in v (by its JSON path) that JSON cannot hold:
// +Inf, -Inf or NaN. nil when every number is finite.
func Finite(v any) error {
	if path, bad, ok := firstNonFinite(reflect.ValueOf(v), "", 0); ok {
		if path == "" {
			path = "the value"
		}
		return fmt.Errorf("%s is %v, which JSON cannot hold: an input too large or a result that overflowed", strings.TrimPrefix(path, "."), bad)
	}
	return nil
}

// maxDepth bounds the walk (no JSON output here nests deeper; a cycle would never end).
const maxDepth = 64

// marshaler is what writes its own JSON (a float that writes NaN as a string, an Outcome that
// writes null): trusted, as encoding/json trusts it.
var marshaler = reflect.TypeFor[json.Marshaler]()

func firstNonFinite(v reflect.Value, path string, depth int) (string, float64, bool) {
	if !v.IsValid() || depth > maxDepth {
		return "", 0, false
	}
	if v.Type().Implements(marshaler) || (v.CanAddr() && v.Addr().Type().Implements(marshaler)) {
		return "", 0, false
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return path, f, true
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return firstNonFinite(v.Elem(), path, depth+1)
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return "", 0, false // []byte: base64, no floats
		}
		for i := range v.Len() {
			if p, f, ok := firstNonFinite(v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1); ok {
				return p, f, true
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if p, f, ok := firstNonFinite(iter.Value(), fmt.Sprintf("%s[%v]", path, iter.Key()), depth+1); ok {
				return p, f, true
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			field := t.Field(i)
			if !field.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = field.Name
			}
			sub := path + "." + name
			if field.Anonymous {
				sub = path
			}
			if p, f, ok := firstNonFinite(v.Field(i), sub, depth+1); ok {
				return p, f, true
			}
		}
	}
	return "", 0, false
}
