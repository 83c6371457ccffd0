package format

import (
	"strings"
	"testing"
)

func TestMarkdown(t *testing.T) {
	var b strings.Builder
	rows := [][]string{{"a|b", "1"}, {"line\nbreak"}}
	if err := Markdown(&b, []string{"name", "ms"}, rows, []bool{false, true}); err != nil {
		t.Fatal(err)
	}
	want := "| name | ms |\n| --- | ---: |\n| a\\|b | 1 |\n| line break |  |\n"
	if b.String() != want {
		t.Errorf("Markdown =\n%q\nwant\n%q", b.String(), want)
	}
}
