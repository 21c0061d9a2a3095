package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/goredisson/ratelimiter"
)

func init() {
	adminCommand("set-rate", "write the configuration (reset the state unless --keep-state)",
		"--rate N --interval D [--mode overall|per-client] [--keep-alive D] [--keep-state]", setRateCmd("set"))
	adminCommand("try-set-rate", "configure the limiter unless it is configured (exit 1 if it was)",
		"--rate N --interval D [--mode overall|per-client] [--keep-alive D]", setRateCmd("try"))
	adminCommand("update-rate", "change the configuration of an existing limiter (exit 1 if missing)",
		"--rate N --interval D [--mode overall|per-client] [--keep-alive D] [--keep-state]", setRateCmd("update"))
	adminCommand("config", "show the configuration (exit 1 if the limiter does not exist)", "[--output json]", configCmd)
	adminCommand("available", "show the permits available now", "[--output json]", availableCmd)
	adminCommand("acquire", "take permits; with several names, from every one or from none (exit 1 if not granted)", "[--n N] [--timeout D]", acquireCmd)
	adminCommand("release", "give permits back", "[--n N]", releaseCmd)
	adminCommand("expire", "set a TTL on all keys (exit 1 if no key changed)",
		"--ttl D | --at TIME [--nx|--xx|--gt|--lt]", expireCmd)
	adminCommand("persist", "remove the TTL from all keys (exit 1 if none had one)", "", persistCmd)
	adminCommand("ttl", "show the TTL of the configuration (exit 1 if the limiter does not exist)", "[--output json]", ttlCmd)
	adminCommand("delete", "delete all keys (exit 1 if none existed)", "", deleteCmd)
	adminCommand("exists", "report whether the limiter exists (exit 1 if not)", "[--output json]", existsCmd)
}

type configJSON struct {
	Name        string `json:"name"`
	Exists      bool   `json:"exists"`
	Mode        string `json:"mode,omitempty"`
	Rate        int64  `json:"rate,omitempty"`
	IntervalMS  int64  `json:"interval_ms,omitempty"`
	KeepAliveMS int64  `json:"keep_alive_ms,omitempty"`
}

func cfgJSON(name string, cfg ratelimiter.Config) configJSON {
	return configJSON{Name: name, Exists: true, Mode: cfg.Mode.String(), Rate: cfg.Rate,
		IntervalMS: cfg.Interval.Milliseconds(), KeepAliveMS: cfg.KeepAlive.Milliseconds()}
}

func describe(cfg ratelimiter.Config) string {
	s := fmt.Sprintf("%d permits per %v, %s", cfg.Rate, cfg.Interval, cfg.Mode)
	if cfg.KeepAlive > 0 {
		s += fmt.Sprintf(", keep-alive %v", cfg.KeepAlive)
	}
	return s
}

func parseMode(s string) (ratelimiter.Mode, error) {
	switch strings.ToLower(s) {
	case "overall", "0":
		return ratelimiter.Overall, nil
	case "per-client", "per_client", "perclient", "1":
		return ratelimiter.PerClient, nil
	}
	return 0, usagef("--mode must be overall or per-client, not %q", s)
}

