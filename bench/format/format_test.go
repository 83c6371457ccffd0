package format

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

type record struct {
	Name  string  `json:"name"`
	Batch int     `json:"batch"`
	Rate  float64 `json:"rate"`
	Note  string  `json:"note,omitempty"`
}

// The shape of every format: each writes every column of every row.
func TestEveryFormatWritesEveryColumn(t *testing.T) {
	recs := []record{{"a", 1, 12.5, ""}, {"b|c", 64, 3e3, "late key"}, {"d,e", 2, 0.25, ""}}
	rows, err := FromRecords(recs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"name", "batch", "rate", "note"}
	if strings.Join(rows.Columns, ",") != strings.Join(want, ",") {
		t.Fatalf("columns %v, want %v (a key one record omits is still a column)", rows.Columns, want)
	}
	for _, name := range All {
		var b bytes.Buffer
		if err := Write(&b, name, rows); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		CheckShape(t, name, b.String(), want, len(recs))
	}
	if err := Check("xml", All); err == nil || !strings.Contains(err.Error(), `"xml"`) || !strings.Contains(err.Error(), "jsonl") {
		t.Errorf("Check(xml) = %v, want the value and the accepted names", err)
	}
}

// CheckShape fails t unless text reads back as the columns and n rows.
func CheckShape(t testing.TB, name, text string, columns []string, n int) {
	t.Helper()
	got, rows, err := Shape(name, text)
	if err != nil {
		t.Fatalf("%s: %v:\n%s", name, err, text)
	}
	if name == Table {
		got = lowerAll(got)
	}
	if strings.Join(got, ",") != strings.Join(columns, ",") || rows != n {
		t.Errorf("%s: columns %v and %d rows, want %v and %d:\n%s", name, got, rows, columns, n, text)
	}
}

func lowerAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = strings.ToLower(x)
	}
	return out
}

// People's formats round; programs' formats keep every digit; a missing value (nil, NaN, an
// infinity) is empty or null in every format, never 0 or "NaN".
func TestNumbersRoundedForPeopleAndMissingValuesEmpty(t *testing.T) {
	type rec struct {
		Batch   int      `json:"batch"`
		Step    float64  `json:"step_seconds"`
		Rate    float64  `json:"rate"`
		Bytes   float64  `json:"bytes"`
		Missing *float64 `json:"fraction"`
	}
	recs, err := FromRecords([]rec{{Batch: 64, Step: 0.0033507498666666665, Rate: 298.44065949178184, Bytes: 15009857536}})
	if err != nil {
		t.Fatal(err)
	}
	direct := Rows{Columns: recs.Columns}
	direct.Add(64, 0.0033507498666666665, 298.44065949178184, 15009857536.0, math.NaN())
	for _, rows := range []Rows{recs, direct} {
		for _, tc := range []struct{ format, want, not string }{
			{Table, "64  0.003351  298.4  15009857536  -", "0.00335074"},
			{MD, "| 64 | 0.003351 | 298.4 | 15009857536 |  |", "0.00335074"},
			{CSV, "64,0.0033507498666666665,298.44065949178184,15009857536,\n", "NaN"},
			{JSON, `{"batch":64,"step_seconds":0.0033507498666666665,"rate":298.44065949178184,"bytes":15009857536,"fraction":null}`, "NaN"},
			{JSONL, `"fraction":null}`, "NaN"},
		} {
			var b bytes.Buffer
			if err := Write(&b, tc.format, rows); err != nil {
				t.Fatalf("%s: %v", tc.format, err)
			}
			text := b.String()
			if tc.format == Table {
				text = strings.Join(strings.Fields(text), "  ")
			}
			if !strings.Contains(text, tc.want) || strings.Contains(b.String(), tc.not) {
				t.Errorf("%s: want %q and no %q in\n%s", tc.format, tc.want, tc.not, text)
			}
		}
	}
}

func TestHuman(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {64, "64"}, {15009857536, "15009857536"}, {298.44065949178184, "298.4"}, {3668.94, "3669"},
		{0.0033507498666666665, "0.003351"}, {0.25, "0.25"}, {1.99999, "2"}, {-12.345, "-12.35"},
		{1.9511e-5, "1.951e-05"}, {math.NaN(), ""}, {math.Inf(1), ""},
	} {
		if got := Human(tc.v); got != tc.want {
			t.Errorf("Human(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
