package main

import (
	"bytes"
	"math"
	"strconv"
	"strings"
)

// The Prometheus text exposition format (version 0.0.4), written by hand
// so that the core module needs no Prometheus library: per family one
// "# HELP" and one "# TYPE" line, then its samples, each
// name{label="value",...} value.

// promContentType is the Content-Type of the text format.
const promContentType = "text/plain; version=0.0.4; charset=utf-8"

// label is one label pair of a sample.
type label struct{ name, value string }

// family is one metric family: its samples in the order they were added.
type family struct {
	name, help, typ string
	samples         []sample
}

type sample struct {
	labels []label
	value  float64
}

// exposition collects families in the order they are first used.
type exposition struct {
	order []*family
	byKey map[string]*family
}

func newExposition() *exposition { return &exposition{byKey: map[string]*family{}} }

// add appends a sample to the family name, declaring it with help and typ
// ("gauge" or "counter") on first use.
func (e *exposition) add(name, typ, help string, value float64, labels ...label) {
	f := e.byKey[name]
	if f == nil {
		f = &family{name: name, help: help, typ: typ}
		e.byKey[name] = f
		e.order = append(e.order, f)
	}
	f.samples = append(f.samples, sample{labels: labels, value: value})
}

// gauge is add for a gauge.
func (e *exposition) gauge(name, help string, value float64, labels ...label) {
	e.add(name, "gauge", help, value, labels...)
}

// bytes renders every family.
func (e *exposition) bytes() []byte {
	var b bytes.Buffer
	for _, f := range e.order {
		b.WriteString("# HELP " + f.name + " " + escapeHelp(f.help) + "\n")
		b.WriteString("# TYPE " + f.name + " " + f.typ + "\n")
		for _, s := range f.samples {
			b.WriteString(f.name)
			if len(s.labels) > 0 {
				b.WriteByte('{')
				for i, l := range s.labels {
					if i > 0 {
						b.WriteByte(',')
					}
					b.WriteString(l.name + `="` + escapeLabel(l.value) + `"`)
				}
				b.WriteByte('}')
			}
			b.WriteString(" " + formatValue(s.value) + "\n")
		}
	}
	return b.Bytes()
}

// escapeHelp escapes a HELP text: backslash and line feed.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

// escapeLabel escapes a label value: backslash, double quote and line
// feed. Other bytes, invalid UTF-8 included, are replaced by U+FFFD when
// not valid UTF-8, which the format requires.
func escapeLabel(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// formatValue writes a float as the format wants: +Inf, -Inf, NaN, or Go's
// shortest representation.
func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
