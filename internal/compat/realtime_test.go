package compat

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimiter "github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
)

// TestMixedFleetBound: Redisson 4.7.0 (one JVM, 4 threads in blocking
// acquire(1)) and 2 Go Clients (each on its own go-redis client, 8
// goroutines each in Acquire(1), the server's clock) on one 50/s limiter.
// Go stamps its records with Redis TIME when its script runs; Redisson
// stamps with the JVM's clock, read before its script is sent. Checked:
//   - by the Go callers' own times (redistest.WorstCertain: grants whose
//     whole call lay inside one window of the interval less 1 ms): at most
//     the rate, no slack;
//   - by the records' scores (every writer), in every window of the full
//     interval: at most the rate plus the Redisson permits scored within
//     |offset| + 1 ms, offset being the JVM's clock against Redis TIME
//     (measured before and after the run through the peer's "now" and
//     this process's clock, the larger with its uncertainty): what the
//     design promises for a Redisson writer whose clock is off;
//   - by the records' scores, per window: at most the rate plus the
//     permits scored in the window's first D ms, D the largest stamp
//     disorder any of its records can have (scoreWindows), measured from
//     when each Redisson record was first seen: the bound that holds
//     whatever delays Redisson's calls between its clock reading and Redis.
//
// Redisson starts first; the Go fleet joins when its first record is in
// the window. The "quick" run takes 5 s of load (about 7 s in all with the
// JVM started); MIXED_FLEET_DUR (a duration) adds a longer run, left out
// of the suite for its time:
//
//	MIXED_FLEET_DUR=10s go test ./internal/compat -run TestMixedFleetBound -v
func TestMixedFleetBound(t *testing.T) {
	t.Run("quick", func(t *testing.T) { mixedFleetBound(t, 5*time.Second) })
	if d, err := time.ParseDuration(os.Getenv("MIXED_FLEET_DUR")); err == nil && d > 0 {
		t.Run(d.String(), func(t *testing.T) { mixedFleetBound(t, d) })
	}
}

