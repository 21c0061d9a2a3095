package main

import "context"

// measureOptions say what the measurements may use besides b's Redis.
type measureOptions struct {
	java      bool   // Redisson's peer runs (it is in b.cs)
	addr      string // b's Redis, host:port
	ownServer bool   // that server is this run's alone: a replica may be attached
	envoyBin  string // Envoy's rate-limit service binary; empty: the tools cache's, built if missing
}

// measure runs every measurement into r, one after another. The replica
// runs come last: once a replica has been attached, the server keeps a
// replication backlog, which the memory figures must not include.
func (b *bench) measure(ctx context.Context, r *results, o measureOptions) error {
	var err error
	if r.tp, err = b.throughput(ctx); err != nil {
		return err
	}
	if r.keyed, err = b.manyKeys(ctx); err != nil {
		return err
	}
	if r.svc, err = b.service(ctx, o.addr, o.envoyBin); err != nil {
		return err
	}
	if r.fleet, err = b.fleet(ctx, o.addr, o.java); err != nil {
		return err
	}
	if r.blocked, err = b.blocked(ctx); err != nil {
		return err
	}
	if r.lat, err = b.latency(ctx); err != nil {
		return err
	}
	if r.lone, err = b.loneCaller(ctx); err != nil {
		return err
	}
	if r.costNames, r.cost, err = b.callerCost(ctx); err != nil {
		return err
	}
	if r.windowNames, r.window, err = b.windowTime(ctx); err != nil {
		return err
	}
	if r.multi, err = b.multiLimits(ctx); err != nil {
		return err
	}
	if r.instr, err = b.instructions(ctx, o.java); err != nil {
		return err
	}
	if r.mem, err = b.memory(ctx); err != nil {
		return err
	}
	if r.exact, err = b.exactness(ctx); err != nil {
		return err
	}
	r.replica, err = b.replicaAck(ctx, o.addr, o.ownServer)
	return err
}
