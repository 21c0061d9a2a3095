package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
)

// The fleet section (issue 24): one limiter shared by a fleet of Clients
// (1, 4, 16, 64; the same callers in all, spread evenly), each Client with
// its own connection pool, in two regimes: over-asking (most decisions
// refused) and under-asking at a high rate (most granted). Redis CPU per
// decision is the headline; script calls are counted beside it, as times
// on a shared machine are noisy, and the limit is checked: the most grants
// in any window of the interval.

// fleetRegime is one workload of the fleet section.
type fleetRegime struct {
	name     string
	rate     int64 // per interval
	interval time.Duration
	run      time.Duration // one contender's run per round
}

// fleetShape is clients Clients with callers callers each.
type fleetShape struct{ clients, callers int }

func (s fleetShape) String() string { return fmt.Sprintf("%d x %d", s.clients, s.callers) }

// fleetEnv is what the sides of one shape run on: a go-redis client per
// Client for the Go sides, and the JVM of RedissonClients.
type fleetEnv struct {
	rdbs []*redis.Client
	jf   *javaFleet // nil: Redisson left out
}

// fleetRun makes decisions for d from every caller of the shape and
// returns them, the grants and the most grants proven in one window of w
// (provenInWindow); most is -1 for a side with no rule.
type fleetRun func(ctx context.Context, d, w time.Duration) (decisions, grants, most int64, err error)

// fleetSide is one contender of the fleet section.
type fleetSide struct {
	name   string
	noRule bool // the floor: grants every call
	// leases, for a side with leased permits, sums its Clients' lease
	// events of the run in progress (each run starts it afresh).
	leases *leaseTally
	// start makes the shape's Clients (one per s.clients, on env's
	// connections); they live for every run of the shape, as a fleet's
	// would, so that what a Client does once (this library probes its
	// ACL permissions and reads INFO) falls in the warm-up.
	start func(ctx context.Context, env *fleetEnv, s fleetShape) (fleetClients, error)
}

// fleetClients opens the limiter called key (fresh) at rate per interval
// on every Client of a shape and returns its run.
type fleetClients func(ctx context.Context, key string, rate int64, interval time.Duration) (fleetRun, error)

// fleetSides are the fleet section's contenders, this library first. A
// row for another configuration of this library is one line here; the
// report gives it the same columns, its ratio to Redisson and the targets
// (targetScriptsPerRefusal, targetCPUPerGrant) that every "ratelimiter"
// row is held to.
func fleetSides(java bool) []fleetSide {
	sides := []fleetSide{
		oursFleet("ratelimiter (default)"),
		leaseFleet(leaseName, ratelimiter.LeaseOptions{}),
	}
	if java {
		sides = append(sides, redissonFleet())
	}
	return append(sides, gcraFleet(), floorFleet())
}

// oursFleet is this library: a ratelimiter.Client with opts per Client,
// each on its own go-redis client, TryAcquire(1) on an OVERALL limiter.
func oursFleet(name string, opts ...ratelimiter.Option) fleetSide {
	return fleetSide{name: name, start: func(ctx context.Context, env *fleetEnv, s fleetShape) (fleetClients, error) {
		cs := make([]*ratelimiter.Client, len(env.rdbs))
		for i, rdb := range env.rdbs {
			cs[i] = ratelimiter.NewClient(rdb, opts...)
		}
		return func(ctx context.Context, key string, rate int64, iv time.Duration) (fleetRun, error) {
			ds := make([]func(context.Context) (bool, error), len(cs))
			for i, c := range cs {
				l := c.Limiter(key)
				if i == 0 {
					if _, err := l.TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: rate, Interval: iv}); err != nil {
						return nil, err
					}
				}
				ds[i] = func(ctx context.Context) (bool, error) { return l.TryAcquire(ctx, 1) }
			}
			return goFleet(ds, s, true), nil
		}, nil
	}}
}

// leaseName is the fleet row of leased permits, with the defaults.
const leaseName = "ratelimiter WithLeases"

