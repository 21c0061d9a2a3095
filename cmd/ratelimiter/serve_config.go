package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	rlsext "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
)

// The configuration of "ratelimiter serve": the files of Envoy's
// rate-limit service (github.com/envoyproxy/ratelimit), read as that
// service reads them, so that a file written for it works unchanged. Each
// file holds one domain and its tree of descriptors; a descriptor with a
// rate_limit block names a limit, which serve keeps in a Redisson
// limiter (serve_service.go).

// rlsFile is one configuration file as YAML holds it. Decoding refuses a
// key the format does not know, as Envoy's service does, so that a typo
// (rate_limits, request_per_unit) is an error, not a silently missing
// limit.
type rlsFile struct {
	Domain      string          `yaml:"domain"`
	Descriptors []rlsDescriptor `yaml:"descriptors"`
}

// rlsDescriptor is one entry of a descriptor list. detailed_metric,
// value_to_metric and metadata are accepted and have no effect: they
// shape Envoy's service's statistics and dynamic metadata, which serve
// does not produce.
type rlsDescriptor struct {
	Key            string          `yaml:"key"`
	Value          string          `yaml:"value"`
	RateLimit      *rlsRateLimit   `yaml:"rate_limit"`
	Descriptors    []rlsDescriptor `yaml:"descriptors"`
	ShadowMode     bool            `yaml:"shadow_mode"`
	QuotaMode      bool            `yaml:"quota_mode"`
	DetailedMetric bool            `yaml:"detailed_metric"`
	ValueToMetric  bool            `yaml:"value_to_metric"`
	ShareThreshold bool            `yaml:"share_threshold"`
	Metadata       map[string]any  `yaml:"metadata"`
}

// rlsRateLimit is a descriptor's rate_limit block.
type rlsRateLimit struct {
	RequestsPerUnit uint32       `yaml:"requests_per_unit"`
	Unit            string       `yaml:"unit"`
	Unlimited       bool         `yaml:"unlimited"`
	Name            string       `yaml:"name"`
	Replaces        []rlsReplace `yaml:"replaces"`
}

type rlsReplace struct {
	Name string `yaml:"name"`
}

// unitIntervals are the windows of the units, the lengths Envoy's service
// uses (a month is 30 days, a year 365).
var unitIntervals = map[rlspb.RateLimitResponse_RateLimit_Unit]time.Duration{
	rlspb.RateLimitResponse_RateLimit_SECOND: time.Second,
	rlspb.RateLimitResponse_RateLimit_MINUTE: time.Minute,
	rlspb.RateLimitResponse_RateLimit_HOUR:   time.Hour,
	rlspb.RateLimitResponse_RateLimit_DAY:    24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_WEEK:   7 * 24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_MONTH:  30 * 24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_YEAR:   365 * 24 * time.Hour,
}

// rlsConfig is the loaded configuration: the domains by name.
type rlsConfig struct {
	domains map[string]*rlsNode
	limits  int // rate_limit blocks, for the log line
}

// rlsMatchKey identifies a child of a node: a key alone (hasValue false)
// matches any value of that key; a key and value match that value, or the
// values its wildcards match. Keeping the key and the value apart (Envoy's
// service joins them as key_value) means key "a_b" and key "a" with
// value "b" are different entries.
type rlsMatchKey struct {
	key, value string
	hasValue   bool
}

// rlsNode is a descriptor of the tree (or a domain, its root).
type rlsNode struct {
	children  map[rlsMatchKey]*rlsNode
	wildcards []rlsWildcard // children whose value holds '*', in file order
	limit     *rlsLimit
	// shareThreshold: the values this node's wildcard matches share one
	// limiter, named with the pattern instead of the value.
	shareThreshold bool
	pattern        string // the value with its wildcards, when shareThreshold
}

// rlsWildcard is a child whose value holds '*': parts is the value split
// at the stars.
type rlsWildcard struct {
	key   string
	parts []string
	node  *rlsNode
}

// rlsLimit is a rate_limit block, checked.
type rlsLimit struct {
	unlimited bool
	rate      uint32
	unit      rlspb.RateLimitResponse_RateLimit_Unit
	interval  time.Duration
	shadow    bool
	quota     bool
	name      string
	replaces  []string
	path      string // domain.key_value... for messages
}

