package report

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/decodebench/decodebench/bench/measure"
	"github.com/decodebench/decodebench/bench/sweep"
	"github.com/decodebench/decodebench/cgo"
	"github.com/decodebench/decodebench/plots"
)

// PeerCSVFile holds the linear peer comparison (`sweep --peer cublas`), one row per shape.
const PeerCSVFile = "linear-peer.csv"

// mmaCeilingName is the compute ceiling the sweep measures: the mma.sync m16n8k16 bf16 probe,
// which on Hopper is not the card's fastest tensor path (wgmma), so it is never called the
// card's tensor peak; the datasheet ratio beside it says how far below that it is.
const mmaCeilingName = "mma.sync bf16 ceiling"

// mmaCeilingText is the measured compute ceiling with its datasheet ratio:
// "mma.sync bf16 ceiling 612 TFLOP/s (62% of the datasheet's dense bf16 989)".
func mmaCeilingText(info sweep.RunInfo) string {
	if info.Measured.FLOPsPerSec <= 0 {
		return mmaCeilingName + " not measured"
	}
	return mmaCeilingName + " " + fmtNum(info.Measured.FLOPsPerSec/1e12) + " TFLOP/s" + datasheetRatio(info)
}

// datasheetRatio is " (62% of the datasheet's dense bf16 989 TFLOP/s)", or "" without a
// datasheet rate.
func datasheetRatio(info sweep.RunInfo) string {
	if info.Datasheet.FLOPsPerSec <= 0 || info.Measured.FLOPsPerSec <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%s of the datasheet's dense bf16 %s TFLOP/s)", pct(info.Measured.FLOPsPerSec/info.Datasheet.FLOPsPerSec), fmtNum(info.Datasheet.FLOPsPerSec/1e12))
}

// peerRow is one linear shape of ours beside the peer's measurement of it.
type peerRow struct {
	names   string // the step's kernels of this shape: "qkv_proj, o_proj"
	spec    measure.LinearSpec
	ours    sweep.Measurement
	peer    sweep.Measurement
	hasPeer bool
	ratio   float64 // peer median / ours; 0: n/a, see note
	note    string
}

// peerVariant is the run's peer, LinearAuto when it has none.
func peerVariant(info sweep.RunInfo) cgo.LinearVariant {
	v, err := cgo.ParseLinearVariant(info.Peer)
	if err != nil {
		return cgo.LinearAuto
	}
	return v
}

// peerRows pairs each linear measurement of ours in kernels.jsonl with the peer's of the same
// shape, in the order of the kernels' names and batches.
func peerRows(p sweep.Prior) []peerRow {
	peer := peerVariant(p.Info)
	if peer == cgo.LinearAuto {
		return nil
	}
	byKey := map[string]sweep.Measurement{}
	for _, m := range p.Kernels {
		byKey[m.Key] = m
	}
	names := map[string][]string{}
	for _, r := range p.Records {
		for _, k := range r.Kernels {
			if !slices.Contains(names[k.Key], k.Name) {
				names[k.Key] = append(names[k.Key], k.Name)
			}
		}
	}
	var rows []peerRow
	seen := map[string]bool{}
	for _, m := range p.Kernels {
		if m.Spec.Kind != measure.KindLinear || m.Spec.Linear == nil || m.Spec.Linear.Variant != cgo.LinearAuto || seen[m.Key] {
			continue
		}
		seen[m.Key] = true
		row := peerRow{names: strings.Join(names[m.Key], ", "), spec: *m.Spec.Linear, ours: m}
		ps, _ := sweep.PeerSpec(m.Spec, peer)
		row.peer, row.hasPeer = byKey[ps.Key()]
		switch {
		case !row.hasPeer:
			row.note = peer.String() + " not measured"
		case !row.peer.OK():
			row.note = peer.String() + " " + row.peer.Status + ": " + row.peer.Reason
		case !m.OK():
			row.note = "ours " + m.Status + ": " + m.Reason
		default:
			row.ratio = row.peer.Stats.Median / m.Stats.Median
		}
		rows = append(rows, row)
	}
	slices.SortStableFunc(rows, func(a, b peerRow) int {
		if c := cmp.Compare(a.names, b.names); c != 0 {
			return c
		}
		return cmp.Compare(a.spec.Batch, b.spec.Batch)
	})
	return rows
}

