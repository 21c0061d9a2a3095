package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// childEnv makes this test binary the child of TestMainWithoutServer: its
// TestMain is then Main, the body every package's TestMain uses.
const childEnv = "REDISTEST_MAIN_CHILD"

// childAddr is the child's *addr, as a package's redisAddr.
var childAddr string

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(Main(m, &childAddr, nil))
	}
	os.Exit(m.Run())
}

// runChild runs this test binary as a package under Main with no
// redis-server to start (REDIS_SERVER names a missing file, REDIS_ADDR is
// unset), with -v, the child tests and ExampleMostInWindow selected and
// TestChildSkipped skipped by -skip; CI is set to ci, or unset when ci is
// "". It returns the combined output and the exit code.
func runChild(t *testing.T, ci string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.v", "-test.timeout=15s",
		"-test.run=^(TestChild.*|ExampleMostInWindow)$", "-test.skip=^TestChildSkipped$")
	for _, e := range os.Environ() {
		switch strings.SplitN(e, "=", 2)[0] {
		case "CI", "REDIS_ADDR", "REDIS_SERVER", childEnv:
		default:
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, childEnv+"=1",
		"REDIS_SERVER="+filepath.Join(t.TempDir(), "no-redis-server"))
	if ci != "" {
		cmd.Env = append(cmd.Env, "CI="+ci)
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee) && ctx.Err() == nil:
		return string(out), ee.ExitCode()
	}
	t.Fatalf("running the child: %v\n%s", err, out)
	return "", 0
}

// TestMainWithoutServer: with no redis-server, Main outside CI still runs
// the tests; the one that asks Client for Redis skips with the reason, the
// pure one passes, the examples are left out and a -skip given on the
// command line still holds. Under CI (CI=true) Main fails the run before
// any test runs.
func TestMainWithoutServer(t *testing.T) {
	t.Run("outside CI", func(t *testing.T) {
		out, code := runChild(t, "")
		if code != 0 {
			t.Fatalf("exit code %d, want 0:\n%s", code, out)
		}
		for _, want := range []string{
			"--- PASS: TestChildPure",
			"--- SKIP: TestChildRedis",
			"needs a redis-server: " + ErrNoServer.Error(),
			"the examples are left out",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		for _, absent := range []string{"ExampleMostInWindow", "TestChildSkipped"} {
			if strings.Contains(out, absent) {
				t.Errorf("%s ran:\n%s", absent, out)
			}
		}
	})
	t.Run("under CI", func(t *testing.T) {
		out, code := runChild(t, "true")
		if code != 1 {
			t.Fatalf("exit code %d, want 1:\n%s", code, out)
		}
		if !strings.Contains(out, "cannot start redis-server: "+ErrNoServer.Error()) {
			t.Errorf("output lacks the reason:\n%s", out)
		}
		if strings.Contains(out, "=== RUN") {
			t.Errorf("tests ran under CI without a server:\n%s", out)
		}
	})
}

// skipUnlessChild skips the child tests in an ordinary run.
func skipUnlessChild(t *testing.T) {
	t.Helper()
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestMainWithoutServer, as its child")
	}
}

// TestChildPure needs no Redis: it runs in the child and sees the address
// Main stores without a server.
func TestChildPure(t *testing.T) {
	skipUnlessChild(t)
	if childAddr != NoServerAddr {
		t.Fatalf("addr = %q, want NoServerAddr %q", childAddr, NoServerAddr)
	}
}

// TestChildRedis asks for Redis through Client, which must skip it in the
// child; reaching the ping fails it.
func TestChildRedis(t *testing.T) {
	skipUnlessChild(t)
	rdb := Client(t, childAddr)
	err := rdb.Ping(context.Background()).Err()
	t.Fatalf("Client did not skip without a server (ping %s: %v)", childAddr, err)
}

// TestChildSkipped is left out by the child's -skip; running fails it.
func TestChildSkipped(t *testing.T) {
	skipUnlessChild(t)
	t.Fatal("the -skip given on the command line did not hold")
}

// Two grants in the same 100 ms window, the third 150 ms after the first.
func ExampleMostInWindow() {
	t0 := time.Unix(0, 0)
	at := []time.Time{t0.Add(150 * time.Millisecond), t0, t0.Add(99 * time.Millisecond)}
	fmt.Println(MostInWindow(at, 100*time.Millisecond))
	// Output: 2
}
