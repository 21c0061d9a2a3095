package compat

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimiter "github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redisproc"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
)

// TestSoak runs Go and the real Redisson 4.7.0 together on three limiters
// (OVERALL, PER_CLIENT, OVERALL with keep-alive) for SOAK_DURATION (60 s
// unless set; `make soak` runs 10 minutes), with every operation (try,
// blocking, Allow, release, availablePermits, setRate with keepState) and a
// fault every few seconds against its own redis-server: CLIENT KILL, DEBUG
// SLEEP, SCRIPT FLUSH, and a restart that keeps the data (AOF). Go stamps
// with the server's clock (the default). It checks, in every window of the
// full interval:
//   - by the scores of every permit record ever seen: on the limiter only
//     Go writes (PER_CLIENT), at most the rate, exactly; on the two that
//     Redisson writes too, at most the rate plus the permits scored in the
//     window's first D ms, D the largest stamp disorder its records can
//     have (scoreRecs: for a Redisson record, how long after its stamp it
//     was first seen, plus the measured clock offsets; printed);
//   - by the Go callers' own start and reply times (redistest.WorstCertain,
//     windows of the interval less 1 ms): at most the rate, no slack; a
//     TryAcquire the soak releases at once counts nowhere, and its Release
//     is set against a window it may have run in when the grant may have
//     run before it (worstCertainNet);
//
// that no Go call returns later than its deadline + 50 ms, except during a
// measured stall of this process; and that goroutines come back to where
// they were.
func TestSoak(t *testing.T) {
	needJava(t)
	needServer(t)
	dur := time.Minute
	if d, err := time.ParseDuration(os.Getenv("SOAK_DURATION")); err == nil {
		dur = d
	}
	ctx := ctxT(t, dur+3*time.Minute)
	srv, err := redisproc.StartWrapped(ctx, nil, "--appendonly", "yes", "--enable-debug-command", "local")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	peer, err := StartPeer(ctx, PeerOptions{Version: "4.7.0", Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = peer.Close() })
	baseline := runtime.NumGoroutine()

	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	client := ratelimiter.NewClient(rdb)
	clkBefore, err := measureClocks(ctx, peer, rdb)
	if err != nil {
		t.Fatal(err)
	}
	cfgs := map[string]ratelimiter.Config{
		"soak:overall":   {Rate: 50, Interval: time.Second},
		"soak:perclient": {Mode: ratelimiter.PerClient, Rate: 20, Interval: 500 * time.Millisecond},
		"soak:keepalive": {Rate: 30, Interval: time.Second, KeepAlive: 5 * time.Second},
	}
	watch := map[string]*recordLog{}
	callers := map[string]*callerLog{}
	for name, cfg := range cfgs {
		l := client.Limiter(name)
		if err := l.SetRate(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		keys := goKeys(client, name)
		key := keys.Permits
		if cfg.Mode == ratelimiter.PerClient {
			key = keys.ClientPermits
		}
		watch[name] = &recordLog{key: key, interval: cfg.Interval, margin: clkBefore.expiryMargin(), seen: map[string]seenRecord{}}
		callers[name] = &callerLog{}
	}

	begin := time.Now()
	end := begin.Add(dur)
	var wg sync.WaitGroup
	var stalls stallLog
	var calls, late, hung, failed, granted atomic.Int64
	var lateMu sync.Mutex
	var lates []string
	run := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				f()
			}
		}()
	}
	run(stalls.watch)
	watchCtx, stopWatch := context.WithCancel(ctx)
	for _, w := range watch {
		wg.Add(1)
		go func() { defer wg.Done(); w.sample(watchCtx, rdb) }()
	}
	// Go: four workers on the OVERALL limiters, one on PER_CLIENT.
	// timed makes one call; a grant of n permits goes to g (nil: none).
	timed := func(deadline time.Duration, g *redistest.Grants, n int64, call func(ctx context.Context) (bool, error)) {
		cctx, cancel := context.WithTimeout(ctx, deadline)
		start := time.Now()
		ok, err := call(cctx)
		if ok && g != nil {
			g.Add(start, n)
		}
		took := time.Since(start)
		cancel()
		calls.Add(1)
		if ok {
			granted.Add(1)
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			failed.Add(1) // the faults: connections killed, Redis asleep or restarting
		}
		if took > deadline+time.Second {
			hung.Add(1)
		}
		if took > deadline+50*time.Millisecond && !stalls.during(start, start.Add(took)) {
			late.Add(1)
			lateMu.Lock()
			lates = append(lates, fmt.Sprintf("%v after %v", took.Round(time.Millisecond), start.Format("15:04:05.000")))
			lateMu.Unlock()
		}
	}
	for i := 0; i < 4; i++ {
		name := []string{"soak:overall", "soak:keepalive"}[i%2]
		l, cl := client.Limiter(name), callers[name]
		step := 0
		run(func() {
			step++
			switch step % 5 {
			case 0:
				timed(300*time.Millisecond, &cl.grants, 1, func(c context.Context) (bool, error) {
					err := l.Acquire(c, 1)
					return err == nil, err
				})
			case 1:
				timed(300*time.Millisecond, &cl.grants, 2, func(c context.Context) (bool, error) {
					r, err := l.Allow(c, 2)
					return r.Granted, err
				})
			case 2:
				timed(300*time.Millisecond, &cl.grants, 1, func(c context.Context) (bool, error) {
					return l.TryAcquireTimeout(c, 1, 100*time.Millisecond)
				})
			case 3:
				timed(300*time.Millisecond, nil, 0, func(c context.Context) (bool, error) {
					try := time.Now()
					ok, err := l.TryAcquire(c, 1)
					if ok && err == nil {
						rel := time.Now()
						err = l.Release(c, 1) // used nothing after all
						cl.released(releasePair{tryStart: try, relStart: rel, relReply: time.Now()})
					}
					return false, err
				})
			default:
				timed(300*time.Millisecond, nil, 0, func(c context.Context) (bool, error) {
					_, err := l.AvailablePermits(c)
					return false, err
				})
			}
			time.Sleep(2 * time.Millisecond)
		})
	}
	pc := client.Limiter("soak:perclient")
	run(func() {
		timed(300*time.Millisecond, &callers["soak:perclient"].grants, 1, func(c context.Context) (bool, error) { return pc.TryAcquire(c, 1) })
		time.Sleep(5 * time.Millisecond)
	})
	// setRate with keepState on the keep-alive limiter, every 3 s.
	run(func() {
		time.Sleep(3 * time.Second)
		timed(time.Second, nil, 0, func(c context.Context) (bool, error) {
			return false, client.Limiter("soak:keepalive").SetRate(c, cfgs["soak:keepalive"], ratelimiter.KeepState())
		})
	})
	// Java: 2 threads, try and blocking in turn, on the OVERALL limiters.
	var javaGrants atomic.Int64
	javaStep := 0
	run(func() {
		javaStep++
		name, mode := "soak:overall", "try"
		if javaStep%2 == 0 {
			name, mode = "soak:keepalive", "acquire"
		}
		s, err := peer.Do(ctx, "load", name, 2, 2000, mode, 1)
		if err == nil {
			var n int64
			fmt.Sscan(s, &n)
			javaGrants.Add(n)
		}
	})
	// Faults.
	faults := map[string]int{}
	faultStep := 0
	run(func() {
		time.Sleep(4 * time.Second)
		faultStep++
		admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		defer admin.Close()
		var err error
		switch kind := []string{"client kill", "debug sleep", "script flush", "restart"}[faultStep%4]; kind {
		case "client kill":
			err = admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal").Err()
			faults[kind]++
		case "debug sleep":
			err = admin.Do(ctx, "DEBUG", "SLEEP", "0.2").Err()
			faults[kind]++
		case "script flush":
			err = admin.ScriptFlush(ctx).Err()
			faults[kind]++
		case "restart":
			err = srv.Restart(ctx)
			faults[kind]++
		}
		if err != nil && ctx.Err() == nil {
			t.Logf("fault: %v", err)
		}
	})
	time.Sleep(time.Until(end))
	time.Sleep(2500 * time.Millisecond) // the last Java load and records
	stopWatch()
	wg.Wait()
	clkAfter, err := measureClocks(ctx, peer, rdb)
	if err != nil {
		t.Fatal(err)
	}
	_ = rdb.Close()
	clk := clkBefore.worse(clkAfter)

	t.Logf("SOAK %v: %d Go calls (%d granted, %d failed with a Redis error), %d Java grants, faults %v, %d late calls, %d stalls of this process over 40 ms",
		dur, calls.Load(), granted.Load(), failed.Load(), javaGrants.Load(), faults, late.Load(), stalls.count())
	t.Logf("SOAK clocks against Redis TIME: %v (before %v, after %v); records gone %d ms or more before their interval ended count as released",
		clk, clkBefore, clkAfter, clk.expiryMargin())
	names := make([]string, 0, len(watch))
	for n := range watch {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		w, cfg := watch[name], cfgs[name]
		iv := cfg.Interval
		mixed := cfg.Mode != ratelimiter.PerClient // Redisson writes the OVERALL ones too
		recs, lags, goD := w.scoreRecs(clk, mixed)
		rep := scoreWindows(recs, iv.Milliseconds(), clk.jvmBoundMs()+1)
		w.mu.Lock()
		t.Logf("SOAK %s: %d fill records after restarts, not counted as grants", name, len(w.fills))
		w.mu.Unlock()
		var foreign int
		for _, r := range recs {
			if !r.goMarked {
				foreign++
			}
		}
		at := func(ms int64) string { return fmt.Sprintf("+%.3fs", float64(ms-begin.UnixMilli())/1000) }
		if !mixed {
			t.Logf("SOAK %s: %d records (Go only, server clock); most permits in a window of %v: %d (at %s); rate %d",
				name, len(recs), iv, rep.worst, at(rep.worstAt), cfg.Rate)
			if foreign > 0 {
				t.Errorf("%s: %d records not written by Go", name, foreign)
			}
			if rep.worst > cfg.Rate {
				t.Errorf("%s: %d permits scored within %v, rate %d", name, rep.worst, iv, cfg.Rate)
			}
		} else {
			t.Logf("SOAK %s: %d records, %d Redisson's (stamp lag as first seen: max %d ms, p99 %d, median %d; Go's disorder bound %d ms); most permits in a window of %v: %d (at %s, D %d ms, %d in its first D ms); "+
				"less Redisson's in its first |JVM offset| + 1 ms: worst %d (at %s, %d set aside); less the permits in its first D ms: worst %d (at %s, D %d ms, %d set aside); largest D %d ms; rate %d",
				name, len(recs), foreign, lags.max, lags.p99, lags.median, goD, iv, rep.worst, at(rep.worstAt), rep.worstD, rep.worstAside,
				rep.design, at(rep.designAt), rep.designAside, rep.net, at(rep.netAt), rep.netD, rep.netSlack, rep.maxD, cfg.Rate)
			if rep.net > cfg.Rate {
				t.Errorf("%s: a %v window holds %d permits besides the %d scored in its first %d ms (its records' largest stamp disorder), rate %d",
					name, iv, rep.net, rep.netSlack, rep.netD, cfg.Rate)
			}
		}
		cl := callers[name]
		gl, rels := cl.grants.List(), cl.releases()
		gross, grossAt := redistest.WorstCertain(gl, iv)
		net, netAt := worstCertainNet(gl, rels, iv)
		t.Logf("SOAK %s: Go callers: %d grants; most permits certainly within %v: %d (at %s); less releases that may have run inside of grants that may have run before: %d (at %s); %d released at once",
			name, len(gl), iv-redistest.StampResolution, gross, at(grossAt.UnixMilli()), net, at(netAt.UnixMilli()), len(rels))
		if net > cfg.Rate {
			t.Errorf("%s: Go callers got %d permits certainly within %v (%d before releases), rate %d",
				name, net, iv-redistest.StampResolution, gross, cfg.Rate)
		}
	}
	if late.Load() > 0 {
		t.Logf("SOAK %d calls past their deadline + 50 ms, outside stalls of this process: %v", late.Load(), lates)
	}
	if hung.Load() > 0 || late.Load()*1000 > calls.Load() {
		t.Errorf("%d calls past their deadline + 1 s; %d of %d past deadline + 50 ms", hung.Load(), late.Load(), calls.Load())
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseline+2 {
		t.Errorf("%d goroutines after the soak, %d before", n, baseline)
	}
}

