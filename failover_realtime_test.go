package ratelimiter_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
)

// TestFailoverSentinelRealTime checks the limit in real time through a
// Sentinel failover (issue 21 item 3), on the server's clock (the default)
// with replica acknowledgements (foAck): a Go-only fleet of two Clients,
// each on a failover client of its own, runs eight goroutines each in a
// loop of blocking Acquire(ctx, 1) (deadline foAcquireDeadline) on one
// rtRate per rtInterval limiter, for rtPhase; the master is killed; the
// fleet runs rtPhase more after its first grant from the new master. The
// interval is longer than the failover (about 2.3 s here), so the records
// granted before the kill are still in the window when the new master
// takes over: it must refuse until they expire.
//
// It asserts:
//   - in every window of the interval less the stamp's 1 ms of real time,
//     the calls that were granted (no error) and lay wholly inside it are
//     at most the rate (redistest.WorstCertain);
//   - calls were granted both before the kill and after it (the check is
//     not vacuous);
//   - the permit records that the new master held, from before the kill
//     (as a replica) to the end, hold at most the rate in any window of
//     their scores that the scripts count as one interval (scores less than
//     the interval apart); the test reads them with ZRANGE WITHSCORES every
//     rtPoll on every server, and once more at the end, so that records the
//     scripts trimmed are counted too, and it asserts that no record could
//     have come and gone between two reads; a record that vanished before
//     its interval passed was given back (a batch granted after some of
//     its callers' deadlines: the engine releases their permits, shrinking
//     or removing the oldest records) and is left out, as sampleRecords
//     does, else a window would count the permits given back twice;
//   - no grant told to a caller before the kill is missing there (the
//     promise of WithReplicaAck), and records from before the kill and
//     after the failover are both there.
//
// Like the other Sentinel failover tests, the scenario runs once more on a
// fresh deployment when the sentinels failed over twice (a stalled host).
func TestFailoverSentinelRealTime(t *testing.T) {
	quietRedisLog(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	for attempt := 1; ; attempt++ {
		res, switches := runRealTimeFailover(ctx, t)
		if switches <= 1 || attempt == 2 {
			require.NoError(t, res.err)
			res.assert(t)
			return
		}
		t.Logf("the sentinels failed over %d times in one run (a stalled host); running the scenario again", switches)
	}
}

const (
	rtRate       = 50
	rtInterval   = 6 * time.Second // longer than the failover: the new master must honour the old records
	rtPhase      = 3 * time.Second // the fleet's run before the kill, and on the new master
	rtClients    = 2
	rtGoroutines = 8 // per Client
	rtPoll       = 100 * time.Millisecond
	// rtPollGap is the longest gap allowed between two reads of the new
	// master's records: a record lives there at least an interval after
	// its stamp, less the time it took to arrive (a replication delay).
	rtPollGap = rtInterval - 200*time.Millisecond
)

// rtResult is what one run of the scenario saw.
type rtResult struct {
	// err: the failover or the first grant after it did not come in time
	// (the rest of the result is then empty).
	err          error
	grants       []redistest.Grant
	killAt       time.Time // just before the kill
	killed       time.Time // the old master's port is closed
	promotedAt   time.Time // WaitFailover returned
	firstAfter   time.Time // reply of the first grant of a call sent after the kill
	ackErrs      int64     // calls failed with ErrReplicaAck
	deadlineErrs int64     // calls failed with context.DeadlineExceeded (the wait would pass the deadline)
	errs         int64     // calls failed with another error
	calls        int64
	promoted     string              // address of the new master
	records      map[string]rtRecord // the new master's records, by member, those given back left out
	givenBack    rtGivenBack         // the new master's records left out
	pollGap      time.Duration       // longest gap between two reads of the new master's records
	pollGapAt    time.Time           // server time of the read that ended it
	shortMembers int                 // members too short to hold a count
	fills        int                 // fill records read (internal/script/restart.go)
}

// rtRecord is one permit record: its score (a stamp in epoch ms) and its
// permits.
type rtRecord struct {
	score   int64
	permits int64
	seen    time.Time // the server's time of the last read that saw it
	gone    bool      // vanished before its interval passed: given back
}

// rtGivenBack counts the records that vanished before their interval
// passed, and their permits.
type rtGivenBack struct{ records, permits int64 }

func runRealTimeFailover(ctx context.Context, t *testing.T) (rtResult, int) {
	s := redistest.StartSentinel(ctx, t)
	master, err := s.Master(ctx)
	require.NoError(t, err)

	var clients []*ratelimiter.Client
	for i := 0; i < rtClients; i++ {
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: s.MasterName(), SentinelAddrs: s.SentinelAddrs(), ContextTimeoutEnabled: true,
		})
		t.Cleanup(func() { _ = rdb.Close() })
		clients = append(clients, ratelimiter.NewClient(rdb, foAck))
	}
	name := "rt-failover"
	lim := clients[0].Limiter(name)
	ok, err := lim.TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: rtRate, Interval: rtInterval})
	require.NoError(t, err)
	require.True(t, ok)

	// Read every server's records once before the fleet starts, then every
	// rtPoll until the end.
	rec := newRecordPoller(lim.Keys().Permits, rtInterval)
	servers := s.Servers()
	var nodes []*redis.Client
	for _, n := range servers {
		rdb := redis.NewClient(&redis.Options{
			Addr: n.Addr, DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond,
			WriteTimeout: 200 * time.Millisecond, MaxRetries: -1, ContextTimeoutEnabled: true,
		})
		t.Cleanup(func() { _ = rdb.Close() })
		require.NoError(t, rec.read(ctx, n.Addr, rdb))
		nodes = append(nodes, rdb)
	}
	var killed atomic.Int64 // unix ns when the old master's port closed; 0 before
	stopPoll := make(chan struct{})
	var pollWG sync.WaitGroup
	for i, n := range servers {
		pollWG.Add(1)
		go func() {
			defer pollWG.Done()
			tk := time.NewTicker(rtPoll)
			defer tk.Stop()
			for {
				select {
				case <-stopPoll:
					return
				case <-tk.C:
					if n.Addr == master.Addr && killed.Load() != 0 {
						return
					}
					// A read that fails (the master being killed) is
					// just not counted; the gaps are checked below.
					pctx, cancel := context.WithTimeout(ctx, 2*rtPoll)
					_ = rec.read(pctx, n.Addr, nodes[i])
					cancel()
				}
			}
		}()
	}
	switches := sentinelSwitches(t, s.SentinelAddrs())(ctx)

	var (
		res        rtResult
		grants     redistest.Grants
		firstAfter = make(chan struct{})
		firstOnce  sync.Once
		firstAt    atomic.Int64
		stop       = make(chan struct{})
		wg         sync.WaitGroup
		panics     = make(chan string, rtClients*rtGoroutines)
	)
	for _, c := range clients {
		l := c.Limiter(name)
		for g := 0; g < rtGoroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					if p := recover(); p != nil {
						panics <- fmt.Sprint(p)
					}
				}()
				for {
					select {
					case <-stop:
						return
					default:
					}
					cctx, cancel := context.WithTimeout(ctx, foAcquireDeadline)
					start := time.Now()
					err := l.Acquire(cctx, 1)
					cancel()
					atomic.AddInt64(&res.calls, 1)
					if err == nil {
						grants.Add(start, 1)
						if k := killed.Load(); k != 0 && start.UnixNano() > k {
							firstOnce.Do(func() {
								firstAt.Store(time.Now().UnixNano())
								close(firstAfter)
							})
						}
						continue
					}
					switch {
					case isAckOnly(err):
						atomic.AddInt64(&res.ackErrs, 1)
					case errors.Is(err, context.DeadlineExceeded):
						atomic.AddInt64(&res.deadlineErrs, 1)
					default:
						atomic.AddInt64(&res.errs, 1)
					}
					// Back off a little, as a real caller would: a loop of
					// instant failures takes the CPU the servers need.
					time.Sleep(5 * time.Millisecond)
				}
			}()
		}
	}

	// Deferred for a failed run (run last-in first-out: the workers stop
	// first); called in turn below.
	stopPollers := sync.OnceFunc(func() { close(stopPoll); pollWG.Wait() })
	defer stopPollers()
	stopWorkers := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopWorkers()
	select {
	case <-time.After(rtPhase):
	case <-ctx.Done():
	}
	res.killAt = time.Now()
	require.NoError(t, s.Kill(master))
	res.killed = time.Now()
	killed.Store(res.killed.UnixNano())
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	m, err := s.WaitFailover(wctx, master)
	wcancel()
	res.promotedAt = time.Now()
	if err == nil {
		select {
		case <-firstAfter:
			res.firstAfter = time.Unix(0, firstAt.Load())
			select {
			case <-time.After(rtPhase):
			case <-ctx.Done():
			}
		case <-time.After(10 * time.Second):
			err = errors.New("no grant within 10 s of the failover")
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	stopWorkers()
	close(panics)
	for p := range panics {
		t.Errorf("worker panicked: %s", p)
	}
	if err != nil {
		// Returned with the switches: a run in which the sentinels
		// failed over twice (a stalled host) can also miss the 10 s,
		// and is run again as any such run is.
		return rtResult{err: err}, switches()
	}
	// The records as the new master holds them at the end, read before
	// the pollers stop: the reads of the new master have no gap that a
	// record written meanwhile could fall into.
	res.promoted = m.Addr
	require.NoError(t, rec.read(ctx, m.Addr, nodeRedis(t, m)))
	stopPollers()
	res.grants = grants.List()
	res.records, res.givenBack, res.pollGap, res.pollGapAt = rec.of(m.Addr)
	res.shortMembers = rec.shortMembers()
	res.fills = rec.fillCount()
	return res, switches()
}

func (res rtResult) assert(t *testing.T) {
	t.Helper()
	var before, after int
	var afterKill []redistest.Grant
	for _, g := range res.grants {
		switch {
		case g.Reply.Before(res.killAt):
			before++
		case g.Start.After(res.killed):
			after++
			afterKill = append(afterKill, g)
		}
	}
	worst, worstAt := redistest.WorstCertain(res.grants, rtInterval)
	worstNew, worstNewAt := redistest.WorstCertain(afterKill, rtInterval)
	byReply, _ := redistest.WorstByReply(res.grants, rtInterval)
	recWorst, recAt := worstRecordWindow(res.records, rtInterval)
	// Records stamped before the kill and after the failover, and how many
	// permits the new master holds from before the kill.
	var recBefore, recAfter, permitsBefore int64
	for _, r := range res.records {
		switch {
		case r.score <= res.killAt.UnixMilli():
			recBefore++
			permitsBefore += r.permits
		case r.score >= res.killed.UnixMilli():
			recAfter++
		}
	}
	t.Logf("%d calls, %d granted (%d before the kill, %d sent after it); failed: %d with ErrReplicaAck, %d past the deadline, %d with another error",
		res.calls, len(res.grants), before, after, res.ackErrs, res.deadlineErrs, res.errs)
	t.Logf("failover: new master %s at kill+%v, first grant after the kill at kill+%v",
		res.promoted, res.promotedAt.Sub(res.killAt).Round(time.Millisecond), res.firstAfter.Sub(res.killAt).Round(time.Millisecond))
	t.Logf("WorstCertain %d (window at kill%+v), of the calls sent after the kill %d (at kill%+v); WorstByReply %d (informational)",
		worst, worstAt.Sub(res.killAt).Round(time.Millisecond), worstNew, worstNewAt.Sub(res.killAt).Round(time.Millisecond), byReply)
	t.Logf("fill records read: %d", res.fills)
	t.Logf("new master's records: %d (%d stamped before the kill, holding %d permits; %d after it), worst window %d (at kill%+v); longest gap between reads %v (ending at kill%+v); given back (left out): %d records holding %d permits",
		len(res.records), recBefore, permitsBefore, recAfter, recWorst, time.UnixMilli(recAt).Sub(res.killAt).Round(time.Millisecond),
		res.pollGap.Round(time.Millisecond), res.pollGapAt.Sub(res.killAt).Round(time.Millisecond), res.givenBack.records, res.givenBack.permits)

	require.LessOrEqualf(t, worst, int64(rtRate), "more than %d grants in one window of real time", rtRate)
	require.Positive(t, before, "no grant before the kill")
	require.Positive(t, after, "no grant after the kill")
	require.Zero(t, res.shortMembers, "permit records too short to hold a count")
	require.Lessf(t, res.pollGap, rtPollGap, "the new master's records were not read often enough to see them all")
	require.LessOrEqualf(t, recWorst, int64(rtRate), "the new master's records hold more than %d permits in one interval", rtRate)
	require.Positive(t, recBefore, "no record from before the kill on the new master")
	require.Positive(t, recAfter, "no record from after the failover on the new master")
	// The Clients saw the new master (NOSCRIPT, then its run_id) and
	// filled the window for one interval.
	require.Positivef(t, res.fills, "no fill record on the new master")
	// Every grant told to a caller before the kill was acknowledged by a
	// replica, and Sentinel promotes the most up-to-date one.
	require.GreaterOrEqualf(t, permitsBefore, int64(before), "grants told to callers before the kill are missing on the new master")
}

// worstRecordWindow returns rtWorstByScore of the records polled.
func worstRecordWindow(recs map[string]rtRecord, interval time.Duration) (int64, int64) {
	rs := make([]rtPermitRec, 0, len(recs))
	for _, r := range recs {
		rs = append(rs, rtPermitRec{score: r.score, permits: r.permits})
	}
	return rtWorstByScore(rs, interval)
}

// recordPoller keeps, for each server, every permit record it read there
// and the server's times of the reads.
type recordPoller struct {
	key      string
	interval time.Duration
	mu       sync.Mutex
	recs     map[string]map[string]rtRecord
	times    map[string][]time.Time
	short    int
	fills    int // fill records read, over all reads (not counted as grants)
}

func newRecordPoller(key string, interval time.Duration) *recordPoller {
	return &recordPoller{key: key, interval: interval, recs: map[string]map[string]rtRecord{}, times: map[string][]time.Time{}}
}

// read reads the records on the server at addr with the server's TIME.
func (p *recordPoller) read(ctx context.Context, addr string, rdb *redis.Client) error {
	var tc *redis.TimeCmd
	var zc *redis.ZSliceCmd
	if _, err := rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		tc = pl.Time(ctx)
		zc = pl.ZRangeWithScores(ctx, p.key, 0, -1)
		return nil
	}); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	recs := p.recs[addr]
	if recs == nil {
		recs = map[string]rtRecord{}
		p.recs[addr] = recs
	}
	at := tc.Val()
	here := map[string]bool{}
	for _, z := range zc.Val() {
		m, _ := z.Member.(string)
		if len(m) < 4 {
			p.short++
			continue
		}
		if d, err := wire.Decode([]byte(m)); err == nil && d.Fill() {
			// The new master's fill (internal/script/restart.go) holds
			// permits no caller was granted: not a grant to count.
			p.fills++
			continue
		}
		k := grantKey(m, int64(z.Score))
		here[k] = true
		if r, ok := recs[k]; ok && !at.After(r.seen) {
			continue // a later read (of another goroutine) saw it already
		}
		recs[k] = rtRecord{score: int64(z.Score), permits: int64(binary.LittleEndian.Uint32([]byte(m[len(m)-4:]))), seen: at}
	}
	// A record missing from a read later than the last that saw it, before
	// its interval passed, was not trimmed by a script's settle (that
	// removes only records an interval old): it was given back. A record
	// shrunk by a give-back is a new member under the old one's score, so
	// the old one is gone and the new one counted.
	for k, r := range recs {
		if !here[k] && !r.gone && at.After(r.seen) && at.UnixMilli() < r.score+p.interval.Milliseconds() {
			r.gone = true
			recs[k] = r
		}
	}
	p.times[addr] = append(p.times[addr], at)
	return nil
}

// of returns the records read on addr less those given back, what was
// given back, the longest gap between two reads there and the server's
// time of the read that ended it.
func (p *recordPoller) of(addr string) (map[string]rtRecord, rtGivenBack, time.Duration, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := map[string]rtRecord{}
	var back rtGivenBack
	for k, r := range p.recs[addr] {
		if r.gone {
			back.records++
			back.permits += r.permits
			continue
		}
		kept[k] = r
	}
	ts := slices.Clone(p.times[addr])
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	var at time.Time
	for i := 1; i < len(ts); i++ {
		if d := ts[i].Sub(ts[i-1]); d > gap {
			gap, at = d, ts[i]
		}
	}
	return kept, back, gap, at
}

func (p *recordPoller) fillCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fills
}

func (p *recordPoller) shortMembers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.short
}