// leaseFleet is this library with leased permits (ratelimiter.WithLeases
// with o): as oursFleet, but a run's Clients are made for the run, each
// warmed with one grant before the measurement (its permission probe and
// eviction check), and closed at its end, inside the measurement, so that
// the returns of the leases' unused permits are counted in the run's
// Redis CPU and script calls. Their lease events are summed in the side's
// tally.
func leaseFleet(name string, o ratelimiter.LeaseOptions) fleetSide {
	tally := &leaseTally{}
	return fleetSide{name: name, leases: tally, start: func(ctx context.Context, env *fleetEnv, s fleetShape) (fleetClients, error) {
		opts := []ratelimiter.Option{ratelimiter.WithLeases(o), ratelimiter.WithHooks(ratelimiter.Hooks{Lease: tally.add})}
		return func(ctx context.Context, key string, rate int64, iv time.Duration) (fleetRun, error) {
			cs := make([]*ratelimiter.Client, len(env.rdbs))
			ds := make([]func(context.Context) (bool, error), len(cs))
			for i, rdb := range env.rdbs {
				cs[i] = ratelimiter.NewClient(rdb, opts...)
				l := cs[i].Limiter(key)
				if i == 0 {
					if _, err := l.TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: rate, Interval: iv}); err != nil {
						return nil, err
					}
				}
				if _, err := l.TryAcquire(ctx, 1); err != nil {
					return nil, err
				}
				ds[i] = func(ctx context.Context) (bool, error) { return l.TryAcquire(ctx, 1) }
			}
			tally.reset()
			run := goFleet(ds, s, true)
			return func(ctx context.Context, d, w time.Duration) (int64, int64, int64, error) {
				dec, grants, most, err := run(ctx, d, w)
				for _, c := range cs {
					err = errors.Join(err, c.Close(ctx))
				}
				return dec, grants, most, err
			}, nil
		}, nil
	}}
}

// leaseTally sums lease events (Hooks.Lease).
type leaseTally struct {
	mu                       sync.Mutex
	permits, handed, kept, n int64
}

func (t *leaseTally) add(e ratelimiter.LeaseEvent) {
	t.mu.Lock()
	t.permits, t.handed, t.kept, t.n = t.permits+e.Permits, t.handed+e.HandedOut, t.kept+e.Kept, t.n+1
	t.mu.Unlock()
}

func (t *leaseTally) reset() {
	t.mu.Lock()
	t.permits, t.handed, t.kept, t.n = 0, 0, 0, 0
	t.mu.Unlock()
}

func (t *leaseTally) read() (permits, handed, kept, n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.permits, t.handed, t.kept, t.n
}

// redissonFleet is Java Redisson: one RedissonClient per Client, all in
// one JVM (peer.Fleet), tryAcquire(1) on an OVERALL RRateLimiter.
func redissonFleet() fleetSide {
	return fleetSide{name: redissonName, start: func(ctx context.Context, env *fleetEnv, s fleetShape) (fleetClients, error) {
		if err := env.jf.fleet(ctx, s.clients, s.callers); err != nil {
			return nil, err
		}
		return func(ctx context.Context, key string, rate int64, iv time.Duration) (fleetRun, error) {
			if err := env.jf.trySetRate(ctx, key, rate, iv); err != nil {
				return nil, err
			}
			return func(ctx context.Context, d, w time.Duration) (int64, int64, int64, error) {
				return env.jf.load(ctx, s.clients, key, s.clients*s.callers, d, w)
			}, nil
		}, nil
	}}
}

// gcraFleet is redis_rate v10 (burst = rate, as in the other sections), a
// redis_rate.Limiter per Client.
func gcraFleet() fleetSide {
	return fleetSide{name: "GCRA (redis_rate v10)", start: func(ctx context.Context, env *fleetEnv, s fleetShape) (fleetClients, error) {
		rls := make([]*redis_rate.Limiter, len(env.rdbs))
		for i, rdb := range env.rdbs {
			rls[i] = redis_rate.NewLimiter(rdb)
		}
		return func(ctx context.Context, key string, rate int64, iv time.Duration) (fleetRun, error) {
			lim := redis_rate.Limit{Rate: int(rate), Burst: int(rate), Period: iv}
			ds := make([]func(context.Context) (bool, error), len(rls))
			for i, rl := range rls {
				ds[i] = func(ctx context.Context) (bool, error) {
					res, err := rl.Allow(ctx, key, lim)
					if err != nil {
						return false, err
					}
					return res.Allowed > 0, nil
				}
			}
			return goFleet(ds, s, true), nil
		}, nil
	}}
}

