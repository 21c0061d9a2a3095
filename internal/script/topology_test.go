package script

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

// TestReadOnlyInScriptRefreshesTopology: READONLY raised inside every
// script that writes (here by a replica) reaches the topology check as
// READONLY, so that a cluster client reloads its slot map, and is not
// taken for corrupt state.
func TestReadOnlyInScriptRefreshesTopology(t *testing.T) {
	redistest.Need(t)
	if os.Getenv("REDIS_ADDR") != "" {
		t.Skip("REDIS_ADDR is set: this test needs a redis-server of its own")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := redistest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	keys := []string{"ro", "{ro}:value", "{ro}:value:c", "{ro}:permits", "{ro}:permits:c"}
	if err := rdb.HSet(ctx, "ro", "rate", "5", "interval", "1000", "type", "0").Err(); err != nil {
		t.Fatal(err)
	}
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(ctx, "REPLICAOF", "127.0.0.1", strconv.Itoa(port)).Err(); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for name, run := range map[string]func() error{
		"trysetrate": func() error { return scriptTrySetRate.Run(ctx, rdb, keys[:1], 5, 1000, 0, 0).Err() },
		"setrate":    func() error { return scriptSetRate.Run(ctx, rdb, keys, 5, 1000, 0, 0, 0, 1, now).Err() },
		"release":    func() error { return scriptRelease.Run(ctx, rdb, keys, 1, now).Err() },
		"expire":     func() error { return scriptExpire.Run(ctx, rdb, keys, "PEXPIRE", 1000).Err() },
	} {
		err := run()
		if !topologyError(err) {
			t.Errorf("%s: %v does not ask for a topology refresh", name, err)
		}
		if errors.Is(MapError(err), ErrCorruptState) {
			t.Errorf("%s: %v maps to ErrCorruptState", name, err)
		}
	}
}

// The errors that ask for a topology refresh: slot moves and failovers,
// also as Valkey words a script's key that moved away, and inside a
// script on Redis 6.2; not other errors.
func TestTopologyErrorWords(t *testing.T) {
	for msg, want := range map[string]bool{
		"MOVED 3999 127.0.0.1:6381": true,
		"ERR Script attempted to access a non local key in a cluster node script: abc, on @user_script:12.":                                 true,
		"ERR Error running script (call to f_0): @user_script:19: @user_script: 19: -READONLY You can't write against a read only replica.": true,
		"WRONGTYPE Operation against a key holding the wrong kind of value":                                                                 false,
		"NOPERM this user has no permissions to run the 'zadd' command":                                                                     false,
	} {
		if got := topologyError(scriptRaised(msg)); got != want {
			t.Errorf("topologyError(%q) = %v, want %v", msg, got, want)
		}
	}
}
