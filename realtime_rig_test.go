package ratelimiter_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redisproc"
	"github.com/goredisson/ratelimiter/internal/redistest"
	"github.com/goredisson/ratelimiter/wire"
)

// The rig of realtime_test.go: servers that DEBUG SLEEP, the permit
// records a limiter wrote as Redis ran them, fleets of Clients, and the
// checks of one run.

// rtDebugServerArgs returns the options a redis-server of this build needs
// for DEBUG: "--enable-debug-command local" from Redis 7 on (Valkey too:
// it forked from 7.2 and reports its own version, 7 or later), where
// DEBUG is refused by default; nothing for 6.2 and earlier, which allow
// DEBUG and do not know the option (redis-server would not start).
func rtDebugServerArgs(t *testing.T) []string {
	t.Helper()
	redistest.Need(t)
	out, err := exec.Command(redisproc.Binary(), "--version").Output()
	require.NoError(t, err, "%s --version", redisproc.Binary())
	m := regexp.MustCompile(`\bv=(\d+)\.`).FindSubmatch(out)
	require.NotNil(t, m, "no version in %q", out)
	if major, _ := strconv.Atoi(string(m[1])); major >= 7 {
		return []string{"--enable-debug-command", "local"}
	}
	return nil
}

// rtFleet returns a limiter of rate per interval (OVERALL), configured on
// the server at addr, as seen by clients Clients, each on its own go-redis
// client (as pods would be), made with opts and with the per-Client
// options of perClient (if not nil) given its index.
func rtFleet(t *testing.T, addr string, rate int64, interval time.Duration, clients int, perClient func(i int) []ratelimiter.Option, opts ...ratelimiter.Option) []*ratelimiter.Limiter {
	t.Helper()
	name := uniqueName(t)
	lims := make([]*ratelimiter.Limiter, clients)
	for i := range lims {
		o := slices.Clone(opts)
		if perClient != nil {
			o = append(o, perClient(i)...)
		}
		lims[i] = ratelimiter.NewClient(redistest.Client(t, addr), o...).Limiter(name)
	}
	ok, err := lims[0].TrySetRate(context.Background(), ratelimiter.Config{Rate: rate, Interval: interval})
	require.NoError(t, err)
	require.True(t, ok)
	return lims
}

// rtRun runs goroutines callers on lims (caller g on lims[g%len(lims)])
// until stop is closed, each calling call in a loop and recording its
// grants in grants with the time the call was made. call returns whether
// it was granted; an error fails the test and ends that caller. The
// returned function waits for every caller to return: a call in progress
// at stop is let finish (Acquire until granted), never abandoned, as an
// abandoned grant is released and its record then no longer shows what
// was granted.
func rtRun(t *testing.T, lims []*ratelimiter.Limiter, callers int, stop <-chan struct{}, grants *redistest.Grants,
	call func(ctx context.Context, g int, l *ratelimiter.Limiter) (bool, error)) (wait func()) {
	// Only a safety net: no call comes near it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var wg sync.WaitGroup
	for g := 0; g < callers; g++ {
		l := lims[g%len(lims)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				ok, err := call(ctx, g, l)
				if err != nil {
					t.Errorf("caller %d: %v", g, err)
					return
				}
				if ok {
					grants.Add(start, 1)
				}
			}
		}()
	}
	return func() { wg.Wait(); cancel() }
}

// rtAcquire is a caller of rtRun that blocks in Acquire(ctx, 1).
func rtAcquire(ctx context.Context, _ int, l *ratelimiter.Limiter) (bool, error) {
	if err := l.Acquire(ctx, 1); err != nil {
		return false, err
	}
	return true, nil
}

// rtTryAcquire is a caller of rtRun that calls TryAcquire(ctx, 1) in a
// tight loop.
func rtTryAcquire(ctx context.Context, _ int, l *ratelimiter.Limiter) (bool, error) {
	return l.TryAcquire(ctx, 1)
}