// floorFleet is the one-command script (EVALSHA of an INCR), per Client.
func floorFleet() fleetSide {
	return fleetSide{name: floorName, noRule: true, start: func(ctx context.Context, env *fleetEnv, s fleetShape) (fleetClients, error) {
		return func(ctx context.Context, key string, rate int64, iv time.Duration) (fleetRun, error) {
			ds := make([]func(context.Context) (bool, error), len(env.rdbs))
			for i, rdb := range env.rdbs {
				c := classic{rdb: rdb, key: key}
				ds[i] = func(ctx context.Context) (bool, error) { return c.floor(ctx, 0) }
			}
			return goFleet(ds, s, false), nil
		}, nil
	}}
}

// goFleet runs s.clients*s.callers goroutines, goroutine j deciding with
// decide[j mod s.clients], as fast as they can until d has passed (one end
// for all). With spans, each grant's call is timed (the clock before it
// was sent, after its answer) and the most grants proven in one window of
// w are counted (provenInWindow).
func goFleet(decide []func(context.Context) (bool, error), s fleetShape, spans bool) fleetRun {
	return func(ctx context.Context, d, w time.Duration) (int64, int64, int64, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type tally struct {
			callerTally
			spans [][2]int64
		}
		tallies := make([]tally, s.clients*s.callers)
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for j := range tallies {
			wg.Add(1)
			go func(t *tally, try func(context.Context) (bool, error)) {
				defer wg.Done()
				var granted func(time.Time)
				if spans {
					granted = func(start time.Time) {
						t.spans = append(t.spans, [2]int64{start.UnixNano(), time.Now().UnixNano()})
					}
				}
				decideUntil(ctx, cancel, end, try, &t.callerTally, granted)
			}(&tallies[j], decide[j%len(decide)])
		}
		wg.Wait()
		var dec, grants int64
		var all [][2]int64
		var errs []error
		for _, t := range tallies {
			errs = append(errs, t.err)
			dec += t.decisions
			grants += t.grants
			all = append(all, t.spans...)
		}
		if err := errors.Join(errs...); err != nil {
			return 0, 0, 0, err
		}
		if !spans {
			return dec, grants, -1, nil
		}
		return dec, grants, int64(provenInWindow(all, int64(w-stampResolution))), nil
	}
}

// stampResolution is the resolution of permit records' stamps: whole
// milliseconds, as Redisson writes them. A record stamped s for a grant
// made at s plus up to 1 ms leaves the window at s plus the interval, so
// a sliding log stamped in whole ms holds its rate in every real-time
// window of the interval less 1 ms, not of the whole interval (the soak's
// and redistest.WorstCertain's window). The Go fleets are judged on that
// window: a whole-interval window also counted the two ends of one
// millisecond's expiry, which every such log allows (a 1.02x row of a
// quick run); what it no longer catches is an excess confined to that
// millisecond.
const stampResolution = time.Millisecond

// provenInWindow returns the most grants that certainly fell in one
// window [t, t+w): a grant whose call was sent at or after s and answered
// at or before e (span {s, e}) is in [t, t+w) for every t in [e-w+1, s],
// so the answer is the most of those ranges that share a point. It is a
// lower bound of the most grants any window held (a grant whose call
// straddles the window's edge is not counted), and never above it: a
// figure above the rate proves the limit exceeded, whatever the scheduler
// did between a call and its answer. The Java fleet counts the same way
// in milliseconds.
func provenInWindow(spans [][2]int64, w int64) int {
	var starts, ends []int64
	for _, sp := range spans {
		if lo, hi := sp[1]-w+1, sp[0]; lo <= hi {
			starts = append(starts, lo)
			ends = append(ends, hi)
		}
	}
	slices.Sort(starts)
	slices.Sort(ends)
	best, cur, j := 0, 0, 0
	for _, lo := range starts {
		for ends[j] < lo {
			cur--
			j++
		}
		cur++
		best = max(best, cur)
	}
	return best
}

