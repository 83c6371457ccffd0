package main

import (
	"fmt"
	"github.com/decodebench/decodebench/bench/measure"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/decodebench/decodebench/bench/step"
	"github.com/decodebench/decodebench/bench/sweep"
)

// newProgress draws the sweep's progress on w: a bar redrawn in place when w is a terminal
// (mode "auto" or "bar"), one line per configuration otherwise ("lines"), or nothing.
func newProgress(mode string, w *os.File, emulated bool) sweep.Progress {
	if mode == "auto" {
		mode = "lines"
		if isTerminal(w) {
			mode = "bar"
		}
	}
	p := &progress{w: w, bar: mode == "bar", quiet: mode == "none", emulated: emulated, width: terminalWidth()}
	return p
}

// isTerminal reports whether f is a character device (a terminal, not a pipe or a file).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func terminalWidth() int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n >= 40 {
		return n
	}
	return 100
}

type progress struct {
	mu       sync.Mutex
	w        io.Writer
	bar      bool
	quiet    bool
	emulated bool
	width    int

	total     int
	done      int
	eta       float64
	what      string
	started   time.Time
	lastDraw  time.Time
	barOnLine bool
}

func (p *progress) Start(total int, eta float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total, p.eta, p.started = total, eta, time.Now()
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
	if p.bar {
		if r.Status != measure.StatusOK || r.Throttled {
			p.line(recordLine(r, done, total, eta))
		}
		p.draw()
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

func (p *progress) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.barOnLine {
		fmt.Fprint(p.w, "\r\033[K")
		p.barOnLine = false
	}
}

// line prints a whole line, above the bar when there is one.
func (p *progress) line(s string) {
	if p.barOnLine {
		fmt.Fprint(p.w, "\r\033[K")
		p.barOnLine = false
	}
	fmt.Fprintln(p.w, s)
	if p.bar && p.total > 0 {
		p.draw()
	}
}

// draw redraws the bar: [#####-----] 12/48  ETA 3m10s  llama B=8 S=4096: attention
func (p *progress) draw() {
	const cells = 24
	filled := 0
	if p.total > 0 {
		filled = cells * p.done / p.total
	}
	bar := "[" + strings.Repeat("#", filled) + strings.Repeat("-", cells-filled) + "]"
	s := fmt.Sprintf("%s %d/%d  ETA %s  %s", bar, p.done, p.total, duration(p.eta), p.what)
	if p.total == 0 { // the probes, before the plan
		s = "measuring the ceilings: " + p.what
	}
	if r := []rune(s); len(r) > p.width-1 {
		s = string(r[:p.width-1])
	}
	fmt.Fprint(p.w, "\r\033[K"+s)
	p.barOnLine, p.lastDraw = true, time.Now()
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