// rtPermitLog is every permit record a limiter's permits key was given,
// read from MONITOR (commands run by scripts included), with the time
// Redis ran each ZADD. It is exact where sampling the sorted set
// (sampleRecords, combine_test.go) is not: a record stamped on a stale
// or skewed client clock can leave the set within one sample, and a
// record removed less than an interval after its stamp by the sampler's
// clock is taken there for a released one and left out, which is what a
// Client whose clock runs ahead does to every record.
type rtPermitLog struct {
	addr, key string
	marker    string // echoed to mark the end of the log
	conn      net.Conn
	done      chan struct{}

	// Written by the reader until done is closed.
	recs     map[string]rtPermitRec // by member
	released int                    // records removed by ZREM (Release)
	live     rtLiveSet              // the set as the commands leave it
	maxLive  int64                  // the most permits live records held at once
	err      error
}

// rtLiveSet is the sorted set's records as MONITOR's commands leave it:
// member to score and permits.
type rtLiveSet map[string]rtPermitRec

// permits returns the permits the set's records hold.
func (s rtLiveSet) permits() int64 {
	var n int64
	for _, r := range s {
		n += r.permits
	}
	return n
}

// removeRanks removes the records of ranks lo to hi (inclusive, from 0,
// negative from the end), in Redis's order: by score, then by member's
// bytes.
func (s rtLiveSet) removeRanks(lo, hi int) {
	ms := make([]string, 0, len(s))
	for m := range s {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool {
		if s[ms[i]].score != s[ms[j]].score {
			return s[ms[i]].score < s[ms[j]].score
		}
		return ms[i] < ms[j]
	})
	if lo < 0 {
		lo += len(ms)
	}
	if hi < 0 {
		hi += len(ms)
	}
	for i := max(lo, 0); i <= hi && i < len(ms); i++ {
		delete(s, ms[i])
	}
}

// removeScores removes the records whose scores lie in [min, max] (a
// bound of "(" excludes it; -inf, +inf).
func (s rtLiveSet) removeScores(min, max string) error {
	lo, loOpen, err := rtScoreBound(min)
	if err != nil {
		return err
	}
	hi, hiOpen, err := rtScoreBound(max)
	if err != nil {
		return err
	}
	for m, r := range s {
		v := float64(r.score)
		if (v > lo || (v == lo && !loOpen)) && (v < hi || (v == hi && !hiOpen)) {
			delete(s, m)
		}
	}
	return nil
}

// rtScoreBound parses a ZRANGEBYSCORE bound.
func rtScoreBound(b string) (v float64, open bool, err error) {
	if strings.HasPrefix(b, "(") {
		open, b = true, b[1:]
	}
	v, err = strconv.ParseFloat(b, 64) // takes -inf and +inf
	return v, open, err
}

// rtPermitRec is one permit record: its stamp (score, ms), its permits,
// and when Redis added it (the MONITOR line's time, this machine's clock).
type rtPermitRec struct {
	score   int64
	permits int64
	added   time.Time
}

// rtMonitorPermits starts reading MONITOR on the server at addr for the
// records of the sorted set key. Call Records after the run.
func rtMonitorPermits(t *testing.T, addr, key string) *rtPermitLog {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = conn.Write([]byte("MONITOR\r\n"))
	require.NoError(t, err)
	r := bufio.NewReaderSize(conn, 1<<16)
	ok, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+OK\r\n", ok)
	p := &rtPermitLog{addr: addr, key: key, conn: conn, done: make(chan struct{}), recs: map[string]rtPermitRec{},
		live:   rtLiveSet{},
		marker: "rtPermitLog-end-" + key}
	go p.read(r)
	return p
}

