package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter"
)

// The many-keys section: per-user limiters. Many limiters, each seldom
// hit twice at once, so combining rarely engages; callers pick a limiter
// at random for every decision, as a server limiting per user or per IP
// does. Each contender opens its limiter by name on every decision, as
// such a server would (ours: Client.Limiter(name)).

// keyedContender decides one permit of the limiter called name.
type keyedContender struct {
	name string
	// setup makes the n limiters named by names ready (ours: TrySetRate
	// on each; redis_rate needs nothing).
	setup  func(ctx context.Context, names []string, rate int64, interval time.Duration) error
	decide func(ctx context.Context, name string) (bool, error)
}

// keyedRegime is how near the rate the callers ask.
type keyedRegime struct {
	name     string
	rate     int64 // per limiter and interval
	interval time.Duration
}

// keyedRegimes: far from the rate (every decision granted) and near it
// (a few decisions per limiter and second against a rate of 2 a second:
// about half refused at 64 callers on 20,000 limiters).
var keyedRegimes = []keyedRegime{
	{name: "far from the rate", rate: 1_000_000, interval: time.Second},
	{name: "near the rate", rate: 2, interval: time.Second},
}

// keyedSample is one contender's run of one round.
type keyedSample struct {
	perSec   float64 // decisions per second
	cpuUs    float64 // Redis CPU (user + sys) per decision, µs
	clientUs float64 // this process's CPU (user + sys) per decision, µs
	granted  float64 // grants per decision
	scripts  float64 // script calls per decision
}

// keyedResult is the samples by regime, limiter count and contender.
type keyedResult struct {
	names   []string
	regimes []string
	counts  []int
	samples map[string]map[int][][]keyedSample
}

// keyedContenders: ours with the defaults and uncombined, and
// redis_rate (burst = rate, as in the other sections).
func keyedContenders(rdb *redis.Client) []keyedContender {
	rl := redis_rate.NewLimiter(rdb)
	gcra := keyedContender{name: "GCRA (redis_rate v10)"}
	// One limit for the whole set of names of a round (set by setup).
	var cur atomic.Pointer[redis_rate.Limit]
	gcra.setup = func(ctx context.Context, names []string, rate int64, interval time.Duration) error {
		l := redis_rate.Limit{Rate: int(rate), Burst: int(rate), Period: interval}
		cur.Store(&l)
		return nil
	}
	gcra.decide = func(ctx context.Context, name string) (bool, error) {
		res, err := rl.Allow(ctx, name, *cur.Load())
		if err != nil {
			return false, err
		}
		return res.Allowed > 0, nil
	}
	return []keyedContender{oursKeyed("ratelimiter (default)", rdb), oursKeyed("ratelimiter WithMaxBatch(1)", rdb, ratelimiter.WithMaxBatch(1)), gcra}
}

// oursKeyed is this library: Client.Limiter(name).TryAcquire(1) per
// decision, on limiters set up in OVERALL mode.
func oursKeyed(name string, rdb *redis.Client, opts ...ratelimiter.Option) keyedContender {
	c := ratelimiter.NewClient(rdb, opts...)
	return keyedContender{name: name,
		setup: func(ctx context.Context, names []string, rate int64, interval time.Duration) error {
			return inParallel(ctx, len(names), 32, func(ctx context.Context, i int) error {
				_, err := c.Limiter(names[i]).TrySetRate(ctx, ratelimiter.Config{Mode: ratelimiter.Overall, Rate: rate, Interval: interval})
				return err
			})
		},
		decide: func(ctx context.Context, name string) (bool, error) { return c.Limiter(name).TryAcquire(ctx, 1) },
	}
}

