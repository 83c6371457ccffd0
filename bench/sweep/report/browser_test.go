package report

import (
	"bytes"
	"context"
	"encoding/json"
	stdhtml "html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/decodebench/decodebench/bench/model"
	"github.com/decodebench/decodebench/bench/plan"
	"github.com/decodebench/decodebench/bench/roofline"
	"github.com/decodebench/decodebench/internal/testtier"
	"github.com/decodebench/decodebench/plots"
)

// EnvRequireBrowser turns a missing chromium from a skip into a failure.
const EnvRequireBrowser = "DECODEBENCH_REQUIRE_BROWSER"

// EnvScreenshotDir, when set, receives the screenshot of the rendered report (to look at).
const EnvScreenshotDir = "DECODEBENCH_SCREENSHOT_DIR"

// chromium finds Debian's chromium, or skips (fails under DECODEBENCH_REQUIRE_BROWSER=1).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv(EnvRequireBrowser) == "1" {
		t.Fatalf("%s=1 but no chromium on PATH (apt-get install -y chromium)", EnvRequireBrowser)
	}
	t.Skipf("no chromium on PATH, skipping the browser test (apt-get install -y chromium; %s=1 makes this a failure)", EnvRequireBrowser)
	return ""
}

// headless runs chromium on a local page with the given mode flags and returns its stdout and
// the console lines it logged.
func headless(t *testing.T, browser, page string, mode ...string) (stdout string, console []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--no-first-run", "--user-data-dir=" + t.TempDir(),
		"--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000"}, mode...)
	args = append(args, "file://"+page)
	cmd := exec.CommandContext(ctx, browser, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, errOut.String())
	}
	for _, line := range strings.Split(errOut.String(), "\n") {
		if strings.Contains(line, "CONSOLE") || strings.Contains(line, "Uncaught") {
			console = append(console, line)
		}
	}
	return out.String(), console
}

var probeResult = regexp.MustCompile(`data-probe="([^"]*)"`)

// layoutProbe, put before </body> of a copy of a page, writes what the page looks like once
// its fonts are ready into body[data-probe], as JSON: the charts (inline SVG, and images that
// decoded), the loaded faces of the charts' typeface, every SVG text that reaches outside its
// SVG's box (with a quarter pixel of tolerance), and the first section's heading and top.
const layoutProbe = `<script>window.addEventListener("load", () => document.fonts.ready.then(() => {
  const imgs = [...document.images];
  const svgs = [...document.querySelectorAll("figure svg")];
  const faces = [...document.fonts].filter(f => f.family.replace(/['"]/g, "") === "Liberation Sans" && f.status === "loaded").map(f => f.weight);
  const outside = [];
  for (const svg of svgs) {
    const box = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll("text")) {
      const r = t.getBoundingClientRect();
      if (r.width > 0 && (r.left < box.left - 0.25 || r.right > box.right + 0.25 || r.top < box.top - 0.25 || r.bottom > box.bottom + 0.25)) {
        outside.push(t.textContent.slice(0, 60));
      }
    }
  }
  const h2 = document.querySelector("h2");
  const result = {images: imgs.length, decoded: imgs.filter(i => i.complete && i.naturalWidth > 0).length, svgs: svgs.length,
    texts: svgs.reduce((n, s) => n + s.querySelectorAll("text").length, 0), faces, outside,
    first: h2 ? h2.textContent : "", firstTop: h2 ? h2.getBoundingClientRect().top + window.scrollY : -1};
  document.body.setAttribute("data-probe", JSON.stringify(result));
}));</script></body>`

type layout struct {
	Images, Decoded, SVGs, Texts int
	Faces                        []string
	Outside                      []string
	First                        string
	FirstTop                     float64
}

// probeLayout runs layoutProbe on a copy of the page in chromium.
func probeLayout(t *testing.T, browser, page string) layout {
	t.Helper()
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	checked := filepath.Join(t.TempDir(), "checked.html")
	os.WriteFile(checked, bytes.Replace(html, []byte("</body>"), []byte(layoutProbe), 1), 0o644)
	dom, console := headless(t, browser, checked, "--window-size=1280,2400", "--dump-dom")
	if len(console) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(console, "\n"))
	}
	m := probeResult.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the probe wrote nothing into the page")
	}
	var l layout
	if err := json.Unmarshal([]byte(stdhtml.UnescapeString(m[1])), &l); err != nil {
		t.Fatalf("probe result %q: %v", m[1], err)
	}
	return l
}

