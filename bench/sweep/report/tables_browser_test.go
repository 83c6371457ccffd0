package report

import (
	"encoding/json"
	stdhtml "html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tableProbe writes into body[data-tables], as JSON, every table of the page that is wider
// than the page leaves it (its wrapper scrolls) and every caption or heading cut short.
const tableProbe = `<script>window.addEventListener("load", () => document.fonts.ready.then(() => {
  const wide = [], cut = [];
  for (const w of document.querySelectorAll(".table-wrap")) {
    if (w.scrollWidth > w.clientWidth + 1) {
      const c = w.querySelector("caption") || w.previousElementSibling;
      wide.push({caption: c ? c.textContent.slice(0, 50) : "", scroll: w.scrollWidth, client: w.clientWidth});
    }
  }
  for (const c of document.querySelectorAll("caption, .table-caption, th")) {
    const r = c.getBoundingClientRect();
    if (r.right > document.documentElement.clientWidth + 1 || c.scrollWidth > c.clientWidth + 1) cut.push(c.textContent.slice(0, 50));
  }
  document.body.setAttribute("data-tables", JSON.stringify({tables: document.querySelectorAll("table").length, wide, cut}));
}));</script></body>`

var tablesResult = regexp.MustCompile(`data-tables="([^"]*)"`)

// At 800 px, the width of a laptop's half screen, every table of the report fits the page
// (long text wraps in its cell) and no caption or header is cut mid-word.
func TestReportTablesFitAt800px(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	h200Run(t).write(t, dir)
	if _, err := Write(dir); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "tables.html")
	os.WriteFile(page, []byte(strings.Replace(string(html), "</body>", tableProbe, 1)), 0o644)
	dom, console := headless(t, browser, page, "--window-size=800,2400", "--dump-dom")
	if len(console) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(console, "\n"))
	}
	m := tablesResult.FindStringSubmatch(dom)
	if m == nil {
		t.Fatal("the probe wrote nothing into the page")
	}
	var got struct {
		Tables int
		Wide   []struct {
			Caption        string
			Scroll, Client float64
		}
		Cut []string
	}
	if err := json.Unmarshal([]byte(stdhtml.UnescapeString(m[1])), &got); err != nil {
		t.Fatal(err)
	}
	if got.Tables < 3 {
		t.Fatalf("%d tables in the report: the probe sees none of them", got.Tables)
	}
	for _, w := range got.Wide {
		t.Errorf("table %q is %.0f px wide in a %.0f px column: cut off at 800 px", w.Caption, w.Scroll, w.Client)
	}
	for _, c := range got.Cut {
		t.Errorf("caption or header %q is cut off at 800 px", c)
	}
	if keep := os.Getenv(EnvScreenshotDir); keep != "" {
		os.MkdirAll(keep, 0o755)
		headless(t, browser, filepath.Join(dir, HTMLFile), "--window-size=800,6000", "--screenshot="+filepath.Join(keep, "report-800px.png"))
	}
}
