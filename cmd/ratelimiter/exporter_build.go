package main

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// buildLabels are ratelimiter_build_info's labels: the version and the
// revision that "ratelimiter --version" prints (both from buildVersion),
// and the Go version the binary was built with, as prometheus/common/
// version labels a build. A revision buildVersion does not know is
// "unknown".
func buildLabels() prometheus.Labels {
	v, revision := buildVersion()
	if revision == "" {
		revision = "unknown"
	}
	return prometheus.Labels{"version": v, "revision": revision, "goversion": runtime.Version()}
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
