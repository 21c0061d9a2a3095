package main

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// ratelimiter_build_info's version and revision are read back from what
// --version prints, in both of its shapes; reassembled they give
// version()'s text again, so a change of that text fails here.
func TestExporterBuildLabels(t *testing.T) {
	for _, c := range []struct{ in, version, revision string }{
		{"ratelimiter v0.1.0 (0123456789ab, go1.26.0)", "v0.1.0", "0123456789ab"},
		{"ratelimiter (devel) (0123456789ab+modified, go1.26.0)", "(devel)", "0123456789ab+modified"},
		{"ratelimiter v0.1.0 (go1.26.0)", "v0.1.0", ""},
		{"ratelimiter (no build information)", "(no build information)", ""},
	} {
		v, rev := splitVersion(c.in)
		require.Equal(t, c.version, v, c.in)
		require.Equal(t, c.revision, rev, c.in)
	}

	l := buildLabels()
	require.Equal(t, runtime.Version(), l["goversion"])
	want := "ratelimiter " + l["version"] + " (" + l["revision"] + ", " + l["goversion"] + ")"
	if l["revision"] == "unknown" {
		want = "ratelimiter " + l["version"] + " (" + l["goversion"] + ")"
	}
	require.Equal(t, version(), want)
}
