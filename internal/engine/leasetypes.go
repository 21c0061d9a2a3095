package engine

import (
	"strconv"
	"time"
)

// LeaseOptions configure leases (the root's ratelimiter.LeaseOptions,
// with its defaults applied).
type LeaseOptions struct {
	Duration   time.Duration
	MaxPermits int64
	Share      float64
	MinDemand  int64
}

// LeaseEnd says why a lease ended; the values are the root's
// ratelimiter.LeaseEnd.
type LeaseEnd uint8

// Why a lease ended (see the root's LeaseEnd constants).
const (
	LeaseExhausted LeaseEnd = iota + 1
	LeaseExpired
	LeaseReplaced
	LeaseDropped
	LeaseClosed
	LeaseRefused
)

// String returns the root's name of e.
func (e LeaseEnd) String() string {
	switch e {
	case LeaseExhausted:
		return "exhausted"
	case LeaseExpired:
		return "expired"
	case LeaseReplaced:
		return "replaced"
	case LeaseDropped:
		return "dropped"
	case LeaseClosed:
		return "closed"
	case LeaseRefused:
		return "refused"
	}
	return "LeaseEnd(" + strconv.Itoa(int(e)) + ")"
}

// LeaseEvent reports one lease when it has ended (the root's
// ratelimiter.LeaseEvent, field for field).
type LeaseEvent struct {
	Limiter   string
	Permits   int64
	HandedOut int64
	Returned  int64
	Kept      int64
	Stamp     time.Time
	Held      time.Duration
	End       LeaseEnd
	Err       error
}

// LeaseCall is one lease call's arguments (lua/lease.lua): the batch's
// Need permits and a lease, Want in all, granted only while the window
// after it holds at most Share millionths of the rate; the replaced
// lease's record Prev gives back Unused permits in the same call.
type LeaseCall struct {
	Need, Want, Share int64
	Prev              []byte // nil: nothing to give back
	Unused            int64
}

// LeaseReply is what one lease call gave.
type LeaseReply struct {
	// Granted is the record's permits (0: the script declined the lease,
	// and the batch goes to the acquire script).
	Granted int64
	// Value, Rate, Interval and Reset are the limiter's figures after the
	// call; Stamp is the record's score (ms), 0 when there is no value key.
	Value, Rate, Stamp int64
	Interval, Reset    time.Duration
	// Returned is the permits of Prev given back.
	Returned int64
	// Member is the record written (Granted > 0).
	Member []byte
	// SentAt and RepliedAt are the Engine's time (Options.Time) when the
	// call was sent and when its reply came.
	SentAt, RepliedAt time.Time
	RoundTrip         time.Duration
	Err               error
	AckShort          bool // Err is a short replica acknowledgement of a granted lease
	Denied            bool // Err is a permission denial: nothing was sent or written
	abandoned         bool // callLease returned before the reply
}

// ReturnReply is what a lease return gave.
type ReturnReply struct {
	Given int64
	Err   error
	// Unknown: no reply came (a network error, a timeout), so whether the
	// script ran is not known; the return is idempotent and is sent again.
	Unknown bool
}