// The report renders in a real browser with no console error: the headline is its first
// section, near the top; every chart is there, its text drawn with the embedded typeface
// (both weights loaded from the page, whatever fonts this machine has) and inside its box.
// A screenshot is taken (kept in DECODEBENCH_SCREENSHOT_DIR when set).
func TestReportRendersInChromium(t *testing.T) {
	testtier.Slow(t, "renders in headless Chromium")
	browser := chromium(t)
	dir := t.TempDir()
	run := h200Run(t)
	run.write(t, dir)
	if _, err := Write(dir); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, HTMLFile)

	// The checks must be able to fail: a page that logs an error is caught, and so is SVG
	// text that runs out of its box.
	bad := filepath.Join(t.TempDir(), "bad.html")
	os.WriteFile(bad, []byte(`<!DOCTYPE html><title>x</title><script>console.error("deliberate")</script>`), 0o644)
	if _, console := headless(t, browser, bad, "--dump-dom"); len(console) == 0 {
		t.Fatalf("the console check sees nothing of a page that logs an error: it would pass anything")
	}
	overflow := filepath.Join(t.TempDir(), "overflow.html")
	os.WriteFile(overflow, []byte(`<!DOCTYPE html><title>x</title><body><figure><svg width="100" height="40" viewBox="0 0 100 40">`+
		`<text x="60" y="20" style="font-size:16px">far too long a title</text></svg></figure></body>`), 0o644)
	if l := probeLayout(t, browser, overflow); len(l.Outside) != 1 {
		t.Fatalf("the box check does not see text that runs out of its SVG: %+v", l)
	}

	l := probeLayout(t, browser, page)
	t.Logf("layout: %d inline SVG charts with %d texts, %d images, faces %v, first section %q at %.0f px", l.SVGs, l.Texts, l.Images, l.Faces, l.First, l.FirstTop)
	if l.SVGs < 6 || l.Texts < 50 || l.Decoded != l.Images {
		t.Errorf("charts: %d inline SVG with %d texts, %d of %d images decoded; want every chart inline and every image decoded", l.SVGs, l.Texts, l.Decoded, l.Images)
	}
	if !(slices.Contains(l.Faces, "normal") || slices.Contains(l.Faces, "400")) || !(slices.Contains(l.Faces, "bold") || slices.Contains(l.Faces, "700")) {
		t.Errorf("the charts' typeface is not loaded from the page in both weights (loaded: %v): the browser drew with a face the layout did not measure", l.Faces)
	}
	if len(l.Outside) > 0 {
		t.Errorf("%d SVG text(s) outside their chart: %q", len(l.Outside), l.Outside)
	}
	if l.First != "Headline" || l.FirstTop > 900 {
		t.Errorf("the first section is %q at %.0f px; want the headline within the first screen", l.First, l.FirstTop)
	}

	shot := filepath.Join(t.TempDir(), "report.png")
	_, console := headless(t, browser, page, "--window-size=1280,2400", "--screenshot="+shot)
	if len(console) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(console, "\n"))
	}
	data, err := os.ReadFile(shot)
	if err != nil || len(data) < 10000 {
		t.Fatalf("screenshot %s: %d bytes, %v", shot, len(data), err)
	}
	if keep := os.Getenv(EnvScreenshotDir); keep != "" {
		os.MkdirAll(keep, 0o755)
		os.WriteFile(filepath.Join(keep, "report.png"), data, 0o644)
		t.Logf("screenshot kept in %s", filepath.Join(keep, "report.png"))
	}
}

// The plan's frontier chart renders in a real browser with every text inside its box.
func TestPlanChartRendersInChromium(t *testing.T) {
	testtier.Slow(t, "renders in headless Chromium")
	browser := chromium(t)
	shape, err := model.Lookup("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := roofline.LookupGPU("h200")
	if err != nil {
		t.Fatal(err)
	}
	f, err := plan.Predicted(shape, gpu, 4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(f, plan.Request{MinRequestRate: 40, TokensPerSec: 100000, Headroom: 0.2, PricePerGPUHour: 3})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := plan.Chart(p, dir); err != nil {
		t.Fatal(err)
	}
	// On a page as the report holds its charts: inline, with the charts' typeface embedded.
	page := filepath.Join(dir, "plan.html")
	doc := plots.Document{Title: "plan", Sections: []plots.Section{{Heading: "Plan",
		Figures: []plots.Figure{{Title: "frontier", Base: filepath.Join(dir, plan.ChartBase)}}}}}
	if err := plots.WriteHTML(page, doc); err != nil {
		t.Fatal(err)
	}
	l := probeLayout(t, browser, page)
	if l.SVGs != 1 || l.Texts < 10 {
		t.Errorf("the plan chart: %d SVG with %d texts; want one chart with its labels", l.SVGs, l.Texts)
	}
	if len(l.Outside) > 0 {
		t.Errorf("%d SVG text(s) outside the plan chart: %q", len(l.Outside), l.Outside)
	}
}

// The per-format charts of a run in several weight formats render in a real browser with
// every text inside its box (the longer legends and titles included).
func TestFormatChartsRenderInChromium(t *testing.T) {
	testtier.Slow(t, "renders in headless Chromium")
	browser := chromium(t)
	dir := t.TempDir()
	formatsRun(t).write(t, dir)
	if _, err := Write(dir); err != nil {
		t.Fatal(err)
	}
	l := probeLayout(t, browser, filepath.Join(dir, HTMLFile))
	if l.SVGs < 9 || l.Texts < 50 {
		t.Errorf("charts: %d inline SVG with %d texts; want every chart of three formats and the per-format ones", l.SVGs, l.Texts)
	}
	if len(l.Outside) > 0 {
		t.Errorf("%d SVG text(s) outside their chart: %q", len(l.Outside), l.Outside)
	}
}
