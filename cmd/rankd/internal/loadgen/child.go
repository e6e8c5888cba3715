package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// childMain is the child: it reads the settings from in, runs the clients
// and answers on out (see the package doc).
func childMain(in io.Reader, out io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(out, "error:", err)
		return 1
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 64<<20)
	if !sc.Scan() {
		return fail(errors.New("no settings on stdin"))
	}
	var o Options
	if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
		return fail(fmt.Errorf("settings: %w", err))
	}
	reqs := make([][]byte, len(o.Targets))
	for i, t := range o.Targets {
		reqs[i] = []byte("GET " + t + " HTTP/1.1\r\nHost: " + o.Addr + "\r\nUser-Agent: rankd-loadgen\r\n\r\n")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &window{}
	w.from.Store(math.MaxInt64)
	w.to.Store(math.MaxInt64)
	clients := make([]*client, o.Clients)
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	for c := range clients {
		cl := &client{addr: o.Addr, w: w, status: map[int]int64{}}
		for i := c; i < len(reqs) || i == c; i += o.Clients {
			cl.reqs = append(cl.reqs, reqs[i%len(reqs)])
		}
		clients[c] = cl
		ready.Add(1)
		wg.Go(func() { cl.run(ctx, ready.Done) })
	}
	ready.Wait()
	if ctx.Err() == nil {
		fmt.Fprintln(out, "ready")
	}
	var cpu0 time.Duration
	for sc.Scan() {
		switch sc.Text() {
		case "start":
			cpu0 = selfCPU()
			w.from.Store(time.Now().UnixNano())
		case "stop":
			return stop(out, w, cpu0, cancel, &wg, clients)
		}
	}
	return 0 // the parent went away
}

func stop(out io.Writer, w *window, cpu0 time.Duration, cancel context.CancelFunc, wg *sync.WaitGroup, clients []*client) int {
	end := time.Now()
	w.to.Store(end.UnixNano())
	cpu := selfCPU() - cpu0
	cancel()
	wg.Wait()
	r := Result{Status: map[int]int64{}, CPUSeconds: cpu.Seconds()}
	if from := w.from.Load(); from != math.MaxInt64 {
		r.Seconds = end.Sub(time.Unix(0, from)).Seconds()
	}
	var h hist
	for _, c := range clients {
		h.merge(&c.h)
		r.Errors += c.errors
		for s, n := range c.status {
			r.Status[s] += n
		}
	}
	r.Requests = h.n
	r.P50Ms, r.P99Ms, r.MaxMs = h.quantile(0.5), h.quantile(0.99), h.quantile(1)
	b, _ := json.Marshal(r)
	fmt.Fprintln(out, string(b))
	return 0
}

// window is the measured window, in unix ns.
type window struct{ from, to atomic.Int64 }

func (w *window) in(t int64) bool { return t >= w.from.Load() && t < w.to.Load() }

// client is one connection in a closed loop.
type client struct {
	addr   string
	reqs   [][]byte
	w      *window
	h      hist
	status map[int]int64
	errors int64

	mu   sync.Mutex
	conn net.Conn // guarded by mu: ctx's end unblocks it
}

// setConn sets the connection; it returns false (closing conn) when ctx
// has ended.
func (c *client) setConn(ctx context.Context, conn net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ctx.Err() != nil {
		if conn != nil {
			_ = conn.Close()
		}
		c.conn = nil
		return false
	}
	c.conn = conn
	return true
}

// run sends the client's requests in turn until ctx ends; ready is called
// after the first answer (or when ctx ends first).
func (c *client) run(ctx context.Context, ready func()) {
	var once sync.Once
	defer once.Do(ready)
	var conn net.Conn
	var br *bufio.Reader
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	stopOnCancel := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.conn != nil {
			_ = c.conn.SetDeadline(time.Now()) // unblocks a pending read
		}
	})
	defer stopOnCancel()
	for i := 0; ctx.Err() == nil; i++ {
		if conn == nil {
			var err error
			if conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", c.addr); err != nil {
				conn = nil
				c.fail(ctx)
				continue
			}
			if !c.setConn(ctx, conn) {
				conn = nil
				return
			}
			br = bufio.NewReaderSize(conn, 16<<10)
		}
		t0 := time.Now()
		status, keep, err := roundTrip(conn, br, c.reqs[i%len(c.reqs)])
		t1 := time.Now()
		if err != nil {
			_ = conn.Close()
			conn = nil
			c.setConn(ctx, nil)
			c.fail(ctx)
			continue
		}
		if c.w.in(t1.UnixNano()) {
			c.h.add(t1.Sub(t0))
			c.status[status]++
		}
		once.Do(ready)
		if !keep {
			_ = conn.Close()
			conn = nil
			c.setConn(ctx, nil)
		}
	}
}

func (c *client) fail(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	if c.w.in(time.Now().UnixNano()) {
		c.errors++
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Millisecond):
	}
}

var errResponse = errors.New("malformed response")

// roundTrip writes req and reads the response: its status and whether the
// connection stays open.
func roundTrip(conn net.Conn, br *bufio.Reader, req []byte) (status int, keep bool, err error) {
	if _, err := conn.Write(req); err != nil {
		return 0, false, err
	}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// HTTP/1.1 200 OK
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, errResponse
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, errResponse
	}
	keep = line[7] == '1'
	length := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, false, errResponse
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, false, errResponse
			}
		case bytes.EqualFold(name, []byte("Connection")):
			keep = keep && !bytes.EqualFold(value, []byte("close"))
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, false, fmt.Errorf("%w: Transfer-Encoding %s", errResponse, value)
		}
	}
	switch {
	case status == 204 || status == 304:
	case length < 0:
		return 0, false, fmt.Errorf("%w: no Content-Length", errResponse)
	default:
		if _, err := br.Discard(length); err != nil {
			return 0, false, err
		}
	}
	return status, keep, nil
}