// setRateCmd is set-rate, try-set-rate and update-rate.
func setRateCmd(kind string) func(fs *flag.FlagSet) action {
	return func(fs *flag.FlagSet) action {
		rate := fs.Int64("rate", 0, "permits per interval (required, >= 1)")
		interval := fs.Duration("interval", 0, "the interval, e.g. 1s, 500ms, 1m (required)")
		mode := fs.String("mode", "overall", "overall (one budget for all clients) or per-client")
		keepAlive := fs.Duration("keep-alive", 0, "TTL renewed by every use; 0 = none, else >= the interval")
		var keepState *bool
		if kind != "try" {
			keepState = fs.Bool("keep-state", false, "keep the permits taken in the current window instead of resetting")
		}
		var cfg ratelimiter.Config
		return action{
			check: func(c *cli) error {
				switch {
				case *rate == 0 && *interval == 0:
					return usagef("--rate and --interval are required")
				case *rate < 1:
					return usagef("--rate must be at least 1, got %d", *rate)
				case *interval == 0:
					return usagef("--interval is required (for example 1s, 500ms, 1m)")
				}
				m, err := parseMode(*mode)
				if err != nil {
					return err
				}
				cfg = ratelimiter.Config{Mode: m, Rate: *rate, Interval: *interval, KeepAlive: *keepAlive}
				if m == ratelimiter.PerClient && keepState != nil && *keepState && c.g.clientID == "" {
					return usagef("--keep-state on a per-client limiter recounts one client's budget: give its --client-id")
				}
				return checkConfig(cfg)
			},
			run: func(c *cli) error {
				var opts []ratelimiter.SetRateOption
				if keepState != nil && *keepState {
					opts = append(opts, ratelimiter.KeepState())
				}
				type result struct {
					Name   string      `json:"name"`
					Done   bool        `json:"done"`
					Result string      `json:"result"`
					Config *configJSON `json:"config,omitempty"` // written, when done
					// SharesKeysWith is the config key of the configured
					// limiter that shares this one's value and permits keys.
					SharesKeysWith string `json:"shares_keys_with,omitempty"`
				}
				// Warn before writing when another configured limiter
				// shares the keys (shared.go).
				key := c.g.mapName(c.name)
				others, err := configuredOthers(c.ctx, c.rdb, []string{key})
				if err != nil {
					return err
				}
				if others[0] != "" {
					fmt.Fprintf(c.stderr, "ratelimiter %s: warning: %s\n", c.cmd, printable(sharedKeysWarning(key, others[0])))
				}
				var done bool
				var what string
				switch kind {
				case "set":
					if err := c.lim.SetRate(c.ctx, cfg, opts...); err != nil {
						return err
					}
					done, what = true, "set"
				case "try":
					ok, err := c.lim.TrySetRate(c.ctx, cfg)
					if err != nil {
						return err
					}
					done, what = ok, "configured"
					if !ok {
						what = "already configured, unchanged"
					}
				case "update":
					ok, err := c.lim.UpdateRate(c.ctx, cfg, opts...)
					if err != nil {
						return err
					}
					done, what = ok, "updated"
					if !ok {
						what = "does not exist, nothing changed"
					}
				}
				r := result{Name: c.name, Done: done, Result: what, SharesKeysWith: others[0]}
				if done {
					j := cfgJSON(c.name, cfg)
					r.Config = &j
				}
				err = c.emit(r, func(w io.Writer) {
					if done {
						fmt.Fprintf(w, "%s %s: %s\n", shown(c.name), what, describe(cfg))
					} else {
						fmt.Fprintf(w, "%s %s\n", shown(c.name), what)
					}
				})
				if err == nil && !done {
					return errRefused
				}
				return err
			},
		}
	}
}

// checkConfig runs the library's Config checks so that bad flags fail
// before connecting (the library checks only when called).
func checkConfig(c ratelimiter.Config) error {
	if err := c.Validate(); err != nil {
		return usagef("%s", strings.TrimPrefix(err.Error(), ratelimiter.ErrInvalidArgument.Error()+": "))
	}
	return nil
}

func configCmd(fs *flag.FlagSet) action {
	return action{run: func(c *cli) error {
		ok, err := c.lim.Exists(c.ctx)
		if err != nil {
			return err
		}
		if !ok {
			if err := c.emit(configJSON{Name: c.name}, func(w io.Writer) {
				fmt.Fprintf(w, "%s: no such limiter\n", shown(c.name))
			}); err != nil {
				return err
			}
			return errRefused
		}
		cfg, err := c.lim.Config(c.ctx)
		if err != nil {
			return err
		}
		return c.emit(cfgJSON(c.name, cfg), func(w io.Writer) {
			tw := table(w)
			fmt.Fprintf(tw, "name\t%s\n", shown(c.name))
			fmt.Fprintf(tw, "mode\t%s\n", cfg.Mode)
			fmt.Fprintf(tw, "rate\t%d\n", cfg.Rate)
			fmt.Fprintf(tw, "interval\t%v\n", cfg.Interval)
			fmt.Fprintf(tw, "keep-alive\t%s\n", durOrOff(cfg.KeepAlive))
			tw.Flush()
		})
	}}
}

func durOrOff(d time.Duration) string {
	if d == 0 {
		return "off"
	}
	return d.String()
}