// seenRecord is a permit record as last seen.
type seenRecord struct {
	score    int64
	permits  int64
	first    time.Time // when first seen: the reply of the sample that saw it
	last     time.Time // when last seen
	goMarked bool      // Go wrote it (wire.Member.GoMarked)
	// lastSrv is Redis TIME (ms) of the last sample that saw it; gap, when
	// it was gone from a sample too late to count as released but last
	// seen before it could have expired, is how long (ms) the two samples
	// were apart: a release or its expiry, no sample tells which.
	lastSrv float64
	gap     int64
}

// recordLog keeps every permit record of one key ever seen. A record that
// is gone from a sample read more than margin ms before its interval ends,
// by Redis TIME read in the same transaction, was released (or shrunk by
// a release, which rewrites it under a new member): it counts with what
// is left of it. Expiry cannot remove a record sooner: Go's scripts remove
// by Redis TIME, Redisson's by a JVM clock reading taken before they run
// (clocks.expiryMargin). A release may remove a record in its last margin
// ms (it takes the oldest records); such a record counts whole, as one
// that expired.
type recordLog struct {
	key      string
	interval time.Duration
	tick     time.Duration // between samples; 0: 5 ms
	margin   int64         // ms
	mu       sync.Mutex
	seen     map[string]seenRecord // by member without its count
	fills    map[string]bool       // fill records seen (wire.Member.Fill): no caller's grant
}

