package consumer

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Pinger checks a dependency, such as *store.Store (Redis PING).
type Pinger interface {
	Ping(ctx context.Context) error
}

// HealthHandler serves /healthz: 200 "ok" while the process can answer
// HTTP at all (liveness; it checks nothing else, so a Redis outage does not
// get the process restarted).
func (c *Consumer) HealthHandler() http.Handler {
	return GetOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	}))
}

// ReadyHandler serves /readyz: 200 "ready" when the consumer is Ready (its
// workers joined the group) and every pinger answers within 2s, else 503
// with the first reason.
func (c *Consumer) ReadyHandler(deps ...Pinger) http.Handler {
	return GetOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if h := c.Halted(); len(h) > 0 {
			more := ""
			if len(h) > 1 {
				more = fmt.Sprintf(" (and %d more partitions)", len(h)-1)
			}
			http.Error(w, "not ready: not applying "+h[0]+more, http.StatusServiceUnavailable)
			return
		}
		if !c.Applying() {
			http.Error(w, "not ready: not applying: messages wait and nothing was committed (or the lag could not be read) for the stall timeout", http.StatusServiceUnavailable)
			return
		}
		if !c.Ready() {
			http.Error(w, "not ready: consumer group not joined", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		for _, d := range deps {
			if err := d.Ping(ctx); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ready\n"))
	}))
}

// GetOnly answers 405 (with Allow: GET, HEAD) to any other method, like the
// API does.
func GetOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}
