// Package format writes rows with named columns in the output formats every command shares,
// after llama-bench's -o: an aligned text table, a Markdown table, CSV, one JSON array, or JSON
// Lines (one object a line). A command builds one Table and this package writes it, so that a
// column cannot appear in one format and be missing from another.
package format

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// The format names, as --format takes them.
const (
	Table = "table"
	MD    = "md"
	CSV   = "csv"
	JSON  = "json"
	JSONL = "jsonl"
)

// All is every format, in the order help lists them.
var All = []string{Table, MD, CSV, JSON, JSONL}

// Check refuses a name outside accepted with a one-line message naming both.
func Check(name string, accepted []string) error {
	for _, a := range accepted {
		if name == a {
			return nil
		}
	}
	return fmt.Errorf("--format %q: accepted are %s", name, strings.Join(accepted, ", "))
}

// Structured reports whether the format is for programs (JSON, JSON Lines, CSV) rather than
// for people: a command keeps its prose off standard output in these.
func Structured(name string) bool { return name == JSON || name == JSONL || name == CSV }

// Rows is a table: every row has one value per column, in the columns' order. A value is a
// string, a number, a bool or nil (printed empty, JSON null), or anything JSON encodes. A
// NaN or an infinity is a missing value too: empty, or null, never "NaN" or 0.
type Rows struct {
	Columns []string
	Rows    [][]any
}

// Add appends a row; it must have one value per column.
func (t *Rows) Add(values ...any) {
	if len(values) != len(t.Columns) {
		panic(fmt.Sprintf("format: a row of %d values for %d columns", len(values), len(t.Columns)))
	}
	t.Rows = append(t.Rows, values)
}

// FromRecords makes rows of JSON-encodable records: the columns are every key any record has,
// in the order they first appear (a struct's field order), so a key that one record omits is
// an empty cell there rather than a lost column.
func FromRecords[R any](records []R) (Rows, error) {
	var t Rows
	index := map[string]int{}
	var objects []map[string]json.RawMessage
	for _, r := range records {
		raw, err := json.Marshal(r)
		if err != nil {
			return t, err
		}
		keys, obj, err := orderedKeys(raw)
		if err != nil {
			return t, err
		}
		for _, k := range keys {
			if _, ok := index[k]; !ok {
				index[k] = len(t.Columns)
				t.Columns = append(t.Columns, k)
			}
		}
		objects = append(objects, obj)
	}
	for _, obj := range objects {
		row := make([]any, len(t.Columns))
		for k, v := range obj {
			row[index[k]] = v
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

// orderedKeys decodes one JSON object keeping its keys' order.
func orderedKeys(raw []byte) ([]string, map[string]json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, nil, fmt.Errorf("format: a record is not a JSON object: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var keys []string
	if _, err := dec.Token(); err != nil { // {
		return nil, nil, err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, nil, err
		}
	}
	return keys, obj, nil
}

// Write writes the rows in the named format.
func Write(w io.Writer, name string, t Rows) error {
	switch name {
	case Table:
		return writeTable(w, t)
	case MD:
		return writeMarkdown(w, t)
	case CSV:
		return writeCSV(w, t)
	case JSON:
		return writeJSON(w, t)
	case JSONL:
		return writeJSONL(w, t)
	}
	return Check(name, All)
}

// cell is a value as text for programs (csv): numbers as JSON writes them (the shortest
// digits that read back exactly), nil, JSON null, NaN and infinities empty (a missing value, never 0 or "NaN"), JSON
// strings unquoted, objects and arrays as compact JSON.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return ""
		}
		b, _ := json.Marshal(x) // shortest exact digits, and JSON's choice of exponent
		return string(b)
	case float32:
		return cell(float64(x))
	case *float64:
		if x == nil {
			return ""
		}
		return cell(*x)
	case json.RawMessage:
		var s string
		if json.Unmarshal(x, &s) == nil {
			return s
		}
		if string(x) == "null" {
			return ""
		}
		return string(x)
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

// Exact writes a number for programs: every digit (the shortest that reads back exactly), in
// JSON's notation, and "" for NaN or an infinity (a missing value).
func Exact(v float64) string { return cell(v) }

// humanCell is a value as text for people (table, md): a number rounded by Human, the rest as
// cell writes it.
func humanCell(v any) string {
	switch x := v.(type) {
	case float64:
		return Human(x)
	case float32:
		return Human(float64(x))
	case *float64:
		if x != nil {
			return Human(*x)
		}
	case json.RawMessage:
		if f, ok := jsonNumber(x); ok {
			return Human(f)
		}
	}
	return cell(v)
}

// jsonNumber is a JSON number's value; ok is false for any other JSON value.
func jsonNumber(raw json.RawMessage) (float64, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || !(t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(t), 64)
	return f, err == nil
}

// Human writes a number for people: a whole number in full (a batch, a byte count), any other
// to 4 significant digits, without an exponent from 0.0001 up and without trailing zeros
// (0.003351, 298.4, 3669, 0.25), and a
// missing value (NaN, an infinity) as "". The programs' formats keep every digit.
func Human(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return ""
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	a := math.Abs(v)
	if a < 1e-4 {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	decimals := max(3-int(math.Floor(math.Log10(a))), 0)
	text := strconv.FormatFloat(v, 'f', decimals, 64)
	if strings.Contains(text, ".") {
		text = strings.TrimRight(strings.TrimRight(text, "0"), ".")
	}
	return text
}

func writeTable(w io.Writer, t Rows) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	upper := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		upper[i] = strings.ToUpper(c)
	}
	fmt.Fprintln(tw, strings.Join(upper, "\t"))
	for _, row := range t.Rows {
		cells := make([]string, len(row))
		for i, v := range row {
			cells[i] = humanCell(v)
			if cells[i] == "" {
				cells[i] = "-"
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func writeMarkdown(w io.Writer, t Rows) error {
	rows := make([][]string, len(t.Rows))
	for r, row := range t.Rows {
		rows[r] = make([]string, len(row))
		for i, v := range row {
			rows[r][i] = humanCell(v)
		}
	}
	return Markdown(w, t.Columns, rows, nil)
}

func writeCSV(w io.Writer, t Rows) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(t.Columns); err != nil {
		return err
	}
	for _, row := range t.Rows {
		cells := make([]string, len(row))
		for i, v := range row {
			cells[i] = cell(v)
		}
		if err := cw.Write(cells); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// object is one row as a JSON object with its keys in the columns' order.
func object(columns []string, row []any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, c := range columns {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(c)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(finite(row[i]))
		if err != nil {
			return nil, fmt.Errorf("format: column %s: %w", c, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// finite is v for JSON: NaN and infinities, which JSON cannot hold, are null (missing).
func finite(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	case float32:
		return finite(float64(x))
	case *float64:
		if x != nil {
			return finite(*x)
		}
	}
	return v
}

func writeJSON(w io.Writer, t Rows) error {
	var b bytes.Buffer
	b.WriteString("[")
	for i, row := range t.Rows {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  ")
		o, err := object(t.Columns, row)
		if err != nil {
			return err
		}
		b.Write(o)
	}
	if len(t.Rows) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	_, err := w.Write(b.Bytes())
	return err
}

func writeJSONL(w io.Writer, t Rows) error {
	for _, row := range t.Rows {
		o, err := object(t.Columns, row)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(o, '\n')); err != nil {
			return err
		}
	}
	return nil
}