func mixedFleetBound(t *testing.T, dur time.Duration) {
	const (
		v           = "4.7.0"
		rate        = 50
		iv          = time.Second
		javaThreads = 4
		goClients   = 2
		perClient   = 8
	)
	peer := peerFor(t, v)
	c := rdb(t)
	name := limName(t, "fleet")
	ctx := ctxT(t, dur+time.Minute)
	gc := newGoClient(t, v)
	setup := gc.Limiter(name)
	if _, err := setup.TrySetRate(ctx, ratelimiter.Config{Rate: rate, Interval: iv}); err != nil {
		t.Fatal(err)
	}
	before, err := measureClocks(ctx, peer, c)
	if err != nil {
		t.Fatal(err)
	}

	log := &recordLog{key: goKeys(gc, name).Permits, interval: iv, tick: 2 * time.Millisecond, margin: before.expiryMargin(), seen: map[string]seenRecord{}}
	obsCtx, stopObs := context.WithCancel(ctx)
	obsDone := make(chan struct{})
	go func() { defer close(obsDone); log.sample(obsCtx, c) }()

	start := time.Now()
	deadline := start.Add(dur)
	javaCh := make(chan error, 1)
	var javaGrants int64
	go func() {
		out, err := peer.Do(ctx, "load", name, javaThreads, dur.Milliseconds(), "acquire", 1)
		if err == nil {
			javaGrants, _ = strconv.ParseInt(strings.Fields(out)[0], 10, 64)
		}
		javaCh <- err
	}()
	// The Go fleet starts once a Redisson record is in the window. Started
	// together, a Redisson that missed the first burst got nothing for the
	// whole run in some runs (always with a JVM that had not acquired
	// before: its 4 grants came when Go stopped), and the run checked a
	// Go-only limiter.
	for log.javaRecords() == 0 {
		select {
		case err := <-javaCh:
			t.Fatalf("java load ended before its first record: %v", err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	goStart := time.Now()
	var grants redistest.Grants
	var wg sync.WaitGroup
	var goErrs sync.Map
	for k := 0; k < goClients; k++ {
		rl := newGoClient(t, v).Limiter(name)
		for g := 0; g < perClient; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// No call is abandoned: each runs to its grant (an abandoned
				// grant is given back, which the callers' check cannot see).
				for time.Now().Before(deadline) {
					s := time.Now()
					if err := rl.Acquire(ctx, 1); err != nil {
						goErrs.Store(err.Error(), true)
						return
					}
					grants.Add(s, 1)
				}
			}()
		}
	}
	wg.Wait()
	if err := <-javaCh; err != nil {
		t.Fatalf("java: %v", err)
	}
	stopObs()
	<-obsDone
	// Every call has returned: one more sample sees the last records.
	if err := log.sampleOnce(ctx, c); err != nil {
		t.Fatal(err)
	}
	goErrs.Range(func(k, _ any) bool { t.Errorf("go: %v", k); return true })
	after, err := measureClocks(ctx, peer, c)
	if err != nil {
		t.Fatal(err)
	}
	clk := before.worse(after)

	gl := grants.List()
	var goGrants int64
	for _, g := range gl {
		goGrants += g.Permits
	}
	recs, javaSpan, goSpan := log.scoreRecs(clk, true)
	var javaScores []int64
	var recorded, javaRecorded int64
	for _, r := range recs {
		recorded += r.permits
		if !r.goMarked {
			javaRecorded += r.permits
			for range r.permits {
				javaScores = append(javaScores, r.score)
			}
		}
	}
	slices.Sort(javaScores)
	var perSec []string
	for sec := int64(0); sec < int64(dur/time.Second); sec++ {
		lo := start.UnixMilli() + sec*1000
		a, _ := slices.BinarySearch(javaScores, lo)
		b, _ := slices.BinarySearch(javaScores, lo+1000)
		perSec = append(perSec, strconv.Itoa(b-a))
	}
	// Redisson's grants once the Go fleet had been in for an interval.
	a, _ := slices.BinarySearch(javaScores, goStart.Add(iv).UnixMilli())
	javaBeside := len(javaScores) - a
	// The design's allowance: the Redisson permits within |offset| + 1 ms.
	offMs := clk.jvmBoundMs()
	allow, allowAt := redistest.WorstWindow(javaScores, offMs+1)
	w := scoreWindows(recs, iv.Milliseconds(), offMs+1)
	certain, certainAt := redistest.WorstCertain(gl, iv)
	t.Logf("%v: Go %d grants (%d Clients x %d goroutines, from +%v), Java %d grants (%d threads); records seen: %d permits, %d of them Redisson's",
		dur, goGrants, goClients, perClient, goStart.Sub(start).Round(time.Millisecond), javaGrants, javaThreads, recorded, javaRecorded)
	t.Logf("Redisson's records per second of the run: %s", strings.Join(perSec, " "))
	t.Logf("clocks: %v (before %v, after %v); Redisson stamp lag as first seen: max %d ms, p99 %d ms, median %d ms; Go records' disorder bound %d ms",
		clk, before, after, javaSpan.max, javaSpan.p99, javaSpan.median, goSpan)
	t.Logf("by Go callers' times: most %d permits certainly within %v (at +%v); rate %d",
		certain, iv-redistest.StampResolution, certainAt.Sub(start).Round(time.Millisecond), rate)
	t.Logf("by scores, full %v windows: most %d permits (at +%d ms, D %d ms, %d in its first D ms); Redisson permits within |offset| + 1 ms = %d ms: %d (at +%d ms), bound %d",
		iv, w.worst, w.worstAt-start.UnixMilli(), w.worstD, w.worstAside, offMs+1, allow, allowAt-start.UnixMilli(), rate+allow)
	t.Logf("by scores, per window less Redisson's permits in its first |offset| + 1 ms: worst %d (at +%d ms, %d set aside)",
		w.design, w.designAt-start.UnixMilli(), w.designAside)
	t.Logf("by scores, per window less the permits in its first D ms: worst %d (at +%d ms, D %d ms, %d permits set aside); largest D %d ms",
		w.net, w.netAt-start.UnixMilli(), w.netD, w.netSlack, w.maxD)

	if certain > rate {
		t.Errorf("Go callers: %d permits certainly granted within %v, rate %d", certain, iv-redistest.StampResolution, rate)
	}
	if w.worst > int64(rate+allow) {
		t.Errorf("records: %d permits scored within %v, more than rate %d + %d Redisson permits within |offset| + 1 ms (%d ms)",
			w.worst, iv, rate, allow, offMs+1)
	}
	if w.net > rate {
		t.Errorf("records: a %v window holds %d permits besides the %d in its first %d ms (its records' largest stamp disorder), rate %d",
			iv, w.net, w.netSlack, w.netD, rate)
	}
	// The checks above are about a full limiter that both sides write.
	if min := int64(rate) * int64(dur/iv) * 9 / 10; goGrants+javaGrants < min || goGrants == 0 || javaBeside == 0 {
		t.Errorf("Go %d + Java %d grants in %v (%d of Java's scored from an interval after the Go fleet joined), want at least %d, both sides among them",
			goGrants, javaGrants, dur, javaBeside, min)
	}
}

// clocks is a measurement of this process's clock and the JVM's
// (System.currentTimeMillis) against Redis TIME: positive offsets are
// ahead of Redis; each offset lies within its uncertainty of the value.
type clocks struct {
	test, testUnc time.Duration
	jvm, jvmUnc   time.Duration
}

func (c clocks) String() string {
	return fmt.Sprintf("JVM %+.2f ms ±%.2f, this process %+.2f ms ±%.2f",
		msf(c.jvm), msf(c.jvmUnc), msf(c.test), msf(c.testUnc))
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// worse returns, for each clock, the measurement of the larger possible
// offset.
func (c clocks) worse(o clocks) clocks {
	if o.jvm.Abs()+o.jvmUnc > c.jvm.Abs()+c.jvmUnc {
		c.jvm, c.jvmUnc = o.jvm, o.jvmUnc
	}
	if o.test.Abs()+o.testUnc > c.test.Abs()+c.testUnc {
		c.test, c.testUnc = o.test, o.testUnc
	}
	return c
}

// jvmBoundMs is the largest |JVM offset| the measurement allows, in whole ms.
func (c clocks) jvmBoundMs() int64 { return ceilMs(c.jvm.Abs() + c.jvmUnc) }

// jvmAheadMs is the most the JVM's clock can be ahead of Redis's, in whole
// ms (0 when it cannot be ahead).
func (c clocks) jvmAheadMs() int64 { return ceilMs(max(0, c.jvm+c.jvmUnc)) }

func ceilMs(d time.Duration) int64 { return int64(math.Ceil(msf(d))) }

// measureClocks measures this process's clock against Redis TIME and the
// JVM's against this process's (the peer's "now"), each the round trip of
// 15 with the shortest time: the reading lies within half of it.
// System.currentTimeMillis is the floor of the JVM's clock, so its
// reading is taken as the middle of its millisecond, ±0.5 ms more.
func measureClocks(ctx context.Context, p *Peer, c *redis.Client) (clocks, error) {
	var m clocks
	best := time.Duration(-1)
	for range 15 {
		t0 := time.Now()
		srv, err := c.Time(ctx).Result()
		rtt := time.Since(t0)
		if err != nil {
			return m, err
		}
		if best < 0 || rtt < best {
			best, m.test, m.testUnc = rtt, t0.Add(rtt/2).Sub(srv), rtt/2
		}
	}
	best = -1
	var jvmGo time.Duration
	for range 15 {
		t0 := time.Now()
		s, err := p.Do(ctx, "now")
		rtt := time.Since(t0)
		if err != nil {
			return m, err
		}
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return m, fmt.Errorf("peer now: %q", s)
		}
		if best < 0 || rtt < best {
			best = rtt
			jvmGo = time.UnixMilli(ms).Add(500 * time.Microsecond).Sub(t0.Add(rtt / 2))
			m.jvmUnc = rtt/2 + 500*time.Microsecond
		}
	}
	m.jvm = jvmGo + m.test
	m.jvmUnc += m.testUnc
	return m, nil
}

// javaRecords returns how many records seen were not written by Go.
func (w *recordLog) javaRecords() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range w.seen {
		if !r.goMarked {
			n++
		}
	}
	return n
}

