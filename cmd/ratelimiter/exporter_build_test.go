package main

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// ratelimiter_build_info's labels say what --version prints: reassembled,
// they give version()'s text.
func TestExporterBuildLabels(t *testing.T) {
	l := buildLabels()
	require.Equal(t, runtime.Version(), l["goversion"])
	want := "ratelimiter " + l["version"] + " (" + l["revision"] + ", " + l["goversion"] + ")"
	if l["revision"] == "unknown" {
		want = "ratelimiter " + l["version"] + " (" + l["goversion"] + ")"
	}
	require.Equal(t, version(), want)
}
