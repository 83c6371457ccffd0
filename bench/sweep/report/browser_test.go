package report

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
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

var imagesResult = regexp.MustCompile(`data-images="(\d+)/(\d+)"`)

// The report renders in a real browser with no console error, every chart decodes, and a
// screenshot of it is taken (kept in DECODEBENCH_SCREENSHOT_DIR when set).
func TestReportRendersInChromium(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	run := h200Run(t)
	run.write(t, dir)
	if _, err := Write(dir); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, HTMLFile)

	// The console check must be able to fail: a page that logs an error is caught.
	bad := filepath.Join(t.TempDir(), "bad.html")
	os.WriteFile(bad, []byte(`<!DOCTYPE html><title>x</title><script>console.error("deliberate")</script>`), 0o644)
	if _, console := headless(t, browser, bad, "--dump-dom"); len(console) == 0 {
		t.Fatalf("the console check sees nothing of a page that logs an error: it would pass anything")
	}

	// A copy of the report with a probe that counts the images that decoded (the report itself
	// carries no script).
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	probe := `<script>window.addEventListener("load", () => { const imgs = [...document.images];
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
  document.body.setAttribute("data-images", ok + "/" + imgs.length); });</script></body>`
	checked := filepath.Join(dir, "checked.html")
	os.WriteFile(checked, bytes.Replace(html, []byte("</body>"), []byte(probe), 1), 0o644)
	dom, console := headless(t, browser, checked, "--dump-dom")
	if len(console) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(console, "\n"))
	}
	m := imagesResult.FindStringSubmatch(dom)
	if m == nil || m[1] != m[2] || m[2] == "0" {
		t.Fatalf("images decoded: %v (want all of them, and more than none)", m)
	}
	t.Logf("%s of the report's images decoded", m[0])

	shot := filepath.Join(t.TempDir(), "report.png")
	_, console = headless(t, browser, page, "--window-size=1280,2400", "--screenshot="+shot)
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
