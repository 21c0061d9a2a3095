package redistest

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
)

// linkProxy is a TCP proxy on loopback in front of a Sentinel setup's
// master: replicas, sentinels and clients all reach the master through it.
// It tells replication links (connections on which the peer sends REPLCONF
// or PSYNC) from the others, and can hold back what the master sends on
// them: the replicas then fall behind while clients are served as usual,
// as when the network to the replicas is slow or the master's machine
// dies with unsent data. Closing it drops what it held back.
type linkProxy struct {
	ln       net.Listener
	upstream func() (string, error)

	mu     sync.Mutex
	frozen bool
	closed bool
	conns  map[net.Conn]struct{}
	held   int // bytes held back on replication links
	wg     sync.WaitGroup
}

func newLinkProxy(upstream func() (string, error)) (*linkProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &linkProxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *linkProxy) addr() string { return p.ln.Addr().String() }

func (p *linkProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *linkProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *linkProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *linkProxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer c.Close()
	addr, err := p.upstream()
	if err != nil {
		return
	}
	u, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	if !p.track(u) {
		u.Close()
		return
	}
	defer u.Close()
	var (
		replMu sync.Mutex
		repl   bool
	)
	isRepl := func() bool { replMu.Lock(); defer replMu.Unlock(); return repl }
	done := make(chan struct{}, 2)
	go func() { // peer -> master; spot a replica's handshake
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32*1024)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				up := bytes.ToUpper(buf[:n])
				if bytes.Contains(up, []byte("REPLCONF")) || bytes.Contains(up, []byte("PSYNC")) {
					replMu.Lock()
					repl = true
					replMu.Unlock()
				}
				if _, werr := u.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { // master -> peer; hold back on replication links when frozen
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32*1024)
		for {
			n, err := u.Read(buf)
			if n > 0 {
				p.mu.Lock()
				hold := p.frozen && isRepl()
				if hold {
					p.held += n
				}
				p.mu.Unlock()
				if !hold {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	<-done
	// One side ended: end the other (Close of both makes the copy loops return).
	c.Close()
	u.Close()
	<-done
}

// freeze holds back, from now on, everything the master sends on
// replication links (it is dropped when the proxy closes).
func (p *linkProxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// heldBytes returns how many bytes of the replication stream were held
// back.
func (p *linkProxy) heldBytes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// close stops accepting (the master's address then refuses connections, as
// a dead master's would), closes every connection and drops what was held
// back. It waits for its goroutines.
func (p *linkProxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	p.ln.Close()
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

// masterPortFile returns an upstream resolver that reads the master's
// port from the file the start script writes.
func masterPortFile(path string) func() (string, error) {
	return func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		port := strings.TrimSpace(string(b))
		if port == "" {
			return "", errors.New("redistest: empty master port file")
		}
		return net.JoinHostPort("127.0.0.1", port), nil
	}
}
