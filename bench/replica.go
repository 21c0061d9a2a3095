package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redisproc"
)

// replicaResult is the latency of TryAcquire without and with
// WithReplicaAck(1, …), or why it was left out.
type replicaResult struct {
	names   []string
	samples [][]latencySample
	skipped string
}

// replicaAck times sequential granted TryAcquire calls without and with
// WithReplicaAck(1, 1s) (a WAIT for one replica after each script call,
// in the same round trip), plan.costRounds rounds of plan.costCalls
// calls, sides alternated. The server needs a replica: when it has none
// and start is true (the server is this run's own), a throwaway replica
// on loopback is started for these runs only, so that no other
// measurement pays for the replication stream; otherwise it is left out.
func (b *bench) replicaAck(ctx context.Context, addr string, start bool) (replicaResult, error) {
	n, err := connectedReplicas(ctx, b.rdb)
	if err != nil {
		return replicaResult{}, err
	}
	if n == 0 && !start {
		b.progress("replica acknowledgement: skipped (no replica)")
		return replicaResult{skipped: "the server named by --url has no replica (without --url the yardstick starts one)"}, nil
	}
	if n == 0 {
		stop, err := b.startReplica(ctx, addr)
		if err != nil {
			return replicaResult{}, err
		}
		defer stop()
	}
	key := b.key("ack")
	defer b.drop(context.Background(), key)
	plain := ratelimiter.NewClient(b.rdb).Limiter(key)
	if _, err := plain.TrySetRate(ctx, ratelimiter.Config{Rate: 1 << 50, Interval: time.Hour}); err != nil {
		return replicaResult{}, err
	}
	acked := ratelimiter.NewClient(b.rdb, ratelimiter.WithReplicaAck(1, time.Second)).Limiter(key)
	sides := []goLimiter{
		func(ctx context.Context) (bool, error) { return plain.TryAcquire(ctx, 1) },
		func(ctx context.Context) (bool, error) { return acked.TryAcquire(ctx, 1) },
	}
	res := replicaResult{names: []string{"no acknowledgement", "WithReplicaAck(1, 1s)"}, samples: make([][]latencySample, 2)}
	for r := 0; r < b.plan.costRounds; r++ {
		for _, i := range order(r, len(sides)) {
			l := sides[i]
			s, err := latencyOf(ctx, l, b.plan.costCalls)
			if err != nil {
				return replicaResult{}, fmt.Errorf("%s: %w", res.names[i], err)
			}
			res.samples[i] = append(res.samples[i], s)
		}
	}
	b.progress("replica acknowledgement: done")
	return res, nil
}

// startReplica starts a redis-server replicating addr and waits until the
// master counts it; stop stops it. The master, this run's own, is set to
// start the initial sync at once instead of after 5 s.
func (b *bench) startReplica(ctx context.Context, addr string) (func(), error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if err := b.rdb.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		return nil, err
	}
	srv, err := redisproc.StartWrapped(ctx, nil, "--replicaof", host, port)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	stop := func() { _ = srv.Close() }
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := connectedReplicas(ctx, b.rdb)
		if err != nil {
			stop()
			return nil, err
		}
		if n > 0 {
			return stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("replica on %s: not connected to the master after 30s", srv.Addr())
		}
		if err := sleepUntil(ctx, time.Now().Add(50*time.Millisecond)); err != nil {
			stop()
			return nil, err
		}
	}
}

// connectedReplicas returns the replicas whose link is up (INFO
// replication: state=online).
func connectedReplicas(ctx context.Context, rdb *redis.Client) (int, error) {
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && strings.HasPrefix(k, "slave") {
			if _, err := strconv.Atoi(strings.TrimPrefix(k, "slave")); err == nil && strings.Contains(v, "state=online") {
				n++
			}
		}
	}
	return n, nil
}

func (r *results) replicaTable(w io.Writer) {
	fmt.Fprintf(w, "### Replica acknowledgement\n\n")
	if r.replica.skipped != "" {
		fmt.Fprintf(w, "Skipped: %s.\n\n", r.replica.skipped)
		return
	}
	fmt.Fprintf(w, "The server with one replica on loopback; sequential granted TryAcquire calls, %d rounds of %d, "+
		"sides alternated, medians of the rounds' percentiles; (x) is the ratio to the first row.\n\n", r.plan.costRounds, r.plan.costCalls)
	fmt.Fprint(w, "| TryAcquire | p50 µs | p99 µs |\n|---|---:|---:|\n")
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	p := func(i int, f func(latencySample) time.Duration) float64 {
		return median(pick(r.replica.samples[i], func(s latencySample) float64 { return us(f(s)) }))
	}
	p50 := func(s latencySample) time.Duration { return s.p50 }
	p99 := func(s latencySample) time.Duration { return s.p99 }
	for i, name := range r.replica.names {
		fmt.Fprintf(w, "| %s | %s | %s |\n", name, withRatio(p(i, p50), p(0, p50), 0), withRatio(p(i, p99), p(0, p99), 0))
	}
	fmt.Fprintln(w)
}