// loadRLSConfig reads the configuration from paths: files, and
// directories whose *.yaml and *.yml files are read (not their
// subdirectories, nor files whose names start with a dot). A domain may
// appear in one file only.
func loadRLSConfig(paths []string) (*rlsConfig, error) {
	files, err := configFiles(paths)
	if err != nil {
		return nil, err
	}
	cfg := &rlsConfig{domains: map[string]*rlsNode{}}
	from := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var file rlsFile
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&file); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		if file.Domain == "" {
			return nil, fmt.Errorf("%s: the domain is missing or empty", f)
		}
		if prev, ok := from[file.Domain]; ok {
			return nil, fmt.Errorf("%s: domain %q is also in %s", f, file.Domain, prev)
		}
		from[file.Domain] = f
		root := &rlsNode{children: map[rlsMatchKey]*rlsNode{}}
		if err := cfg.load(root, file.Domain, file.Descriptors); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		cfg.domains[file.Domain] = root
	}
	return cfg, nil
}

// configFiles lists the files that paths name, in a stable order.
func configFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		var in []string
		for _, e := range entries {
			n := e.Name()
			ext := filepath.Ext(n)
			if strings.HasPrefix(n, ".") || (ext != ".yaml" && ext != ".yml") {
				continue
			}
			// A symlink to a file counts (Kubernetes mounts ConfigMaps so).
			if st, err := os.Stat(filepath.Join(p, n)); err != nil || st.IsDir() {
				continue
			}
			in = append(in, filepath.Join(p, n))
		}
		sort.Strings(in)
		files = append(files, in...)
	}
	return files, nil
}

// load adds the descriptors of a list to node; path is the node's place
// (domain.key_value...), for messages.
func (c *rlsConfig) load(node *rlsNode, path string, list []rlsDescriptor) error {
	for _, d := range list {
		if d.Key == "" {
			return fmt.Errorf("a descriptor under %s has no key", path)
		}
		mk := rlsMatchKey{key: d.Key, value: d.Value, hasValue: d.Value != ""}
		here := path + "." + d.Key
		if mk.hasValue {
			here += "_" + d.Value
		}
		if _, dup := node.children[mk]; dup {
			return fmt.Errorf("descriptor %s appears twice", here)
		}
		child := &rlsNode{children: map[rlsMatchKey]*rlsNode{}}
		if d.ShareThreshold {
			if !strings.Contains(d.Value, "*") {
				return fmt.Errorf("%s: share_threshold needs a value with a wildcard (*)", here)
			}
			child.shareThreshold, child.pattern = true, d.Value
		}
		if rl := d.RateLimit; rl != nil {
			l := &rlsLimit{unlimited: rl.Unlimited, rate: rl.RequestsPerUnit, shadow: d.ShadowMode, quota: d.QuotaMode, name: rl.Name, path: here}
			unit, known := rlspb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(rl.Unit)]
			valid := known && unit != int32(rlspb.RateLimitResponse_RateLimit_UNKNOWN)
			switch {
			case rl.Unlimited && valid:
				return fmt.Errorf("%s: an unlimited rate_limit takes no unit", here)
			case !rl.Unlimited && !valid:
				return fmt.Errorf("%s: unit %q is not second, minute, hour, day, week, month or year", here, rl.Unit)
			}
			if valid {
				l.unit = rlspb.RateLimitResponse_RateLimit_Unit(unit)
				l.interval = unitIntervals[l.unit]
			}
			for _, r := range rl.Replaces {
				switch {
				case r.Name == "":
					return fmt.Errorf("%s: a replaces entry has no name", here)
				case r.Name == rl.Name:
					return fmt.Errorf("%s: replaces its own name %q", here, r.Name)
				}
				l.replaces = append(l.replaces, r.Name)
			}
			child.limit = l
			c.limits++
		}
		if strings.Contains(d.Value, "*") {
			node.wildcards = append(node.wildcards, rlsWildcard{key: d.Key, parts: strings.Split(d.Value, "*"), node: child})
		}
		node.children[mk] = child
		if err := c.load(child, here, d.Descriptors); err != nil {
			return err
		}
	}
	return nil
}

