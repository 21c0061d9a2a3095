package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// stats is one reading of the server's INFO cpu, commandstats and memory.
type stats struct {
	cpu         time.Duration // used_cpu_sys + used_cpu_user
	scriptCalls int64         // EVAL, EVALSHA and their _RO forms
	scriptUsec  int64         // time Redis spent in those calls
	commands    int64         // every command but INFO, those run by scripts included
	usedMemory  int64         // used_memory less mem_clients_normal (connection buffers)
}

// readStats reads INFO cpu, commandstats and memory in one call.
func readStats(ctx context.Context, rdb *redis.Client) (stats, error) {
	info, err := rdb.Info(ctx, "cpu", "commandstats", "memory").Result()
	if err != nil {
		return stats{}, err
	}
	return parseStats(info)
}

func parseStats(info string) (stats, error) {
	var s stats
	var cpu float64
	seen := 0
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return stats{}, fmt.Errorf("INFO %s: %w", k, err)
			}
			cpu += f
			seen++
		case k == "used_memory":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return stats{}, fmt.Errorf("INFO used_memory: %w", err)
			}
			s.usedMemory += n
			seen++
		case k == "mem_clients_normal":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return stats{}, fmt.Errorf("INFO mem_clients_normal: %w", err)
			}
			s.usedMemory -= n
			seen++
		case strings.HasPrefix(k, "cmdstat_"):
			cmd := strings.TrimPrefix(k, "cmdstat_")
			calls, usec := cmdstat(v)
			if cmd == "info" {
				continue
			}
			s.commands += calls
			switch cmd {
			case "eval", "evalsha", "eval_ro", "evalsha_ro":
				s.scriptCalls += calls
				s.scriptUsec += usec
			}
		}
	}
	if seen != 4 {
		return stats{}, fmt.Errorf("INFO lacks used_cpu_sys, used_cpu_user, used_memory or mem_clients_normal")
	}
	s.cpu = time.Duration(cpu * float64(time.Second))
	return s, nil
}

// cmdstat reads calls= and usec= of one commandstats line.
func cmdstat(v string) (calls, usec int64) {
	for _, f := range strings.Split(v, ",") {
		if x, ok := strings.CutPrefix(f, "calls="); ok {
			calls, _ = strconv.ParseInt(x, 10, 64)
		}
		if x, ok := strings.CutPrefix(f, "usec="); ok {
			usec, _ = strconv.ParseInt(x, 10, 64)
		}
	}
	return calls, usec
}

// sub returns the change from before to s.
func (s stats) sub(before stats) stats {
	return stats{
		cpu:         s.cpu - before.cpu,
		scriptCalls: s.scriptCalls - before.scriptCalls,
		scriptUsec:  s.scriptUsec - before.scriptUsec,
		commands:    s.commands - before.commands,
		usedMemory:  s.usedMemory - before.usedMemory,
	}
}

// serverInfo returns "Redis 7.0.15" from INFO server.
func serverInfo(ctx context.Context, rdb *redis.Client) string {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "Redis (version unknown)"
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return "Redis " + v
		}
	}
	return "Redis (version unknown)"
}

// deleteKeys removes every key matching pattern (SCAN, then DEL in
// batches) and returns how many it removed. DEL, not UNLINK: memory is
// measured right after, so it must be freed by then.
func deleteKeys(ctx context.Context, rdb *redis.Client, pattern string) (int64, error) {
	var n int64
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	batch := make([]string, 0, 1000)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		d, err := rdb.Del(ctx, batch...).Result()
		n += d
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return n, err
	}
	return n, flush()
}

// countKeys returns how many keys match pattern.
func countKeys(ctx context.Context, rdb *redis.Client, pattern string) (int64, error) {
	var n int64
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		n++
	}
	return n, iter.Err()
}
