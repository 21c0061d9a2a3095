package main

import (
	"runtime"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// buildLabels are ratelimiter_build_info's labels: the version and the
// revision that "ratelimiter --version" prints (version(), read back
// from its text so that both always agree), and the Go version the
// binary was built with, as prometheus/common/version labels a build.
// A revision version() does not print is "unknown".
func buildLabels() prometheus.Labels {
	v, revision := splitVersion(version())
	if revision == "" {
		revision = "unknown"
	}
	return prometheus.Labels{"version": v, "revision": revision, "goversion": runtime.Version()}
}

// splitVersion reads the version and the revision out of what version()
// prints: "ratelimiter VERSION (REVISION, GOVERSION)", or without the
// revision "ratelimiter VERSION (GOVERSION)". A text of another shape is
// the version as a whole, with no revision.
func splitVersion(s string) (v, revision string) {
	s = strings.TrimPrefix(s, "ratelimiter ")
	v, rest, ok := strings.Cut(s, " (")
	if !ok || !strings.HasSuffix(rest, ")") {
		return s, ""
	}
	parts := strings.Split(strings.TrimSuffix(rest, ")"), ", ")
	if len(parts) == 2 {
		revision = parts[0]
	}
	return v, revision
}

// newBuildInfo is ratelimiter_build_info: a gauge of 1 whose labels say
// which build serves (buildLabels).
func newBuildInfo() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "ratelimiter_build_info",
		Help:        "A metric with a constant '1' value labeled by version, revision, and goversion from which ratelimiter was built.",
		ConstLabels: buildLabels(),
	}, func() float64 { return 1 })
}
