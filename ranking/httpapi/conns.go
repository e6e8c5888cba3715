package httpapi

import (
	"container/list"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// DefaultMaxConns is the default cap on the open connections of the HTTP
// server (ConnLimit; rankd run's http.max_conns).
const DefaultMaxConns = 4096

// ConnLimit caps the open connections of a fasthttp.Server. A connection over
// the cap first takes the place of the connection idle the longest (a
// keep-alive connection between requests, closed as the server would at
// its idle timeout); when none is idle, it is answered 503 at once and
// closed, without reaching the server. So an open connection costs at most
// the cap's file descriptors and memory, and a new client (a probe of
// /healthz or /readyz included) gets in whenever some connection is idle.
type ConnLimit struct {
	max int

	mu   sync.Mutex
	open int
	idle list.List // of *limitedConn, front: idle the longest

	refused, evicted atomic.Int64
}

// NewConnLimit returns a cap of max open connections (at least 1).
func NewConnLimit(n int) *ConnLimit { return &ConnLimit{max: max(n, 1)} }

// Limit makes srv's connections count against the cap: it wraps ln, and
// srv.ConnState (keeping any function already set). Serve srv on the
// returned listener.
func (l *ConnLimit) Limit(srv *fasthttp.Server, ln net.Listener) net.Listener {
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, st fasthttp.ConnState) {
		l.connState(c, st)
		if prev != nil {
			prev(c, st)
		}
	}
	return &limitListener{Listener: ln, l: l}
}

// Open returns the connections open now.
func (l *ConnLimit) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Refused and Evicted count the connections answered 503 over the cap and
// the idle ones closed to make room.
func (l *ConnLimit) Refused() int64 { return l.refused.Load() }
func (l *ConnLimit) Evicted() int64 { return l.evicted.Load() }

func (l *ConnLimit) connState(c net.Conn, st fasthttp.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.elem != nil {
		l.idle.Remove(lc.elem)
		lc.elem = nil
	}
	if st == fasthttp.StateIdle && !lc.closed {
		lc.elem = l.idle.PushBack(lc)
	}
}

// admit counts a new connection in, making room if it must; it returns
// false when there is none.
func (l *ConnLimit) admit() bool {
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.mu.Unlock()
			return true
		}
		front := l.idle.Front()
		if front == nil {
			l.mu.Unlock()
			return false
		}
		victim := front.Value.(*limitedConn)
		l.idle.Remove(front)
		victim.elem = nil
		l.mu.Unlock()
		l.evicted.Add(1)
		_ = victim.Close() // counts it out
	}
}

func (l *ConnLimit) release(lc *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.elem != nil {
		l.idle.Remove(lc.elem)
		lc.elem = nil
	}
	lc.closed = true
	l.open--
}

type limitListener struct {
	net.Listener
	l *ConnLimit
}

// overloadedResponse is the answer of a connection over the cap.
var overloadedResponse = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n" +
	"Retry-After: 1\r\nConnection: close\r\nContent-Length: 90\r\n\r\n" +
	`{"error":"too many open connections to this instance; retry shortly","code":"overloaded"}` + "\n")

func (ln *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ln.l.admit() {
			return &limitedConn{Conn: c, l: ln.l}, nil
		}
		ln.l.refused.Add(1)
		go func() {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.Write(overloadedResponse)
			_ = c.Close()
		}()
	}
}

// limitedConn is a connection counted by a ConnLimit. Its fields other
// than the Conn are guarded by the ConnLimit's mutex.
type limitedConn struct {
	net.Conn
	l      *ConnLimit
	elem   *list.Element // in l.idle while idle
	closed bool
	once   sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}
