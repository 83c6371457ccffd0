package plots

import "fmt"

// Axis labels. Tokens/s are decimal (1k = 1000 tokens/s), context lengths binary
// (1k = 1024 tokens), as the field writes them; each axis says which.
const (
	batchLabelText      = "batch size (sequences)"
	contextLabelText    = "context length (tokens, 1k = 1024)"
	perServerLabelText  = "per-server tokens/s (1k = 1000)"
	perRequestLabelText = "per-request tokens/s (1k = 1000)"
	tokensLabelText     = "tokens/s (1k = 1000)"
)

// TokensVsBatch draws two panels side by side against the batch size (log2 axis): per-server
// tokens/s (the card's total rate) on the left and per-request tokens/s (one stream's speed) on
// the right. Series with the same Group (or Label) get the same colour in both panels and one
// legend entry. A tokens/s axis is logarithmic when its values span more than 100x, linear from
// zero otherwise.
func TokensVsBatch(c Chart, perServer, perRequest []Series, base string) ([]string, error) {
	const what = "TokensVsBatch"
	server, err := prepareCurves(what+": per-server", perServer, true)
	if err != nil {
		return nil, err
	}
	request, err := prepareCurves(what+": per-request", perRequest, true)
	if err != nil {
		return nil, err
	}
	if countPoints(server) == 0 {
		return nil, fmt.Errorf("plots: %s: per-server panel: %w", what, ErrNothingToDraw)
	}
	if countPoints(request) == 0 {
		return nil, fmt.Errorf("plots: %s: per-request panel: %w", what, ErrNothingToDraw)
	}
	st := newStyler(server, request)
	left, err := linePanel("Per-server throughput", axisSpec{label: batchLabelText, kind: batchAxis},
		axisSpec{label: perServerLabelText, kind: rateAxis, fromZero: true}, server, st, false)
	if err != nil {
		return nil, err
	}
	right, err := linePanel("Per-request speed", axisSpec{label: batchLabelText, kind: batchAxis},
		axisSpec{label: perRequestLabelText, kind: rateAxis, fromZero: true}, request, st, false)
	if err != nil {
		return nil, err
	}
	f := newFigure(c)
	f.panels = append(f.panels, left, right)
	addSeriesLegend(&f.legend, st, server, request)
	return f.save(base)
}

// Tradeoff draws per-server tokens/s (y) against per-request tokens/s (x), one curve per
// series (typically one per context length) in the order of its points (typically rising
// batch). Series.PointLabels (such as "B=8") are written next to their points where they fit.
func Tradeoff(c Chart, series []Series, base string) ([]string, error) {
	const what = "Tradeoff"
	curves, err := prepareCurves(what, series, false)
	if err != nil {
		return nil, err
	}
	if countPoints(curves) == 0 {
		return nil, fmt.Errorf("plots: %s: %w", what, ErrNothingToDraw)
	}
	st := newStyler(curves)
	// Per-server tokens/s grows with the batch, from a few hundred to tens of thousands: a log
	// axis past 10x keeps the long-context curves off the floor. Per-request speed changes
	// less and is read best linearly, without a zero that would empty half the panel.
	p, err := linePanel("", axisSpec{label: perRequestLabelText, kind: rateAxis},
		axisSpec{label: perServerLabelText, kind: rateAxis, logAbove: 10}, curves, st, true)
	if err != nil {
		return nil, err
	}
	f := newFigure(c)
	f.panels = append(f.panels, p)
	addSeriesLegend(&f.legend, st, curves)
	return f.save(base)
}

// TokensVsContext draws tokens/s against the context length (log2 axis), one curve per series
// (typically one per batch size). The y axis reads "tokens/s" unless Chart.ValueLabel says
// which level it is.
func TokensVsContext(c Chart, series []Series, base string) ([]string, error) {
	const what = "TokensVsContext"
	curves, err := prepareCurves(what, series, true)
	if err != nil {
		return nil, err
	}
	if countPoints(curves) == 0 {
		return nil, fmt.Errorf("plots: %s: %w", what, ErrNothingToDraw)
	}
	yLabel := tokensLabelText
	if c.ValueLabel != "" {
		yLabel = c.ValueLabel
	}
	st := newStyler(curves)
	p, err := linePanel("", axisSpec{label: contextLabelText, kind: contextAxis},
		axisSpec{label: yLabel, kind: rateAxis, fromZero: true}, curves, st, false)
	if err != nil {
		return nil, err
	}
	f := newFigure(c)
	f.panels = append(f.panels, p)
	addSeriesLegend(&f.legend, st, curves)
	return f.save(base)
}
