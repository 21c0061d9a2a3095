package compat

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimiter "github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/internal/redisproc"
)

// Instructions is what Redis executes for one tryAcquire on one path, in
// instructions per call as callgrind counts them (everything Redis does for
// the call, its network handling included).
type Instructions struct {
	Path     string  // "granted", "refused" or "settling"
	Records  int     // records in each limiter's window while counting
	Redisson float64 // Redisson's tryAcquire(1), through the peer
	Go       float64 // this library's TryAcquire(ctx, 1), one caller
	// GoClientClock is Go with WithServerClock(false): the Client's clock,
	// and a read of the window's newest record on each grant.
	GoClientClock float64
	OneCommand    float64 // a script that runs one EXISTS, for scale
}

// instructionPaths: granted and refused have an hour-long window, so
// nothing leaves it while counting; granted holds fill records, refused
// is full at 10. settling has a 1 ms window: under callgrind a call takes
// longer than that, so every call frees the record of the call before it
// and is granted, as on a busy limiter far from its rate.
var instructionPaths = []struct {
	name    string
	cfg     ratelimiter.Config
	granted bool
	settle  bool
}{
	{"granted", ratelimiter.Config{Rate: 1_000_000, Interval: time.Hour}, true, false},
	{"refused", ratelimiter.Config{Rate: 10, Interval: time.Hour}, false, false},
	{"settling", ratelimiter.Config{Rate: 1_000_000, Interval: time.Millisecond}, true, true},
}

// ScriptInstructions counts, on the server cg (whose client is rdb), the
// instructions Redis executes per tryAcquire while Redisson (peer, on the
// same server) and this library each make n calls on a limiter of their
// own in the same state: granted (fill records in the window) and refused.
// The calls are counted in rounds, the sides in turn (countRounds), and
// each side's median round is reported. Limiter names start with prefix.
// peer may be nil: Redisson is then left out (0). It fails when a call
// fails or does not take the path counted (checked by the permits left
// afterwards).
func ScriptInstructions(ctx context.Context, cg *redisproc.Callgrind, rdb *redis.Client, peer *Peer, prefix string, fill, n int) ([]Instructions, error) {
	// Local refusals off: the refused path measures the script, which a
	// Client's first refusal of an ask still runs.
	g := ratelimiter.NewClient(rdb, ratelimiter.WithLocalRefusals(false))
	gc := ratelimiter.NewClient(rdb, ratelimiter.WithLocalRefusals(false), ratelimiter.WithServerClock(false))
	baseline := redis.NewScript(`return redis.call('EXISTS', KEYS[1])`)
	var out []Instructions
	for _, path := range instructionPaths {
		records := min(fill, int(path.cfg.Rate))
		if path.settle {
			records = 1
		}
		refused := 0 // calls counted that were not granted (settling)
		names := map[string]string{"redisson": prefix + path.name + ".redisson", "go": prefix + path.name + ".go",
			"goclient": prefix + path.name + ".goclient"}
		goCalls := func(c *ratelimiter.Client, name string) func(k int) error {
			return func(k int) error {
				l := c.Limiter(name)
				for i := 0; i < k; i++ {
					ok, err := l.TryAcquire(ctx, 1)
					if err != nil {
						return err
					}
					if !ok {
						refused++
					}
				}
				return nil
			}
		}
		calls := map[string]func(k int) error{
			"redisson": func(k int) error {
				r, err := peer.Do(ctx, "bench", names["redisson"], k)
				var granted, no int
				if _, serr := fmt.Sscan(r, &granted, &no); err == nil && serr != nil {
					err = fmt.Errorf("redisson: bench answered %q: %w", r, serr)
				}
				refused += no
				return err
			},
			"go":       goCalls(g, names["go"]),
			"goclient": goCalls(gc, names["goclient"]),
		}
		sides := []string{"redisson", "go", "goclient"}
		if peer == nil {
			sides = sides[1:]
			delete(names, "redisson")
		}
		for _, who := range sides {
			if _, err := g.Limiter(names[who]).TrySetRate(ctx, path.cfg); err != nil {
				return nil, err
			}
			if err := calls[who](records); err != nil { // fill the window, warm the script cache
				return nil, fmt.Errorf("%s: %w", who, err)
			}
		}
		calls["base"] = func(k int) error {
			for i := 0; i < k; i++ {
				if err := baseline.Run(ctx, rdb, []string{prefix + "x"}).Err(); err != nil {
					return err
				}
			}
			return nil
		}
		per, err := countRounds(cg, calls, append([]string{"base"}, sides...), n)
		if err != nil {
			return nil, err
		}
		if path.settle {
			err = checkSettled(ctx, g, names, path.cfg, refused)
		} else {
			err = checkPath(ctx, g, names, path.cfg.Rate, records, n, path.granted)
		}
		if err != nil {
			return nil, fmt.Errorf("%s path: %w", path.name, err)
		}
		out = append(out, Instructions{Path: path.name, Records: records, Redisson: per["redisson"], Go: per["go"], GoClientClock: per["goclient"], OneCommand: per["base"]})
	}
	return out, nil
}

// instructionRounds is how many counts each side's calls are split into,
// the sides taking turns: the median count per call is reported, so that
// a count that also caught work the server does apart from the calls (its
// timers, a Client's background read) is left out.
const instructionRounds = 3

// countRounds makes n calls of each side (calls[who](k) makes k) in
// instructionRounds counts (n of them when fewer), the sides in turn, and
// returns each side's median instructions per call.
func countRounds(cg *redisproc.Callgrind, calls map[string]func(k int) error, sides []string, n int) (map[string]float64, error) {
	per := map[string][]float64{}
	rounds := max(min(instructionRounds, n), 1)
	for r := 0; r < rounds; r++ {
		k := n / rounds
		if r == rounds-1 {
			k = n - k*(rounds-1)
		}
		for _, who := range sides {
			v, err := cg.Count(func() error { return calls[who](k) })
			if err != nil {
				return nil, fmt.Errorf("%s: %w", who, err)
			}
			per[who] = append(per[who], float64(v)/float64(k))
		}
	}
	med := map[string]float64{}
	for who, vs := range per {
		slices.Sort(vs)
		med[who] = vs[len(vs)/2]
	}
	return med, nil
}

// checkSettled fails unless every call counted on the settling path
// was granted and each limiter holds its whole rate once its window has
// passed (every record was released).
func checkSettled(ctx context.Context, g *ratelimiter.Client, names map[string]string, cfg ratelimiter.Config, refused int) error {
	if refused > 0 {
		return fmt.Errorf("%d calls refused on a limiter of %d permits a %v (the calls did not take the path counted)", refused, cfg.Rate, cfg.Interval)
	}
	time.Sleep(2 * cfg.Interval) // the last records leave the window
	return checkPath(ctx, g, names, cfg.Rate, 0, 0, false)
}

// checkPath fails unless each limiter has the permits left that its calls
// leave when they took the path counted.
func checkPath(ctx context.Context, g *ratelimiter.Client, names map[string]string, rate int64, records, n int, granted bool) error {
	want := rate - int64(records)
	if granted {
		want -= int64(n)
	}
	for who, name := range names {
		left, err := g.Limiter(name).AvailablePermits(ctx)
		if err != nil {
			return err
		}
		if left != want {
			return fmt.Errorf("%s: %d permits left, want %d (the calls did not take the path counted)", who, left, want)
		}
	}
	return nil
}
