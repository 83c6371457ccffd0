package validate

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/decodebench/decodebench/bench/timing"
)

// FleetSchema names the fleet summary format that `decodebench fleet --summary` writes and
// --baseline reads.
const FleetSchema = "decodebench.fleet/v1"

// FleetCard is one card of the fleet as the summary keeps it.
type FleetCard struct {
	Host     string  `json:"host"`
	Index    int     `json:"index"`
	UUID     string  `json:"uuid"`
	Serial   string  `json:"serial,omitempty"`
	PCIBusID string  `json:"pci_bus_id"`
	Name     string  `json:"name"`
	Kind     string  `json:"kind"` // PeerKey: the spec row, or name and memory without one
	Verdict  Verdict `json:"verdict"`
	// Gates holds each measured gate's value (in its unit) and, where known, its fraction of
	// the reference and the fraction required.
	Gates map[string]FleetGate `json:"gates,omitempty"`
	// Findings are the card's FAIL and WARN checks.
	Findings []Finding `json:"findings,omitempty"`
}

// FleetGate is one gate of one card in the summary.
type FleetGate struct {
	Value            float64 `json:"value"`
	Unit             string  `json:"unit"`
	Fraction         float64 `json:"fraction,omitempty"`
	RequiredFraction float64 `json:"required_fraction,omitempty"`
	Required         float64 `json:"required,omitempty"`
	// Emulated values are no speed: plotted, but never compared (outliers, baseline).
	Emulated bool `json:"emulated,omitempty"`
}

// Finding is a check that did not pass, in short.
type Finding struct {
	ID      string  `json:"id"`
	Verdict Verdict `json:"verdict"`
	Message string  `json:"message"`
}

// FleetOutlier is a card more than the outlier fraction below the fleet median of its kind.
type FleetOutlier struct {
	Host   string  `json:"host"`
	Index  int     `json:"index"`
	UUID   string  `json:"uuid"`
	Kind   string  `json:"kind"`
	Gate   string  `json:"gate"`
	Unit   string  `json:"unit"`
	Value  float64 `json:"value"`
	Median float64 `json:"median"`
	Below  float64 `json:"below"` // fraction of the median
	Peers  int     `json:"peers"` // cards of the kind with this gate measured, this one included
}

// Regression is a card slower on a gate than in the baseline.
type Regression struct {
	Host   string  `json:"host"`
	Index  int     `json:"index"`
	UUID   string  `json:"uuid"`
	Kind   string  `json:"kind"`
	Gate   string  `json:"gate"`
	Unit   string  `json:"unit"`
	Before float64 `json:"before"`
	Now    float64 `json:"now"`
	Change float64 `json:"change"` // now / before - 1: -0.08 is 8% slower
}

// BoxError is a box whose report says it could not be validated at all.
type BoxError struct {
	Host  string `json:"host"`
	File  string `json:"file"`
	Error string `json:"error"`
}