func (p *rtPermitLog) read(r *bufio.Reader) {
	defer close(p.done)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			p.err = fmt.Errorf("MONITOR: %w", err)
			return
		}
		if !strings.Contains(line, " lua] ") {
			// Not a script's command: no script is part-way through,
			// so the set is as a script left it (acquire.lua adds its
			// grant's record before it removes the records whose
			// interval ended: 56 to 58 permits part-way, rate 50).
			p.maxLive = max(p.maxLive, p.live.permits())
		}
		if strings.Contains(line, strconv.Quote(p.marker)) { // ECHO from Records
			return
		}
		if !strings.Contains(line, `"ZADD"`) && !strings.Contains(line, `"ZREM`) &&
			!strings.Contains(line, `"zadd"`) && !strings.Contains(line, `"zrem`) {
			continue
		}
		at, args, err := rtParseMonitorLine(strings.TrimRight(line, "\r\n"))
		if err != nil {
			p.err = err
			return
		}
		if len(args) < 2 || args[1] != p.key {
			continue
		}
		switch strings.ToUpper(args[0]) {
		case "ZADD":
			rest := args[2:]
			for len(rest) > 0 {
				if _, err := strconv.ParseFloat(rest[0], 64); err == nil {
					break
				}
				rest = rest[1:] // NX, XX, GT, LT, CH
			}
			if len(rest) > 0 && strings.EqualFold(rest[0], "nan") {
				continue // refused by Redis (the permissions probe, probe.lua)
			}
			for ; len(rest) >= 2; rest = rest[2:] {
				score, err := strconv.ParseFloat(rest[0], 64)
				m, derr := wire.Decode([]byte(rest[1]))
				if err != nil || derr != nil {
					p.err = fmt.Errorf("MONITOR line %q: %v %v", line, err, derr)
					return
				}
				rec := rtPermitRec{score: int64(score), permits: int64(m.Permits), added: at}
				if old, ok := p.recs[rest[1]]; ok {
					// A member written anew (the probe record, after its
					// last write was settled: docs/protocol.md): each
					// write is a grant of its own.
					p.recs[fmt.Sprintf("%s@%d", rest[1], old.score)] = old
				}
				p.recs[rest[1]], p.live[rest[1]] = rec, rec
			}
		case "ZREM":
			for _, m := range args[2:] {
				if _, ok := p.recs[m]; ok {
					delete(p.recs, m) // released: its permits came back
					p.released++
				}
				delete(p.live, m)
			}
		case "ZREMRANGEBYRANK":
			if len(args) == 4 && strings.EqualFold(args[2], "nan") {
				continue // refused by Redis (probe.lua)
			}
			lo, err1 := strconv.Atoi(args[min(2, len(args)-1)])
			hi, err2 := strconv.Atoi(args[min(3, len(args)-1)])
			if len(args) != 4 || err1 != nil || err2 != nil {
				p.err = fmt.Errorf("MONITOR line %q: not ZREMRANGEBYRANK key start stop", line)
				return
			}
			p.live.removeRanks(lo, hi)
		case "ZREMRANGEBYSCORE":
			if len(args) != 4 {
				p.err = fmt.Errorf("MONITOR line %q: not ZREMRANGEBYSCORE key min max", line)
				return
			}
			if err := p.live.removeScores(args[2], args[3]); err != nil {
				p.err = fmt.Errorf("MONITOR line %q: %v", line, err)
				return
			}
		}
	}
}

// MaxLive returns the most permits that the set's records held between
// two scripts, by the commands MONITOR showed: the count the value key keeps, which
// no clock (the server's or skewed Clients') can lift past the rate.
// Call it after Records.
func (p *rtPermitLog) MaxLive() int64 { return p.maxLive }

