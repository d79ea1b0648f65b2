package admin

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// Charts are drawn here as inline SVG, server side: no script, no
// library, nothing fetched; the page's Content-Security-Policy stays
// 'self'. Colours and sizes are the stylesheet's (classes l0, l1, ...),
// and the SVG stretches to its box, so a chart fits a phone's width as
// well as a wide screen's.

// Size of a chart's drawing, in its own units (viewBox).
const (
	chartW = 300
	chartH = 60
)

// windowText says how long a window is: "34 s", "2 min 10 s", "15 min".
func windowText(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second)).Round(time.Second)
	switch m, s := int(d/time.Minute), int(d%time.Minute/time.Second); {
	case m == 0:
		return strconv.Itoa(s) + " s"
	case s == 0:
		return strconv.Itoa(m) + " min"
	default:
		return fmt.Sprintf("%d min %d s", m, s)
	}
}

// figure formats a chart's value with its unit; "-" for none.
func figure(v float64, unit string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	var s string
	switch a := math.Abs(v); {
	case a == 0:
		s = "0"
	case a >= 100:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	default:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	}
	if unit == "%" || unit == "/s" {
		return s + unit
	}
	return s + " " + unit
}

// chartSVG draws c over a window of the given seconds: one path a line,
// broken where it has no value, on a scale from 0 to its highest value,
// with a legend of each line's last value.
func chartSVG(c Chart, window float64) template.HTML {
	top := 0.0
	for _, l := range c.Lines {
		for _, p := range l.Points {
			if !math.IsNaN(p) && !math.IsInf(p, 0) {
				top = max(top, p)
			}
		}
	}
	scale := top
	if scale <= 0 {
		scale = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<figure class="chart" data-window-seconds="%.0f"><figcaption>%s <span class="window">· last %s</span> <span class="top">max %s</span></figcaption>`,
		window, template.HTMLEscapeString(c.Title), windowText(window), template.HTMLEscapeString(figure(top, c.Unit)))
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" preserveAspectRatio="none" role="img" aria-label="%s">`, chartW, chartH, template.HTMLEscapeString(c.Title))
	fmt.Fprintf(&b, `<path class="axis" d="M0,%d H%d"/>`, chartH, chartW)
	for i, l := range c.Lines {
		var d strings.Builder
		n, pen := 0, false
		for k, p := range l.Points {
			if math.IsNaN(p) || math.IsInf(p, 0) || k >= len(c.X) {
				pen = false
				continue
			}
			x := float64(chartW)
			if window > 0 {
				x = chartW * c.X[k] / window
			}
			y := chartH - chartH*p/scale
			if pen {
				fmt.Fprintf(&d, "L%.1f,%.1f", x, y)
			} else {
				fmt.Fprintf(&d, "M%.1f,%.1f", x, y)
				if k == len(l.Points)-1 || math.IsNaN(l.Points[k+1]) {
					fmt.Fprintf(&d, "h-0.1") // a lone point still shows
				}
			}
			pen = true
			n++
		}
		if n > 0 {
			fmt.Fprintf(&b, `<path class="line l%d" data-line="%s" data-points="%d" d="%s"/>`, i%6, template.HTMLEscapeString(l.Name), n, d.String())
		}
	}
	b.WriteString(`</svg><ul class="keys"><li class="label">last step:</li>`)
	for i, l := range c.Lines {
		fmt.Fprintf(&b, `<li class="l%d">%s %s</li>`, i%6, template.HTMLEscapeString(l.Name), template.HTMLEscapeString(figure(l.Last, c.Unit)))
	}
	b.WriteString(`</ul></figure>`)
	return template.HTML(b.String()) // every value above is escaped or a number
}
