package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/bench/sweep"
)

// newProgress draws the sweep's progress on w: a bar redrawn in place when w is a terminal
// (mode "auto" or "bar"), one line per configuration otherwise ("lines"), or nothing.
func newProgress(mode string, w *os.File, emulated bool) sweep.Progress {
	if mode == "auto" {
		mode = "lines"
		if term.IsTerminal(int(w.Fd())) {
			mode = "bar"
		}
	}
	return &progress{w: w, bar: mode == "bar", quiet: mode == "none", emulated: emulated,
		width: func() int { return terminalWidth(w) }, began: time.Now()}
}

// terminalWidth is f's width in columns as the terminal reports it (not $COLUMNS, which
// shells do not export), or 80 when f is not a terminal.
func terminalWidth(f *os.File) int {
	if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
		return w
	}
	return 80
}

// progress is the sweep's sweep.Progress on a terminal or a log. In bar mode every line it
// prints (each finished configuration with its two tokens/s, each note) goes above the bar and
// is wrapped to the terminal's width, so that no line ever wraps on its own and leaves a stale
// copy of the bar behind.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	bar      bool
	quiet    bool
	emulated bool
	width    func() int // the terminal's columns, asked at every draw (it may be resized)
	began    time.Time  // elapsed time and the ETA count from here: the probes included

	total    int
	done     int
	eta      float64
	what     string
	lastDraw time.Time
	planned  bool // Start was called: the probes are over
	stopped  bool // Stop was called: the bar is cleared for good, lines print plain
	pb       *progressbar.ProgressBar
	pbTotal  int // the total pb was made for; -1: the spinner of the probes
	pbCells  int
}

func (p *progress) Start(total int, eta float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total, p.eta, p.planned = total, eta, true
	if p.quiet {
		return
	}
	emu := ""
	if p.emulated {
		emu = " on the CPU emulator (times are not a speed)"
	}
	p.line(fmt.Sprintf("sweep: %d configuration(s) to measure%s, about %s", total, emu, duration(eta)))
}

func (p *progress) Measuring(done, total int, what string, eta float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done, p.total, p.what, p.eta = done, max(total, p.total), what, eta
	if p.bar && time.Since(p.lastDraw) > 100*time.Millisecond {
		p.draw()
	}
}

func (p *progress) Recorded(r sweep.Record, done, total int, eta float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done, p.total, p.eta = done, total, eta
	if p.quiet {
		return
	}
	p.line(recordLine(r, done, total, eta))
}

// RecordedStep prints an end-to-end step record as its line (above the bar).
func (p *progress) RecordedStep(r step.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.quiet {
		p.line("  whole step: " + stepLine(r))
	}
}

func (p *progress) Note(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.quiet {
		p.line("decodebench: " + msg)
	}
}

// Stop clears the bar for good: a note after it (an interrupt while the report is written)
// prints as a plain line and draws no bar again, which nothing would clear.
func (p *progress) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.pb != nil {
		p.pb.Clear()
		p.pb = nil
	}
}

// line prints a whole line, above the bar when there is one.
func (p *progress) line(s string) {
	if !p.bar || p.stopped {
		fmt.Fprintln(p.w, s)
		return
	}
	if p.pb != nil {
		p.pb.Clear()
	}
	for _, l := range wrap(s, p.width()-1) {
		fmt.Fprintln(p.w, l)
	}
	p.draw()
}

// The bar's fixed parts, as progressbar lays them out with the description at the line's
// end: "\r 42% [====>.....] " then the description and a space (barFixed columns besides the
// cells), or "\r| " then the description and a space for the spinner (spinnerFixed).
const (
	barFixed     = 11
	spinnerFixed = 4
)

