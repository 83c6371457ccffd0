package axes

import (
	"slices"
	"strings"
	"testing"
)

func TestParseIntList(t *testing.T) {
	tests := []struct {
		desc string
		in   string
		want []int
	}{
		{"single", "128", []int{128}},
		{"list", "1,2,4", []int{1, 2, 4}},
		{"spaces around items", " 1 , 2 ,4 ", []int{1, 2, 4}},
		{"unsorted with duplicates", "8,1,4,1,8", []int{1, 4, 8}},
		{"every value", "1-8", []int{1, 2, 3, 4, 5, 6, 7, 8}},
		{"one-value range", "5-5", []int{5}},
		{"geometric", "1-256*2", []int{1, 2, 4, 8, 16, 32, 64, 128, 256}},
		{"geometric stops before the end", "1-100*2", []int{1, 2, 4, 8, 16, 32, 64}},
		{"geometric x4", "1-64*4", []int{1, 4, 16, 64}},
		{"arithmetic", "1-9+2", []int{1, 3, 5, 7, 9}},
		{"arithmetic stops before the end", "1-10+2", []int{1, 3, 5, 7, 9}},
		{"k suffix", "1k", []int{1024}},
		{"upper-case K", "32K", []int{32768}},
		{"k range", "1k-8k*2", []int{1024, 2048, 4096, 8192}},
		{"k step", "1k-4k+1k", []int{1024, 2048, 3072, 4096}},
		{"mixed", "1,8-64*2,100", []int{1, 8, 16, 32, 64, 100}},
		{"overlapping items", "1-4,2-8*2", []int{1, 2, 3, 4, 8}},
		{"exactly the limit", "1-10000", nil}, // checked by length below
		{"largest value", "2147483647", []int{MaxValue}},
	}
	for _, tc := range tests {
		got, err := ParseIntList(tc.in)
		if err != nil {
			t.Errorf("%s: ParseIntList(%q): %v", tc.desc, tc.in, err)
			continue
		}
		if tc.want == nil {
			if len(got) != MaxValues || got[0] != 1 || got[len(got)-1] != MaxValues {
				t.Errorf("%s: got %d values", tc.desc, len(got))
			}
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: ParseIntList(%q) = %v, want %v", tc.desc, tc.in, got, tc.want)
		}
	}
}

func TestParseIntListErrors(t *testing.T) {
	tests := []struct {
		desc, in      string
		wantInMessage string
	}{
		{"empty", "", "empty list"},
		{"blank", "   ", "empty list"},
		{"empty item", "1,,2", `item ""`},
		{"trailing comma", "1,2,", `item ""`},
		{"zero", "0", "positive"},
		{"zero k", "0k", "positive"},
		{"zero start", "0-8", "positive"},
		{"negative", "-4", "negative"},
		{"negative end", "1--4", "negative"},
		{"fraction", "1.5", "not a whole number"},
		{"exponent", "1e3", "not a whole number"},
		{"hex", "0x10", "not a whole number"},
		{"plus sign", "+5", "needs a range"},
		{"word", "abc", "not a whole number"},
		{"reversed range", "8-1", "below its start"},
		{"reversed with k", "2k-1k", "below its start"},
		{"factor 1", "1-8*1", "at least 2"},
		{"factor 0", "1-8*0", "positive"},
		{"step 0", "1-8+0", "positive"},
		{"missing step", "1-8*", "missing number"},
		{"missing end", "1-", "missing number"},
		{"two operators", "1-8*2+1", "not a whole number"},
		{"step without range", "8*2", "needs a range"},
		{"two dashes", "1-4-8", "not a whole number"},
		{"too large", "2147483648", "too large"},
		{"too large with k", "2097152k", "too large"},
		{"huge", "99999999999999999999999", "too large"},
		{"too many from one range", "1-10001", "more than 10000"},
		{"too many in all", "1-10000,20000", "more than 10000"},
		{"too many, huge range", "1-2147483647", "more than 10000"},
	}
	for _, tc := range tests {
		got, err := ParseIntList(tc.in)
		if err == nil {
			t.Errorf("%s: ParseIntList(%q) = %v, want an error", tc.desc, tc.in, got)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.wantInMessage) || !strings.HasSuffix(msg, Syntax) {
			t.Errorf("%s: error %q should say %q and end with the syntax", tc.desc, msg, tc.wantInMessage)
		}
	}
}

func TestSyntaxExamplesParse(t *testing.T) {
	for _, example := range []string{"1,8-64*2,100", "1k-128k*2", "32k"} {
		if !strings.Contains(Syntax, example) {
			t.Errorf("Syntax lost its example %q", example)
		}
		if _, err := ParseIntList(example); err != nil {
			t.Errorf("example %q: %v", example, err)
		}
	}
}

func TestCheckPoints(t *testing.T) {
	batch, context := Axis{"--batch", 10000}, Axis{"--context", 10000}
	if err := CheckPoints(MaxPoints, "rows", Axis{"--batch", 9}, Axis{"--context", 3}); err != nil {
		t.Errorf("27 points: %v", err)
	}
	if err := CheckPoints(MaxPoints, "rows", Axis{"--batch", 1000}, Axis{"--context", 100}); err != nil {
		t.Errorf("exactly the cap: %v", err)
	}
	err := CheckPoints(MaxPoints, "rows", batch, context)
	if err == nil {
		t.Fatal("10000 x 10000 points accepted")
	}
	for _, want := range []string{"--batch (10000 values)", "--context (10000 values)", "= 100000000 rows", "100000 one command"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// Each axis within the cap, the product not: the check is on the product.
	if err := CheckPoints(MaxPoints, "rows", Axis{"--batch", 1001}, Axis{"--context", 100}); err == nil || !strings.Contains(err.Error(), "100100 rows") {
		t.Errorf("100100 points: %v", err)
	}
	// A product past int64 is still refused, and says so without overflowing.
	many := []Axis{batch, context, batch, context, batch, context}
	if err := CheckPoints(MaxPoints, "rows", many...); err == nil || !strings.Contains(err.Error(), "more than 9223372036854775807") {
		t.Errorf("1e24 points: %v", err)
	}
	if err := CheckPoints(64, "models", Axis{"--hidden", 8}, Axis{"--ffn", 9}, Axis{"--vocab", 1}); err == nil || !strings.Contains(err.Error(), "--vocab (1 value) = 72 models") {
		t.Errorf("a command's own cap of 64: %v", err)
	}
}

func TestNearest(t *testing.T) {
	known := []string{"model", "model-config", "min-time", "max-time", "min-request-rate", "tokens-per-s", "reserve"}
	for _, tc := range []struct{ typed, want string }{
		{"modle", "model"}, {"mdoel-config", "model-config"}, {"min-tme", "min-time"}, {"resrve", "reserve"},
		{"min-request", "min-request-rate"}, // the one name it begins
		{"tokens", "tokens-per-s"},
		{"min", ""},      // begins two names and is near neither
		{"zzzzzzzz", ""}, // near nothing
	} {
		if got := Nearest(tc.typed, known); got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.typed, got, tc.want)
		}
	}
}
