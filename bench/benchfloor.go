package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// benchFloor is what redis-benchmark gets from the same server with the
// fleet's callers as connections: the floor printed beside the fleet.
type benchFloor struct {
	skipped  string // why it did not run
	names    []string
	samples  [][]benchFloorSample // by case, round
	requests int
}

type benchFloorSample struct {
	perSec float64 // requests per second, as redis-benchmark reports them
	cpuUs  float64 // Redis CPU (user + sys) per request, µs
}

// benchmarkFloor runs redis-benchmark, plan.fleetRounds rounds of
// plan.rbRequests requests from plan.fleetCallers connections, for an
// EVALSHA of the one-command script (lua/floor.lua) and for INCR
// pipelined 16 deep, on a key of this run. It is left out when
// redis-benchmark is not installed (Debian's redis-tools has it) or the
// connection uses TLS or a Unix socket.
func (b *bench) benchmarkFloor(ctx context.Context, addr string) (benchFloor, error) {
	res := benchFloor{requests: b.plan.rbRequests}
	path, err := exec.LookPath("redis-benchmark")
	if err != nil {
		res.skipped = "redis-benchmark is not installed (Debian's redis-tools package has it)"
		return res, nil
	}
	o := b.rdb.Options()
	host, port, err := net.SplitHostPort(addr)
	if o.TLSConfig != nil || o.Network == "unix" || err != nil {
		res.skipped = "redis-benchmark is run only over plain TCP"
		return res, nil
	}
	sha, err := floorScript.Load(ctx, b.rdb).Result()
	if err != nil {
		return res, err
	}
	key := b.key("rb")
	defer b.drop(ctx, key)
	base := []string{"-h", host, "-p", port, "-c", strconv.Itoa(b.plan.fleetCallers), "-n", strconv.Itoa(b.plan.rbRequests), "--csv"}
	if o.Password != "" {
		base = append(base, "-a", o.Password)
		if o.Username != "" {
			base = append(base, "--user", o.Username)
		}
	}
	if o.DB != 0 {
		base = append(base, "--dbnum", strconv.Itoa(o.DB))
	}
	cases := []struct {
		name string
		args []string
	}{
		{"EVALSHA of the one-command script (INCR)", []string{"EVALSHA", sha, "1", key}},
		{"INCR, pipelined 16 deep", []string{"-P", "16", "INCR", key}},
	}
	res.samples = make([][]benchFloorSample, len(cases))
	for _, c := range cases {
		res.names = append(res.names, c.name)
	}
	for r := 0; r < b.plan.fleetRounds; r++ {
		for _, i := range order(r, len(cases)) {
			s, err := b.redisBenchmark(ctx, path, append(append([]string(nil), base...), cases[i].args...))
			if err != nil {
				return res, fmt.Errorf("redis-benchmark, %s: %w", cases[i].name, err)
			}
			res.samples[i] = append(res.samples[i], s)
		}
	}
	b.progress("redis-benchmark floor: done")
	return res, nil
}

// redisBenchmark runs redis-benchmark once with args and reads INFO cpu
// around it.
func (b *bench) redisBenchmark(ctx context.Context, path string, args []string) (benchFloorSample, error) {
	before, err := readStats(ctx, b.rdb)
	if err != nil {
		return benchFloorSample{}, err
	}
	start := time.Now()
	out, err := exec.CommandContext(ctx, path, args...).Output()
	elapsed := time.Since(start)
	if err != nil {
		return benchFloorSample{}, err
	}
	after, err := readStats(ctx, b.rdb)
	if err != nil {
		return benchFloorSample{}, err
	}
	n := float64(b.plan.rbRequests)
	s := benchFloorSample{perSec: n / elapsed.Seconds(), cpuUs: us(after.sub(before).cpu) / n}
	if v, ok := csvRPS(string(out)); ok {
		s.perSec = v
	}
	return s, nil
}

// csvRPS reads the requests per second of redis-benchmark --csv's one
// data line ("test","rps",...).
func csvRPS(out string) (float64, bool) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSpace(line), ",")
		if len(f) < 2 || f[0] == `"test"` {
			continue
		}
		if v, err := strconv.ParseFloat(strings.Trim(f[1], `"`), 64); err == nil {
			return v, true
		}
	}
	return 0, false
}

func (f benchFloor) table(w io.Writer, callers int) {
	fmt.Fprint(w, "### The floor from redis-benchmark, beside the fleet\n\n")
	if f.skipped != "" {
		fmt.Fprintf(w, "Left out: %s.\n\n", f.skipped)
		return
	}
	fmt.Fprintf(w, "`redis-benchmark -c %d -n %d --csv` against the same server, %d round(s), medians: requests per second as "+
		"it reports them, Redis CPU per request from INFO cpu around it (user + sys, the whole server).\n\n",
		callers, f.requests, len(f.samples[0]))
	fmt.Fprint(w, "| redis-benchmark runs | requests/s | Redis CPU µs/request |\n|---|---:|---:|\n")
	for i, name := range f.names {
		fmt.Fprintf(w, "| %s | %s | %.2f |\n", name,
			group(median(pick(f.samples[i], func(s benchFloorSample) float64 { return s.perSec })), 0),
			median(pick(f.samples[i], func(s benchFloorSample) float64 { return s.cpuUs })))
	}
	fmt.Fprintln(w)
}
