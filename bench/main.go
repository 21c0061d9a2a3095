// Command bench puts this library's limiter beside Java Redisson's
// RRateLimiter, go-redis/redis_rate (GCRA) and the classic algorithms
// (fixed window, sliding log, sliding window counter, token bucket, and a
// one-command script as the floor), all against one redis-server in one
// run. It prints markdown tables (throughput and Redis CPU per decision at
// 1, 16 and 64 callers on a hot key, latency, memory, exactness; and for
// this library against Redisson: combining, blocked callers, the caller's
// cost, replica acknowledgement, Redis time by window size, Redis
// instructions under callgrind, composites), a fleet section (1 to 64
// Clients sharing one limiter beside as many RedissonClients, redis_rate
// and the one-command floor, with redis-benchmark's floor), a service
// section (`ratelimiter serve` beside envoyproxy/ratelimit, both over
// gRPC on the same Redis) and writes SVG charts.
//
//	go run . [--quick] [--url redis://host:port] [--charts DIR] [--no-java] [--fleet-only] [--many-keys-only] [--service-only] [--envoy-ratelimit PATH]
//
// Without --url it starts a throwaway redis-server on a free loopback port
// (REDIS_ADDR names an existing one instead). With --url it uses that
// server and touches only keys that start with bench:<random>:.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/internal/redisproc"
)

// options are the command line's.
type options struct {
	url    string // Redis to use; empty: start one
	quick  bool   // quickPlan instead of fullPlan
	charts string // directory for the SVG charts; empty: none
	noJava bool   // leave Redisson out
	// fleetOnly: run the fleet section alone (its tables, no charts).
	fleetOnly bool
	// manyKeysOnly: run the many-keys section alone (its table).
	manyKeysOnly bool
	// serviceOnly: run the service section alone (its tables).
	serviceOnly bool
	// loneOnly: run the lone-caller section alone (its table).
	loneOnly bool
	// envoyBin: Envoy's rate-limit service binary (make bench builds it);
	// empty: the tools cache's, built there if missing.
	envoyBin string
	// ownServer: the server at url is this run's alone (the tests'), so
	// a throwaway replica may be attached to it for a while.
	ownServer bool
	out       io.Writer
	log       io.Writer
}

func main() {
	o := options{out: os.Stdout, log: os.Stderr}
	flag.StringVar(&o.url, "url", os.Getenv("REDIS_URL"), "Redis URL (redis://host:port); default: start a throwaway redis-server")
	flag.BoolVar(&o.quick, "quick", false, "run every measurement briefly (about two minutes) instead of the full run (about twelve)")
	flag.StringVar(&o.charts, "charts", "", "write the SVG charts into this directory")
	flag.BoolVar(&o.noJava, "no-java", false, "leave Java Redisson out")
	flag.BoolVar(&o.fleetOnly, "fleet-only", false, "run only the fleet section (Clients sharing one limiter) and print its tables")
	flag.BoolVar(&o.manyKeysOnly, "many-keys-only", false, "run only the many-keys section (per-user limiters) and print its table")
	flag.BoolVar(&o.loneOnly, "lone-only", false, "run only the lone-caller section (one caller, call by call) and print its table")
	flag.BoolVar(&o.serviceOnly, "service-only", false, "run only the service section (ratelimiter serve beside envoyproxy/ratelimit) and print its tables")
	flag.StringVar(&o.envoyBin, "envoy-ratelimit", "", "envoyproxy/ratelimit's service binary; default: built with go install into ~/.cache/ratelimiter/tools if missing")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	if _, err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "bench: done in %v\n", time.Since(start).Round(time.Second))
}

// run measures every contender, prints the tables to o.out and writes the
// charts.
func run(ctx context.Context, o options) (*results, error) {
	rdb, addr, own, stopRedis, err := connect(ctx, o.url, o.log)
	if err != nil {
		return nil, err
	}
	defer stopRedis()
	defer rdb.Close()

	p := fullPlan
	if o.quick {
		p = quickPlan
	}
	b := &bench{rdb: rdb, plan: p, prefix: "bench:" + randomHex(4) + ":", log: o.log}
	defer deleteKeys(context.Background(), rdb, "*"+b.prefix+"*")

	if o.fleetOnly {
		return b.fleetOnly(ctx, o, addr)
	}
	if o.manyKeysOnly {
		return b.manyKeysOnly(ctx, o, addr)
	}
	if o.serviceOnly {
		return b.serviceOnly(ctx, o, addr)
	}
	if o.loneOnly {
		return b.loneOnly(ctx, o, addr)
	}

	var skipped []string
	redissonLabel := "Redisson left out"
	var peer *javaPeer
	if o.noJava {
		skipped = append(skipped, "Redisson "+redissonVersion+" (--no-java)")
	} else {
		var why string
		peer, why, err = startRedisson(ctx, addr)
		if err != nil {
			return nil, err
		}
		if peer == nil {
			skipped = append(skipped, "Redisson "+redissonVersion+": "+why)
			fmt.Fprintf(o.log, "bench: Redisson %s left out: %s\n", redissonVersion, why)
		} else {
			defer peer.Close()
			redissonLabel = "Redisson " + redissonVersion
		}
	}
	b.cs = contenders(rdb, peer)
	r := &results{env: newEnvironment(serverInfo(ctx, rdb), redissonLabel), plan: p, skipped: skipped}
	for _, c := range b.cs {
		r.names = append(r.names, c.name)
	}
	b.progress("%s run: %d contenders on %s (%s)", p.name, len(b.cs), addr, r.env.redis)
	if err := b.measure(ctx, r, measureOptions{java: peer != nil, addr: addr, ownServer: own || o.ownServer, envoyBin: o.envoyBin}); err != nil {
		return nil, err
	}
	r.writeMarkdown(o.out)
	if o.charts != "" {
		files, err := writeCharts(r, o.charts)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			fmt.Fprintln(o.log, "bench: wrote", f)
		}
	}
	return r, nil
}

// connect opens url, or starts a throwaway redis-server when url is empty
// (own is then true, unless REDIS_ADDR named an existing server).
func connect(ctx context.Context, url string, log io.Writer) (rdb *redis.Client, addr string, own bool, stop func(), err error) {
	var opts *redis.Options
	stop = func() {}
	if url != "" {
		if opts, err = redis.ParseURL(url); err != nil {
			return nil, "", false, nil, fmt.Errorf("--url: %w", err)
		}
	} else {
		srv, err := redisproc.Start(ctx)
		if err != nil {
			return nil, "", false, nil, err
		}
		fmt.Fprintf(log, "bench: started a throwaway redis-server on %s\n", srv.Addr())
		opts = &redis.Options{Addr: srv.Addr()}
		stop = func() { _ = srv.Close() }
		own = srv.Pid() != 0
	}
	opts.PoolSize = 128 // 64 callers never wait for a connection
	rdb = redis.NewClient(opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		stop()
		return nil, "", false, nil, fmt.Errorf("redis at %s: %w", opts.Addr, err)
	}
	return rdb, opts.Addr, own, stop, nil
}