// GateDistribution summarizes one gate over the cards of one kind.
type GateDistribution struct {
	Gate   string  `json:"gate"`
	Kind   string  `json:"kind"`
	Unit   string  `json:"unit"`
	Count  int     `json:"count"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	// RequiredFraction is the gate's threshold as a fraction of its reference (the median over
	// the cards, which normally share one), 0 when the thresholds gave an absolute value.
	RequiredFraction float64 `json:"required_fraction,omitempty"`
}

// FleetSummary is the fleet verdict: what `decodebench fleet` prints and --summary writes.
type FleetSummary struct {
	Schema      string    `json:"schema"`
	GeneratedAt time.Time `json:"generated_at"`
	Verdict     Verdict   `json:"verdict"`
	Boxes       int       `json:"boxes"`
	CardCount   int       `json:"card_count"`
	CardCounts  Counts    `json:"card_counts"` // cards by verdict
	Kinds       []string  `json:"kinds"`

	ExpectedNodes int      `json:"expected_nodes,omitempty"`
	MissingNodes  []string `json:"missing_nodes,omitempty"` // named when a hostfile lists the nodes
	MissingCount  int      `json:"missing_count"`

	BoxErrors []BoxError `json:"box_errors,omitempty"`
	// InterruptedBoxes are boxes whose latest report is INTERRUPTED: no verdict, and none of
	// their cards is counted.
	InterruptedBoxes []BoxError `json:"interrupted_boxes,omitempty"`
	// IdentityConflicts are card identities that cannot be trusted: one UUID in two places,
	// an empty UUID, one serial or bus id twice in a box. Each fails the fleet.
	IdentityConflicts []IdentityConflict `json:"identity_conflicts,omitempty"`
	FailingCards      []FleetCard        `json:"failing_cards,omitempty"`
	Outliers          []FleetOutlier     `json:"outliers,omitempty"`
	// Baseline comparison: Slower are regressions past the threshold; GoneCards were in the
	// baseline on a box that reported now, but are not among its cards.
	Baseline  string       `json:"baseline,omitempty"`
	Slower    []Regression `json:"slower,omitempty"`
	GoneCards []FleetCard  `json:"gone_cards,omitempty"`
	// GoneBoxes were in the baseline but gave no report now (an unreadable one is listed
	// under Unreadable instead): each fails the fleet.
	GoneBoxes []string `json:"gone_boxes,omitempty"`

	Distributions []GateDistribution `json:"distributions"`
	EmulatedBoxes []string           `json:"emulated_boxes,omitempty"`
	Duplicates    []string           `json:"duplicates,omitempty"` // reports of one host beyond its latest
	Unreadable    []string           `json:"unreadable,omitempty"` // *.json files that are not readable reports, with why
	// UnreadableNodes are the hostfile's nodes whose only report cannot be read.
	UnreadableNodes []string `json:"unreadable_nodes,omitempty"`
	Files           []string `json:"files"` // the reports read

	Cards []FleetCard `json:"cards"`
}

// FleetOptions tune the fleet analysis.
type FleetOptions struct {
	ExpectNodes int      // how many boxes should have reported (0: no check)
	Hosts       []string // the boxes that should have reported (a hostfile), if known
	// OutlierBelowMedian flags a card this fraction below its kind's fleet median (WARN).
	OutlierBelowMedian float64
	// SlowerBy flags a card this fraction slower on a gate than in Baseline.
	SlowerBy     float64
	Baseline     *FleetSummary
	BaselineName string
	Now          time.Time
}

// LoadedReport is a report and the file it came from.
type LoadedReport struct {
	Path   string
	Report Report
}

// shortHost is a host name without its domain, lower case, for matching a hostfile.
func shortHost(h string) string {
	h, _, _ = strings.Cut(strings.TrimSpace(h), ".")
	return strings.ToLower(h)
}

// AnalyzeFleet turns the reports of many boxes into the fleet verdict.
func AnalyzeFleet(loaded []LoadedReport, unreadable []UnreadableReport, o FleetOptions) FleetSummary {
	if o.OutlierBelowMedian <= 0 {
		o.OutlierBelowMedian = DefaultThresholds().Outlier.BelowMedian
	}
	if o.SlowerBy <= 0 {
		o.SlowerBy = 0.05
	}
	if o.Now.IsZero() {
		o.Now = time.Now().UTC()
	}
	s := FleetSummary{Schema: FleetSchema, GeneratedAt: o.Now, ExpectedNodes: o.ExpectNodes, Files: []string{}}
	for _, u := range unreadable {
		s.Unreadable = append(s.Unreadable, u.String())
	}

	// The latest report of each host.
	latest := map[string]LoadedReport{}
	for _, lr := range loaded {
		host := lr.Report.Hostname
		if prev, ok := latest[host]; ok {
			keep, drop := prev, lr
			if lr.Report.FinishedAt.After(prev.Report.FinishedAt) {
				keep, drop = lr, prev
			}
			latest[host] = keep
			s.Duplicates = append(s.Duplicates, fmt.Sprintf("%s: %s (older than %s)", host, drop.Path, keep.Path))
			continue
		}
		latest[host] = lr
	}
	hosts := slices.Sorted(maps.Keys(latest))
	s.Boxes = len(hosts)
	kinds := map[string]bool{}
	for _, host := range hosts {
		lr := latest[host]
		r := lr.Report
		s.Files = append(s.Files, lr.Path)
		if r.Verdict == Interrupted {
			// No verdict on this box: none of its cards counts, failing or passing.
			why := r.Interrupted
			if why == "" {
				why = "validate was interrupted"
			}
			s.InterruptedBoxes = append(s.InterruptedBoxes, BoxError{Host: host, File: lr.Path, Error: why})
			continue
		}
		if r.Emulated {
			s.EmulatedBoxes = append(s.EmulatedBoxes, host)
		}
		if r.Error != "" || len(r.Cards) == 0 {
			msg := r.Error
			if msg == "" {
				msg = "the report has no cards"
			}
			s.BoxErrors = append(s.BoxErrors, BoxError{Host: host, File: lr.Path, Error: msg})
		}
		for _, c := range r.Cards {
			fc := fleetCard(host, c)
			kinds[fc.Kind] = true
			s.Cards = append(s.Cards, fc)
			s.CardCounts.add(fc.Verdict)
			if fc.Verdict == Fail {
				s.FailingCards = append(s.FailingCards, fc)
			}
		}
		// Box-level failures (a missing GPU) count against the box as a card failure would.
		for _, ch := range r.Checks {
			if ch.Verdict == Fail {
				s.BoxErrors = append(s.BoxErrors, BoxError{Host: host, File: lr.Path, Error: ch.ID + ": " + ch.Message})
			}
		}
	}
	s.CardCount = len(s.Cards)
	s.Kinds = slices.Sorted(maps.Keys(kinds))
	s.missingNodes(hosts, unreadable, o)
	s.identityConflicts()
	s.fleetOutliers(o)
	s.distributions()
	if o.Baseline != nil {
		s.Baseline = o.BaselineName
		s.compareBaseline(*o.Baseline, hosts, unreadable, o.SlowerBy)
	}
	s.Verdict = s.verdict()
	return s
}

func fleetCard(host string, c Card) FleetCard {
	fc := FleetCard{Host: host, Index: c.Index, UUID: c.UUID, Serial: c.Serial, PCIBusID: c.PCIBusID,
		Name: c.Name, Kind: PeerKey(c), Verdict: c.Verdict}
	if !fc.Verdict.Valid() {
		fc.Verdict = verdictOf(c.Checks)
	}
	for _, g := range c.Gates {
		if g.Value > 0 {
			if fc.Gates == nil {
				fc.Gates = map[string]FleetGate{}
			}
			fc.Gates[g.Gate] = FleetGate{Value: g.Value, Unit: g.Unit, Fraction: g.Fraction, RequiredFraction: g.RequiredFraction,
				Required: g.Required, Emulated: g.Emulated}
		}
	}
	for _, ch := range c.Checks {
		if ch.Verdict != Pass {
			fc.Findings = append(fc.Findings, Finding{ID: ch.ID, Verdict: ch.Verdict, Message: ch.Message})
		}
	}
	implausibleGates(c, &fc)
	return fc
}

func (s *FleetSummary) missingNodes(reported []string, unreadable []UnreadableReport, o FleetOptions) {
	if len(o.Hosts) > 0 {
		seen := map[string]bool{}
		for _, h := range reported {
			seen[shortHost(h)] = true
		}
		damaged := map[string]bool{}
		for _, u := range unreadable {
			damaged[shortHost(u.Host)] = true
		}
		for _, h := range o.Hosts {
			switch {
			case seen[shortHost(h)]:
			case damaged[shortHost(h)]:
				s.UnreadableNodes = append(s.UnreadableNodes, h)
			default:
				s.MissingNodes = append(s.MissingNodes, h)
			}
		}
		s.MissingCount = len(s.MissingNodes)
		if s.ExpectedNodes == 0 {
			s.ExpectedNodes = len(o.Hosts)
		}
	}
	if o.ExpectNodes > 0 && s.Boxes < o.ExpectNodes {
		s.MissingCount = max(s.MissingCount, o.ExpectNodes-s.Boxes)
	}
}

// fleetOutliers compares every card with the fleet median of its kind on each gate.
func (s *FleetSummary) fleetOutliers(o FleetOptions) {
	for _, gate := range Gates {
		groups := map[string][]int{}
		for i, c := range s.Cards {
			if g, ok := c.Gates[gate]; ok && !g.Emulated {
				groups[c.Kind] = append(groups[c.Kind], i)
			}
		}
		for _, kind := range slices.Sorted(maps.Keys(groups)) {
			members := groups[kind]
			if len(members) < 2 {
				continue
			}
			values := make([]float64, len(members))
			for j, i := range members {
				values[j] = s.Cards[i].Gates[gate].Value
			}
			med := timing.Median(values)
			for j, i := range members {
				if below := BelowMedian(values[j], med); below > o.OutlierBelowMedian {
					c := s.Cards[i]
					s.Outliers = append(s.Outliers, FleetOutlier{Host: c.Host, Index: c.Index, UUID: c.UUID, Kind: kind,
						Gate: gate, Unit: gateUnit(gate), Value: values[j], Median: med, Below: below, Peers: len(members)})
				}
			}
		}
	}
	slices.SortStableFunc(s.Outliers, func(a, b FleetOutlier) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Index, b.Index), cmp.Compare(slices.Index(Gates, a.Gate), slices.Index(Gates, b.Gate)))
	})
}

func (s *FleetSummary) distributions() {
	s.Distributions = []GateDistribution{}
	for _, gate := range Gates {
		for _, kind := range s.Kinds {
			var values, required []float64
			for _, c := range s.Cards {
				if g, ok := c.Gates[gate]; ok && c.Kind == kind {
					values = append(values, g.Value)
					if g.RequiredFraction > 0 {
						required = append(required, g.RequiredFraction)
					}
				}
			}
			if len(values) == 0 {
				continue
			}
			s.Distributions = append(s.Distributions, GateDistribution{Gate: gate, Kind: kind, Unit: gateUnit(gate),
				Count: len(values), Min: slices.Min(values), Median: timing.Median(values), Max: slices.Max(values),
				RequiredFraction: timing.Median(required)})
		}
	}
}

// compareBaseline names the cards slower than in the baseline, the cards a box that reported
// has lost, and the boxes of the baseline that did not report at all.
//
// Cards are matched by (host, UUID): a UUID that two cards report must not let one card's
// numbers stand for the other's. Where one box reports a UUID twice, the baseline card is held
// against each of them.
func (s *FleetSummary) compareBaseline(base FleetSummary, hosts []string, unreadable []UnreadableReport, slowerBy float64) {
	type key struct{ host, uuid string }
	now := map[key][]FleetCard{}
	for _, c := range s.Cards {
		k := key{shortHost(c.Host), c.UUID}
		now[k] = append(now[k], c)
	}
	reported, damaged := map[string]bool{}, map[string]bool{}
	for _, h := range hosts {
		reported[shortHost(h)] = true
	}
	for _, u := range unreadable {
		damaged[shortHost(u.Host)] = true
	}
	for _, before := range base.Cards {
		host := shortHost(before.Host)
		matches := now[key{host, before.UUID}]
		if len(matches) == 0 {
			switch {
			case reported[host]:
				s.GoneCards = append(s.GoneCards, before)
			case !damaged[host] && !slices.Contains(s.GoneBoxes, before.Host) && !slices.ContainsFunc(s.MissingNodes, func(h string) bool { return shortHost(h) == host }):
				s.GoneBoxes = append(s.GoneBoxes, before.Host)
			}
			continue
		}
		for _, c := range matches {
			s.compareCard(before, c, slowerBy)
		}
	}
}

func (s *FleetSummary) compareCard(before, c FleetCard, slowerBy float64) {
	for _, gate := range Gates {
		b, okB := before.Gates[gate]
		n, okN := c.Gates[gate]
		if !okB || !okN || b.Value <= 0 || b.Emulated || n.Emulated {
			continue
		}
		if change := n.Value/b.Value - 1; change < -slowerBy {
			s.Slower = append(s.Slower, Regression{Host: c.Host, Index: c.Index, UUID: c.UUID, Kind: c.Kind,
				Gate: gate, Unit: gateUnit(gate), Before: b.Value, Now: n.Value, Change: change})
		}
	}
}

// verdict: FAIL for a failing card, a box that could not validate, a missing node, a card gone
// from its box, a box gone since the baseline or an identity conflict; INCOMPLETE, short of that, while a box gave no verdict
// (interrupted) or a report cannot be read; WARN for warnings, outliers, regressions or
// emulated reports; PASS otherwise. A fleet with no report at all fails.
func (s FleetSummary) verdict() Verdict {
	switch {
	case s.Boxes == 0, len(s.FailingCards) > 0, len(s.BoxErrors) > 0, s.MissingCount > 0, len(s.GoneCards) > 0,
		len(s.GoneBoxes) > 0, len(s.IdentityConflicts) > 0:
		return Fail
	case len(s.InterruptedBoxes) > 0, len(s.Unreadable) > 0:
		return Incomplete
	case s.CardCounts.Warn > 0, len(s.Outliers) > 0, len(s.Slower) > 0, len(s.EmulatedBoxes) > 0:
		return Warn
	}
	return Pass
}
