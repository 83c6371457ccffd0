package plots

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html"
	"html/template"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/decodebench/decodebench/bench/atomicfile"
	"github.com/decodebench/decodebench/bench/format"
)

// Document is a report as plain data: WriteHTML makes one self-contained page of it (styles
// and images inline, nothing fetched: it opens offline, from a mail attachment or a USB
// stick), WriteMarkdown a page that links the images beside it.
type Document struct {
	Title    string
	Subtitle string
	Alerts   []Alert
	Sections []Section
	Footer   string
}

// Alert levels.
const (
	AlertDanger  = "danger"  // the numbers must not be read as they look (emulated timings)
	AlertWarning = "warning" // read them with care (throttling, failures)
	AlertInfo    = "info"
)

// Alert is a banner above the sections.
type Alert struct {
	Level string
	Title string
	Text  string
}

// Section is a heading with its paragraphs, facts, tables and figures, in that order.
type Section struct {
	Heading    string
	Paragraphs []string
	Facts      []Fact
	Tables     []Table
	Figures    []Figure
	// Collapsed sections start folded in the HTML page (long per-kernel tables).
	Collapsed bool
}

// Fact is one line of a definition list: "Card: NVIDIA H200".
type Fact struct{ Name, Value string }

// Table is a table of text cells. Cells that read as numbers are right-aligned.
type Table struct {
	Caption string
	Header  []string
	Rows    [][]string
	// RowClass marks rows (one entry per row, or nil): RowFailed, RowSkipped, RowThrottled.
	RowClass []string
	Note     string
}

// Row classes of a Table.
const (
	RowFailed    = "failed"
	RowSkipped   = "skipped"
	RowThrottled = "throttled"
)

// Figure is a chart saved by one of this package's functions: base+".svg" and base+".png".
type Figure struct {
	Title   string
	Caption string
	Base    string // path without extension
}

