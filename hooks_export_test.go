package ratelimiter

import "context"

// Decide reports d as an acquisition of c does when it returns: the
// Decision hook and the clock check (hooks.go), for the hook benchmarks.
func Decide(c *Client, d Decision) { c.decided(context.Background(), d) }