// rtParseMonitorLine splits a MONITOR line (+<sec>.<usec> [db client]
// "arg" ...) into its time and its arguments, unescaped: Redis quotes
// each with sdscatrepr, whose escapes (\\ \" \n \r \t \a \b \xhh) all
// read the same in Go.
func rtParseMonitorLine(line string) (time.Time, []string, error) {
	bad := func(why string) (time.Time, []string, error) {
		return time.Time{}, nil, fmt.Errorf("MONITOR line %q: %s", line, why)
	}
	ts, rest, ok := strings.Cut(strings.TrimPrefix(line, "+"), " ")
	sec, frac, ok2 := strings.Cut(ts, ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	us, err2 := strconv.ParseInt(frac, 10, 64)
	if !ok || !ok2 || err1 != nil || err2 != nil {
		return bad("no time")
	}
	_, rest, ok = strings.Cut(rest, "] ")
	if !ok {
		return bad("no client")
	}
	var args []string
	for i := 0; i < len(rest); {
		if rest[i] == ' ' {
			i++
			continue
		}
		if rest[i] != '"' {
			return bad("unquoted argument")
		}
		j := i + 1
		for ; j < len(rest) && rest[j] != '"'; j++ {
			if rest[j] == '\\' {
				j++
			}
		}
		if j >= len(rest) {
			return bad("unterminated argument")
		}
		a, err := strconv.Unquote(rest[i : j+1])
		if err != nil {
			return bad(err.Error())
		}
		args = append(args, a)
		i = j + 1
	}
	return time.Unix(s, us*1000), args, nil
}

// Records returns every record added to the key and not released since
// rtMonitorPermits, once MONITOR has shown every command before this call.
// It checks the log against the set: every record the set holds now was
// seen added, with the same score.
func (p *rtPermitLog) Records(t *testing.T) []rtPermitRec {
	t.Helper()
	ctx := context.Background()
	rdb := redistest.Client(t, p.addr)
	set, err := rdb.ZRangeWithScores(ctx, p.key, 0, -1).Result()
	require.NoError(t, err)
	require.NoError(t, rdb.Echo(ctx, p.marker).Err())
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("MONITOR: the end marker did not come in 30 s")
	}
	p.conn.Close()
	require.NoError(t, p.err)
	for _, z := range set {
		m := z.Member.(string)
		r, ok := p.recs[m]
		require.True(t, ok, "record %x (score %v) in the set was not seen added", m, z.Score)
		require.Equal(t, int64(z.Score), r.score, "record %x", m)
		_, ok = p.live[m]
		require.True(t, ok, "record %x (score %v) in the set, not in the set the commands left", m, z.Score)
	}
	require.Len(t, p.live, len(set), "the set the commands left, against the set")
	out := make([]rtPermitRec, 0, len(p.recs))
	for _, r := range p.recs {
		out = append(out, r)
	}
	if p.released > 0 {
		t.Logf("%d records released (ZREM) during the run, left out", p.released)
	}
	return out
}

// rtWorstByScore returns the most permits held by records whose scores lie
// within one window [s, s+interval) of the stamps' own clock, and s: what
// the limiter, by its records, let out within one interval. The scripts
// keep it at most the rate on either clock.
func rtWorstByScore(recs []rtPermitRec, interval time.Duration) (most, at int64) {
	r := slices.Clone(recs)
	slices.SortFunc(r, func(a, b rtPermitRec) int { return cmp.Compare(a.score, b.score) })
	var n int64
	j := 0
	for i := range r {
		n += r[i].permits
		for r[j].score+interval.Milliseconds() <= r[i].score {
			n -= r[j].permits
			j++
		}
		if n > most {
			most, at = n, r[j].score
		}
	}
	return most, at
}

// rtWorstByAdded returns the most permits of records that Redis added
// within one window of w of real time (MONITOR's clock, this machine's),
// and its start.
func rtWorstByAdded(recs []rtPermitRec, w time.Duration) (int64, time.Time) {
	g := make([]redistest.Grant, len(recs))
	for i, r := range recs {
		g[i] = redistest.Grant{Start: r.added, Reply: r.added, Permits: r.permits}
	}
	return redistest.WorstByReply(g, w)
}

// rtReplyJitter is how much later one reply may reach its caller than
// another, after Redis granted both, without this process stalling
// visibly (watchStalls records gaps over 50 ms): the fan-out of a
// combined call's reply to its callers, scheduling. An exact limiter
// grants a permit again 999 ms after it granted it at the soonest, and
// on this 2-core machine a reply 2 ms late then put both in one 1 s
// window of replies: 4 Clients x 16 goroutines in Acquire on 100/s
// got 115 to 160 permits by WorstByReply over 1 s in the first second
// of a run whose records Redis added 100 in any 999 ms.
const rtReplyJitter = 50 * time.Millisecond