// WriteHTML writes d to path as one HTML page with every figure inlined (its SVG, or its PNG
// when there is no SVG, as a data: URI). A figure whose files are missing is an error.
func WriteHTML(path string, d Document) error {
	page := htmlPage{Document: d}
	for _, s := range d.Sections {
		hs := htmlSection{Section: s, ID: anchor(s.Heading)}
		for _, t := range s.Tables {
			hs.HTMLTables = append(hs.HTMLTables, newHTMLTable(t))
		}
		for _, f := range s.Figures {
			img, svg, err := figureHTML(f)
			if err != nil {
				return err
			}
			page.inlineSVG = page.inlineSVG || svg
			hs.HTMLFigures = append(hs.HTMLFigures, htmlFigure{Figure: f, Img: img})
		}
		page.HTMLSections = append(page.HTMLSections, hs)
	}
	if page.inlineSVG {
		page.FontFaces = fontFaceCSS()
	}
	var buf bytes.Buffer
	if err := reportTemplate.Execute(&buf, page); err != nil {
		return fmt.Errorf("plots: report %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return atomicfile.Write(path, buf.Bytes())
}

// figureHTML is a figure as the page holds it: its SVG inline (svg true), where the page's
// @font-face reaches its text, which an <img> would keep from it, so that the text is drawn
// with the face it was measured with; or, with no SVG, its PNG as a data: URI. The SVGs this
// package writes carry no ids and style each element inline, so several share a page safely.
func figureHTML(f Figure) (img template.HTML, svg bool, err error) {
	if data, err := os.ReadFile(f.Base + ".svg"); err == nil {
		s := string(data)
		if i := strings.Index(s, "<svg"); i >= 0 {
			s = s[i:] // the XML declaration and the generator's comment have no place in HTML
		}
		// An HTML parser puts <svg> in its namespace by itself: the declarations would only be
		// URLs in a page that fetches nothing.
		s = svgNamespaces.ReplaceAllString(s, "")
		label := `<svg role="img" aria-label="` + html.EscapeString(f.Title) + `"`
		return template.HTML(strings.Replace(s, "<svg", label, 1)), true, nil
	}
	data, err := os.ReadFile(f.Base + ".png")
	if err != nil {
		return "", false, fmt.Errorf("plots: figure %s: neither .svg nor .png can be read: %w", f.Base, err)
	}
	// The URI holds only base64 and "data:image/png;base64," (no quote, no ampersand), so it
	// goes in as it is: escaping each '+' as &#43; would only bloat the page.
	uri := "data:image/png;base64," + base64.StdEncoding.EncodeToString(data)
	return template.HTML(`<img src="` + uri + `" alt="` + html.EscapeString(f.Title) + `">`), false, nil
}

var svgNamespaces = regexp.MustCompile(`\s+xmlns(:xlink)?="[^"]*"`)

// fontFaceCSS declares the charts' typeface (ChartFonts) from the font files themselves, so a
// browser draws the SVG text with the face the layout measured, whatever it has installed.
func fontFaceCSS() template.CSS {
	var b strings.Builder
	for _, f := range ChartFonts {
		fmt.Fprintf(&b, "@font-face { font-family: '%s'; font-weight: %s; font-style: normal; src: url(data:font/ttf;base64,%s) format('truetype'); }\n",
			f.Family, f.Weight, base64.StdEncoding.EncodeToString(f.TTF))
	}
	return template.CSS(b.String())
}

type htmlPage struct {
	Document
	HTMLSections []htmlSection
	FontFaces    template.CSS // the charts' typeface, when a chart is inline SVG
	inlineSVG    bool
}

type htmlSection struct {
	Section
	ID          string
	HTMLTables  []htmlTable
	HTMLFigures []htmlFigure
}

type htmlFigure struct {
	Figure
	Img template.HTML // the inline <svg>, or an <img> of the PNG with its data: URI
}

type htmlTable struct {
	Table
	Numeric []bool // per column
	Classes []string
}

func newHTMLTable(t Table) htmlTable {
	h := htmlTable{Table: t, Numeric: make([]bool, len(t.Header))}
	for col := range t.Header {
		numbers, others := 0, 0
		for _, row := range t.Rows {
			if col >= len(row) || row[col] == "" || row[col] == "–" {
				continue
			}
			if isNumberCell(row[col]) {
				numbers++
			} else {
				others++
			}
		}
		h.Numeric[col] = numbers > 0 && others == 0
	}
	h.Classes = make([]string, len(t.Rows))
	copy(h.Classes, t.RowClass)
	return h
}

// isNumberCell accepts "1234", "12.5", "61%", "1.2e-3", "×1.07" and a trailing marker "*".
func isNumberCell(s string) bool {
	s = strings.TrimSpace(strings.TrimRight(s, "*%"))
	s = strings.TrimPrefix(s, "×")
	_, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	return err == nil
}

func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"cell": func(row []string, i int) string {
		if i < len(row) {
			return row[i]
		}
		return ""
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{{.Title}}</title>
<style>
{{.FontFaces}}
:root { --text: #1d2330; --muted: #5b6475; --rule: #dde1e8; --bg: #ffffff; --band: #f5f7fa;
        --danger: #b3261e; --danger-bg: #fdecea; --warn: #8a5300; --warn-bg: #fff4e0; --info-bg: #eef4ff; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--text);
       font: 15px/1.5 "Liberation Sans", Arial, Helvetica, sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 24px 32px 48px; }
h1 { font-size: 26px; margin: 0 0 4px; }
.subtitle { color: var(--muted); margin: 0 0 20px; }
h2 { font-size: 20px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 2px solid var(--rule); }
nav { margin: 0 0 18px; font-size: 14px; }
nav a { color: #1f5fbf; margin-right: 14px; text-decoration: none; }
.alert { border-radius: 6px; padding: 12px 16px; margin: 12px 0; border-left: 6px solid; }
.alert strong { display: block; font-size: 16px; margin-bottom: 2px; }
.alert.danger { background: var(--danger-bg); border-color: var(--danger); color: var(--danger); }
.alert.danger strong { font-size: 20px; letter-spacing: 0.02em; }
.alert.warning { background: var(--warn-bg); border-color: #e39b20; color: var(--warn); }
.alert.info { background: var(--info-bg); border-color: #1f5fbf; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 3px 18px; margin: 8px 0 16px; }
dt { color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
.table-wrap { overflow-x: auto; margin: 10px 0 6px; }
table { border-collapse: collapse; font-size: 13.5px; min-width: 50%; }
caption { text-align: left; font-weight: bold; padding: 4px 0 6px; }
/* Text and headers wrap (a long name anywhere), numbers never: a table fits a narrow window
   rather than running out of it (at 800 px the widest was 1153 px, its caption cut mid-word). */
th, td { padding: 4px 10px; border-bottom: 1px solid var(--rule); overflow-wrap: anywhere; }
th { background: var(--band); text-align: left; position: sticky; top: 0; overflow-wrap: normal; hyphens: auto; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
@media (max-width: 1000px) {
  main { padding: 16px 12px 32px; }
  table { font-size: 12.5px; }
  th, td { padding: 3px 5px; }
}
tr.failed td { background: var(--danger-bg); color: var(--danger); }
tr.skipped td { color: #8b93a3; }
tr.throttled td { background: var(--warn-bg); }
.note { color: var(--muted); font-size: 13px; margin: 2px 0 14px; }
figure { margin: 18px 0 26px; }
figure img, figure svg { display: block; width: 100%; max-width: 1200px; height: auto; border: 1px solid var(--rule); border-radius: 4px; }
figcaption { color: var(--muted); font-size: 13.5px; margin-top: 4px; }
figcaption strong { color: var(--text); }
details > summary { cursor: pointer; color: #1f5fbf; margin: 8px 0; }
footer { color: var(--muted); font-size: 12.5px; margin-top: 40px; border-top: 1px solid var(--rule); padding-top: 10px; }
</style>
</head>
<body>
<main>
<h1>{{.Title}}</h1>
{{with .Subtitle}}<p class="subtitle">{{.}}</p>{{end}}
{{range .Alerts}}<div class="alert {{.Level}}" role="alert"><strong>{{.Title}}</strong>{{.Text}}</div>
{{end}}
<nav>{{range .HTMLSections}}<a href="#{{.ID}}">{{.Heading}}</a>{{end}}</nav>
{{range .HTMLSections}}
<section id="{{.ID}}">
<h2>{{.Heading}}</h2>
{{if .Collapsed}}<details><summary>show</summary>{{end}}
{{range .Paragraphs}}<p>{{.}}</p>
{{end}}
{{with .Facts}}<dl>{{range .}}<dt>{{.Name}}</dt><dd>{{.Value}}</dd>{{end}}</dl>{{end}}
{{range .HTMLFigures}}<figure>{{.Img}}<figcaption><strong>{{.Title}}.</strong> {{.Caption}}</figcaption></figure>
{{end}}
{{range .HTMLTables}}{{$t := .}}<div class="table-wrap"><table>
{{with .Caption}}<caption>{{.}}</caption>{{end}}
<thead><tr>{{range $i, $h := .Header}}<th{{if index $t.Numeric $i}} class="num"{{end}}>{{$h}}</th>{{end}}</tr></thead>
<tbody>
{{range $r, $row := .Rows}}<tr{{with index $t.Classes $r}} class="{{.}}"{{end}}>{{range $i, $h := $t.Header}}<td{{if index $t.Numeric $i}} class="num"{{end}}>{{cell $row $i}}</td>{{end}}</tr>
{{end}}</tbody>
</table></div>
{{with .Note}}<p class="note">{{.}}</p>{{end}}
{{end}}
{{if .Collapsed}}</details>{{end}}
</section>
{{end}}
{{with .Footer}}<footer>{{.}}</footer>{{end}}
</main>
</body>
</html>
`))

// WriteMarkdown writes d to path as GitHub-flavoured Markdown; figures link their PNG by a path
// relative to path's directory.
func WriteMarkdown(path string, d Document) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", d.Title)
	if d.Subtitle != "" {
		fmt.Fprintf(&b, "%s\n\n", d.Subtitle)
	}
	for _, a := range d.Alerts {
		fmt.Fprintf(&b, "> **%s** %s\n\n", mdEscape(a.Title), mdEscape(a.Text))
	}
	dir := filepath.Dir(path)
	for _, s := range d.Sections {
		fmt.Fprintf(&b, "## %s\n\n", s.Heading)
		for _, p := range s.Paragraphs {
			fmt.Fprintf(&b, "%s\n\n", p)
		}
		for _, f := range s.Facts {
			fmt.Fprintf(&b, "- **%s:** %s\n", mdEscape(f.Name), mdEscape(f.Value))
		}
		if len(s.Facts) > 0 {
			b.WriteString("\n")
		}
		for _, f := range s.Figures {
			rel, err := filepath.Rel(dir, f.Base+".png")
			if err != nil {
				rel = f.Base + ".png"
			}
			fmt.Fprintf(&b, "![%s](%s)\n\n*%s.* %s\n\n", mdEscape(f.Title), filepath.ToSlash(rel), mdEscape(f.Title), mdEscape(f.Caption))
		}
		for _, t := range s.Tables {
			writeMarkdownTable(&b, t)
		}
	}
	if d.Footer != "" {
		fmt.Fprintf(&b, "---\n\n%s\n", d.Footer)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return atomicfile.Write(path, []byte(b.String()))
}

func writeMarkdownTable(b *strings.Builder, t Table) {
	if t.Caption != "" {
		fmt.Fprintf(b, "**%s**\n\n", mdEscape(t.Caption))
	}
	format.Markdown(b, t.Header, t.Rows, newHTMLTable(t).Numeric)
	b.WriteString("\n")
	if t.Note != "" {
		fmt.Fprintf(b, "%s\n\n", mdEscape(t.Note))
	}
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "\n", " ") }