func (w *recordLog) sample(ctx context.Context, rdb *redis.Client) {
	every := w.tick
	if every == 0 {
		every = 5 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		_ = w.sampleOnce(ctx, rdb) // a fault; the next sample catches up
	}
}

// sampleOnce reads the key's records once, with Redis TIME, in one
// transaction.
func (w *recordLog) sampleOnce(ctx context.Context, rdb *redis.Client) error {
	var srv *redis.TimeCmd
	var zc *redis.ZSliceCmd
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		srv = p.Time(ctx)
		zc = p.ZRangeWithScores(ctx, w.key, 0, -1)
		return nil
	}); err != nil {
		return err
	}
	now := time.Now()
	srvMs := float64(srv.Val().UnixMicro()) / 1000
	zs := zc.Val()
	present := map[string]bool{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, z := range zs {
		m := z.Member.(string)
		if dm, err := wire.Decode([]byte(m)); err == nil && dm.Fill() {
			// A Client's fill after a restart (internal/script/restart.go)
			// holds permits that no caller was granted.
			if w.fills == nil {
				w.fills = map[string]bool{}
			}
			w.fills[m] = true
			continue
		}
		id := m[:len(m)-4] + fmt.Sprint(int64(z.Score))
		present[id] = true
		r, ok := w.seen[id]
		if !ok {
			r.first = now
			dm, err := wire.Decode([]byte(m))
			r.goMarked = err == nil && dm.GoMarked()
		}
		r.score, r.permits, r.last, r.lastSrv = int64(z.Score), int64(binary.LittleEndian.Uint32([]byte(m[len(m)-4:]))), now, srvMs
		w.seen[id] = r
	}
	for id, r := range w.seen {
		if present[id] || r.permits <= 0 || r.gap > 0 {
			continue
		}
		end := float64(r.score + w.interval.Milliseconds() - w.margin)
		switch {
		case srvMs < end:
			// Gone before its interval ended: released.
			r.permits = 0
			w.seen[id] = r
		case r.lastSrv < end:
			// Gone between a sample before its end and one after: it
			// counts whole, and the windows it starts set it aside
			// (scoreRecs, d). A release takes the oldest records, which
			// are the ones about to expire (giveback.lua).
			r.gap = int64(math.Ceil(srvMs - r.lastSrv))
			w.seen[id] = r
		}
	}
	return nil
}

