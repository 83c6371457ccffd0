package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// The recipes in deploy/ call validate and fleet with flags; a renamed flag must fail here, not
// on a thousand nodes.

var flagPattern = regexp.MustCompile(`(?:^|[\s("'])(--[a-z][a-z0-9-]*)`)

func commandFlags(cmd *cli.Command) map[string]bool {
	names := map[string]bool{"--help": true}
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			names["--"+n] = true
		}
	}
	return names
}

// checkFlags fails t for every --flag in text that cmd does not define.
func checkFlags(t *testing.T, where, text string, cmd *cli.Command) int {
	t.Helper()
	known := commandFlags(cmd)
	n := 0
	for _, m := range flagPattern.FindAllStringSubmatch(text, -1) {
		n++
		if !known[m[1]] {
			t.Errorf("%s: decodebench %s has no flag %s", where, cmd.Name, m[1])
		}
	}
	return n
}

// linesWith returns the lines of path holding any of the markers, with their continuations.
func linesWith(t *testing.T, path string, markers ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		for _, m := range markers {
			if strings.Contains(lines[i], m) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "#") {
				out = append(out, lines[i])
				for strings.HasSuffix(strings.TrimSpace(lines[i]), `\`) && i+1 < len(lines) {
					i++
					out = append(out, lines[i])
				}
				break
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no line with %q", path, markers)
	}
	return strings.Join(out, "\n")
}

func TestSlurmRecipeFlags(t *testing.T) {
	v, f := validateCommand(), fleetCommand()
	checkFlags(t, "deploy/slurm/validate.sbatch", linesWith(t, "deploy/slurm/validate.sbatch", `" validate `), v)
	checkFlags(t, "deploy/slurm/fleet.sbatch", linesWith(t, "deploy/slurm/fleet.sbatch", "args=(", "args+=("), f)
	if n := checkFlags(t, "scripts/slurm-test.sh", linesWith(t, "scripts/slurm-test.sh", "VALIDATE_ARGS="), v); n < 5 {
		t.Errorf("scripts/slurm-test.sh: %d validate flags found, want the emulated tiny suite's", n)
	}
}

// yamlDocs parses a YAML file with python3's yaml module (the module graph's Go YAML decoders
// are not direct dependencies) and returns its documents as JSON values.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skipf("python3 not found, skipping the YAML check of %s", path)
	}
	if exec.Command(py, "-c", "import yaml").Run() != nil {
		t.Skipf("python3 has no yaml module (apt-get install python3-yaml), skipping the YAML check of %s", path)
	}
	out, err := exec.Command(py, "-c", "import sys, yaml, json; json.dump(list(yaml.safe_load_all(open(sys.argv[1]))), sys.stdout)",
		filepath.Join("..", "..", path)).CombinedOutput()
	if err != nil {
		t.Fatalf("%s is not valid YAML: %v\n%s", path, err, out)
	}
	var docs []map[string]any
	if err := json.Unmarshal(out, &docs); err != nil {
		t.Fatal(err)
	}
	return docs
}

// dig follows a path of map keys and list indices ("0") through a decoded document.
func dig(t *testing.T, v any, path ...string) any {
	t.Helper()
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i := 0
			for _, c := range p {
				i = i*10 + int(c-'0')
			}
			if i >= len(x) {
				t.Fatalf("index %s past %d items at %q", p, len(x), path)
			}
			v = x[i]
		default:
			t.Fatalf("%q: %T at %s", path, v, p)
		}
	}
	return v
}

func TestKubernetesRecipe(t *testing.T) {
	pvc := yamlDocs(t, "deploy/k8s/reports-pvc.yaml")
	validateJob := yamlDocs(t, "deploy/k8s/validate-job.yaml")
	fleetJob := yamlDocs(t, "deploy/k8s/fleet-job.yaml")
	if len(pvc) != 1 || len(validateJob) != 1 || len(fleetJob) != 1 {
		t.Fatalf("documents: %d %d %d, want one each", len(pvc), len(validateJob), len(fleetJob))
	}
	claim := dig(t, pvc[0], "metadata", "name")
	if dig(t, pvc[0], "kind") != "PersistentVolumeClaim" || dig(t, pvc[0], "spec", "accessModes", "0") != "ReadWriteMany" {
		t.Errorf("the reports volume must be a ReadWriteMany claim: every node writes, the collector reads all")
	}

	v := validateJob[0]
	spec := dig(t, v, "spec", "template", "spec")
	container := dig(t, spec, "containers", "0")
	switch {
	case dig(t, v, "kind") != "Job" || dig(t, v, "spec", "completionMode") != "Indexed":
		t.Errorf("validate: want an Indexed Job")
	case dig(t, v, "spec", "completions") != dig(t, v, "spec", "parallelism"):
		t.Errorf("validate: completions and parallelism differ: every node at once")
	case dig(t, spec, "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "0", "topologyKey") != "kubernetes.io/hostname":
		t.Errorf("validate: no required anti-affinity on the host name: two pods could share a node")
	case dig(t, container, "resources", "limits", "nvidia.com/gpu") == nil:
		t.Errorf("validate: the container requests no nvidia.com/gpu")
	case dig(t, spec, "volumes", "0", "persistentVolumeClaim", "claimName") != claim:
		t.Errorf("validate: writes to another volume than %v", claim)
	case dig(t, spec, "restartPolicy") != "Never":
		t.Errorf("validate: a failed validate must not be restarted in a loop")
	}
	nodeName := false
	for _, e := range dig(t, container, "env").([]any) {
		if dig(t, e, "name") == "NODE_NAME" && dig(t, e, "valueFrom", "fieldRef", "fieldPath") == "spec.nodeName" {
			nodeName = true
		}
	}
	if !nodeName {
		t.Errorf("validate: NODE_NAME does not come from spec.nodeName (a pod's host name is its own, not the node's)")
	}
	checkFlags(t, "validate-job.yaml", dig(t, container, "args", "0").(string), validateCommand())

	fspec := dig(t, fleetJob[0], "spec", "template", "spec")
	fc := dig(t, fspec, "containers", "0")
	if dig(t, fspec, "volumes", "0", "persistentVolumeClaim", "claimName") != claim {
		t.Errorf("fleet: reads another volume than %v", claim)
	}
	if dig(t, fc, "resources") != nil {
		t.Errorf("fleet: the collector needs no GPU")
	}
	checkFlags(t, "fleet-job.yaml", dig(t, fc, "args", "0").(string), fleetCommand())
}
