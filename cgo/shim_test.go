package cgo_test

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestShimCoversTheHeader keeps shim.c in step with decodebench.h: every function the header
// declares is resolved by the loader, typed in db_api and given a trampoline, and nothing else.
func TestShimCoversTheHeader(t *testing.T) {
	header, err := os.ReadFile("../kernels/decodebench.h")
	if err != nil {
		t.Fatal(err)
	}
	shimC, err := os.ReadFile("shim.c")
	if err != nil {
		t.Fatal(err)
	}
	shimH, err := os.ReadFile("shim.h")
	if err != nil {
		t.Fatal(err)
	}
	declared := names(regexp.MustCompile(`(?m)^(?:const\s+char\s*\*|int)\s*(db_\w+)\s*\(`), string(header))
	resolved := names(regexp.MustCompile(`X\((db_\w+)\)`), string(shimC))
	typed := names(regexp.MustCompile(`DBSHIM_FN\((db_\w+)\)`), string(shimH))
	if len(declared) < 20 {
		t.Fatalf("found only %d functions in decodebench.h: the pattern is stale", len(declared))
	}
	// The optional functions are looked up on first use (so a library built before them still
	// loads), not by the loader: launches.go, graph.go, mla.go, mla_step.go, quant.go and recurrent.go.
	var launches []byte
	for _, file := range []string{"launches.go", "graph.go", "mla.go", "mla_step.go", "quant.go", "recurrent.go"} {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		launches = append(launches, text...)
	}
	optional := map[string]bool{}
	for _, fn := range names(regexp.MustCompile(`const op = "(db_\w+)"`), string(launches)) {
		optional[fn] = true
	}
	required := declared[:0:0]
	for _, fn := range declared {
		if !optional[fn] {
			required = append(required, fn)
		}
	}
	if len(required)+len(optional) != len(declared) {
		t.Errorf("launches.go looks up functions decodebench.h does not declare: %v", optional)
	}
	declared = required
	for _, list := range []struct {
		what  string
		names []string
	}{{"resolved in shim.c", resolved}, {"typed in shim.h's db_api", typed}} {
		if strings.Join(list.names, " ") != strings.Join(declared, " ") {
			t.Errorf("functions declared in decodebench.h and %s differ:\n header: %v\n shim:   %v", list.what, declared, list.names)
		}
	}
	for _, fn := range declared {
		if fn == "db_abi_version" {
			continue // called once, inside dbshim_load
		}
		if !strings.Contains(string(shimC), "a->"+fn+"(") {
			t.Errorf("%s has no trampoline in shim.c", fn)
		}
	}
}

func names(re *regexp.Regexp, text string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	sort.Strings(out)
	return out
}
