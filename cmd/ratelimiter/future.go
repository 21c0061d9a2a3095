package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/goredisson/ratelimiter/wire"
)

// Records stamped after Redis's clock: their writer's clock was ahead of
// Redis by at least the lead. A clock ahead by d makes its client see the
// others' records expire d early (docs/operations.md, "Clock skew").

// futureRecords sums the records of an inspection stamped after Redis's
// TIME.
type futureRecords struct {
	ServerTime time.Time `json:"server_time"`
	Records    int       `json:"records"`
	Permits    int64     `json:"permits"`
	MaxLeadMS  int64     `json:"max_lead_ms"`
}

// futureOf reads Redis's TIME and counts the records of in stamped after
// it. It fails with TIME's error (a user who may not run TIME, say).
func futureOf(ctx context.Context, rdb redis.UniversalClient, in *inspection) (*futureRecords, error) {
	t, err := rdb.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	f := &futureRecords{ServerTime: t}
	now := t.UnixMilli()
	for _, b := range in.Budgets {
		for _, r := range b.Records {
			if r.ScoreMS > now {
				f.Records++
				f.Permits += int64(r.Permits)
				f.MaxLeadMS = max(f.MaxLeadMS, r.ScoreMS-now)
			}
		}
	}
	return f, nil
}

// printFuture prints one line when records are stamped after Redis's
// clock.
func printFuture(w io.Writer, f *futureRecords) {
	if f == nil || f.Records == 0 {
		return
	}
	fmt.Fprintf(w, "\nclock: %d records (%d permits) are stamped after Redis's clock (%s), the newest by %v: a client's clock is ahead of Redis\n",
		f.Records, f.Permits, f.ServerTime.Format("15:04:05.000"), wire.Millis(f.MaxLeadMS))
}
