package format

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strings"
)

// Shape reads back a document Write wrote: its columns and its number of rows, or an error
// saying how it is malformed (a csv row of the wrong width, a json that does not parse, an md
// row with a cell too many). Tests of every command check their output with it.
func Shape(name, text string) (columns []string, rows int, err error) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	switch name {
	case CSV:
		recs, err := csv.NewReader(strings.NewReader(text)).ReadAll() // refuses rows of another width
		if err != nil || len(recs) == 0 {
			return nil, 0, fmt.Errorf("csv: %d records, %v", len(recs), err)
		}
		return recs[0], len(recs) - 1, nil
	case JSON:
		var objs []json.RawMessage
		if err := json.Unmarshal([]byte(text), &objs); err != nil {
			return nil, 0, fmt.Errorf("json: %w", err)
		}
		return objectsShape(objs, true)
	case JSONL:
		var objs []json.RawMessage
		for _, l := range lines {
			if l == "" {
				continue
			}
			if !json.Valid([]byte(l)) {
				return nil, 0, fmt.Errorf("jsonl: not JSON: %q", l)
			}
			objs = append(objs, json.RawMessage(l))
		}
		return objectsShape(objs, false)
	case MD:
		if len(lines) < 2 || !strings.HasPrefix(lines[1], "| --- |") {
			return nil, 0, fmt.Errorf("md: no header and separator: %q", text)
		}
		split := func(l string) []string {
			l = strings.ReplaceAll(l, `\|`, "\x00")
			if !strings.HasPrefix(l, "| ") || !strings.HasSuffix(l, " |") {
				return nil
			}
			cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(l, "| "), " |"), " | ")
			for i := range cells {
				cells[i] = strings.ReplaceAll(cells[i], "\x00", "|")
			}
			return cells
		}
		columns = split(lines[0])
		for _, l := range lines[1:] {
			if c := split(l); len(c) != len(columns) {
				return nil, 0, fmt.Errorf("md: %d cells in %q, want %d", len(c), l, len(columns))
			}
		}
		return columns, len(lines) - 2, nil
	case Table:
		return strings.Fields(lines[0]), len(lines) - 1, nil
	}
	return nil, 0, Check(name, All)
}

// objectsShape is the columns of JSON objects (every key, in the order they first appear)
// and their count. same: every object must have the same keys, as Write's do; JSON Lines
// streamed as records are measured may leave out keys a record does not have.
func objectsShape(objs []json.RawMessage, same bool) ([]string, int, error) {
	var columns []string
	seen := map[string]bool{}
	for i, o := range objs {
		keys, _, err := orderedKeys(bytes.TrimSpace(o))
		if err != nil {
			return nil, 0, err
		}
		if same && i > 0 && strings.Join(keys, ",") != strings.Join(columns, ",") {
			return nil, 0, fmt.Errorf("object %d has keys %v, the first %v", i, keys, columns)
		}
		for _, k := range keys {
			if !seen[k] {
				seen[k] = true
				columns = append(columns, k)
			}
		}
	}
	return columns, len(objs), nil
}
