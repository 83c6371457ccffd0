package main

import (
	"encoding/json"
	"fmt"
	"testing"
)

// verify linear --weight-dtype: every format through the CLI, the report naming it.
func TestVerifyLinearWeightDTypes(t *testing.T) {
	useEmu(t)
	for _, c := range []struct {
		weights       string
		group         int
		batch, n, k   int
		dtype, varian string
	}{
		{"fp8", 0, 1, 7, 160, "bf16", "gemv"}, {"fp8-tensor", 0, 17, 9, 64, "fp16", "tiled"}, {"int8", 0, 3, 5, 48, "bf16", "auto"},
		{"int4", 64, 2, 9, 192, "fp16", "auto"}, {"int4-zp", 32, 5, 8, 96, "bf16", "auto"}, {"mxfp4", 0, 4, 3, 64, "bf16", "auto"},
	} {
		t.Run(c.weights, func(t *testing.T) {
			args := []string{"verify", "linear", "--backend", "emu", "--json", "--weight-dtype", c.weights,
				"--batch", fmt.Sprint(c.batch), "--n", fmt.Sprint(c.n), "--k", fmt.Sprint(c.k), "--dtype", c.dtype, "--variant", c.varian}
			if c.group > 0 {
				args = append(args, "--group-size", fmt.Sprint(c.group))
			}
			out, code, msg := runCLI(t, args...)
			var rep linearReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("exit %d (%s); output is not one JSON object: %v\n%s", code, msg, err, out)
			}
			if code != 0 || !rep.Passed {
				t.Fatalf("exit %d (%s): %s", code, msg, out)
			}
			wantGroup := c.group
			if c.weights == "mxfp4" {
				wantGroup = 32
			}
			if rep.WeightFormat != c.weights || rep.GroupSize != wantGroup {
				t.Errorf("report names weights %q group %d, want %q group %d", rep.WeightFormat, rep.GroupSize, c.weights, wantGroup)
			}
			if c.varian == "auto" && (c.batch <= 4) != (rep.Variant == "gemv") {
				t.Errorf("batch %d ran %s", c.batch, rep.Variant)
			}
		})
	}
}

// A format a shape does not take is a one-line usage error naming both, before any library is
// looked for; so are unknown formats and groups.
func TestWeightDTypeUsageErrors(t *testing.T) {
	hermetic(t, "")
	base := []string{"--backend", "emu", "--batch", "1", "--n", "8"}
	cases := []struct {
		desc string
		args []string
		want []string
	}{
		{"group does not fit k", []string{"--k", "4128", "--weight-dtype", "int4", "--group-size", "64"}, []string{"int4", "k 4128", "group size 64"}},
		{"default group 128 does not fit k", []string{"--k", "4128", "--weight-dtype", "int4-zp"}, []string{"int4-zp", "k 4128", "group size 128"}},
		{"group not offered", []string{"--k", "4096", "--weight-dtype", "int4", "--group-size", "96"}, []string{"96", "32, 64 or 128"}},
		{"mxfp4 group", []string{"--k", "4096", "--weight-dtype", "mxfp4", "--group-size", "64"}, []string{"64", "mxfp4"}},
		{"group on a per-channel format", []string{"--k", "4096", "--weight-dtype", "int8", "--group-size", "32"}, []string{"int8", "--group-size 32"}},
		{"k not whole vectors", []string{"--k", "40", "--weight-dtype", "fp8"}, []string{"fp8", "k 40", "16"}},
		{"unknown format", []string{"--k", "64", "--weight-dtype", "nf4"}, []string{`"nf4"`, "int4", "mxfp4"}},
		{"dense against --dtype", []string{"--k", "64", "--weight-dtype", "fp16", "--dtype", "bf16"}, []string{"fp16", "bf16"}},
	}
	odd := []string{"--backend", "emu", "--batch", "1", "--n", "7", "--k", "64", "--weight-dtype", "int4-zp", "--group-size", "32"}
	for _, cmd := range []string{"verify", "bench"} {
		all := append(cases, struct {
			desc string
			args []string
			want []string
		}{"odd n with zero points", odd, []string{"n 7", "int4-zp"}})
		for _, c := range all {
			t.Run(cmd+"/"+c.desc, func(t *testing.T) {
				args := append([]string{cmd, "linear"}, c.args...)
				if c.args[0] != "--backend" {
					args = append(append([]string{cmd, "linear"}, base...), c.args...)
				}
				checkUsageError(t, args, c.want...)
			})
		}
	}
}
