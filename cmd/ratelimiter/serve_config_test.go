package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsext "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeServeConfig writes text as a file in a new directory and returns
// its path.
func writeServeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

func descriptor(kv ...string) *rlsext.RateLimitDescriptor {
	d := &rlsext.RateLimitDescriptor{}
	for i := 0; i < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlsext.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// The matching rules of Envoy's service, on the examples of its README:
// key and value before a wildcard before the key alone, the limit of the
// level the last entry reaches (a request with more or fewer entries
// than the path matches nothing), each value of a key-only descriptor a
// limiter of its own, a share_threshold wildcard one limiter for all.
func TestServeConfigMatch(t *testing.T) {
	cfg, err := loadRLSConfig([]string{writeServeConfig(t, `
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
  - key: path
    value: /api/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10
  - key: ldap
    rate_limit:
      unlimited: true
  - key: service
    detailed_metric: true
    descriptors:
      - key: user
        value: user-a
        shadow_mode: true
        rate_limit:
          unit: SECOND
          requests_per_unit: 10
`)})
	require.NoError(t, err)
	for _, c := range []struct {
		kv   []string
		path string // the limit's place; "" for none
		name string
	}{
		{[]string{"message_type", "marketing", "to_number", "2061111111"}, "messaging.message_type_marketing.to_number", "messaging:message_type_marketing:to_number_2061111111"},
		{[]string{"to_number", "2061111111"}, "messaging.to_number", "messaging:to_number_2061111111"},
		{[]string{"message_type", "marketing"}, "", ""},
		{[]string{"message_type", "other", "to_number", "1"}, "", ""},
		{[]string{"to_number", "1", "extra", "x"}, "", ""},
		{[]string{"remote_address", "50.0.0.1"}, "messaging.remote_address", "messaging:remote_address_50.0.0.1"},
		{[]string{"remote_address", "50.0.0.5"}, "messaging.remote_address_50.0.0.5", "messaging:remote_address_50.0.0.5"},
		{[]string{"path", "/api/123/action"}, "messaging.path_/api/*/action", "messaging:path_/api/123/action"},
		{[]string{"path", "/api/123/other"}, "", ""},
		{[]string{"files", "files/a.pdf"}, "messaging.files_files/*", "messaging:files_files/*"},
		{[]string{"files", "files/b.csv"}, "messaging.files_files/*", "messaging:files_files/*"},
		{[]string{"ldap", "x"}, "messaging.ldap", "messaging:ldap_x"},
		{[]string{"service", "s", "user", "user-a"}, "messaging.service.user_user-a", "messaging:service_s:user_user-a"},
		{[]string{"service", "s", "user", "user-b"}, "", ""},
	} {
		m := cfg.match("messaging", descriptor(c.kv...))
		if c.path == "" {
			assert.Nil(t, m.limit, "%v", c.kv)
			continue
		}
		if assert.NotNil(t, m.limit, "%v", c.kv) {
			assert.Equal(t, c.path, m.limit.path, "%v", c.kv)
			assert.Equal(t, c.name, m.name, "%v", c.kv)
		}
	}
	assert.Nil(t, cfg.match("other", descriptor("to_number", "1")).limit, "an unknown domain has no limits")
	l := cfg.match("messaging", descriptor("service", "s", "user", "user-a")).limit
	assert.True(t, l.shadow)
	assert.Equal(t, time.Second, l.interval)
	assert.True(t, cfg.match("messaging", descriptor("ldap", "x")).limit.unlimited)
	assert.Equal(t, 24*time.Hour, cfg.match("messaging", descriptor("to_number", "1")).limit.interval)

	// A limit the request carries (Envoy's override) wins, in a known
	// domain.
	d := descriptor("anything", "v")
	d.Limit = &rlsext.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: typev3.RateLimitUnit_HOUR}
	m := cfg.match("messaging", d)
	require.NotNil(t, m.limit)
	assert.Equal(t, uint32(7), m.limit.rate)
	assert.Equal(t, time.Hour, m.limit.interval)
	assert.Equal(t, "messaging:anything_v:override=7/hour", m.name, "a limiter of its own")
	assert.Nil(t, cfg.match("other", d).limit)
}

