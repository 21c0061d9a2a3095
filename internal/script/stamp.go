package script

import (
	"sync"
	"sync/atomic"

	"github.com/goredisson/ratelimiter/wire"
)

// Clocks (docs/protocol.md, "Clocks"). A permit record's stamp decides
// when its permits come back, so a stamp earlier than the moment the
// grant really happened lets them be spent again too soon. A client's own
// clock reading is stale whenever a stall holds the call between the
// reading and the script (a CLIENT PAUSE, a slow command, a stopped
// server), and it is off by the client's clock offset. The scripts read
// Redis's clock (TIME) instead when Go sends an empty stamp: one clock
// for every Go writer, read when the script runs.

// Stamp returns the clock argument of a script call: the empty string
// for the server's clock, else the Client's reading in ms (docs/
// protocol.md, "Clocks").
func (c *Conn) Stamp() any {
	if c.clientClock {
		return c.clock().UnixMilli()
	}
	return ""
}

// OwnMark returns what marks this Conn's own permit records and its
// 1-based offset, as the release scripts take them (wire.OwnMark): a
// release takes permits out of the releasing Client's own records only.
func (c *Conn) OwnMark() ([]byte, int) { return wire.OwnMark(c.format, c.tag) }

// maxPerClient bounds the PER_CLIENT limiter names a Conn remembers;
// the set starts afresh when it is reached (a forgotten limiter costs one
// more script call, then is remembered again).
const maxPerClient = 4096

// perClientSet remembers the limiters (by config key) that the acquire
// script found PER_CLIENT, so that their calls send the PER_CLIENT keys
// (Keys.PerClient): the others send the OVERALL keys (lua/acquire.lua).
// Every acquire reads it, so reads take no lock.
type perClientSet struct {
	m sync.Map // config key -> struct{}
	n atomic.Int64
}

func (s *perClientSet) has(key string) bool {
	_, ok := s.m.Load(key)
	return ok
}

func (s *perClientSet) add(key string) {
	if s.n.Add(1) > maxPerClient {
		s.m.Clear()
		s.n.Store(1)
	}
	s.m.Store(key, struct{}{})
}

// remove forgets key: the acquire script found it OVERALL.
func (s *perClientSet) remove(key string) { s.m.Delete(key) }