// wildcardMatches reports whether value matches the pattern split at its
// stars into parts: each star stands for any run of bytes, empty too.
func wildcardMatches(parts []string, value string) bool {
	if len(parts) == 1 {
		return parts[0] == value
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) || !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// rlsMatch is what a request's descriptor matched: the limit (nil for
// none) and the limiter name of the descriptor path.
type rlsMatch struct {
	limit *rlsLimit
	name  string
	// configured: the descriptor matched a rate_limit block (unlimited
	// included), or the request overrode the limit.
	configured bool
}

// match finds the limit of one descriptor of a request, as Envoy's
// service does: level by level, an entry matches its key and value, else
// the first wildcard value of its key that matches, else its key alone;
// the limit is that of the node the last entry matched, so a descriptor
// with more or fewer entries than the configured path matches nothing.
// A limit the request carries (Envoy's limit override) replaces the
// configured one, in a domain that is configured, on a limiter of its own
// (overrideNamePart), so that requests with and without it, or with
// different overrides, do not write their rates over each other's.
func (c *rlsConfig) match(domain string, d *rlsext.RateLimitDescriptor) rlsMatch {
	node := c.domains[domain]
	if node == nil || len(d.GetEntries()) == 0 {
		return rlsMatch{}
	}
	entries := d.GetEntries()
	path := make([]nameEntry, len(entries))
	for i, e := range entries {
		path[i] = nameEntry{key: e.GetKey(), value: e.GetValue()}
	}
	if o := d.GetLimit(); o != nil {
		// The override's unit is envoy.type.v3.RateLimitUnit: the same
		// names as the response's unit, matched by name.
		unit := rlspb.RateLimitResponse_RateLimit_Unit(rlspb.RateLimitResponse_RateLimit_Unit_value[o.GetUnit().String()])
		l := &rlsLimit{rate: o.GetRequestsPerUnit(), unit: unit, path: "override"}
		if l.interval = unitIntervals[l.unit]; l.interval == 0 {
			return rlsMatch{}
		}
		return rlsMatch{limit: l, name: limiterName(domain, path) + overrideNamePart(l), configured: true}
	}
	var found *rlsLimit
	for i, e := range entries {
		key, value := e.GetKey(), e.GetValue()
		next := node.children[rlsMatchKey{key: key, value: value, hasValue: true}]
		if next == nil {
			for _, w := range node.wildcards {
				if w.key == key && wildcardMatches(w.parts, value) {
					next = w.node
					if next.shareThreshold {
						path[i].value = next.pattern
					}
					break
				}
			}
		}
		if next == nil {
			next = node.children[rlsMatchKey{key: key}]
		}
		if next == nil {
			break
		}
		if i == len(entries)-1 {
			found = next.limit
		}
		if len(next.children) == 0 {
			break
		}
		node = next
	}
	if found == nil {
		return rlsMatch{}
	}
	return rlsMatch{limit: found, name: limiterName(domain, path), configured: true}
}

// nameEntry is one key and value of a descriptor path.
type nameEntry struct{ key, value string }

// limiterName is the name of the Redisson limiter that holds a descriptor
// path's limit: the domain, then each entry as key_value, joined by ':'
// (domain:key_value:key2_value2). So that two paths never share a name,
// each part is escaped: the bytes '%', ':', '{' and '}' everywhere, and
// '_' in values, are written as '%' and two upper-case hex digits. A value
// then holds no bare '_', so the last bare '_' of an entry ends its key
// (keys keep theirs: Envoy's own keys, such as remote_address, have one),
// and no part holds a bare ':'. Names without braces make Redisson's keys
// {name}:value and {name}:permits share the config key's Cluster slot.
func limiterName(domain string, path []nameEntry) string {
	var b strings.Builder
	escapeNamePart(&b, domain, false)
	for _, e := range path {
		b.WriteByte(':')
		escapeNamePart(&b, e.key, false)
		b.WriteByte('_')
		escapeNamePart(&b, e.value, true)
	}
	return b.String()
}

// overrideNamePart is what a limit override adds to the limiter name of
// its descriptor path: ":override=" and the override's rate and unit
// (":override=50/minute"). An entry's part always holds a bare '_' (the
// one after its key) and this part holds none (the unit names have no
// '_'), so the name of an override is never that of a path, and
// overrides that differ in rate or unit get limiters of their own.
func overrideNamePart(l *rlsLimit) string {
	return fmt.Sprintf(":override=%d/%s", l.rate, strings.ToLower(l.unit.String()))
}

func escapeNamePart(b *strings.Builder, s string, value bool) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%' || c == ':' || c == '{' || c == '}' || (value && c == '_'):
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
}