// The name mapping is one to one: the bytes that separate (':' between
// entries, the last '_' of an entry) and '%', '{', '}' are escaped, so
// that paths that differ never share a limiter.
func TestServeLimiterNames(t *testing.T) {
	assert.Equal(t, "d:remote_address_1.2.3.4", limiterName("d", []nameEntry{{"remote_address", "1.2.3.4"}}))
	assert.Equal(t, "d%3Ax:k%25_v%5Fw%3A%7B%7D%25", limiterName("d:x", []nameEntry{{"k%", "v_w:{}%"}}))
	paths := [][]nameEntry{
		{{"a", "b_c"}},
		{{"a_b", "c"}},
		{{"a", "b:c_d"}},
		{{"a", "b"}, {"c", "d"}},
		{{"a", "b%3Ac_d"}},
		{{"a", ""}},
		{{"a_", ""}},
	}
	seen := map[string]int{}
	for i, p := range paths {
		n := limiterName("d", p)
		if j, dup := seen[n]; dup {
			t.Errorf("paths %v and %v share the name %q", paths[j], p, n)
		}
		seen[n] = i
	}

	// Overrides: never a path's name, one per rate and unit. The paths
	// are built to look like an override part.
	names := map[string]string{}
	add := func(what, n string) {
		t.Helper()
		if prev, dup := names[n]; dup {
			t.Errorf("%s and %s share the name %q", prev, what, n)
		}
		names[n] = what
	}
	for _, p := range [][]nameEntry{
		{{"a", "b"}},
		{{"a", "b"}, {"override", "50/minute"}},
		{{"a", "b"}, {"override=50/minute", ""}},
		{{"a", "b:override=50/minute"}},
	} {
		add(fmt.Sprint("path ", p), limiterName("d", p))
	}
	for _, o := range []*rlsLimit{
		{rate: 50, unit: rlspb.RateLimitResponse_RateLimit_MINUTE},
		{rate: 50, unit: rlspb.RateLimitResponse_RateLimit_SECOND},
		{rate: 5, unit: rlspb.RateLimitResponse_RateLimit_MINUTE},
		{rate: 0, unit: rlspb.RateLimitResponse_RateLimit_YEAR},
	} {
		n := limiterName("d", []nameEntry{{"a", "b"}}) + overrideNamePart(o)
		assert.NotContains(t, strings.TrimPrefix(n, "d:a_b"), "_")
		add(fmt.Sprintf("override %d/%v", o.rate, o.unit), n)
	}
	assert.Contains(t, names, "d:a_b:override=50/minute")
}

// A file Envoy's service refuses is refused, with the reason.
func TestServeConfigRefused(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"descriptors: []\n", "domain is missing"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limits: {unit: second, requests_per_unit: 1}\n", "rate_limits"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", "fortnight"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, unlimited: true}\n", "takes no unit"},
		{"domain: d\ndescriptors:\n  - value: v\n", "no key"},
		{"domain: d\ndescriptors:\n  - key: k\n  - key: k\n", "twice"},
		{"domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n", "wildcard"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n", "-1"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: n, replaces: [{name: n}]}\n", "own name"},
		{"domain: [\n", "yaml"},
	} {
		_, err := loadRLSConfig([]string{writeServeConfig(t, c.text)})
		if assert.Error(t, err, c.text) {
			assert.Contains(t, err.Error(), c.want, c.text)
		}
	}
	// A domain in two files of a directory.
	dir := t.TempDir()
	for _, n := range []string{"a.yaml", "b.yml"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("domain: same\n"), 0o600))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not read"), 0o600))
	_, err := loadRLSConfig([]string{dir})
	require.ErrorContains(t, err, `domain "same" is also in`)
}

func TestServeWildcards(t *testing.T) {
	for _, c := range []struct {
		pattern, value string
		want           bool
	}{
		{"value*", "value1", true},
		{"value*", "value", true},
		{"value*", "valu", false},
		{"/api/*/action", "/api/1/action", true},
		{"/api/*/action", "/api/1/other", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "acb", false},
		{"ab*ba", "aba", false},
	} {
		assert.Equal(t, c.want, wildcardMatches(strings.Split(c.pattern, "*"), c.value), "%s %s", c.pattern, c.value)
	}
}