// fleetSample is one contender's run at one shape and regime.
type fleetSample struct {
	decisions, grants int64
	scripts           int64         // script calls Redis ran meanwhile
	cpu               time.Duration // Redis CPU (user + sys) meanwhile
	run               time.Duration
	most              int64 // most grants proven in one window of the interval; -1: no rule
	// Leased permits (a side with leases): the permits of the run's leases,
	// those handed out, those neither handed out nor given back, and the
	// leases.
	leasePermits, leaseHanded, leaseKept, leases int64
}

// unusedShare is the share of lease permits not handed out (given back,
// or kept); NaN without leases.
func (s fleetSample) unusedShare() float64 {
	if s.leasePermits == 0 {
		return math.NaN()
	}
	return float64(s.leasePermits-s.leaseHanded) / float64(s.leasePermits)
}

// leasedShare is the share of grants whose permits came from lease
// records (handed out, or to the lease call's own callers); NaN without
// leases.
func (s fleetSample) leasedShare() float64 {
	if s.leasePermits == 0 {
		return math.NaN()
	}
	return float64(s.leaseHanded) / float64(max(s.grants, 1))
}

func (s fleetSample) perSec() float64 { return float64(s.decisions) / s.run.Seconds() }
func (s fleetSample) cpuUs() float64  { return us(s.cpu) / float64(max(s.decisions, 1)) }
func (s fleetSample) cpuPerGrant() float64 {
	if s.grants == 0 {
		return math.NaN()
	}
	return us(s.cpu) / float64(s.grants)
}
func (s fleetSample) granted() float64 { return float64(s.grants) / float64(max(s.decisions, 1)) }
func (s fleetSample) scriptsPerDecision() float64 {
	return float64(s.scripts) / float64(max(s.decisions, 1))
}

