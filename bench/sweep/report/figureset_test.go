package report

import (
	"errors"
	"fmt"
	"testing"

	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/plots"
)

// Both chartSet and formatCharts gather their figures through figureSet: a chart with
// nothing to draw is a note, any other error stops the report.
func TestFigureSet(t *testing.T) {
	var s figureSet
	if err := s.add(plots.Figure{Title: "drawn"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.add(plots.Figure{Title: "empty"}, nil, fmt.Errorf("roofline: %w", plots.ErrNothingToDraw)); err != nil {
		t.Fatalf("a chart with nothing to draw stops the report: %v", err)
	}
	broken := errors.New("disk full")
	if err := s.add(plots.Figure{Title: "broken"}, nil, broken); !errors.Is(err, broken) {
		t.Errorf("a failing chart returns %v, want %v", err, broken)
	}
	if len(s.figs) != 1 || s.figs[0].Title != "drawn" {
		t.Errorf("figures %+v: want only the drawn one", s.figs)
	}
	if len(s.notes) != 1 || s.notes[0] != "empty: nothing to draw" {
		t.Errorf("notes %q: want the empty chart named", s.notes)
	}

	var info sweep.RunInfo
	if tag := emulatedTag(info); tag != "" {
		t.Errorf("a card's run has titles led by %q", tag)
	}
	info.Backend.Emulated = true
	if tag := emulatedTag(info); tag != "[EMULATED, not a speed] " {
		t.Errorf("an emulated run's titles are led by %q", tag)
	}
}