// peerSection is the report's comparison of our linear kernels with the peer's, shape by
// shape; the reason the peer could not run is said once when it is the same for every shape.
func peerSection(p sweep.Prior, rows []peerRow) plots.Section {
	peer := peerVariant(p.Info)
	s := plots.Section{Heading: "Linear kernels beside " + peerTitle(peer)}
	s.Paragraphs = append(s.Paragraphs, fmt.Sprintf("Every linear shape of the sweep was also run with the %s variant (%s), verified against the same float64 reference "+
		"and timed by the same code as ours, its operands rotated the same way. %s / ours is %s's median time over ours: above 1, our kernel is faster. "+
		"The steps, tokens/s and roofline fractions above are composed of our kernels only.", peer, peerTitle(peer), peerTitle(peer), peerTitle(peer)))
	common := ""
	for i, r := range rows {
		if i == 0 {
			common = r.note
		} else if r.note != common {
			common = ""
		}
	}
	if common != "" && len(rows) > 0 {
		s.Paragraphs = append(s.Paragraphs, peerTitle(peer)+" / ours is n/a for every shape: "+common+".")
	}
	t := plots.Table{Caption: "Per linear shape (M = rows of X; µs per call, medians)",
		Header: []string{"kernel", "M", "N", "K", "dtype", "our variant", "ours µs", peerTitle(peer) + " µs", peerTitle(peer) + " / ours", "note"}}
	for _, r := range rows {
		ours, theirs, ratio := "–", "–", "n/a"
		if r.ours.OK() {
			ours = fmtNum(r.ours.Stats.Median * 1e6)
		}
		if r.hasPeer && r.peer.OK() {
			theirs = fmtNum(r.peer.Stats.Median * 1e6)
		}
		if r.ratio > 0 {
			ratio = fmt.Sprintf("%.2f", r.ratio)
		}
		note := r.note
		if note == common {
			note = ""
		}
		t.Rows = append(t.Rows, []string{r.names, strconv.Itoa(r.spec.Batch), strconv.Itoa(r.spec.N), strconv.Itoa(r.spec.K), r.spec.DType.String(),
			orDash(r.ours.Plan.Variant), ours, theirs, ratio, note})
		t.RowClass = append(t.RowClass, "")
	}
	s.Tables = []plots.Table{t}
	return s
}

func peerTitle(v cgo.LinearVariant) string {
	if v == cgo.LinearCUBLAS {
		return "cuBLAS"
	}
	return v.String()
}

// PeerCSV renders the rows as linear-peer.csv.
func PeerCSV(rows []peerRow, peer cgo.LinearVariant) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.Write([]string{"kernels", "m", "n", "k", "dtype", "our_variant", "our_median_seconds", "peer", "peer_median_seconds", "peer_over_ours", "note"})
	num := func(ok bool, v float64) string {
		if !ok || v <= 0 {
			return ""
		}
		return strconv.FormatFloat(v, 'g', 8, 64)
	}
	for _, r := range rows {
		w.Write([]string{r.names, strconv.Itoa(r.spec.Batch), strconv.Itoa(r.spec.N), strconv.Itoa(r.spec.K), r.spec.DType.String(), r.ours.Plan.Variant,
			num(r.ours.OK(), r.ours.Stats.Median), peer.String(), num(r.hasPeer && r.peer.OK(), r.peer.Stats.Median), num(true, r.ratio), r.note})
	}
	w.Flush()
	return buf.Bytes()
}
