package model

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// Routing: how each family's router picks a token's experts and weighs them, as its modeling
// code does (the step, bench/step, runs it; bench/ref checks it):
//
//	mixtral, phimoe, custom   softmax over the experts, top k, renormalised (the zero values)
//	qwen3_moe                 softmax, top k, renormalised when norm_topk_prob (RawTopKWeights otherwise)
//	gpt_oss                   top k of the logits (router bias included), softmax over those k
//	llama4_text               top k of the logits, weight sigmoid(logit) on the expert's input
//	deepseek_v3, kimi_k2,     sigmoid scores; e_score_correction_bias added for the choice only;
//	glm4_moe                  the choice limited to topk_group of n_group groups (a group scored by
//	                          its two best biased scores); weights the chosen unbiased scores,
//	                          renormalised when norm_topk_prob, times routed_scaling_factor
//
// PhiMoE's sparsemixer is not modelled by the step (it is refused there).

// routingProblem says what is wrong with the routing fields, "" when nothing is.
func (s Shape) routingProblem() string {
	switch {
	case s.RouterScoring != "" && s.RouterScoring != "softmax" && s.RouterScoring != "sigmoid":
		return fmt.Sprintf("RouterScoring = %q: accepted are \"\" or softmax, and sigmoid", s.RouterScoring)
	case s.ExpertGroups < 0 || s.GroupsKept < 0:
		return fmt.Sprintf("ExpertGroups = %d, GroupsKept = %d: must be 0 or more", s.ExpertGroups, s.GroupsKept)
	case s.ExpertGroups > 1 && s.RouterScoring != "sigmoid":
		return fmt.Sprintf("ExpertGroups = %d: the group limit is for sigmoid scoring (RouterScoring %q)", s.ExpertGroups, s.RouterScoring)
	case s.ExpertGroups > 1 && (s.Experts%s.ExpertGroups != 0 || s.Experts/s.ExpertGroups < 2):
		return fmt.Sprintf("ExpertGroups = %d: must divide Experts = %d into groups of 2 or more", s.ExpertGroups, s.Experts)
	case s.ExpertGroups > 1 && (s.GroupsKept < 1 || s.GroupsKept > s.ExpertGroups || s.GroupsKept*(s.Experts/s.ExpertGroups) < s.ExpertsPerToken):
		return fmt.Sprintf("GroupsKept = %d: must be 1..ExpertGroups = %d and hold ExpertsPerToken = %d experts", s.GroupsKept, s.ExpertGroups, s.ExpertsPerToken)
	case s.RoutedScaling < 0 || math.IsNaN(s.RoutedScaling) || math.IsInf(s.RoutedScaling, 0):
		return fmt.Sprintf("RoutedScaling = %g: must be finite and 0 (meaning 1) or more", s.RoutedScaling)
	case s.SwiGLULimit < 0 || math.IsNaN(s.SwiGLULimit) || math.IsInf(s.SwiGLULimit, 0):
		return fmt.Sprintf("SwiGLULimit = %g: must be finite and 0 (meaning gpt-oss's 7) or more", s.SwiGLULimit)
	}
	return ""
}

// GroupLimited reports whether the router chooses within expert groups.
func (s Shape) GroupLimited() bool { return s.ExpertGroups > 1 }

// routing reads the router's scoring, groups, normalisation and scaling, and gpt-oss's
// swiglu_limit, with each config class's defaults.
func (c hfConfig) routing(arch hfArch, s *Shape) error {
	if c.has("swiglu_limit") {
		limit, err := c.number("swiglu_limit", 0)
		if err != nil {
			return err
		}
		if limit <= 0 {
			return c.errorf("swiglu_limit = %g: must be positive", limit)
		}
		s.SwiGLULimit = limit
	}
	switch arch.moe {
	case moeQwen3:
		norm, err := c.boolean("norm_topk_prob", false) // Qwen3MoeConfig's default
		if err != nil {
			return err
		}
		s.RawTopKWeights = !norm
	case moeLlama4:
		s.RouterScoring, s.RawTopKWeights = "sigmoid", true
	case moeDeepSeek:
		// Every published config states n_group, topk_group and routed_scaling_factor; one that
		// leaves them out is read as one group (no limit) and no scaling (DeepseekV3Config's own
		// defaults, 8 of 4 and 2.5, would not fit the small test configs people write).
		groups, kept, scaling := 1, 1, 1.0
		scoring, err := c.str("scoring_func", "sigmoid")
		if err != nil {
			return err
		}
		if scoring != "sigmoid" {
			return c.errorf("scoring_func = %q: %s routes by sigmoid scores (noaux_tc); accepted is sigmoid", scoring, s.Family)
		}
		if method, err := c.str("topk_method", "noaux_tc"); err != nil {
			return err
		} else if method != "noaux_tc" {
			return c.errorf("topk_method = %q: accepted is noaux_tc (DeepSeek-V3's biased, group-limited top k)", method)
		}
		if s.ExpertGroups, err = c.positiveInt("n_group", groups, false); err != nil {
			return err
		}
		if s.GroupsKept, err = c.positiveInt("topk_group", kept, false); err != nil {
			return err
		}
		if s.RoutedScaling, err = c.number("routed_scaling_factor", scaling); err != nil {
			return err
		}
		if s.RoutedScaling <= 0 {
			return c.errorf("routed_scaling_factor = %g: must be positive", s.RoutedScaling)
		}
		norm, err := c.boolean("norm_topk_prob", true)
		if err != nil {
			return err
		}
		s.RouterScoring, s.RawTopKWeights = "sigmoid", !norm
		if s.ExpertGroups == 1 {
			s.ExpertGroups, s.GroupsKept = 0, 0 // one group is no limit
		}
		if p := s.routingProblem(); p != "" {
			return c.errorf("n_group = %d, topk_group = %d: %s", s.ExpertGroups, s.GroupsKept, p)
		}
	}
	return nil
}

// number reads a finite JSON number; a missing key gives def.
func (c hfConfig) number(key string, def float64) (float64, error) {
	if !c.has(key) {
		return def, nil
	}
	text := string(bytes.TrimSpace(c.fields[key]))
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, c.errorf("%s = %s: must be a number", key, text)
	}
	return f, nil
}
