package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// throwaway is a redis-server the demo starts when it is given no URL: on
// a free loopback port, persistence off, in a temporary directory, gone
// at close. The CLI is a module of its own and may not import the core's
// test rigs (internal/redisproc), so it carries this small launcher.
type throwaway struct {
	addr string
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// errNoServer reports that no redis-server binary was found.
var errNoServer = errors.New("redis-server not found on PATH (install it: make deps, or apt-get install -y redis-server; or pass --url)")

// startThrowaway starts redis-server ($REDIS_SERVER, else the one on PATH)
// and returns once it answers PING. It fails when the binary is missing,
// or when the server exits or does not answer before ctx is done or 30 s
// pass.
func startThrowaway(ctx context.Context) (*throwaway, error) {
	bin := os.Getenv("REDIS_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, errNoServer
	}
	port, err := loopbackPort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ratelimiter-demo-")
	if err != nil {
		return nil, err
	}
	s := &throwaway{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, done: make(chan struct{})}
	s.cmd = exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	if err := s.await(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// await polls PING until the server answers, exits, or ctx or 30 s end.
func (s *throwaway) await(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer rdb.Close()
	for {
		if rdb.Ping(ctx).Err() == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("redis-server on %s exited at start (port taken?)", s.addr)
		case <-ctx.Done():
			return fmt.Errorf("redis-server on %s did not answer: %w", s.addr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Addr returns the server's host:port.
func (s *throwaway) Addr() string { return s.addr }

// Close stops the server and removes its directory.
func (s *throwaway) Close() {
	_ = s.cmd.Process.Kill()
	<-s.done
	_ = os.RemoveAll(s.dir)
}

// loopbackPort returns a loopback TCP port that was free a moment ago.
func loopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
