package main

import (
	"errors"
	"fmt"

	"github.com/goredisson/ratelimiter"
	"github.com/goredisson/ratelimiter/wire"
)

// Reading limiters' keys and config hashes through wire, the protocol's
// one Go home: no Client is built to learn them.

// mapName returns the config key of the limiter name: --name-prefix and
// name, as the Client of clientOptions maps it.
func (g *globals) mapName(name string) string { return g.prefix + name }

// keys returns the keys of the limiter name, as c.client names them (its
// client id names the PER_CLIENT pair).
func (c *cli) keys(name string) wire.Keys {
	return wire.KeysFor(c.g.mapName(name), c.client.ID())
}

// parseConfig reads a config hash (HGETALL) by the scripts' rule
// (wire.ParseConfig). It fails, as Limiter.Config would, with an error
// naming the limiter name whose config key is key: ErrNotInitialized for
// a missing rate, interval or type, ErrCorruptState for a field the
// scripts refuse.
func parseConfig(name, key string, h map[string]string) (ratelimiter.Config, error) {
	c, err := wire.ParseConfig(h)
	if err != nil {
		sentinel := ratelimiter.ErrCorruptState
		if errors.Is(err, wire.ErrConfigMissing) {
			sentinel = ratelimiter.ErrNotInitialized
		}
		return ratelimiter.Config{}, &ratelimiter.LimiterError{Limiter: name, Err: fmt.Errorf("%w: %s: %w", sentinel, key, err)}
	}
	return libConfig(c), nil
}

// libConfig returns c as the library's Config.
func libConfig(c wire.Config) ratelimiter.Config {
	return ratelimiter.Config{Mode: ratelimiter.Mode(c.Type), Rate: c.Rate, Interval: c.Interval, KeepAlive: c.KeepAlive}
}