// expiryMargin is how much sooner than its interval's end (ms, by Redis
// TIME) a record can be gone by expiry: Go's scripts remove a record when
// Redis's clock reaches its end, Redisson's by a JVM clock that may be
// ahead of Redis's. It is no more than the disorder bound of Go's records
// on a limiter Redisson writes too (scoreRecs), so a release's removal of
// a record in that span, counted whole, stays within a window's first D
// ms, which the check by scores sets aside.
func (c clocks) expiryMargin() int64 {
	return c.jvmAheadMs()
}

// callerLog is what the Go callers of one limiter were granted, and the
// TryAcquires they released at once.
type callerLog struct {
	grants redistest.Grants
	mu     sync.Mutex
	rels   []releasePair
}

// releasePair is a TryAcquire that was granted and released at once: when
// the TryAcquire was sent, and the Release's call.
type releasePair struct{ tryStart, relStart, relReply time.Time }

func (c *callerLog) released(p releasePair) {
	c.mu.Lock()
	c.rels = append(c.rels, p)
	c.mu.Unlock()
}

func (c *callerLog) releases() []releasePair {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.rels)
}

// worstCertainNet is redistest.WorstCertain less releases: over the same
// windows (from each grant's Start, of interval less StampResolution),
// the most permits certainly granted inside, less one for each release
// that may have run inside while its TryAcquire may have run before (the
// Release takes the permits out of this Client's oldest records, which
// may be those of grants counted inside; a release whose TryAcquire ran
// inside took what it gave back). Within a window the grants can exceed
// the rate only by the permits given back inside: the records of grants
// inside stay for the whole window (Go's are stamped when the script
// runs; Redisson's earlier, so they may go sooner, but they were granted
// inside too). Not
// seen here: a call abandoned at its deadline whose script granted gives
// the permits back when its reply comes, which lifts a window that the
// give-back ran in and the grant before.
func worstCertainNet(grants []redistest.Grant, rels []releasePair, interval time.Duration) (int64, time.Time) {
	g := slices.Clone(grants)
	slices.SortFunc(g, func(a, b redistest.Grant) int { return a.Start.Compare(b.Start) })
	r := slices.Clone(rels)
	slices.SortFunc(r, func(a, b releasePair) int { return a.tryStart.Compare(b.tryStart) })
	var span time.Duration
	for _, p := range r {
		span = max(span, p.relReply.Sub(p.tryStart))
	}
	w := interval - redistest.StampResolution
	most, at := int64(math.MinInt64), time.Time{}
	for i := range g {
		s := g[i].Start
		end := s.Add(w)
		var n int64
		for j := i; j < len(g) && g[j].Start.Before(end); j++ {
			if g[j].Reply.Before(end) {
				n += g[j].Permits
			}
		}
		k, _ := slices.BinarySearchFunc(r, s, func(p releasePair, s time.Time) int { return p.tryStart.Compare(s) })
		for k--; k >= 0 && !r[k].tryStart.Before(s.Add(-span)); k-- {
			if !r[k].relReply.Before(s) && r[k].relStart.Before(end) {
				n--
			}
		}
		if n > most {
			most, at = n, s
		}
	}
	if len(g) == 0 {
		most = 0
	}
	return most, at
}

// stallLog records the moments this process did not run for over 40 ms.
type stallLog struct {
	mu     sync.Mutex
	stalls [][2]time.Time
}

func (s *stallLog) watch() {
	prev := time.Now()
	time.Sleep(10 * time.Millisecond)
	if now := time.Now(); now.Sub(prev) > 50*time.Millisecond {
		s.mu.Lock()
		s.stalls = append(s.stalls, [2]time.Time{prev, now})
		s.mu.Unlock()
	}
}

func (s *stallLog) during(from, to time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.stalls {
		if st[0].Before(to) && st[1].After(from) {
			return true
		}
	}
	return false
}

func (s *stallLog) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.stalls)
}
