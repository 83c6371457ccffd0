package plan

import (
	"errors"
	"fmt"
	"math"
)

// Request is what a plan is asked: the streaming target and, optionally, the traffic, the
// headroom and the price.
type Request struct {
	// MinRequestRate is the per-request tokens/s every stream must get.
	MinRequestRate float64 `json:"min_request_rate_tokens_per_s"`
	// The traffic, as requests per second of OutputTokens each, or as TokensPerSec output
	// tokens per second; none of them set: no GPU count.
	RequestsPerSec float64 `json:"requests_per_s,omitempty"`
	OutputTokens   float64 `json:"output_tokens,omitempty"`
	TokensPerSec   float64 `json:"tokens_per_s,omitempty"`
	// Headroom is the fraction of each server's rate kept spare (0.2: servers run at 80%).
	Headroom float64 `json:"headroom"`
	// PricePerGPUHour in any currency; 0: no cost.
	PricePerGPUHour float64 `json:"price_per_gpu_hour,omitempty"`
}

// Limits of a request: past them a plan's counts overflow an int (about 3.6e22 tokens/s once
// answered "1 server") and its costs leave float64. A trillion output tokens a second is
// thousands of times any fleet's traffic; a billion servers, or a billion a GPU-hour, likewise.
const (
	MaxTokensPerSec    = 1e12
	MaxServers         = 1e9
	MaxPricePerGPUHour = 1e9
	MaxMinRequestRate  = 1e9
)

// Validate refuses a request that cannot be planned, naming the field.
func (r Request) Validate() error {
	positive := func(v float64) bool { return v > 0 && !math.IsInf(v, 1) }
	demand, _ := r.Demand()
	switch {
	case !positive(r.MinRequestRate):
		return fmt.Errorf("minimum request rate %g: must be a positive number of tokens/s", r.MinRequestRate)
	case r.TokensPerSec != 0 && (r.RequestsPerSec != 0 || r.OutputTokens != 0):
		return errors.New("traffic given twice: as tokens per second and as requests per second; give one")
	case r.TokensPerSec != 0 && !positive(r.TokensPerSec):
		return fmt.Errorf("tokens per second %g: must be positive", r.TokensPerSec)
	case (r.RequestsPerSec != 0) != (r.OutputTokens != 0):
		return errors.New("requests per second and output tokens go together: give both, or tokens per second")
	case r.RequestsPerSec != 0 && (!positive(r.RequestsPerSec) || !positive(r.OutputTokens)):
		return fmt.Errorf("requests per second %g and output tokens %g: must be positive", r.RequestsPerSec, r.OutputTokens)
	case !(r.Headroom >= 0 && r.Headroom < 1):
		return fmt.Errorf("headroom %g: must be a fraction in [0, 1)", r.Headroom)
	case r.PricePerGPUHour != 0 && !positive(r.PricePerGPUHour):
		return fmt.Errorf("price per GPU-hour %g: must be positive", r.PricePerGPUHour)
	case r.MinRequestRate > MaxMinRequestRate:
		return fmt.Errorf("minimum request rate %g tokens/s: more than the %g a plan takes", r.MinRequestRate, float64(MaxMinRequestRate))
	case !(demand <= MaxTokensPerSec):
		return fmt.Errorf("traffic %g output tokens/s: more than the %g tokens/s a plan takes", demand, float64(MaxTokensPerSec))
	case r.PricePerGPUHour > MaxPricePerGPUHour:
		return fmt.Errorf("price per GPU-hour %g: more than the %g a plan takes", r.PricePerGPUHour, float64(MaxPricePerGPUHour))
	}
	return nil
}

// Demand is the output tokens per second the traffic asks for (false: no traffic given).
func (r Request) Demand() (float64, bool) {
	switch {
	case r.TokensPerSec > 0:
		return r.TokensPerSec, true
	case r.RequestsPerSec > 0:
		return r.RequestsPerSec * r.OutputTokens, true
	}
	return 0, false
}

// Option is one batch with what serving the traffic at it takes.
type Option struct {
	Point
	MeetsTarget bool `json:"meets_target"`
	// Servers at this batch for the traffic, each running at (1 - headroom) of its rate, and
	// GPUs = Servers x TP. Zero without traffic.
	Servers int `json:"servers,omitempty"`
	GPUs    int `json:"gpus,omitempty"`
	// CostPerMillionTokens is what the GPUs cost per million output tokens of this traffic
	// (GPUs x price / tokens per hour x 1e6); FullLoadCostPerMillionTokens the same for one
	// server kept busy at its whole per-server rate. Zero without a price.
	CostPerMillionTokens         float64 `json:"cost_per_million_tokens,omitempty"`
	FullLoadCostPerMillionTokens float64 `json:"full_load_cost_per_million_tokens,omitempty"`
}

