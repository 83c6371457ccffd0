package format

import (
	"bytes"
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
