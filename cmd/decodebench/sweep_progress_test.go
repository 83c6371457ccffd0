package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/sweep"
)

// screen is the least of a terminal that the bar's output needs: a grid of cols columns with
// the cursor, carriage return, line feed, erase in line (ESC[K, ESC[0K, ESC[2K) and the
// terminal's own wrap at the last column, which it counts: a line that wraps by itself leaves
// a stale copy of the bar behind when it is redrawn with "\r".
type screen struct {
	cols     int
	rows     [][]rune
	row, col int
	wraps    int
	unknown  []string
}

func newScreen(cols int) *screen { return &screen{cols: cols, rows: [][]rune{nil}} }

func (s *screen) put(r rune) {
	if s.col >= s.cols {
		s.wraps++
		s.newline()
	}
	line := s.rows[s.row]
	for len(line) <= s.col {
		line = append(line, ' ')
	}
	line[s.col] = r
	s.rows[s.row] = line
	s.col++
}

func (s *screen) newline() {
	s.row++
	s.col = 0
	if s.row == len(s.rows) {
		s.rows = append(s.rows, nil)
	}
}

func (s *screen) write(b []byte) {
	str := string(b)
	for i := 0; i < len(str); {
		switch c := str[i]; {
		case c == '\r':
			s.col = 0
			i++
		case c == '\n':
			s.newline()
			i++
		case c == 0x1b && i+1 < len(str) && str[i+1] == '[':
			j := i + 2
			for j < len(str) && (str[j] >= '0' && str[j] <= '9' || str[j] == ';') {
				j++
			}
			if j == len(str) {
				s.unknown = append(s.unknown, "unterminated escape")
				return
			}
			param, final := str[i+2:j], str[j]
			switch {
			case final == 'K' && (param == "" || param == "0"):
				if s.col < len(s.rows[s.row]) {
					s.rows[s.row] = s.rows[s.row][:s.col]
				}
			case final == 'K' && param == "2":
				s.rows[s.row] = nil
			default:
				s.unknown = append(s.unknown, fmt.Sprintf("ESC[%s%c", param, final))
			}
			i = j + 1
		default:
			r, n := utf8.DecodeRuneInString(str[i:])
			s.put(r)
			i += n
		}
	}
}

