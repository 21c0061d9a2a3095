package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// A binary stamped as make dist stamps it (.goreleaser.yaml's ldflags)
// prints the stamped version and revision, for --version and for the
// version command; TestUsageMessages checks an unstamped build.
func TestVersionStamped(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ratelimiter")
	build := exec.Command("go", "build", "-o", out,
		"-ldflags", "-X main.stampedVersion=v9.8.7 -X main.stampedRevision=0123456789abcdef+modified", ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	want := "ratelimiter v9.8.7 (0123456789abcdef+modified, " + runtime.Version() + ")\n"
	for _, arg := range []string{"--version", "version"} {
		got, err := exec.Command(out, arg).Output()
		require.NoError(t, err, arg)
		require.Equal(t, want, string(got), arg)
	}
}
