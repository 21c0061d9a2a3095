package ratelimiter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/goredisson/ratelimiter/internal/script"
	"github.com/goredisson/ratelimiter/wire"
)

// Mode says who shares a limiter's budget.
type Mode int

const (
	// Overall is one budget shared by every client (Redisson's
	// RateType.OVERALL, stored as type 0).
	Overall Mode = 0
	// PerClient gives every client instance its own budget, kept under
	// its client id (RateType.PER_CLIENT, type 1).
	PerClient Mode = 1
)

// String returns "overall", "per-client" or "Mode(n)".
func (m Mode) String() string {
	switch m {
	case Overall:
		return "overall"
	case PerClient:
		return "per-client"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// maxRate keeps counts exact in Lua, whose numbers are float64.
const maxRate = 1<<53 - 1

// Config is a limiter's configuration: at most Rate permits in any window
// of Interval.
type Config struct {
	// Mode is Overall or PerClient.
	Mode Mode
	// Rate is the permits per interval, 1 to 2^53-1.
	Rate int64
	// Interval is the window length, a whole number of milliseconds, at
	// least 1 ms.
	Interval time.Duration
	// KeepAlive, when not zero, is a TTL that every use of the limiter
	// renews, so an unused limiter disappears. It must be 0 or at least
	// Interval, in whole milliseconds. Redisson reads it since 3.38.
	KeepAlive time.Duration
}

// Validate reports, with an error matching ErrInvalidArgument, why c is not
// a configuration that SetRate and friends accept, or nil.
func (c Config) Validate() error {
	switch {
	case c.Mode != Overall && c.Mode != PerClient:
		return invalid("unknown mode %d", int(c.Mode))
	case c.Rate < 1 || c.Rate > maxRate:
		return invalid("rate %d out of range [1, %d]", c.Rate, int64(maxRate))
	case c.Interval < time.Millisecond || c.Interval%time.Millisecond != 0:
		return invalid("interval %v must be a whole number of milliseconds, at least 1ms", c.Interval)
	case c.KeepAlive < 0 || c.KeepAlive%time.Millisecond != 0:
		return invalid("keep-alive %v must be 0 or a whole number of milliseconds", c.KeepAlive)
	case c.KeepAlive != 0 && c.KeepAlive < c.Interval:
		return invalid("keep-alive %v is shorter than the interval %v", c.KeepAlive, c.Interval)
	}
	return nil
}

// TrySetRate configures the limiter unless it is configured already, like
// Redisson's trySetRate: each field is written only if absent. It returns
// true when this call set the limiter up (and then puts the KeepAlive TTL
// on its config), false when it was configured before.
//
// On a server whose maxmemory-policy may evict the limiter's keys (see
// Eviction.Evicts; read with INFO every 10 s, when the user may run it),
// a limiter that this call sets up while none of its state is left starts
// with its window full: it grants nothing for one interval. The call
// cannot tell a new limiter from one whose keys were all evicted, and a
// re-created limiter that started empty would grant its rate again
// (docs/differences.md, "Eviction"). State that is still there carries on.
func (r *Limiter) TrySetRate(ctx context.Context, cfg Config) (bool, error) {
	defer r.c.eng.Forget() // local refusals may no longer hold
	if err := r.check(cfg.Validate()); err != nil {
		return false, err
	}
	full := r.c.conn.Evicting(ctx, cfg.KeepAlive > 0)
	held := min(cfg.Rate, MaxPermits)
	set, err := r.eval(ctx, script.TrySetRate, r.sk.All,
		cfg.Rate, cfg.Interval.Milliseconds(), int(cfg.Mode), cfg.KeepAlive.Milliseconds(),
		flag(full), r.c.stamp(), wire.New(r.c.format, r.c.tag, uint32(held)), cfg.Rate-held)
	return set == 1, err
}

// SetRateOption changes how SetRate and UpdateRate treat the permits
// already taken. Its zero value changes nothing; KeepState makes one.
type SetRateOption struct{ keepState bool }

// KeepState makes SetRate or UpdateRate keep the permits taken in the
// current window: the value becomes rate - permits still in the new
// interval instead of a fresh, full budget. A rate lowered under those
// permits keeps the debt (a value below 0, reported as 0 by
// AvailablePermits): nothing is granted, and no Release or lease return
// makes anything available, until enough of the window's records leave
// it. When the mode changes the state is reset anyway. Redisson 4.4 and
// later offer the same, but store 0 for a debt (docs/differences.md).
func KeepState() SetRateOption { return SetRateOption{keepState: true} }

// SetRate writes the configuration whether or not the limiter exists and,
// unless KeepState is given, resets its state: the new mode's value and
// permit records are deleted (for PerClient, this client's). When the mode
// changes, every mode's state of the limiter is deleted.
func (r *Limiter) SetRate(ctx context.Context, cfg Config, opts ...SetRateOption) error {
	_, err := r.setRate(ctx, cfg, false, opts)
	return err
}

// UpdateRate is SetRate for a limiter that must exist already: it returns
// false, changing nothing, when the limiter's config is missing, and true
// when it was updated.
func (r *Limiter) UpdateRate(ctx context.Context, cfg Config, opts ...SetRateOption) (bool, error) {
	return r.setRate(ctx, cfg, true, opts)
}

func (r *Limiter) setRate(ctx context.Context, cfg Config, mustExist bool, opts []SetRateOption) (bool, error) {
	defer r.c.eng.Forget() // local refusals may no longer hold
	if err := r.check(cfg.Validate()); err != nil {
		return false, err
	}
	defer r.dropLease()() // no hand-out from a lease after the call; its rest given back
	keepState := false
	for _, opt := range opts {
		keepState = keepState || opt.keepState
	}
	done, err := r.eval(ctx, script.SetRate, r.sk.All,
		cfg.Rate, cfg.Interval.Milliseconds(), int(cfg.Mode), cfg.KeepAlive.Milliseconds(),
		flag(mustExist), flag(keepState), r.c.stamp())
	return done == 1, err
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Config reads the limiter's configuration. A limiter that does not exist
// gives the zero Config (Overall, rate 0, interval 0) and no error, as in
// Redisson; use Exists to tell the two apart. It accepts what the scripts
// accept: decimal integers, rate and interval in [1, 2^53-1],
// keepAliveTime absent or in [0, 2^53-1], type 0 or 1; anything else gives
// ErrCorruptState, and a config without rate, interval or type
// ErrNotInitialized. An interval or keep-alive longer than a time.Duration
// holds (about 292 years) is returned as the longest whole-millisecond
// Duration.
func (r *Limiter) Config(ctx context.Context) (Config, error) {
	if err := r.check(nil); err != nil {
		return Config{}, err
	}
	h, err := script.Bounded(ctx, func() (map[string]string, error) {
		return r.c.rdb.HGetAll(ctx, r.keys.Config).Result()
	})
	if err != nil {
		return Config{}, r.result(err)
	}
	if len(h) == 0 {
		return Config{}, nil
	}
	cfg, err := parseConfig(h, r.keys.Config)
	return cfg, r.wrap(err)
}

// parseConfig reads a config hash's fields by the scripts' rule
// (wire.ParseConfig; key names it in errors): a missing rate, interval
// or type is ErrNotInitialized, a field the scripts refuse ErrCorruptState.
func parseConfig(h map[string]string, key string) (Config, error) {
	c, err := wire.ParseConfig(h)
	if err != nil {
		sentinel := ErrCorruptState
		if errors.Is(err, wire.ErrConfigMissing) {
			sentinel = ErrNotInitialized
		}
		return Config{}, fmt.Errorf("%w: %s: %w", sentinel, key, err)
	}
	return Config{Mode: Mode(c.Type), Rate: c.Rate, Interval: c.Interval, KeepAlive: c.KeepAlive}, nil
}

// check returns the limiter's construction error, or else err.
func (r *Limiter) check(err error) error {
	if r.err != nil {
		return r.wrap(r.err)
	}
	return r.wrap(err)
}
