package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/goredisson/ratelimiter"
)

// The limits file of plan and apply (docs/limits-as-code.md):
//
//	limits:
//	  - name: api              # one limiter, created if missing
//	    rate: 100
//	    interval: 1s
//	  - match: "tenant:*"      # every existing limiter whose name matches
//	    rate: 10
//	    interval: 1m
//	    mode: per_client       # overall (default) or per_client
//	    keep_alive: 24h        # optional; absent or 0s: none
//
// It is read whole and checked before anything is sent to Redis: unknown
// fields, missing or ill-typed values, names given twice and
// configurations that SetRate would refuse are usage errors (exit 2),
// each naming the file and line.

// limitEntry is one entry of the file: a name or a pattern, and the
// configuration it asks for.
type limitEntry struct {
	name  string // exactly one of name and match is set
	match string
	cfg   ratelimiter.Config
	line  int
}

// source is how output shows where an entry came from: the name, or
// match=PATTERN.
func (e limitEntry) source() string {
	if e.match != "" {
		return "match=" + e.match
	}
	return e.name
}

// limitsFile is a parsed limits file.
type limitsFile struct {
	path    string
	entries []limitEntry
}

// entryFields are the keys an entry may have.
var entryFields = []string{"name", "match", "rate", "interval", "mode", "keep_alive"}

// readLimitsFile reads and checks the limits file at path ("-": standard
// input).
func readLimitsFile(path string, stdin io.Reader) (*limitsFile, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usagef("%v", err)
	}
	name := path
	if path == "-" {
		name = "<stdin>"
	}
	entries, err := parseLimits(b)
	if err != nil {
		return nil, usagef("%s: %v", name, err)
	}
	return &limitsFile{path: name, entries: entries}, nil
}

// lineError is a problem at one line of the file.
func lineError(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("line %d: %s", n.Line, fmt.Sprintf(format, args...))
}

// parseLimits parses a limits file's bytes and checks every entry.
func parseLimits(b []byte) ([]limitEntry, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty file: want a top-level limits: list")
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, lineError(&extra, "a second YAML document: the file holds one")
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	if top.Kind != yaml.MappingNode {
		return nil, lineError(top, "want a mapping with a limits: list at the top")
	}
	var list *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if k.Value != "limits" {
			return nil, lineError(k, "unknown field %s (the top level has only limits)", strconv.Quote(k.Value))
		}
		if list != nil {
			return nil, lineError(k, "limits given twice")
		}
		list = v
	}
	if list == nil {
		return nil, lineError(top, "no limits: list")
	}
	if list.Kind != yaml.SequenceNode {
		if list.Kind == yaml.ScalarNode && list.Tag == "!!null" {
			return nil, nil // "limits:" with nothing: an empty list
		}
		return nil, lineError(list, "limits must be a list of entries")
	}
	var out []limitEntry
	names := map[string]int{}
	patterns := map[string]int{}
	for _, item := range list.Content {
		e, err := parseEntry(item)
		if err != nil {
			return nil, err
		}
		seen, key := names, e.name
		if e.match != "" {
			seen, key = patterns, e.match
		}
		if first, dup := seen[key]; dup {
			return nil, lineError(item, "%s given twice (first at line %d)", e.source(), first)
		}
		seen[key] = e.line
		out = append(out, e)
	}
	return out, nil
}