// draw redraws the bar: " 25% [=====>...............] 12/48 1m02s, ETA 3m10s llama B=8 S=4096: attention".
// Before the plan (total 0: the probes) it is a spinner with what is measured.
func (p *progress) draw() {
	if p.stopped {
		return
	}
	width := p.width() - 1 // the last column would wrap on some terminals
	elapsed := time.Since(p.began).Seconds()
	if p.total == 0 {
		if p.planned { // nothing to measure: no bar
			return
		}
		p.ensure(-1, 0)
		p.pb.Describe(clip(fmt.Sprintf("measuring the ceilings (%s): %s", duration(elapsed), p.what), width-spinnerFixed))
		p.lastDraw = time.Now()
		return
	}
	cells := min(30, max(5, (width-barFixed)/4))
	p.ensure(p.total, cells)
	desc := fmt.Sprintf("%d/%d %s, ETA %s %s", p.done, p.total, duration(elapsed), duration(p.eta), p.what)
	p.pb.Describe(clip(desc, width-barFixed-cells)) // before Set: a finished bar draws no more
	p.pb.Set(p.done)
	p.lastDraw = time.Now()
}

// ensure makes the bar for total (-1: a spinner) and cells when the one drawn is not it.
func (p *progress) ensure(total, cells int) {
	if p.pb != nil && p.pbTotal == total && p.pbCells == cells {
		return
	}
	if p.pb != nil {
		p.pb.Clear()
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionUseANSICodes(true), // clear a line with ESC[2K, not spaces that could wrap
		progressbar.OptionSetTheme(progressbar.ThemeASCII),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionSetElapsedTime(false), // elapsed and ETA are the sweep's, in the description
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionSpinnerCustom([]string{"|", "/", "-", `\`}),
		// No timer of its own: a spinner with one redraws from a goroutine of its own, over
		// the lines printed above it and after it is dropped. The spinner turns at each draw.
		progressbar.OptionSetSpinnerChangeInterval(0),
	}
	if total > 0 {
		opts = append(opts, progressbar.OptionSetWidth(cells))
	}
	p.pb, p.pbTotal, p.pbCells = progressbar.NewOptions(total, opts...), total, cells
}

// clip cuts s to n columns (runes), marking the cut with "…".
func clip(s string, n int) string {
	if n < 1 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// wrap breaks s at spaces into lines of at most n runes (a word longer than n is cut), the
// continuations indented.
func wrap(s string, n int) []string {
	if n < 20 || utf8.RuneCountInString(s) <= n {
		return []string{s}
	}
	var out []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= n:
			line += " " + word
		default:
			out = append(out, line)
			line = "    " + word
		}
		for utf8.RuneCountInString(line) > n {
			r := []rune(line)
			out = append(out, string(r[:n]))
			line = "    " + string(r[n:])
		}
	}
	return append(out, line)
}

func recordLine(r sweep.Record, done, total int, eta float64) string {
	head := fmt.Sprintf("[%d/%d] %s B=%d S=%d: ", done, total, r.Model, r.Batch, r.Context)
	switch r.Status {
	case measure.StatusOK:
		s := fmt.Sprintf("%sstep %.4g ms, %.4g tok/s per request, %.4g tok/s per server", head, r.StepSeconds*1e3, r.PerRequestTokensPerSec, r.PerServerTokensPerSec)
		if r.RooflineFraction > 0 {
			s += fmt.Sprintf(", %.0f%% of the roofline", r.RooflineFraction*100)
		}
		if r.Throttled {
			s += " [THROTTLED: " + strings.Join(r.ThrottleReasons, ", ") + "]"
		}
		if r.Emulated {
			s += " (emulated)"
		}
		return s + "  ETA " + duration(eta)
	}
	return head + strings.ToUpper(r.Status) + ": " + r.Reason
}

// duration writes seconds as 1h02m, 3m10s or 12s; past 10000 hours (or not a number) it says
// so rather than overflow time.Duration into a negative time.
func duration(seconds float64) string {
	switch {
	case math.IsNaN(seconds) || seconds < 0:
		return "unknown"
	case seconds >= 1e4*3600:
		return "more than 10000h"
	}
	d := time.Duration(seconds * float64(time.Second)).Round(time.Second)
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}