func availableCmd(fs *flag.FlagSet) action {
	return action{run: func(c *cli) error {
		if err := needClientID(c, c.lim); err != nil {
			return err
		}
		n, err := c.lim.AvailablePermits(c.ctx)
		if err != nil {
			return err
		}
		return c.emit(map[string]any{"name": c.name, "available": n}, func(w io.Writer) {
			fmt.Fprintln(w, n)
		})
	}}
}

func acquireCmd(fs *flag.FlagSet) action {
	n := fs.Int64("n", 1, "permits to take")
	timeout := fs.Duration("timeout", 0, "wait up to this long for the permits (0: try once)")
	return action{
		check: func(c *cli) error {
			if *n < 1 || *n > ratelimiter.MaxPermits {
				return usagef("--n %d out of range [1, %d]", *n, int64(ratelimiter.MaxPermits))
			}
			if *timeout < 0 {
				return usagef("--timeout must not be negative")
			}
			return nil
		},
		several: true,
		run: func(c *cli) error {
			for _, name := range c.names {
				if err := needClientID(c, c.client.Limiter(name)); err != nil {
					return err
				}
			}
			// One name: that limiter; several: their composite, which
			// takes from every one or from none.
			var lim interface {
				Allow(context.Context, int64) (ratelimiter.Result, error)
				TryAcquireTimeout(context.Context, int64, time.Duration) (bool, error)
			} = c.lim
			if len(c.names) > 1 {
				lim = c.client.All(c.names...)
			}
			var granted bool
			var hint time.Duration
			if *timeout == 0 {
				res, err := lim.Allow(c.ctx, *n)
				if err != nil {
					return err
				}
				granted, hint = res.Granted, res.RetryAfter
			} else {
				ok, err := lim.TryAcquireTimeout(c.ctx, *n, *timeout)
				if err != nil {
					return err
				}
				granted = ok
			}
			out := map[string]any{"name": c.name, "permits": *n, "granted": granted}
			if len(c.names) > 1 {
				delete(out, "name")
				out["names"] = c.names
			}
			if hint > 0 {
				out["retry_after_ms"] = hint.Milliseconds()
			}
			err := c.emit(out, func(w io.Writer) {
				switch {
				case granted:
					fmt.Fprintf(w, "granted %d\n", *n)
				case hint > 0:
					fmt.Fprintf(w, "refused; retry after %v\n", hint)
				default:
					fmt.Fprintf(w, "refused within %v\n", *timeout)
				}
			})
			if err == nil && !granted {
				return errRefused
			}
			return err
		},
	}
}

func releaseCmd(fs *flag.FlagSet) action {
	n := fs.Int64("n", 1, "permits to give back")
	return action{
		check: func(c *cli) error {
			if *n < 0 || *n > ratelimiter.MaxPermits {
				return usagef("--n %d out of range [0, %d]", *n, int64(ratelimiter.MaxPermits))
			}
			return nil
		},
		run: func(c *cli) error {
			if err := needClientID(c, c.lim); err != nil {
				return err
			}
			if err := c.lim.Release(c.ctx, *n); err != nil {
				return err
			}
			return c.emit(map[string]any{"name": c.name, "released": *n}, func(w io.Writer) {
				fmt.Fprintf(w, "released %d\n", *n)
			})
		},
	}
}

// parseAt reads an RFC 3339 time or epoch milliseconds.
func parseAt(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usagef("--at %q is neither RFC 3339 (2026-01-02T15:04:05Z) nor epoch milliseconds", s)
	}
	return t, nil
}