// inParallel runs f(0..n-1) on workers goroutines and returns the first
// error.
func inParallel(ctx context.Context, n, workers int, f func(context.Context, int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(ctx, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// manyKeys runs every regime and limiter count, plan.keyedRounds rounds,
// each round every contender in turn (order) on limiters of its own.
func (b *bench) manyKeys(ctx context.Context) (*keyedResult, error) {
	cs := keyedContenders(b.rdb)
	res := &keyedResult{counts: b.plan.keyedLimiters, samples: map[string]map[int][][]keyedSample{}}
	for _, c := range cs {
		res.names = append(res.names, c.name)
	}
	for _, reg := range keyedRegimes {
		res.regimes = append(res.regimes, reg.name)
		res.samples[reg.name] = map[int][][]keyedSample{}
		for _, n := range b.plan.keyedLimiters {
			all := make([][]keyedSample, len(cs))
			for r := 0; r < b.plan.keyedRounds; r++ {
				for _, i := range order(r, len(cs)) {
					s, err := b.keyedRun(ctx, cs[i], reg, n)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", cs[i].name, err)
					}
					all[i] = append(all[i], s)
				}
			}
			res.samples[reg.name][n] = all
			b.progress("many keys, %s, %d limiters: done", reg.name, n)
		}
	}
	return res, nil
}

// keyedRun sets up n fresh limiters for c, runs b.plan.keyedCallers
// callers on them at random for b.plan.keyedRound, and deletes them.
func (b *bench) keyedRun(ctx context.Context, c keyedContender, reg keyedRegime, n int) (keyedSample, error) {
	label := b.key("keyed")
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s:%d", label, i)
	}
	defer deleteKeys(context.Background(), b.rdb, "*"+label+"*")
	if err := c.setup(ctx, names, reg.rate, reg.interval); err != nil {
		return keyedSample{}, err
	}
	// A short warm-up on the same limiters: connections, script cache.
	if _, _, err := keyedLoop(ctx, c, names, b.plan.keyedCallers, b.plan.keyedRound/5); err != nil {
		return keyedSample{}, err
	}
	before, err := readStats(ctx, b.rdb)
	if err != nil {
		return keyedSample{}, err
	}
	cpu0 := processCPU()
	start := time.Now()
	decisions, grants, err := keyedLoop(ctx, c, names, b.plan.keyedCallers, b.plan.keyedRound)
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	if err != nil {
		return keyedSample{}, err
	}
	after, err := readStats(ctx, b.rdb)
	if err != nil {
		return keyedSample{}, err
	}
	d := after.sub(before)
	k := float64(max(decisions, 1))
	return keyedSample{
		perSec:   float64(decisions) / elapsed.Seconds(),
		cpuUs:    float64(d.cpu.Microseconds()) / k,
		clientUs: float64(cpu.Microseconds()) / k,
		granted:  float64(grants) / k,
		scripts:  float64(d.scriptCalls) / k,
	}, nil
}

// keyedLoop runs callers goroutines, each deciding on a limiter of names
// drawn at random, until d has passed; it returns decisions and grants.
func keyedLoop(ctx context.Context, c keyedContender, names []string, callers int, d time.Duration) (int64, int64, error) {
	var decisions, grants atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	end := time.Now().Add(d)
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d))
			var n, ok int64
			for time.Now().Before(end) {
				got, err := c.decide(ctx, names[rng.IntN(len(names))])
				if err != nil {
					errs <- err
					return
				}
				n++
				if got {
					ok++
				}
			}
			decisions.Add(n)
			grants.Add(ok)
		}(uint64(g))
	}
	wg.Wait()
	close(errs)
	return decisions.Load(), grants.Load(), <-errs
}

// processCPU returns this process's CPU time (user + sys) so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// write prints the many-keys tables: medians over the rounds, and
// each contender's ratio to redis_rate (the last) from the same rounds.
func (r *keyedResult) write(w io.Writer, callers int) {
	fmt.Fprintf(w, "\n### Many keys: %d callers on limiters picked at random\n\n", callers)
	fmt.Fprint(w, "Medians over the rounds, contenders alternated in each; ratios are to redis_rate's median of the same cell. "+
		"Every decision passes the run's context, which can end (an interrupt), as a server's request context can: "+
		"this library then makes each script call on a second goroutine (combining.md).\n\n")
	fmt.Fprint(w, "| regime | limiters | contender | decisions/s | x redis_rate | Redis CPU µs/decision | x redis_rate | client CPU µs/decision | grants/decision | script calls/decision | decisions/s, each round |\n")
	fmt.Fprint(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	ref := len(r.names) - 1
	for _, reg := range r.regimes {
		for _, n := range r.counts {
			all := r.samples[reg][n]
			med := func(i int, f func(keyedSample) float64) float64 {
				xs := make([]float64, len(all[i]))
				for j, s := range all[i] {
					xs[j] = f(s)
				}
				return median(xs)
			}
			refPer, refCPU := med(ref, func(s keyedSample) float64 { return s.perSec }), med(ref, func(s keyedSample) float64 { return s.cpuUs })
			for i, name := range r.names {
				per, cpu := med(i, func(s keyedSample) float64 { return s.perSec }), med(i, func(s keyedSample) float64 { return s.cpuUs })
				var each string
				for j, s := range all[i] {
					if j > 0 {
						each += ", "
					}
					each += fmt.Sprintf("%.0f", s.perSec)
				}
				fmt.Fprintf(w, "| %s | %d | %s | %.0f | %.2f | %.1f | %.2f | %.1f | %.2f | %.2f | %s |\n", reg, n, name,
					per, per/refPer, cpu, cpu/refCPU, med(i, func(s keyedSample) float64 { return s.clientUs }),
					med(i, func(s keyedSample) float64 { return s.granted }), med(i, func(s keyedSample) float64 { return s.scripts }), each)
			}
		}
	}
}

// manyKeysOnly runs the many-keys section alone (--many-keys-only) and
// prints its table under the run's caption.
func (b *bench) manyKeysOnly(ctx context.Context, o options, addr string) (*results, error) {
	b.progress("%s run of the many-keys section alone on %s", b.plan.name, addr)
	k, err := b.manyKeys(ctx)
	if err != nil {
		return nil, err
	}
	r := &results{env: newEnvironment(serverInfo(ctx, b.rdb), "Redisson left out"), plan: b.plan, names: k.names}
	fmt.Fprintf(o.out, "## Many-keys section (%s run, --many-keys-only)\n\n%s. One redis-server on loopback.\n", b.plan.name, r.env.caption())
	k.write(o.out, b.plan.keyedCallers)
	return r, nil
}
