package assembly

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rankd/rankd/consumer"
	"github.com/rankd/rankd/ranking/httpapi"
)

type readinessFunc func() error

func (f readinessFunc) NotReady() error { return f() }

type pingerFunc func(context.Context) error

func (p pingerFunc) Ping(ctx context.Context) error { return p(ctx) }

// The consumer is what /readyz reports on.
var _ Readiness = (*consumer.Consumer)(nil)

// TestReadyHandler: /readyz is 200 "ready" when the part is ready and every
// dependency answers, else 503 with the first reason.
func TestReadyHandler(t *testing.T) {
	ready := readinessFunc(func() error { return nil })
	up := pingerFunc(func(context.Context) error { return nil })
	down := pingerFunc(func(context.Context) error { return errors.New("redis is unavailable") })
	for _, tt := range []struct {
		name string
		part Readiness
		deps []httpapi.Pinger
		code int
		body string
	}{
		{"ready, Redis up", ready, []httpapi.Pinger{up}, http.StatusOK, "ready\n"},
		{"ready, no dependencies", ready, nil, http.StatusOK, "ready\n"},
		{"ready, Redis down", ready, []httpapi.Pinger{up, down}, http.StatusServiceUnavailable, "not ready: redis is unavailable\n"},
		{"consumer not ready", readinessFunc(func() error { return errors.New("consumer group not joined") }), []httpapi.Pinger{down},
			http.StatusServiceUnavailable, "not ready: consumer group not joined\n"},
		{"a consumer that never ran", &consumer.Consumer{}, []httpapi.Pinger{up}, http.StatusServiceUnavailable, "not ready: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			ReadyHandler(tt.part, tt.deps...).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != tt.code || !strings.HasPrefix(rec.Body.String(), tt.body) {
				t.Errorf("/readyz = %d %q, want %d %q", rec.Code, rec.Body.String(), tt.code, tt.body)
			}
		})
	}
	rec := httptest.NewRecorder()
	HealthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "ok\n" {
		t.Errorf("/healthz = %d %q, want 200 ok", rec.Code, rec.Body.String())
	}
}

func TestHealthMethods(t *testing.T) {
	for _, h := range []http.Handler{HealthHandler(), ReadyHandler(&consumer.Consumer{})} {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(m, "/", nil))
			if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
				t.Errorf("%s: %d (Allow %q), want 405 with Allow: GET, HEAD", m, rec.Code, rec.Header().Get("Allow"))
			}
		}
	}
}
