package model

import (
	"fmt"
	"github.com/decodebench/decodebench/bench/internal/textdist"
	"sort"
	"strings"
)

// Lookup finds a preset by name. Matching ignores case, the separators "-",
// "_", "." and spaces, a Hugging Face "org/" prefix, a leading "Meta-" and the
// variant suffixes -Instruct, -Chat, -hf, -it and -Base (they share the base
// model's shape), so llama3-8b, Llama-3-8B, meta-llama/Meta-Llama-3-8B-Instruct
// and google/gemma-2-9b-it all resolve. An unknown name gives an error listing
// the closest presets by edit distance.
func Lookup(name string) (Shape, error) {
	key := lookupKey(name)
	if key == "" {
		return Shape{}, fmt.Errorf("no model name given: %s", seeModelList)
	}
	for _, p := range presets {
		for _, k := range presetKeys(p.shape.Name, p.aliases) {
			if k == key {
				return p.shape, nil
			}
		}
	}
	return Shape{}, fmt.Errorf("unknown model %q: closest presets are %s; %s",
		name, strings.Join(closestPresets(key, 3), ", "), seeModelList)
}

const seeModelList = "`decodebench model list` shows all presets, or pass a config.json"

// ignoredTokens are name parts that do not change the shape.
var ignoredTokens = map[string]bool{"meta": true, "instruct": true, "chat": true, "hf": true, "it": true, "base": true}

// lookupKey reduces a name to lower-case alphanumerics, dropping an "org/"
// prefix and the ignoredTokens.
func lookupKey(name string) string {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	tokens := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return r == '-' || r == '_' || r == '.' || r == ' ' || r == '\t'
	})
	var b strings.Builder
	for _, t := range tokens {
		if !ignoredTokens[t] {
			b.WriteString(t)
		}
	}
	return b.String()
}

func presetKeys(name string, aliases []string) []string {
	keys := []string{lookupKey(name)}
	for _, a := range aliases {
		keys = append(keys, lookupKey(a))
	}
	return keys
}

// closestPresets names the n presets whose name or alias is nearest to key.
func closestPresets(key string, n int) []string {
	type candidate struct {
		name     string
		distance int
		order    int
	}
	candidates := make([]candidate, len(presets))
	for i, p := range presets {
		best := -1
		for _, k := range presetKeys(p.shape.Name, p.aliases) {
			if d := textdist.Levenshtein(key, k); best < 0 || d < best {
				best = d
			}
		}
		candidates[i] = candidate{p.shape.Name, best, i}
	}
	sort.Slice(candidates, func(i, j int) bool {
		if candidates[i].distance != candidates[j].distance {
			return candidates[i].distance < candidates[j].distance
		}
		return candidates[i].order < candidates[j].order
	})
	names := make([]string, 0, n)
	for _, c := range candidates[:min(n, len(candidates))] {
		names = append(names, c.name)
	}
	return names
}
