package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	rlsext "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goredisson/ratelimiter/internal/redisproc"
)

// The two rate-limit services of the service section, each run as its own
// process against the bench's Redis: `ratelimiter serve`, built from this
// checkout, and Envoy's own service, built from its Go module; and the
// section's floor (bench/grpcfloor), which answers without Redis.

// envoyRatelimitVersion is the envoyproxy/ratelimit the section runs: the
// module proxy lists no release of it (go list -m -versions is empty),
// only pseudo-versions; this one, @latest on 2026-11-27, is the commit
// 3fb702589d36 of 2026-01-22. The Makefile's ENVOY_RATELIMIT_VERSION is
// the same (TestEnvoyRatelimitVersion).
const (
	envoyRatelimitModule  = "github.com/envoyproxy/ratelimit"
	envoyRatelimitVersion = "v1.4.1-0.20260122083618-3fb702589d36"
)

// envoyRatelimitBinary returns the path of Envoy's service, building it
// with go install into the tools cache the Makefile uses when it is not
// there (make bench builds it first, so that its download is not part
// of the run).
func envoyRatelimitBinary(ctx context.Context, log func(string, ...any)) (string, error) {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		cache = filepath.Join(home, ".cache")
	}
	dir := filepath.Join(cache, "ratelimiter", "tools", "envoy-ratelimit-"+envoyRatelimitVersion)
	bin := filepath.Join(dir, "service_cmd")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	log("building %s@%s into %s", envoyRatelimitModule, envoyRatelimitVersion, dir)
	cmd := exec.CommandContext(ctx, "go", "install", envoyRatelimitModule+"/src/service_cmd@"+envoyRatelimitVersion)
	// Its own module graph, outside any workspace of this repository.
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s: %w\n%s", envoyRatelimitModule, err, out)
	}
	return bin, nil
}

// buildRatelimiter builds cmd/ratelimiter from this checkout into dir, in
// the CLI's own workspace (the core and the CLI, as make cli-work writes
// it), and returns the binary's path.
func buildRatelimiter(ctx context.Context, dir string) (string, error) {
	root, err := moduleDir(ctx, "github.com/goredisson/ratelimiter")
	if err != nil {
		return "", err
	}
	work := filepath.Join(dir, "cli.work")
	ws := fmt.Sprintf("go 1.26.0\n\nuse (\n\t%s\n\t%s\n)\n\nreplace github.com/goredisson/ratelimiter v0.1.0 => %s\n",
		root, filepath.Join(root, "cmd", "ratelimiter"), root)
	if err := os.WriteFile(work, []byte(ws), 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ratelimiter")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(root, "cmd", "ratelimiter")
	cmd.Env = append(os.Environ(), "GOWORK="+work)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building cmd/ratelimiter: %w\n%s", err, out)
	}
	return bin, nil
}

// moduleDir returns the directory of module path in the bench's
// workspace (the repository's go.work).
func moduleDir(ctx context.Context, path string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", path).Output()
	if err != nil {
		return "", fmt.Errorf("finding module %s (the bench runs in the repository's workspace): %w", path, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// buildFloor builds the section's floor (bench/grpcfloor) into dir and
// returns the binary's path.
func buildFloor(ctx context.Context, dir string) (string, error) {
	benchDir, err := moduleDir(ctx, "github.com/goredisson/ratelimiter/bench")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "grpcfloor")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./grpcfloor")
	cmd.Dir = benchDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the gRPC floor: %w\n%s", err, out)
	}
	return bin, nil
}

// svcProc is one running service and the callers' connections to it.
type svcProc struct {
	name string
	cmd  *exec.Cmd
	out  *redisproc.SyncBuffer // its stdout and stderr
	done chan struct{}
	// conns: one grpc.ClientConn per caller, as each Envoy worker thread
	// holds a connection of its own to the service.
	conns   []*grpc.ClientConn
	clients []rlspb.RateLimitServiceClient
}

// freePorts returns n ports free on loopback just now.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startSvc starts bin with args and env, waits until its gRPC API at addr
// answers, and opens callers connections to it.
func startSvc(ctx context.Context, name, bin string, args, env []string, addr string, callers int) (*svcProc, error) {
	p := &svcProc{name: name, out: &redisproc.SyncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	for range callers {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			p.stop()
			return nil, err
		}
		p.conns = append(p.conns, cc)
		p.clients = append(p.clients, rlspb.NewRateLimitServiceClient(cc))
	}
	// Ready once a request is answered: a descriptor no limit matches,
	// answered OK by both without Redis.
	probe := &rlspb.RateLimitRequest{Domain: svcDomain, Descriptors: []*rlsext.RateLimitDescriptor{svcDescriptor("unconfigured", "x")}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := p.clients[0].ShouldRateLimit(cctx, probe)
		cancel()
		if err == nil {
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited: %s", name, p.out.String())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, fmt.Errorf("%s: no answer on %s: %v\n%s", name, addr, err, p.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop closes the connections and ends the process: SIGTERM, then SIGKILL
// after 5 s.
func (p *svcProc) stop() {
	for _, cc := range p.conns {
		cc.Close()
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// cpu returns the process's CPU time (user + sys) so far, from
// /proc/<pid>/stat (in clock ticks of 10 ms: over runs of a second or
// more, a few per cent at most).
func (p *svcProc) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command's name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14 and stime 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(ut+st) * tick, nil
}

// svcDescriptor is a descriptor of one entry.
func svcDescriptor(key, value string) *rlsext.RateLimitDescriptor {
	return &rlsext.RateLimitDescriptor{Entries: []*rlsext.RateLimitDescriptor_Entry{{Key: key, Value: value}}}
}
