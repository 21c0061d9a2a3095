package compat

import (
	"testing"
	"time"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// TestScriptInstructions compares the Redis work of one tryAcquire by
// Redisson 4.7.0 and by this library without the noise that makes time
// measurements on a shared machine swing by half: ScriptInstructions runs
// redis-server under valgrind's callgrind and counts the instructions it
// executes while each side makes its calls on a limiter in the same state.
// The counts are repeatable to a fraction of a percent, so the test
// asserts that ours (the default: the server's clock) is not larger; on
// the client's clock (WithServerClock(false)) the read of the window's
// newest record that each grant then makes is logged, not held to it.
// The yardstick (make bench, section
// "Redis instructions per decision") prints the same counts.
//
// Run: go test ./internal/compat -run TestScriptInstructions -v
func TestScriptInstructions(t *testing.T) {
	needJava(t)
	needServer(t)
	ctx := ctxT(t, 10*time.Minute)
	cg, c := redistest.Callgrind(t, ctx)
	peer, err := StartPeer(ctx, PeerOptions{Version: "4.7.0", Addr: cg.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = peer.Close() })

	counts, err := ScriptInstructions(ctx, cg, c, peer, limName(t, "instr")+".", 2000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range counts {
		t.Logf("REDIS INSTRUCTIONS per tryAcquire, %s path (window of %d records): Redisson 4.7.0 %.0f, Go %.0f, Go/Redisson %.3f; Go on the client's clock %.0f (%.3fx); one-command script %.0f (Redisson %.2fx, Go %.2fx)",
			r.Path, r.Records, r.Redisson, r.Go, r.Go/r.Redisson, r.GoClientClock, r.GoClientClock/r.Redisson, r.OneCommand, r.Redisson/r.OneCommand, r.Go/r.OneCommand)
		if r.Go > r.Redisson {
			t.Errorf("%s path: our script costs Redis %.0f instructions per call, Redisson's %.0f", r.Path, r.Go, r.Redisson)
		}
	}
}
