package main

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFiles embed.FS

func mustScript(name string) *redis.Script {
	src, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err) // embedded at build time: cannot be missing
	}
	return redis.NewScript(string(src))
}

// The classic algorithms, each one Lua script (lua/*.lua). Every script
// takes its time from the caller (ARGV), so the tests can drive it through
// windows without sleeping.
var (
	fixedWindowScript   = mustScript("fixed_window")
	slidingLogScript    = mustScript("sliding_log")
	windowCounterScript = mustScript("sliding_window_counter")
	tokenBucketScript   = mustScript("token_bucket")
	floorScript         = mustScript("floor")
)

// classic is one limiter of a classic algorithm: its key prefix, rate and
// interval.
type classic struct {
	rdb      redis.Scripter
	key      string
	rate     int64
	interval int64 // milliseconds
}

// windowKey names the counter of the fixed window with index idx; the key
// carries key as its hash tag, so a limiter's counters share a cluster slot.
func (c classic) windowKey(idx int64) string {
	return "{" + c.key + "}:" + strconv.FormatInt(idx, 10)
}

// fixedWindow decides one request at now (milliseconds).
func (c classic) fixedWindow(ctx context.Context, now int64) (bool, error) {
	return granted(fixedWindowScript.Run(ctx, c.rdb, []string{c.windowKey(now / c.interval)}, c.rate, c.interval))
}

// slidingLog decides one request at now (milliseconds).
func (c classic) slidingLog(ctx context.Context, now int64) (bool, error) {
	return granted(slidingLogScript.Run(ctx, c.rdb, []string{c.key}, c.rate, c.interval, now, member()))
}

// windowCounter decides one request at now (milliseconds).
func (c classic) windowCounter(ctx context.Context, now int64) (bool, error) {
	idx := now / c.interval
	keys := []string{c.windowKey(idx), c.windowKey(idx - 1)}
	return granted(windowCounterScript.Run(ctx, c.rdb, keys, c.rate, c.interval, now%c.interval))
}

// tokenBucket decides one request at now (milliseconds).
func (c classic) tokenBucket(ctx context.Context, now int64) (bool, error) {
	return granted(tokenBucketScript.Run(ctx, c.rdb, []string{c.key}, c.rate, c.interval, now))
}

// floor runs the one-command script; it grants every call.
func (c classic) floor(ctx context.Context, _ int64) (bool, error) {
	return granted(floorScript.Run(ctx, c.rdb, []string{c.key}))
}

// granted reads a script's reply: 0 is a refusal, any other integer a grant.
func granted(cmd *redis.Cmd) (bool, error) {
	n, err := cmd.Int64()
	if err != nil {
		return false, err
	}
	return n != 0, nil
}

var (
	memberPrefix = randomHex(3)
	memberSeq    atomic.Int64
)

// member returns a sorted-set member unique to this process's request:
// a random 6-character prefix and a base-36 sequence number.
func member() string {
	return memberPrefix + strconv.FormatInt(memberSeq.Add(1), 36)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return fmt.Sprint(time.Now().UnixNano())
	}
	return hex.EncodeToString(b)
}
