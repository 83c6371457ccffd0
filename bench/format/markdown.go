package format

import (
	"io"
	"strings"
)

// Markdown writes a Markdown table: the header, the separator, then a line a row. A "|" in a
// cell is escaped and a line break becomes a space, so a cell never splits the table; a row
// shorter than the header is padded with empty cells. right[i] aligns column i to the right
// (numbers); right may be nil or shorter than the header.
func Markdown(w io.Writer, header []string, rows [][]string, right []bool) error {
	var b strings.Builder
	b.WriteString("|")
	for _, c := range header {
		b.WriteString(" " + MarkdownCell(c) + " |")
	}
	b.WriteString("\n|")
	for i := range header {
		if i < len(right) && right[i] {
			b.WriteString(" ---: |")
		} else {
			b.WriteString(" --- |")
		}
	}
	b.WriteString("\n")
	for _, row := range rows {
		b.WriteString("|")
		for i := range header {
			c := ""
			if i < len(row) {
				c = row[i]
			}
			b.WriteString(" " + MarkdownCell(c) + " |")
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// MarkdownCell is s made safe for one cell of a Markdown table.
func MarkdownCell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}
