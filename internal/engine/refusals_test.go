package engine

import (
	"testing"
	"time"
)

// A local refusal ends when the refused records expire, counted from
// when the refused call was sent, however late the reply came back.
// Without a send time it counts from the reply.
func TestLocalRefusalFromSend(t *testing.T) {
	sent := time.Unix(1000, 0)
	replied := sent.Add(40 * time.Millisecond)
	hint := 100 * time.Millisecond
	expire := sent.Add(hint - hintPad)
	var rs refusals
	rs.note("k", 1, Result{RetryAfter: hint}, sent, replied)
	if res, ok := rs.lookup("k", 1, false, expire.Add(-time.Millisecond)); !ok || res.RetryAfter != time.Millisecond+hintPad {
		t.Errorf("1 ms before the records expire: refused %v with %v, want refused with %v", ok, res.RetryAfter, time.Millisecond+hintPad)
	}
	if _, ok := rs.lookup("k", 1, false, expire); ok {
		t.Errorf("refused locally at %v after the send, when the records expire", expire.Sub(sent))
	}
	rs.note("k", 1, Result{RetryAfter: hint}, time.Time{}, replied)
	if _, ok := rs.lookup("k", 1, false, expire.Add(30*time.Millisecond)); !ok {
		t.Error("no send time: the refusal should count from the reply")
	}
	rs.note("k", 1, Result{Granted: true}, sent, replied)
	if _, ok := rs.lookup("k", 1, false, replied); ok {
		t.Error("a grant should end the local refusal")
	}
}
