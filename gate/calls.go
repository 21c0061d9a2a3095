package gate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goredisson/ratelimiter"
)

// ForCalls checks the limiter fields of an outgoing-call limiter
// (httplimit.Transport, grpclimit.Outgoing): exactly one of rl and a;
// with rl, cfg zero or valid and no cfgs; with a, a zero cfg and cfgs nil
// or one zero or valid Config per part. It returns the Gate that takes
// permits per call and configures on first use, the Target and its
// label (rl's name, or a's names joined by "+"), or why the fields do
// not fit.
func ForCalls(rl *ratelimiter.Limiter, cfg ratelimiter.Config, a *ratelimiter.Composite, cfgs []ratelimiter.Config, permits int64) (*Gate, Target, string, error) {
	switch {
	case rl == nil && a == nil:
		return nil, nil, "", errors.New("neither a Limiter nor a Composite")
	case rl != nil && a != nil:
		return nil, nil, "", errors.New("both a Limiter and a Composite")
	case rl != nil && cfgs != nil:
		return nil, nil, "", errors.New("a Limiter with Configs (use Config)")
	case a != nil && cfg != (ratelimiter.Config{}):
		return nil, nil, "", errors.New("a Composite with Config (use Configs)")
	case rl != nil:
		return New(cfg, permits), rl, rl.Name(), checkConfig("Config", cfg)
	}
	names := make([]string, 0, len(a.Parts()))
	for _, p := range a.Parts() {
		names = append(names, p.Name())
	}
	if cfgs == nil {
		cfgs = make([]ratelimiter.Config, len(names))
	}
	if len(cfgs) != len(names) {
		return nil, nil, "", fmt.Errorf("%d Configs for %d parts", len(cfgs), len(names))
	}
	var err error
	for i, c := range cfgs {
		err = errors.Join(err, checkConfig(fmt.Sprintf("Configs[%d]", i), c))
	}
	return NewParts(cfgs, permits), a, strings.Join(names, "+"), err
}

// checkConfig returns why c, which is not the zero Config, is invalid.
func checkConfig(field string, c ratelimiter.Config) error {
	if c == (ratelimiter.Config{}) {
		return nil
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}
