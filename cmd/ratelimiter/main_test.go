package main_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// The tests build the real binary once and run it as a process against a
// real redis-server, then read Redis to see what each command changed.
var (
	bin       string
	redisAddr string
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m, &redisAddr, buildBinary)) }

// buildBinary builds the command once for all tests into a temporary
// directory, which the returned cleanup removes.
func buildBinary() (func(), error) {
	dir, err := os.MkdirTemp("", "ratelimiter-cli-")
	if err != nil {
		return nil, err
	}
	bin = filepath.Join(dir, "ratelimiter")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("go build: %w", err)
	}
	return func() { os.RemoveAll(dir) }, nil
}

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

// cli runs the binary with REDIS_URL pointing at the test server; it
// skips t when there is none (redistest.Need). cliEnv runs it without.
func cli(t testing.TB, args ...string) result {
	t.Helper()
	redistest.Need(t)
	return cliEnv(t, []string{"REDIS_URL=redis://" + redisAddr + "/0"}, args...)
}

// cliOffline runs the binary with REDIS_URL at an address nothing listens
// on (redistest.NoServerAddr), for what it answers before it connects
// (help, usage errors, its version): those tests run without a
// redis-server.
func cliOffline(t testing.TB, args ...string) result {
	t.Helper()
	return cliEnv(t, []string{"REDIS_URL=redis://" + redistest.NoServerAddr + "/0"}, args...)
}

func cliEnv(t testing.TB, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "REDIS_URL=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

func newRedis(t testing.TB) *redis.Client { return redistest.Client(t, redisAddr) }

// newRedisAt is newRedis for the server at addr.
func newRedisAt(t testing.TB, addr string) *redis.Client { return redistest.Client(t, addr) }

func uniqueName(t testing.TB) string { return redistest.Name(t) }

// ok requires exit status 0 and an empty stderr.
func ok(t testing.TB, r result) result {
	t.Helper()
	require.Equal(t, 0, r.code, "stdout %q stderr %q", r.stdout, r.stderr)
	require.Empty(t, r.stderr)
	return r
}

// failsWith requires the exit status and, for 2, exactly one line on stderr.
func failsWith(t testing.TB, code int, r result) result {
	t.Helper()
	require.Equal(t, code, r.code, "stdout %q stderr %q", r.stdout, r.stderr)
	if code == 2 {
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "stderr must be one line: %q", r.stderr)
	}
	return r
}

// TestBinaryDoesNotLinkTesting: the demo's throwaway redis-server comes from
// the CLI's own launcher (throwaway.go), so the binary carries no test
// machinery (testing, the core's test rigs), and the CLI's own packages
// import none of the core module's internal packages (a published module
// must not: the core may change them in any release). The core's engine
// and scripts (internal/engine, internal/script) are linked through the
// core's public packages, as in any program that uses the library.
func TestBinaryDoesNotLinkTesting(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	rigs := []string{"internal/redistest", "internal/redisproc", "internal/compat", "internal/modproxy"}
	for _, pkg := range strings.Fields(string(out)) {
		rig := slices.ContainsFunc(rigs, func(r string) bool {
			return strings.HasPrefix(pkg, "github.com/goredisson/ratelimiter/"+r)
		})
		if pkg == "testing" || rig {
			t.Errorf("cmd/ratelimiter links %s", pkg)
		}
	}
	out, err = exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/goredisson/ratelimiter/internal/") {
			t.Errorf("cmd/ratelimiter imports %s", pkg)
		}
	}
}