// scriptsPerRefusal is the script calls per refused decision: every script
// call is counted, the granting ones too, so it bounds the refusals' own.
func (s fleetSample) scriptsPerRefusal() float64 {
	if s.decisions == s.grants {
		return math.NaN()
	}
	return float64(s.scripts) / float64(s.decisions-s.grants)
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// fleetResult is the fleet section's runs.
type fleetResult struct {
	names   []string // contenders, this library first
	shapes  []fleetShape
	regimes []fleetRegime
	// samples by regime name, shape index, contender, round.
	samples map[string][][][]fleetSample
	skipped []string // contenders left out, with the reason
	floor   benchFloor
	// leaseRegimes is the largest shape's runs by regime (leaseregimes.go);
	// nil when the plan has none.
	leaseRegimes *leaseRegimeResult
}

// fleet runs the fleet section: for each shape, a warm-up of every
// contender, then per regime plan.fleetRounds rounds that alternate the
// contenders, each on a fresh limiter; then the redis-benchmark floor.
// java says Redisson may run (its peer jar is built and java found).
func (b *bench) fleet(ctx context.Context, addr string, java bool) (*fleetResult, error) {
	p := b.plan
	res := &fleetResult{regimes: []fleetRegime{p.fleetOver, p.fleetUnder}, samples: map[string][][][]fleetSample{}}
	env := &fleetEnv{}
	if java {
		jf, why, err := startJavaFleet(ctx, addr)
		if err != nil {
			return nil, err
		}
		if jf == nil {
			res.skipped = append(res.skipped, "Redisson "+redissonVersion+": "+why)
		} else {
			defer jf.Close()
			env.jf = jf
		}
	} else {
		res.skipped = append(res.skipped, "Redisson "+redissonVersion+" (left out of the run)")
	}
	sides := fleetSides(env.jf != nil)
	for _, s := range sides {
		res.names = append(res.names, s.name)
	}
	for _, n := range p.fleetClients {
		res.shapes = append(res.shapes, fleetShape{clients: n, callers: max(p.fleetCallers/n, 1)})
	}
	for si, s := range res.shapes {
		env.rdbs = b.fleetConns(s)
		err := b.runShape(ctx, res, sides, env, si, s)
		for _, rdb := range env.rdbs {
			_ = rdb.Close()
		}
		if err != nil {
			return nil, err
		}
	}
	var err error
	res.floor, err = b.benchmarkFloor(ctx, addr)
	return res, err
}

// fleetOnly runs the fleet section alone (--fleet-only) and prints its
// tables under the run's caption.
func (b *bench) fleetOnly(ctx context.Context, o options, addr string) (*results, error) {
	label := "Redisson " + redissonVersion
	if o.noJava {
		label = "Redisson left out"
	}
	b.progress("%s run of the fleet section alone on %s", b.plan.name, addr)
	f, err := b.fleet(ctx, addr, !o.noJava)
	if err != nil {
		return nil, err
	}
	r := &results{env: newEnvironment(serverInfo(ctx, b.rdb), label), plan: b.plan, fleet: f, names: f.names}
	fmt.Fprintf(o.out, "## Fleet section (%s run, --fleet-only)\n\n%s. One redis-server on loopback.\n\n", b.plan.name, r.env.caption())
	f.writeMarkdown(o.out, b.plan.fleetCallers)
	return r, nil
}

// fleetConns opens one go-redis client per Client of s, on b's server,
// with a connection per caller.
func (b *bench) fleetConns(s fleetShape) []*redis.Client {
	rdbs := make([]*redis.Client, s.clients)
	for i := range rdbs {
		o := *b.rdb.Options()
		o.PoolSize = s.callers
		o.MinIdleConns = 0
		rdbs[i] = redis.NewClient(&o)
	}
	return rdbs
}

// runShape starts the shape's Clients of every contender, warms them up
// and runs the regimes.
func (b *bench) runShape(ctx context.Context, res *fleetResult, sides []fleetSide, env *fleetEnv, si int, s fleetShape) error {
	// The shape's Clients, then a warm-up: connections opened, each
	// Client's first calls made, the JIT at work (Redisson 3x, and 10x at
	// the first shape: its JVM has just started).
	cs := make([]fleetClients, len(sides))
	for i, side := range sides {
		var err error
		if cs[i], err = side.start(ctx, env, s); err != nil {
			return fmt.Errorf("fleet %s, %s: %w", side.name, s, err)
		}
		d := b.plan.fleetWarmup
		if side.name == redissonName && si == 0 {
			d *= 10
		} else if side.name == redissonName {
			d *= 3
		}
		warm := fleetRegime{name: "warm-up", rate: b.plan.fleetUnder.rate, interval: b.plan.fleetUnder.interval, run: d}
		if _, err := b.fleetRun(ctx, side, cs[i], s, warm); err != nil {
			return err
		}
	}
	for _, g := range res.regimes {
		if res.samples[g.name] == nil {
			res.samples[g.name] = make([][][]fleetSample, len(res.shapes))
		}
		all := make([][]fleetSample, len(sides))
		for r := 0; r < b.plan.fleetRounds; r++ {
			for _, i := range order(r, len(sides)) {
				smp, err := b.fleetRun(ctx, sides[i], cs[i], s, g)
				if err != nil {
					return err
				}
				all[i] = append(all[i], smp)
			}
		}
		res.samples[g.name][si] = all
		b.progress("fleet %s Clients x callers, %s: done", s, g.name)
	}
	if si == len(res.shapes)-1 && len(b.plan.leaseRegimes) > 0 {
		return b.runLeaseRegimes(ctx, res, sides, cs, s)
	}
	return nil
}

// fleetRun runs one contender once on a fresh limiter and reads what
// Redis did meanwhile.
func (b *bench) fleetRun(ctx context.Context, side fleetSide, cs fleetClients, s fleetShape, g fleetRegime) (fleetSample, error) {
	key := b.key("fleet")
	defer b.drop(ctx, key)
	run, err := cs(ctx, key, g.rate, g.interval)
	if err != nil {
		return fleetSample{}, fmt.Errorf("fleet %s, %s: open: %w", side.name, s, err)
	}
	before, err := readStats(ctx, b.rdb)
	if err != nil {
		return fleetSample{}, err
	}
	dec, grants, most, err := run(ctx, g.run, g.interval)
	if err != nil {
		return fleetSample{}, fmt.Errorf("fleet %s, %s, %s: %w", side.name, s, g.name, err)
	}
	after, err := readStats(ctx, b.rdb)
	if err != nil {
		return fleetSample{}, err
	}
	d := after.sub(before)
	if side.noRule {
		most = -1
	}
	smp := fleetSample{decisions: dec, grants: grants, scripts: d.scriptCalls, cpu: d.cpu, run: g.run, most: most}
	if side.leases != nil {
		smp.leasePermits, smp.leaseHanded, smp.leaseKept, smp.leases = side.leases.read()
	}
	return smp, nil
}

// at returns the median over the rounds of f for contender i at shape si,
// of the rounds where f is defined (NaN: none).
func (r *fleetResult) at(regime string, si, i int, f func(fleetSample) float64) float64 {
	return medianOf(r.samples[regime][si][i], f)
}

// medianOf is the median of f over the rounds ss where f is defined (NaN:
// none).
func medianOf(ss []fleetSample, f func(fleetSample) float64) float64 {
	vs := slices.DeleteFunc(pick(ss, f), math.IsNaN)
	if len(vs) == 0 {
		return math.NaN()
	}
	return median(vs)
}

// mostShare is the worst round's most grants proven in one window, as a
// multiple of the rate; -1 for a contender with no rule.
func (r *fleetResult) mostShare(g fleetRegime, si, i int) float64 {
	return worstShare(r.samples[g.name][si][i], g.rate)
}

// worstShare is the most grants proven in one window of the rounds ss, the
// worst round's, as a multiple of rate; -1 for a contender with no rule.
func worstShare(ss []fleetSample, rate int64) float64 {
	worst := int64(-1)
	for _, s := range ss {
		worst = max(worst, s.most)
	}
	if worst < 0 {
		return -1
	}
	return float64(worst) / float64(rate)
}

// fleetTargets are issue 24's targets for this library's rows at 64
// Clients x 1 caller: at most 0.05 script calls per refused decision
// over-asking, with the limit held; at most 0.25x Redisson's Redis CPU per
// granted decision under-asking (leased permits; the defaults are not
// expected to meet it).
const (
	targetScriptsPerRefusal = 0.05
	targetCPUPerGrant       = 0.25
)

func (r *fleetResult) writeMarkdown(w io.Writer, callers int) {
	ref := slices.Index(r.names, redissonName)
	for _, s := range r.skipped {
		fmt.Fprintf(w, "Fleet: left out: %s\n\n", s)
	}
	for _, g := range r.regimes {
		r.table(w, g, ref, callers)
	}
	if r.leaseRegimes != nil {
		r.leaseRegimes.table(w)
	}
	r.floor.table(w, callers)
}

func (r *fleetResult) table(w io.Writer, g fleetRegime, ref, callers int) {
	what := "most decisions refused"
	if g.name == "under-asking" {
		what = "most decisions granted, at a high rate"
	}
	fmt.Fprintf(w, "### Fleet: Clients sharing one limiter, %s (%s)\n\n", g.name, what)
	fmt.Fprintf(w, "%d callers in all, spread evenly over 1 to 64 Clients (rows: Clients x callers each) on one limiter of "+
		"%s per %v, every caller as fast as it can for %v. Each Client has its own connection pool: this library a "+
		"ratelimiter.Client with the defaults on its own go-redis client, redis_rate a Limiter on its own go-redis client, "+
		"Redisson a RedissonClient of its own, all in one JVM (internal/compat/peer, peer.Fleet; they share its Netty "+
		"event loops and executor). Redis CPU per decision (the headline) from INFO cpu (user + sys, the whole server), "+
		"script calls from INFO commandstats (every script call, so per refused decision it bounds what a refusal "+
		"costs), medians of %d round(s) that alternate the contenders; (x) is the ratio to %s at the same shape. "+
		"Most permits in a window: the most grants whose whole call (from before it was sent to after its answer) "+
		"fell inside one window of the interval less 1 ms (stamps are whole ms; the Java fleet counts its records' "+
		"stamps in whole windows), as a multiple of the rate, worst round. It never counts a grant "+
		"outside the window, so above 1.00x the limit was exceeded; at or below it, no window was seen to "+
		"exceed it (held).\n\n",
		callers, group(float64(g.rate), 0), g.interval, g.run, len(r.samples[g.name][0][0]), redissonName)
	fmt.Fprint(w, "| Clients x callers | contender | Redis CPU µs/decision | decisions/s | granted | script calls/decision | "+
		"script calls/refused decision | Redis CPU µs/grant | most permits in a window / rate |\n"+
		"|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	cpu := func(s fleetSample) float64 { return s.cpuUs() }
	perSec := func(s fleetSample) float64 { return s.perSec() }
	perGrant := func(s fleetSample) float64 { return s.cpuPerGrant() }
	for si, s := range r.shapes {
		vs := func(i int, f func(fleetSample) float64, digits int) string {
			v := r.at(g.name, si, i, f)
			if math.IsNaN(v) {
				return "—"
			}
			if ref < 0 || math.IsNaN(r.at(g.name, si, ref, f)) {
				return group(v, digits)
			}
			return withRatio(v, r.at(g.name, si, ref, f), digits)
		}
		for i, name := range r.names {
			refusal := r.at(g.name, si, i, func(s fleetSample) float64 { return s.scriptsPerRefusal() })
			fmt.Fprintf(w, "| %s | %s | %s | %s | %.1f%% | %.3f | %s | %s | %s |\n", s, name, vs(i, cpu, 2), vs(i, perSec, 0),
				100*r.at(g.name, si, i, func(s fleetSample) float64 { return s.granted() }),
				r.at(g.name, si, i, func(s fleetSample) float64 { return s.scriptsPerDecision() }),
				nanDash(refusal, 4), vs(i, perGrant, 2), heldCell(r.mostShare(g, si, i)))
		}
	}
	fmt.Fprintln(w)
	r.targets(w, g, ref)
}

// targets prints, under each regime's table, where this library's rows
// stand against issue 24's targets at the largest fleet.
func (r *fleetResult) targets(w io.Writer, g fleetRegime, ref int) {
	si := len(r.shapes) - 1
	s := r.shapes[si]
	for i, name := range r.names {
		if !strings.HasPrefix(name, "ratelimiter") {
			continue
		}
		switch g.name {
		case "over-asking":
			v := r.at(g.name, si, i, func(s fleetSample) float64 { return s.scriptsPerRefusal() })
			m := r.mostShare(g, si, i)
			fmt.Fprintf(w, "Target at %s, %s: at most %.2f script calls per refused decision with the limit held: "+
				"%s script calls, limit %s: **%s**.\n\n", s, name, targetScriptsPerRefusal, nanDash(v, 4), heldWord(m),
				metWord(v <= targetScriptsPerRefusal && m >= 0 && m <= 1))
		case "under-asking":
			if name == leaseName {
				r.leaseLine(w, g, si)
			}
			if ref < 0 {
				fmt.Fprintf(w, "Target at %s, %s: at most %.2fx Redisson's Redis CPU per granted decision: no Redisson in this run.\n\n",
					s, name, targetCPUPerGrant)
				continue
			}
			f := func(s fleetSample) float64 { return s.cpuPerGrant() }
			x := r.at(g.name, si, i, f) / r.at(g.name, si, ref, f)
			fmt.Fprintf(w, "Target at %s, %s: at most %.2fx Redisson's Redis CPU per granted decision (leased permits): "+
				"%.2fx: **%s**.\n\n", s, name, targetCPUPerGrant, x, metWord(x <= targetCPUPerGrant))
		}
	}
}

func heldCell(m float64) string {
	if m < 0 {
		return "— (grants every call)"
	}
	return fmt.Sprintf("%.2fx (%s)", m, heldWord(m))
}

func heldWord(m float64) string {
	switch {
	case m < 0:
		return "not measured"
	case m <= 1:
		return "held"
	}
	return "exceeded"
}

func metWord(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

func nanDash(v float64, digits int) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.*f", digits, v)
}

// leaseLine prints, under the under-asking table, the lease row's leased
// permits at the largest fleet: the share of grants that came from lease
// records and the share of lease permits left unused (given back by the
// lease's end, or kept), medians of the rounds.
func (r *fleetResult) leaseLine(w io.Writer, g fleetRegime, si int) {
	i := slices.Index(r.names, leaseName)
	var kept, leases int64
	for _, s := range r.samples[g.name][si][i] {
		kept, leases = kept+s.leaseKept, leases+s.leases
	}
	fmt.Fprintf(w, "Leases at %s, %s: %s of the grants from lease records, %s of the lease permits left unused "+
		"(given back; %d kept), %d leases in %d round(s).\n\n", r.shapes[si], leaseName,
		pct(r.at(g.name, si, i, fleetSample.leasedShare)), pct(r.at(g.name, si, i, fleetSample.unusedShare)),
		kept, leases, len(r.samples[g.name][si][i]))
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}