// Plan is the answer.
type Plan struct {
	Frontier Frontier `json:"frontier"`
	Request  Request  `json:"request"`
	// DemandTokensPerSec is the traffic's output tokens per second (0: none given).
	DemandTokensPerSec float64 `json:"demand_tokens_per_s,omitempty"`
	// Chosen is the largest batch whose per-request rate meets the target.
	Chosen Option `json:"chosen"`
	// Neighbours are the known batches beside the chosen one, the smaller first.
	Neighbours []Option `json:"neighbours"`
	// AtRangeEnd: the target is met at the largest batch known, so a larger batch may meet it
	// too; the plan stops there rather than extrapolate, and its GPU count is an upper bound.
	AtRangeEnd bool   `json:"at_range_end"`
	Method     string `json:"method"`
	// Notes say what the frontier left out or how to read it (failed batches, throttling, an
	// emulated run, a prediction's defaults).
	Notes []string `json:"notes,omitempty"`
}

// UnreachableError is a target no batch of the frontier meets.
type UnreachableError struct {
	Target float64
	Best   Point
	Range  string
}

func (e UnreachableError) Error() string {
	return fmt.Sprintf("no batch reaches %s tokens/s per request: the best reachable is %s at batch %d (%s)",
		num(e.Target), num(e.Best.PerRequestTokensPerSec), e.Best.Batch, e.Range)
}

// Make plans r on f.
func Make(f Frontier, r Request) (Plan, error) {
	if err := r.Validate(); err != nil {
		return Plan{}, err
	}
	if len(f.Knots) == 0 {
		return Plan{}, errors.New("the frontier has no batch")
	}
	p := Plan{Frontier: f, Request: r, Method: methodText(f)}
	p.DemandTokensPerSec, _ = r.Demand()
	meets := func(pt Point) bool { return pt.PerRequestTokensPerSec >= r.MinRequestRate }

	// The highest knot that meets the target; the segment above it falls below the target
	// (or there is none), and the frontier is monotone within a segment, so the largest batch
	// that meets the target lies between that knot and the next.
	top := -1
	for i := len(f.Knots) - 1; i >= 0; i-- {
		if meets(f.Knots[i]) {
			top = i
			break
		}
	}
	if top < 0 {
		best := f.Knots[0]
		for _, k := range f.Knots {
			if k.PerRequestTokensPerSec > best.PerRequestTokensPerSec {
				best = k
			}
		}
		return Plan{}, UnreachableError{Target: r.MinRequestRate, Best: best, Range: f.RangeText()}
	}
	chosen := f.Knots[top]
	if top == len(f.Knots)-1 {
		p.AtRangeEnd = true
	} else {
		lo, hi := chosen.Batch, f.Knots[top+1].Batch // At(lo) meets, At(hi) does not
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			pt, err := f.At(mid)
			if err != nil {
				return Plan{}, err
			}
			if meets(pt) {
				lo, chosen = mid, pt
			} else {
				hi = mid
			}
		}
	}
	var err error
	if p.Chosen, err = p.option(chosen); err != nil {
		return Plan{}, err
	}
	below, above := top-1, top+1
	if chosen.Batch != f.Knots[top].Batch {
		below = top // the chosen batch lies strictly between knots top and top+1
	}
	for _, i := range []int{below, above} {
		if i < 0 || i >= len(f.Knots) {
			continue
		}
		o, err := p.option(f.Knots[i])
		if err != nil {
			return Plan{}, err
		}
		p.Neighbours = append(p.Neighbours, o)
	}
	return p, nil
}

// option is what serving the plan's traffic at pt takes; an error where that is more than
// MaxServers servers.
func (p Plan) option(pt Point) (Option, error) {
	o := Option{Point: pt, MeetsTarget: pt.PerRequestTokensPerSec >= p.Request.MinRequestRate}
	tp := max(p.Frontier.TP, 1)
	price := p.Request.PricePerGPUHour
	if price > 0 {
		o.FullLoadCostPerMillionTokens = price * float64(tp) / (pt.PerServerTokensPerSec * 3600) * 1e6
	}
	if d := p.DemandTokensPerSec; d > 0 {
		usable := pt.PerServerTokensPerSec * (1 - p.Request.Headroom)
		if servers := d / usable; !(servers <= MaxServers) {
			return o, fmt.Errorf("traffic %g tokens/s needs %.3g servers at batch %d (%s tokens/s each at headroom %g): more than the %g a plan counts",
				d, servers, pt.Batch, num(pt.PerServerTokensPerSec), p.Request.Headroom, float64(MaxServers))
		}
		o.Servers = ceilServers(d / usable)
		o.GPUs = o.Servers * tp
		if price > 0 {
			o.CostPerMillionTokens = float64(o.GPUs) * price / (d * 3600) * 1e6
		}
	}
	return o, nil
}

// ceilServers rounds a fractional server count up: 3.2 servers' worth of traffic needs 4. A
// quotient within 1e-9 above a whole number is that number (float noise, not traffic).
func ceilServers(x float64) int { return max(1, int(math.Ceil(x-1e-9))) }

func methodText(f Frontier) string {
	if f.Source == SourcePredicted {
		return "predicted: the roofline bound of every batch (datasheet bandwidth and tensor rate), up to the largest batch whose KV cache fits; a bound, not a measurement"
	}
	return "measured: " + Interpolation
}

// num writes a rate with three significant digits or as a whole number.
func num(v float64) string {
	if math.Abs(v) >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