// parseEntry reads one entry of the limits list.
func parseEntry(n *yaml.Node) (limitEntry, error) {
	e := limitEntry{line: n.Line}
	if n.Kind != yaml.MappingNode {
		return e, lineError(n, "an entry must be a mapping (name or match, rate, interval, ...)")
	}
	got := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		known := false
		for _, f := range entryFields {
			known = known || k.Value == f
		}
		if !known {
			return e, lineError(k, "unknown field %s (an entry has %s)", strconv.Quote(k.Value), strings.Join(entryFields, ", "))
		}
		if got[k.Value] != nil {
			return e, lineError(k, "field %s given twice", k.Value)
		}
		got[k.Value] = v
	}
	str := func(field string) (string, *yaml.Node, error) {
		v := got[field]
		if v == nil {
			return "", nil, nil
		}
		if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
			return "", v, lineError(v, "%s must be a string", field)
		}
		return v.Value, v, nil
	}
	name, nameNode, err := str("name")
	if err != nil {
		return e, err
	}
	match, matchNode, err := str("match")
	if err != nil {
		return e, err
	}
	switch {
	case nameNode != nil && matchNode != nil:
		return e, lineError(n, "an entry has a name or a match pattern, not both")
	case nameNode == nil && matchNode == nil:
		return e, lineError(n, "an entry needs a name (one limiter) or a match pattern (existing limiters)")
	case nameNode != nil && name == "":
		return e, lineError(nameNode, "empty name")
	case matchNode != nil && match == "":
		return e, lineError(matchNode, "empty match pattern")
	}
	e.name, e.match = name, match

	rate := got["rate"]
	switch {
	case rate == nil:
		return e, lineError(n, "%s: rate is required", e.source())
	case rate.Kind != yaml.ScalarNode || (rate.Tag != "!!int" && !digits(rate.Value)):
		return e, lineError(rate, "rate must be a whole number, not %s", strconv.Quote(rate.Value))
	}
	r, err := strconv.ParseInt(rate.Value, 10, 64)
	if err != nil {
		return e, lineError(rate, "rate %s is not a decimal integer in [1, %d]", rate.Value, int64(1<<53-1))
	}
	if r < 1 {
		return e, lineError(rate, "rate must be at least 1, got %d", r)
	}
	e.cfg.Rate = r

	interval := got["interval"]
	if interval == nil {
		return e, lineError(n, "%s: interval is required (for example 1s, 500ms, 1m)", e.source())
	}
	if e.cfg.Interval, err = duration(interval, "interval"); err != nil {
		return e, err
	}
	if e.cfg.Interval <= 0 {
		return e, lineError(interval, "interval must be a positive duration, got %s", interval.Value)
	}

	if m := got["mode"]; m != nil {
		if m.Kind != yaml.ScalarNode || m.Tag != "!!str" {
			return e, lineError(m, "mode must be overall or per_client")
		}
		switch strings.ToLower(m.Value) {
		case "overall":
			e.cfg.Mode = ratelimiter.Overall
		case "per_client", "per-client":
			e.cfg.Mode = ratelimiter.PerClient
		default:
			return e, lineError(m, "unknown mode %s: want overall or per_client", strconv.Quote(m.Value))
		}
	}

	if k := got["keep_alive"]; k != nil {
		// 0 without a unit reads as none, as time.ParseDuration reads it.
		if e.cfg.KeepAlive, err = duration(k, "keep_alive"); err != nil {
			return e, err
		}
	}
	if err := e.cfg.Validate(); err != nil {
		return e, lineError(n, "%s: %s", e.source(), strings.TrimPrefix(err.Error(), ratelimiter.ErrInvalidArgument.Error()+": "))
	}
	return e, nil
}

// duration reads a duration written as Go writes one (1s, 500ms, 1h30m);
// a bare number has no unit and is refused.
func duration(v *yaml.Node, field string) (time.Duration, error) {
	if v.Kind != yaml.ScalarNode || (v.Tag != "!!str" && v.Tag != "!!int" && v.Tag != "!!float") {
		return 0, lineError(v, "%s must be a duration such as 1s, 500ms or 1m", field)
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil {
		return 0, lineError(v, "%s %s is not a duration with a unit, such as 1s, 500ms or 1m", field, strconv.Quote(v.Value))
	}
	if d < 0 {
		return 0, lineError(v, "%s must not be negative, got %s", field, v.Value)
	}
	return d, nil
}

// digits reports whether s is decimal digits after an optional sign: a
// whole number, however large, that YAML may not tag !!int.
func digits(s string) bool {
	s = strings.TrimLeft(s, "+-")
	return s != "" && strings.Trim(s, "0123456789") == ""
}
