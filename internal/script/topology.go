package script

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Topology refresh for Redis Cluster.
//
// go-redis's ClusterClient reloads its slot map on its own only when a node
// answers MOVED or READONLY, and otherwise once a minute
// (ClusterStateReloadInterval). After a master crashes, its slots stay
// mapped to the dead address: every command for them fails with
// "connection refused" (go-redis retries the same dead master), and nothing
// answers MOVED, so the client keeps dialing the dead node long after a
// replica has taken over (more than 8 s measured with a 1 s
// cluster-node-timeout; go-redis issue #3979). The library therefore asks
// the client to reload its slot map whenever a call fails in a way that
// suggests the topology changed: a network error or timeout, CLUSTERDOWN,
// MOVED, ASK, TRYAGAIN, READONLY, MASTERDOWN or LOADING. The reload runs
// in the background (ClusterClient.ReloadState) and is rate-limited to one
// per refreshInterval per Client; failed calls are not retried (an
// acquisition whose reply was lost may have been applied).
//
// A Sentinel-backed redis.FailoverClient needs none of this: it asks the
// sentinels for the master on every new connection and drops its
// connections on +switch-master. NewFailoverClusterClient returns a
// ClusterClient and gets the refresh.

// refreshInterval is the least time between two slot map reloads that a
// Client asks of its ClusterClient.
const refreshInterval = 100 * time.Millisecond

type refresher struct {
	next atomic.Int64 // unix nanoseconds before which no reload is asked
}

// Observe is called with the raw error of every Redis call the library
// makes. On a ClusterClient, an error that suggests a topology change
// triggers a slot map reload (at most one per refreshInterval).
func (c *Conn) Observe(err error) {
	if err == nil {
		return
	}
	cc, ok := c.rdb.(*redis.ClusterClient)
	if !ok || !topologyError(err) {
		return
	}
	r := &c.refresh
	now := time.Now().UnixNano()
	next := r.next.Load()
	if now < next || !r.next.CompareAndSwap(next, now+int64(refreshInterval)) {
		return
	}
	// ReloadState only schedules a reload in the background and returns at
	// once; the context is not used for it.
	cc.ReloadState(context.Background())
}

// topologyError reports whether err suggests that the node a command was
// sent to is no longer the master of its slot (or no longer there).
func topologyError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, redis.ErrClosed) {
		return false
	}
	err = innerScriptError(err)
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		for _, p := range []string{"CLUSTERDOWN", "MOVED ", "ASK ", "TRYAGAIN", "READONLY", "MASTERDOWN", "LOADING"} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		// Valkey (and Redis 7) refuse a script whose keys moved away
		// during a slot migration with this instead of MOVED.
		return strings.Contains(msg, "non local key")
	}
	var nerr net.Error
	return errors.As(err, &nerr) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}
