package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/goredisson/ratelimiter"
)

// maxConfigured bounds the names remembered as configured; past it the
// memory is cleared and names are configured again on their next use
// (TrySetRate is harmless on a configured limiter).
const maxConfigured = 10000

// Target is what a Gate takes permits from: a *ratelimiter.Limiter, or a
// *ratelimiter.Composite whose parts go with the Gate's Configs in order.
type Target interface {
	Allow(ctx context.Context, n int64) (ratelimiter.Result, error)
	TryAcquireTimeout(ctx context.Context, n int64, timeout time.Duration) (bool, error)
	Acquire(ctx context.Context, n int64) error
}

// Compile-time checks that both kinds of limiter are Targets.
var (
	_ Target = (*ratelimiter.Limiter)(nil)
	_ Target = (*ratelimiter.Composite)(nil)
)

// Gate takes permits from limiters that it configures on first use: one
// limiter with one Config (New), or the parts of a composite each with
// its own (NewParts, NewRules). A zero Config (Rate 0) configures
// nothing: that limiter must be set up elsewhere (by an operator or a
// Java service). It is safe for concurrent use.
type Gate struct {
	cfgs       []ratelimiter.Config // one per part
	rules      []string             // the rules' names (NewRules), else nil
	costed     bool                 // a rule has a cost of its own (Costed)
	permits    int64
	mu         sync.Mutex
	configured map[string]struct{}
}

// New returns a Gate that configures limiters with cfg (when cfg.Rate is
// not 0) and takes permits per call from each.
func New(cfg ratelimiter.Config, permits int64) *Gate {
	return NewParts([]ratelimiter.Config{cfg}, permits)
}

// NewParts returns a Gate whose Targets are composites: part i is
// configured with cfgs[i] (when its Rate is not 0), and every call takes
// permits from every part at once. A Target with another number of parts
// fails with ratelimiter.ErrInvalidArgument.
func NewParts(cfgs []ratelimiter.Config, permits int64) *Gate {
	return &Gate{cfgs: cfgs, permits: permits, configured: map[string]struct{}{}}
}

// parts returns the limiters of t in order, or an error when their number
// is not the Gate's.
func (g *Gate) parts(t Target) ([]*ratelimiter.Limiter, error) {
	var parts []*ratelimiter.Limiter
	switch t := t.(type) {
	case *ratelimiter.Limiter:
		parts = []*ratelimiter.Limiter{t}
	case *ratelimiter.Composite:
		parts = t.Parts()
	}
	if len(parts) != len(g.cfgs) {
		return nil, fmt.Errorf("%w: %d limiters for %d configs", ratelimiter.ErrInvalidArgument, len(parts), len(g.cfgs))
	}
	return parts, nil
}

// configures reports whether the Gate configures any limiter.
func (g *Gate) configures() bool {
	for _, c := range g.cfgs {
		if c.Rate > 0 {
			return true
		}
	}
	return false
}

// retry runs do after configuring t's limiters if this Gate has not yet
// done so, and once more after configuring them again when do finds one
// missing (deleted or expired since).
func (g *Gate) retry(ctx context.Context, t Target, do func() error) error {
	parts, err := g.parts(t)
	if err != nil {
		return err
	}
	if err := g.configure(ctx, parts, false); err != nil {
		return err
	}
	err = do()
	if errors.Is(err, ratelimiter.ErrNotInitialized) && g.configures() {
		if err := g.configure(ctx, parts, true); err != nil {
			return err
		}
		err = do()
	}
	return err
}

// configure sets up, with TrySetRate, every part that has a Config and
// that this Gate has not configured yet (every such part when force).
func (g *Gate) configure(ctx context.Context, parts []*ratelimiter.Limiter, force bool) error {
	for i, rl := range parts {
		cfg := g.cfgs[i]
		if cfg.Rate == 0 {
			continue
		}
		name := rl.Name()
		g.mu.Lock()
		_, done := g.configured[name]
		g.mu.Unlock()
		if done && !force {
			continue
		}
		if _, err := rl.TrySetRate(ctx, cfg); err != nil {
			return err
		}
		g.mu.Lock()
		if len(g.configured) >= maxConfigured {
			clear(g.configured)
		}
		g.configured[name] = struct{}{}
		g.mu.Unlock()
	}
	return nil
}
