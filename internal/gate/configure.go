package gate

import (
	"context"
	"errors"
	"sync"

	"github.com/goredisson/ratelimiter"
)

// maxConfigured bounds the names remembered as configured; past it the
// memory is cleared and names are configured again on their next use
// (TrySetRate is harmless on a configured limiter).
const maxConfigured = 10000

// Gate takes permits from limiters that it configures with one Config on
// first use. The zero Config (Rate 0) configures nothing: the limiters
// must be set up elsewhere (by an operator or a Java service). It is safe
// for concurrent use; make it with New.
type Gate struct {
	cfg        ratelimiter.Config
	permits    int64
	mu         sync.Mutex
	configured map[string]struct{}
}

// New returns a Gate that configures limiters with cfg (when cfg.Rate is
// not 0) and takes permits per call from each.
func New(cfg ratelimiter.Config, permits int64) *Gate {
	return &Gate{cfg: cfg, permits: permits, configured: map[string]struct{}{}}
}

// retry runs do after configuring rl if this Gate has not yet done so, and
// once more after configuring it again when do finds it missing (deleted
// or expired since).
func (g *Gate) retry(ctx context.Context, rl *ratelimiter.Limiter, do func() error) error {
	if err := g.configure(ctx, rl, false); err != nil {
		return err
	}
	err := do()
	if errors.Is(err, ratelimiter.ErrNotInitialized) && g.cfg.Rate > 0 {
		if err := g.configure(ctx, rl, true); err != nil {
			return err
		}
		err = do()
	}
	return err
}

func (g *Gate) configure(ctx context.Context, rl *ratelimiter.Limiter, force bool) error {
	if g.cfg.Rate == 0 {
		return nil
	}
	name := rl.Name()
	g.mu.Lock()
	_, done := g.configured[name]
	g.mu.Unlock()
	if done && !force {
		return nil
	}
	if _, err := rl.TrySetRate(ctx, g.cfg); err != nil {
		return err
	}
	g.mu.Lock()
	if len(g.configured) >= maxConfigured {
		clear(g.configured)
	}
	g.configured[name] = struct{}{}
	g.mu.Unlock()
	return nil
}
