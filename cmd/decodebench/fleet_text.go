package main

import (
	"reflect"
	"strconv"
	"strings"
	"unicode"

	"github.com/decodebench/decodebench/bench/validate"
)

// printableText is s as a terminal may show it: unchanged when every rune is printable (spaces
// allowed), else Go-quoted ("node\n07" with its escapes), so that a newline in a report's
// hostname cannot forge a line of the verdict, nor an escape sequence reach the terminal.
func printableText(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// printableSummary is a copy of s whose every string (hostnames, UUIDs, serials, messages,
// file names: whatever the reports said) is printableText; the JSON output needs none of this,
// its encoder escapes.
func printableSummary(s validate.FleetSummary) validate.FleetSummary {
	v := reflect.New(reflect.TypeOf(s)).Elem()
	v.Set(reflect.ValueOf(s))
	printableStrings(v)
	return v.Interface().(validate.FleetSummary)
}

// printableStrings rewrites the strings under v in place, copying each slice first so that the
// caller's summary is left as it was. Maps are left alone: the summary's only map is a card's
// gates, keyed and united by decodebench's own names.
func printableStrings(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(printableText(v.String()))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				printableStrings(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.IsNil() || !v.CanSet() {
			return
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		v.Set(c)
		for i := range v.Len() {
			printableStrings(v.Index(i))
		}
	case reflect.Pointer:
		if !v.IsNil() && v.CanSet() {
			c := reflect.New(v.Type().Elem())
			c.Elem().Set(v.Elem())
			v.Set(c)
			printableStrings(c.Elem())
		}
	}
}
