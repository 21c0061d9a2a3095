package ratelimiter

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
		if errors.Is(scriptError(err), ErrCorruptState) {
			t.Errorf("%s: %v maps to ErrCorruptState", name, err)
		}
	}
}