// scoreRec is a permit record for the window checks: its score, the
// permits it holds (0 once released), whether Go wrote it, and d, the
// most its stamp can be behind the newest stamp of a script that ran
// before it (ms): the span at the start of a window whose records it may
// not have counted.
type scoreRec struct {
	score, permits int64
	goMarked       bool
	d              int64
}

// lagSpread summarises the lags of Redisson's records as first seen.
type lagSpread struct{ max, p99, median int64 }

// scoreRecs returns the records seen with the stamp disorder each can
// have, and the spread of Redisson's records' lags.
//
// A script stamped s that runs after one stamped c has removed the
// records scored up to c - interval, so it counts no record of
// [t, t+interval) scored below t + (c - s) (t > s - interval) that it
// would otherwise have counted: every window holds at most the rate plus
// the permits in its first max(c - s) ms, taken over its records (the
// last of them to run counted all the others that were still there).
//   - Go's stamps are Redis TIME when the script runs, and Go's scripts
//     remove by them: among Go's scripts c - s <= 0. A Redisson script
//     read the JVM's clock before it ran, so beside one c - s is at most
//     how far the JVM's clock can be ahead (jvmAheadMs).
//   - A Redisson record stamped s ran before it was first seen (the
//     sample's reply, read on this process's clock, which is off Redis's
//     by clk.test), so the Go scripts before it stamped at most that; a
//     Redisson script before it read the JVM's clock before then too.
//
// mixed false: only Go writes the key, and every record's d is 0.
func (w *recordLog) scoreRecs(clk clocks, mixed bool) ([]scoreRec, lagSpread, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	goD := int64(0)
	if mixed {
		goD = clk.jvmAheadMs()
	}
	var recs []scoreRec
	var lags []int64
	for _, r := range w.seen {
		// d covers a record that may have been released in the last
		// sample gap before its end (recordLog.sampleOnce): it sits at the
		// start of the windows it could push over the rate.
		sr := scoreRec{score: r.score, permits: r.permits, goMarked: r.goMarked, d: max(goD, r.gap)}
		if !r.goMarked {
			lag := float64(r.first.UnixMicro())/1000 - float64(r.score)
			sr.d = int64(math.Ceil(lag+msf(clk.test.Abs()+clk.testUnc))) + clk.jvmAheadMs()
			lags = append(lags, int64(math.Ceil(lag)))
		}
		recs = append(recs, sr)
	}
	slices.Sort(lags)
	var s lagSpread
	if n := len(lags); n > 0 {
		s = lagSpread{max: lags[n-1], p99: lags[n*99/100], median: lags[n/2]}
	}
	return recs, s, goD
}