func (s *screen) text() string {
	var lines []string
	for _, r := range s.rows {
		lines = append(lines, strings.TrimRight(string(r), " "))
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// A sweep's progress in a pseudo-terminal of 80 columns: the probes' spinner, long notes,
// long kernel names and every record line stay within the width (the terminal never wraps a
// line by itself), each finished configuration prints its two tokens/s above the bar, and
// after Stop no bar is left on the screen, not even by a note after it (Ctrl-C while the
// report is written), which used to draw the bar again and leave it frozen there.
func TestProgressBarInPseudoTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: 80, Rows: 24}); err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	read := make(chan struct{})
	go func() { io.Copy(&raw, ptmx); close(read) }()

	p := newProgress("auto", tty, true).(*progress)
	if !p.bar {
		t.Fatalf("auto on a pseudo-terminal did not choose the bar")
	}
	long := strings.Repeat("attention b=256 q=64 kv=8 d=128 ctx=32768 ", 3)
	p.Measuring(0, 0, "read probe of 8.59 GB buffer, 1000 iterations", 0)
	p.Note("launch baseline: 2.11 µs per launch (empty kernel, median of 5 samples of 1000 launches back to back); EMULATED: the CPU emulator's, not a card's")
	p.Start(12, 250)
	for i := 0; i < 12; i++ {
		p.lastDraw = time.Time{}
		p.Measuring(i, 12, fmt.Sprintf("Llama-3.1-405B B=%d S=32768: %s", 1<<i, long), float64(250-20*i))
		rec := sweep.Record{Model: "Llama-3.1-405B-with-a-long-name", Batch: 1 << i, Context: 32768, Status: measure.StatusOK,
			StepSeconds: 0.0123, PerRequestTokensPerSec: 81.3, PerServerTokensPerSec: 81.3 * float64(int(1)<<i), RooflineFraction: 0.71,
			Emulated: true, Throttled: i == 5, ThrottleReasons: []string{"SW Power Cap", "HW Slowdown"}}
		if i == 7 {
			rec = sweep.Record{Model: rec.Model, Batch: rec.Batch, Context: rec.Context, Status: measure.StatusSkipped,
				Reason: "does not fit in memory: weights 810 GB + KV cache 137 GB (128 sequences x 32768 tokens) > 129 GB usable"}
		}
		p.Recorded(rec, i+1, 12, float64(230-20*i))
	}
	p.Stop()
	p.Note("interrupted (SIGINT): stopping after the measurement in flight")
	// Nothing may draw after Stop (a spinner's own timer, say): give it time to, then look.
	time.Sleep(350 * time.Millisecond)
	tty.Close()
	<-read

	out := raw.String()
	scr := newScreen(80)
	scr.write(raw.Bytes())
	if len(scr.unknown) > 0 {
		t.Errorf("escape sequences the test terminal does not know (extend it, or the bar changed): %v", scr.unknown)
	}
	if scr.wraps > 0 {
		t.Errorf("the terminal wrapped %d line(s) by itself: a line was wider than 80 columns\n%s", scr.wraps, scr.text())
	}
	for _, seg := range strings.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if plain := stripEscapes(seg); utf8.RuneCountInString(plain) > 79 {
			t.Errorf("a line of %d columns: %q", utf8.RuneCountInString(plain), plain)
		}
	}
	screenText := scr.text()
	for _, want := range []string{"B=2 S=32768: step 12.3 ms, 81.3 tok/s", "per request, 162.6 tok/s per server", "[12/12]", "SKIPPED: does not fit", "THROTTLED", "launch baseline",
		"decodebench: interrupted (SIGINT)"} {
		if !strings.Contains(screenText, want) {
			t.Errorf("the screen lacks %q:\n%s", want, screenText)
		}
	}
	for _, stale := range []string{"measuring the ceilings", "ETA 4m", "%  [", "[=="} {
		if strings.Contains(screenText, stale) {
			t.Errorf("a stale bar (%q) is left on the screen after Stop:\n%s", stale, screenText)
		}
	}
	// The bar was drawn (with elapsed time and the ETA) before it was cleared.
	if !strings.Contains(out, "ETA 4m10s") || !strings.Contains(out, "measuring the ceilings (0s): read probe") || !strings.Contains(out, "[=") {
		t.Errorf("the bar was never drawn with its ETA, or the probes' spinner never shown:\n%q", out)
	}
}

func stripEscapes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && !(s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z') {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Not a terminal (a pipe, a log file): plain lines, one per configuration, no escape sequence.
func TestProgressLinesWhenNotATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := newProgress("auto", w, false)
	p.Measuring(0, 0, "read probe", 0)
	p.Start(2, 10)
	p.Measuring(0, 2, "attention", 9)
	p.Recorded(sweep.Record{Model: "m", Batch: 1, Context: 1024, Status: measure.StatusOK, StepSeconds: 0.01, PerRequestTokensPerSec: 100, PerServerTokensPerSec: 100}, 1, 2, 5)
	p.Stop()
	w.Close()
	out, _ := io.ReadAll(r)
	if bytes.ContainsAny(out, "\x1b\r") {
		t.Errorf("escape sequences or carriage returns in a pipe: %q", out)
	}
	want := "sweep: 2 configuration(s) to measure, about 10s\n[1/2] m B=1 S=1024: step 10 ms, 100 tok/s per request, 100 tok/s per server  ETA 5s\n"
	if string(out) != want {
		t.Errorf("got %q\nwant %q", out, want)
	}
}

func TestWrapAndClip(t *testing.T) {
	for _, s := range []string{"short", strings.Repeat("word ", 40), strings.Repeat("x", 200) + " tail"} {
		for _, l := range wrap(s, 40) {
			if utf8.RuneCountInString(l) > 40 {
				t.Errorf("wrap(%q, 40) gave a line of %d", s, utf8.RuneCountInString(l))
			}
		}
	}
	if got := clip("µs µs µs", 5); got != "µs µ…" {
		t.Errorf("clip by runes: %q", got)
	}
}