// rtFigures are the checks of one run.
type rtFigures struct {
	// certain is WorstCertain over the interval; byReply WorstByReply over
	// the interval; byReplyIn WorstByReply over replyWindow.
	certain, byReply, byReplyIn int64
	replyWindow                 time.Duration
	// byScore is the most permits whose records' stamps lie in one
	// interval (rtWorstByScore); byAdded the most whose records Redis
	// added (MONITOR's clock) within the interval less 1 ms.
	byScore, byAdded int64
	grants, recorded int64 // permits granted to the callers; in the records
}

// rtMeasure computes the figures of a run of a rate per interval limiter
// from its callers' grants and its records, and logs them under label.
// procStall is the longest stall of this process during the run
// (watchStalls): replyWindow is the interval less the stamp's 1 ms,
// rtReplyJitter and procStall (at least half the interval), the longest
// window in which an exact limiter never delivers more than the rate.
// It fails when the records do not hold the permits the callers were
// granted: then the log is not the run's, and no figure can be trusted.
func rtMeasure(t *testing.T, label string, grants []redistest.Grant, recs []rtPermitRec, interval, procStall time.Duration) rtFigures {
	t.Helper()
	f := rtFigures{replyWindow: max(interval-redistest.StampResolution-rtReplyJitter-procStall, interval/2)}
	for _, g := range grants {
		f.grants += g.Permits
	}
	for _, r := range recs {
		f.recorded += r.permits
	}
	var certainAt, replyAt, replyInAt, addedAt time.Time
	var scoreAt int64
	f.certain, certainAt = redistest.WorstCertain(grants, interval)
	f.byReply, replyAt = redistest.WorstByReply(grants, interval)
	f.byReplyIn, replyInAt = redistest.WorstByReply(grants, f.replyWindow)
	f.byScore, scoreAt = rtWorstByScore(recs, interval)
	// Less the stamp's resolution, as WorstCertain: a record stamped in
	// the last µs of its ms comes back 999 ms and a few µs after it.
	f.byAdded, addedAt = rtWorstByAdded(recs, interval-redistest.StampResolution)
	first := time.Now()
	for _, g := range grants {
		if g.Start.Before(first) {
			first = g.Start
		}
	}
	ms := func(at time.Time) int64 { return at.Sub(first).Milliseconds() }
	t.Logf("%s: %d granted (%d in records), longest stall of this process %v; worst window (at ms from the first call): "+
		"WorstCertain %d (%d), WorstByReply %v %d (%d), WorstByReply %v %d (%d), by records' scores %d (score %+d), by when Redis added the records %d (%d)",
		label, f.grants, f.recorded, procStall, f.certain, ms(certainAt), interval, f.byReply, ms(replyAt), f.replyWindow, f.byReplyIn, ms(replyInAt),
		f.byScore, scoreAt-first.UnixMilli(), f.byAdded, ms(addedAt))
	require.Equal(t, f.grants, f.recorded, "the records hold other permits than the callers were granted")
	return f
}

// rtCheckStalled fails unless the stall from start to end held every call:
// no grant was answered from 100 ms into it to 100 ms before its end,
// and some call sent before it was answered after it. It returns how
// many permits were answered after end.
func rtCheckStalled(t *testing.T, grants []redistest.Grant, start, end time.Time) int64 {
	t.Helper()
	var after int64
	held := false
	for _, g := range grants {
		if g.Reply.After(start.Add(100*time.Millisecond)) && g.Reply.Before(end.Add(-100*time.Millisecond)) {
			t.Fatalf("the stall did not hold the calls: a grant was answered %v into the stall of %v", g.Reply.Sub(start), end.Sub(start))
		}
		if g.Start.Before(start) && g.Reply.After(end) {
			held = true
		}
		if g.Reply.After(end) {
			after += g.Permits
		}
	}
	require.True(t, held, "the stall did not hold the calls: none sent before it was answered after it")
	return after
}

// grantKey is the key under which a record sampler counts record member,
// scored score, as a grant: the member, but for the probe record, which
// is written anew under the same member after its last write was
// settled (docs/protocol.md), so each of its writes, by its score, is a
// grant of its own.
func grantKey(member string, score int64) string {
	if d, err := wire.Decode([]byte(member)); err == nil && d.Probe() {
		return fmt.Sprintf("%s@%d", member, score)
	}
	return member
}
