package main

import "github.com/goredisson/ratelimiter/wire"

// settled returns what AvailablePermits would return for a budget whose
// value is value (nil: absent) and whose records, in score order, are
// recs; cutoff is now minus the interval, in ms. The rule is the scripts'
// (wire.Settle, whose tests hold it to internal/script/lua/lib.lua).
func settled(rate int64, value *int64, recs []record, cutoff int64) int64 {
	rs := make([]wire.Record, len(recs))
	for i, r := range recs {
		rs[i] = wire.Record{Score: r.score, Permits: r.Permits}
	}
	return wire.Settle(rate, value, rs, cutoff)
}