func expireCmd(fs *flag.FlagSet) action {
	ttl := fs.Duration("ttl", 0, "TTL from now, e.g. 10m")
	at := fs.String("at", "", "expiry time in the future, RFC 3339 or epoch milliseconds")
	nx := fs.Bool("nx", false, "only keys without a TTL")
	xx := fs.Bool("xx", false, "only keys with a TTL")
	gt := fs.Bool("gt", false, "only when later than the current TTL")
	lt := fs.Bool("lt", false, "only when earlier than the current TTL")
	var cond ratelimiter.ExpireCondition
	var when time.Time
	return action{
		check: func(c *cli) error {
			if (*ttl != 0) == (*at != "") {
				return usagef("give exactly one of --ttl and --at")
			}
			if *ttl != 0 && (*ttl < time.Millisecond || *ttl%time.Millisecond != 0) {
				return usagef("--ttl %v must be a whole number of milliseconds, at least 1ms", *ttl)
			}
			set := 0
			for _, f := range []struct {
				on bool
				c  ratelimiter.ExpireCondition
			}{{*nx, ratelimiter.ExpireNX}, {*xx, ratelimiter.ExpireXX}, {*gt, ratelimiter.ExpireGT}, {*lt, ratelimiter.ExpireLT}} {
				if f.on {
					set++
					cond = f.c
				}
			}
			if set > 1 {
				return usagef("--nx, --xx, --gt and --lt exclude each other")
			}
			if *at != "" {
				t, err := parseAt(*at)
				if err != nil {
					return err
				}
				if !t.After(time.Now()) {
					return usagef("--at %s is not in the future: Redis would delete the limiter (delete does that)", *at)
				}
				when = t
			}
			return nil
		},
		run: func(c *cli) error {
			var changed bool
			var err error
			if *ttl != 0 {
				changed, err = c.lim.ExpireIf(c.ctx, *ttl, cond)
			} else {
				changed, err = c.lim.ExpireAtIf(c.ctx, when, cond)
			}
			if err != nil {
				return err
			}
			return changedResult(c, changed, "TTL set", "no key changed")
		},
	}
}

func changedResult(c *cli, changed bool, yes, no string) error {
	err := c.emit(map[string]any{"name": c.name, "changed": changed}, func(w io.Writer) {
		if changed {
			fmt.Fprintf(w, "%s: %s\n", shown(c.name), yes)
		} else {
			fmt.Fprintf(w, "%s: %s\n", shown(c.name), no)
		}
	})
	if err == nil && !changed {
		return errRefused
	}
	return err
}

func persistCmd(fs *flag.FlagSet) action {
	return action{run: func(c *cli) error {
		changed, err := c.lim.ClearExpire(c.ctx)
		if err != nil {
			return err
		}
		return changedResult(c, changed, "TTL removed", "no key had a TTL")
	}}
}

func deleteCmd(fs *flag.FlagSet) action {
	return action{run: func(c *cli) error {
		changed, err := c.lim.Delete(c.ctx)
		if err != nil {
			return err
		}
		return changedResult(c, changed, "deleted", "no such limiter")
	}}
}

func existsCmd(fs *flag.FlagSet) action {
	return action{run: func(c *cli) error {
		ok, err := c.lim.Exists(c.ctx)
		if err != nil {
			return err
		}
		err = c.emit(map[string]any{"name": c.name, "exists": ok}, func(w io.Writer) {
			fmt.Fprintln(w, ok)
		})
		if err == nil && !ok {
			return errRefused
		}
		return err
	}}
}

func ttlCmd(fs *flag.FlagSet) action {
	return action{run: func(c *cli) error {
		d, err := c.lim.RemainTimeToLive(c.ctx)
		if err != nil {
			return err
		}
		ms := d.Milliseconds()
		if d < 0 {
			ms = int64(d) // -1 persistent, -2 missing, as PTTL
		}
		err = c.emit(map[string]any{"name": c.name, "ttl_ms": ms}, func(w io.Writer) {
			switch d {
			case ratelimiter.TTLPersistent:
				fmt.Fprintln(w, "none")
			case ratelimiter.TTLMissing:
				fmt.Fprintf(w, "%s: no such limiter\n", shown(c.name))
			default:
				fmt.Fprintln(w, d)
			}
		})
		if err == nil && d == ratelimiter.TTLMissing {
			return errRefused
		}
		return err
	}}
}

// needClientID refuses to work on a PER_CLIENT limiter without --client-id:
// the random id of a one-off process would leave a budget under a client
// id nobody uses again. It reads the config; a missing limiter passes (the
// command then reports it).
func needClientID(c *cli, lim *ratelimiter.Limiter) error {
	if c.g.clientID != "" {
		return nil
	}
	cfg, err := lim.Config(c.ctx)
	if err != nil {
		return err
	}
	if cfg.Mode == ratelimiter.PerClient {
		return usagef("%q is a per-client limiter: give the --client-id whose budget to use (inspect lists them)", lim.Name())
	}
	return nil
}
