package ratelimiterotel_test

import (
	"sort"
	"strings"

	"go.opentelemetry.io/otel/attribute"
)

func attrsOf(kvs []attribute.KeyValue) string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return render(m)
}

func render(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
