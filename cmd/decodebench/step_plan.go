package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/decodebench/decodebench/bench/step"
)

// PlanFile is where `step --plan --out DIR` writes every call of every configuration.
const PlanFile = "plan.txt"

// planCall is one kind of call of a step: the same op, kernel and sizes, at the layers it runs.
type planCall struct {
	text   string // the call without its layer: "down_proj (linear) [1 x 14336] . [4096 x 14336]^T"
	layers []int  // -1: once a step, outside the layers
}

// summarizePlan folds a step's calls into one line per kind of call, in launch order of
// their first call: Llama-3-8B's 293 calls a step are 11 lines.
func summarizePlan(ops []step.Op) []planCall {
	var calls []planCall
	index := map[string]int{}
	for _, o := range ops {
		where := "step"
		if o.Layer >= 0 {
			where = "layer " + strconv.Itoa(o.Layer)
		}
		text := strings.TrimPrefix(o.String(), where+" ")
		i, ok := index[text]
		if !ok {
			i = len(calls)
			index[text] = i
			calls = append(calls, planCall{text: text})
		}
		calls[i].layers = append(calls[i].layers, o.Layer)
	}
	return calls
}

// layersText names the layers a kind of call runs at: "step", "layer 3", "layers 0-31",
// "layers 0-2, 5-7", or for more than three runs "30 layers, 0 to 60".
func layersText(layers []int) string {
	if len(layers) > 0 && layers[0] < 0 {
		if len(layers) == 1 {
			return "step"
		}
		return strconv.Itoa(len(layers)) + " x step"
	}
	if len(layers) == 1 {
		return "layer " + strconv.Itoa(layers[0])
	}
	var runs []string
	for i := 0; i < len(layers); {
		j := i
		for j+1 < len(layers) && layers[j+1] == layers[j]+1 {
			j++
		}
		if i == j {
			runs = append(runs, strconv.Itoa(layers[i]))
		} else {
			runs = append(runs, fmt.Sprintf("%d-%d", layers[i], layers[j]))
		}
		i = j + 1
	}
	if len(runs) > 3 {
		return fmt.Sprintf("%d layers, %d to %d", len(layers), layers[0], layers[len(layers)-1])
	}
	return "layers " + strings.Join(runs, ", ")
}

// writePlan writes one configuration's step: its calls folded by kind (counted, with the
// layers they run at), or with full every call in launch order.
func writePlan(w io.Writer, ops []step.Op, full bool) {
	if full {
		for i, o := range ops {
			fmt.Fprintf(w, "  %3d %s\n", i, o)
		}
		return
	}
	for _, c := range summarizePlan(ops) {
		fmt.Fprintf(w, "  %4d x %s %s\n", len(c.layers), layersText(c.layers), c.text)
	}
}
