package loadgen

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStart runs the child against a server that answers 200, 304, 404
// (with Connection: close) and 503 by path, and checks that every target
// was asked, and that the result counts the answers by status.
func TestStart(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	total := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.RequestURI()]++
		total++
		mu.Unlock()
		switch r.URL.Path {
		case "/ok":
			_, _ = w.Write([]byte(`{"entries":[]}`))
		case "/cached":
			w.WriteHeader(http.StatusNotModified)
		case "/gone":
			w.Header().Set("Connection", "close")
			http.Error(w, "no", http.StatusNotFound)
		default:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	targets := []string{"/ok?limit=20", "/cached", "/gone", "/busy", "/ok?limit=5"}
	g, err := Start(t.Context(), Options{Addr: srv.Listener.Addr().String(), Clients: 3, Targets: targets})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Begin(); err != nil {
		t.Fatal(err)
	}
	// wait for some answers in the window (no timing assertion: the
	// count only has to move)
	mu.Lock()
	from := total
	mu.Unlock()
	for {
		mu.Lock()
		n := total
		mu.Unlock()
		if n >= from+200 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	r, err := g.End(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, n := range r.Status {
		sum += n
	}
	if r.Requests == 0 || sum != r.Requests || r.Errors != 0 || r.Seconds <= 0 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms || r.MaxMs < r.P99Ms {
		t.Errorf("result %+v", r)
	}
	for _, s := range []int{200, 304, 404, 503} {
		if r.Status[s] == 0 {
			t.Errorf("no answer with status %d: %+v", s, r.Status)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, target := range targets {
		if seen[target] == 0 {
			t.Errorf("target %s never asked: %v", target, seen)
		}
	}
}

// TestRoundTrip reads responses the minimal parser must handle, and
// refuses those it cannot.
func TestRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		name, resp string
		status     int
		keep       bool
		err        string
	}{
		{"body", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\nabc", 200, true, ""},
		{"lowercase", "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", 200, true, ""},
		{"not modified", "HTTP/1.1 304 Not Modified\r\nEtag: \"x\"\r\n\r\n", 304, true, ""},
		{"close", "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}", 503, false, ""},
		{"http 1.0", "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", 200, false, ""},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 0, false, "Transfer-Encoding"},
		{"no length", "HTTP/1.1 200 OK\r\n\r\n", 0, false, "no Content-Length"},
		{"garbage", "SSH-2.0-OpenSSH\r\n", 0, false, "malformed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			go func() {
				defer server.Close()
				br := bufio.NewReader(server)
				for {
					line, err := br.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				_, _ = server.Write([]byte(tt.resp))
			}()
			status, keep, err := roundTrip(client, bufio.NewReader(client), []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || status != tt.status || keep != tt.keep {
				t.Fatalf("got %d, %v, %v; want %d, %v", status, keep, err, tt.status, tt.keep)
			}
		})
	}
}

// TestHist checks that every value falls in the bucket whose bounds hold
// it, and the quantiles of a known set.
func TestHist(t *testing.T) {
	for us := uint64(0); us < 1<<22; us += 1 + us/97 {
		i := bucket(us)
		if lower(i) > us || lower(i+1) <= us {
			t.Fatalf("%d µs in bucket %d [%d, %d)", us, i, lower(i), lower(i+1))
		}
	}
	var h hist
	for i := 1; i <= 100; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	for _, tt := range []struct{ q, want float64 }{{0.5, 50}, {0.99, 99}, {1, 100}} {
		if got := h.quantile(tt.q); got < tt.want*0.97 || got > tt.want*1.03 {
			t.Errorf("quantile %v = %v ms, want %v within 3%%", tt.q, got, tt.want)
		}
	}
}
