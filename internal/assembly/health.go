package assembly

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/rankd/rankd/ranking/httpapi"
)

// Readiness is a part whose state /readyz reports: NotReady says why it
// is not ready, nil when it is (*consumer.Consumer).
type Readiness interface {
	NotReady() error
}

// HealthHandler serves /healthz: 200 "ok" while the process can answer
// HTTP at all (liveness; it checks nothing else, so a Redis outage does not
// get the process restarted).
func HealthHandler() http.Handler {
	return GetOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	}))
}

// ReadyHandler serves /readyz: 200 "ready" when part is ready (the
// consumer: no partition halted, applying, its workers joined the group)
// and every dependency answers its ping within 2s, else 503 "not ready: "
// with the first reason.
func ReadyHandler(part Readiness, deps ...httpapi.Pinger) http.Handler {
	return GetOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := part.NotReady(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
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

// Probe GETs url (such as /readyz) as `rankd healthcheck` does: it returns
// the status line of a 2xx answer, else an error with the status and the
// start of the body.
func Probe(ctx context.Context, url string) (status string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", fmt.Errorf("%s: %s: %s", url, resp.Status, msg)
	}
	return resp.Status, nil
}