// windowReport is what scoreWindows found.
type windowReport struct {
	worst, worstAt int64 // most permits in a full window, and its start (ms)
	// worstD, worstAside: that window's D and the permits in its first D ms.
	worstD, worstAside int64
	// net: the most permits in a window less those in its first D ms, D
	// the largest d of its records; at netAt, with netD and netSlack the
	// D and the permits set aside there.
	net, netAt, netD, netSlack int64
	maxD                       int64 // the largest d of a record with permits
	// design: the most permits in a window less Redisson's in its first
	// allow ms (scoreWindows), at designAt, designAside set aside there.
	design, designAt, designAside int64
}

// scoreWindows examines every window [t, t+iv) (ms) that holds a record
// with permits; allow is the span (ms) of the design figure.
func scoreWindows(recs []scoreRec, iv, allow int64) windowReport {
	rep := windowReport{net: math.MinInt64, design: math.MinInt64}
	if len(recs) == 0 {
		rep.net, rep.design = 0, 0
		return rep
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, r := range recs {
		lo, hi = min(lo, r.score), max(hi, r.score)
	}
	base := lo - iv + 1 // the first window start that holds lo
	n := hi - base + 1
	perm := make([]int64, n+iv+1) // permits at each ms
	java := make([]int64, n+iv+1) // Redisson's permits at each ms
	dAt := make([]int64, n+iv)    // the largest d at each ms, -1 none
	for i := range dAt {
		dAt[i] = -1
	}
	for _, r := range recs {
		if r.permits <= 0 {
			continue
		}
		i := r.score - base
		perm[i] += r.permits
		if !r.goMarked {
			java[i] += r.permits
		}
		dAt[i] = max(dAt[i], r.d)
		rep.maxD = max(rep.maxD, r.d)
	}
	pre, jpre := make([]int64, len(perm)+1), make([]int64, len(perm)+1)
	for i, p := range perm {
		pre[i+1], jpre[i+1] = pre[i]+p, jpre[i]+java[i]
	}
	sum := func(a, b int64) int64 { return pre[min(b, int64(len(perm)))] - pre[a] }
	jsum := func(a, b int64) int64 { return jpre[min(b, int64(len(perm)))] - jpre[a] }
	// Sliding maximum of dAt over [t, t+iv).
	var dq []int64
	for i := int64(0); i < iv-1; i++ {
		for len(dq) > 0 && dAt[dq[len(dq)-1]] <= dAt[i] {
			dq = dq[:len(dq)-1]
		}
		dq = append(dq, i)
	}
	for t := int64(0); t < n; t++ {
		j := t + iv - 1
		for len(dq) > 0 && dAt[dq[len(dq)-1]] <= dAt[j] {
			dq = dq[:len(dq)-1]
		}
		dq = append(dq, j)
		for dq[0] < t {
			dq = dq[1:]
		}
		d := dAt[dq[0]]
		if d < 0 {
			continue // no record with permits
		}
		all := sum(t, t+iv)
		aside := sum(t, t+min(d, iv))
		if all > rep.worst {
			rep.worst, rep.worstAt, rep.worstD, rep.worstAside = all, t+base, d, aside
		}
		if all-aside > rep.net {
			rep.net, rep.netAt, rep.netD, rep.netSlack = all-aside, t+base, d, aside
		}
		if ja := jsum(t, t+min(allow, iv)); all-ja > rep.design {
			rep.design, rep.designAt, rep.designAside = all-ja, t+base, ja
		}
	}
	return rep
}
