package validate

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/decodebench/decodebench/bench/gpuinfo"
)

// docs/validate-schema.md is the report's contract: every JSON field and every check id must
// be in it.
func TestSchemaDocCoversTheReport(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "validate-schema.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] || ty.PkgPath() == "time" {
			return
		}
		seen[ty] = true
		for i := range ty.NumField() {
			f := ty.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && name == "" {
				walk(f.Type)
				continue
			}
			if name == "" || name == "-" {
				continue
			}
			if !strings.Contains(doc, "`"+name+"`") && !strings.Contains(doc, name+"`") && !strings.Contains(doc, " "+name+",") &&
				!strings.Contains(doc, "`"+name+",") && !strings.Contains(doc, ", "+name) && !strings.Contains(doc, "{"+name) {
				t.Errorf("%s.%s (json %q) is not in docs/validate-schema.md", ty.Name(), f.Name, name)
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(Report{}))
	walk(reflect.TypeOf(FleetSummary{}))
	walk(reflect.TypeOf(gpuinfo.Health{}))

	ids := []string{"health.ecc_mode", "health.ecc_errors", "health.retired_pages", "health.row_remapping",
		"health.pcie_link", "health.throttling", "health.temperature", "health.power", "health.idle", "health.nvml",
		"identity.kind", "box.gpu_count", "correctness.<step>", "performance.<gate>", "outlier.<gate>"}
	for _, c := range HealthChecks(HealthObservation{}, DefaultThresholds().Health) {
		if !strings.Contains(doc, "`"+c.ID+"`") {
			t.Errorf("check %s is not in docs/validate-schema.md", c.ID)
		}
	}
	for _, id := range append(ids, Gates...) {
		if !strings.Contains(doc, "`"+id+"`") {
			t.Errorf("%s is not in docs/validate-schema.md", id)
		}
	}
}
