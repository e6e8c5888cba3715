package secure_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/secure"
)

// TestBearer: only the exact token passes; the scheme is case-insensitive
// (RFC 6750); no token configured lets everything through.
func TestBearer(t *testing.T) {
	const token = "0123456789abcdef-token"
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	h := secure.Bearer(config.Secret(token), ok)
	for _, tt := range []struct {
		header string
		code   int
	}{
		{"", 401},
		{"Bearer", 401},
		{"Bearer ", 401},
		{"Basic " + token, 401},
		{"Bearer " + token[:len(token)-1], 401},
		{"Bearer " + token + "0", 401},
		{"Bearer  " + token, 200},
		{"Bearer " + token, 200},
		{"bearer " + token, 200},
		{"BEARER " + token, 200},
	} {
		r := httptest.NewRequest(http.MethodGet, "/v1/boards", nil)
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != tt.code {
			t.Errorf("Authorization %q: %d, want %d", tt.header, rec.Code, tt.code)
		}
		if tt.code == 401 {
			if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer realm="rankd"` {
				t.Errorf("WWW-Authenticate %q", got)
			}
			if strings.Contains(rec.Body.String(), token) {
				t.Errorf("401 body shows the token: %s", rec.Body)
			}
		}
	}
	rec := httptest.NewRecorder()
	secure.Bearer("", ok).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != 200 {
		t.Errorf("no token configured: %d", rec.Code)
	}
}

// TestNoBody: a request with a body, declared or chunked, is refused with
// 413 before the handler runs.
func TestNoBody(t *testing.T) {
	ran := false
	h := secure.NoBody(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
	for _, tt := range []struct {
		name   string
		length int64
		code   int
	}{{"no body", 0, 200}, {"declared body", 5, 413}, {"chunked body", -1, 413}} {
		ran = false
		r := httptest.NewRequest(http.MethodGet, "/", strings.NewReader("hello"))
		r.ContentLength = tt.length
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != tt.code || ran != (tt.code == 200) {
			t.Errorf("%s: %d (handler ran %v), want %d", tt.name, rec.Code, ran, tt.code)
		}
	}
}
