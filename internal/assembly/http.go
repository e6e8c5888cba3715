package assembly

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/rankd/rankd/config"
	"github.com/rankd/rankd/internal/secure"
	"github.com/rankd/rankd/ranking/httpapi"
)

// newHTTPServers returns the HTTP server of http.listen and, when
// http.metrics_listen is set, the one of /metrics (nil otherwise). With
// http.token the API and /metrics require it as a bearer token; /healthz
// and /readyz stay open (probes), on both servers. Request bodies are
// refused (nothing reads one), headers are capped at
// http.max_header_bytes and every phase of a request has its timeout.
//
// The servers are fasthttp's: a cached read costs it about half the CPU
// net/http's server costs (see the README's "Reads at audience scale"),
// and cached reads are most of what an audience sends. Cache hits of the
// API are served natively (httpapi.FastCachedServer), before any routing
// and with the same token check: a cached response's path is one routed
// to the API. Every other request goes to the net/http handlers through
// fasthttpadaptor.
func newHTTPServers(h config.HTTP, log *slog.Logger, api, metrics, health, ready http.Handler) (srv, msrv *fasthttp.Server) {
	auth := func(next http.Handler) http.Handler { return secure.Bearer(h.Token, next) }
	mux := http.NewServeMux()
	mux.Handle("/", auth(api))
	mux.Handle("/v1/", auth(api))
	mux.Handle("/healthz", health)
	mux.Handle("/readyz", ready)
	var mmux *http.ServeMux
	if h.MetricsListen == "" {
		mux.Handle("/metrics", auth(metrics))
	} else {
		mmux = http.NewServeMux()
		mmux.Handle("/metrics", auth(metrics))
		mmux.Handle("/healthz", health)
		mmux.Handle("/readyz", ready)
	}
	root := adapt(mux)
	if fc, ok := api.(httpapi.FastCachedServer); ok {
		authorized := secure.TokenCheck(h.Token)
		slow := root
		root = func(ctx *fasthttp.RequestCtx) {
			if len(ctx.Request.Body()) == 0 &&
				(authorized == nil || authorized(string(ctx.Request.Header.Peek("Authorization")))) &&
				fc.ServeCachedFast(ctx) {
				return
			}
			slow(ctx)
		}
	}
	srv = newFastServer(h, log, root)
	if mmux != nil {
		msrv = newFastServer(h, log, adapt(mmux))
	}
	return srv, msrv
}

// adapt serves h through fasthttpadaptor, refusing request bodies. The
// request's context is a background one, not the fasthttp.RequestCtx the
// adaptor gives: that one ends when the server shuts down (the requests
// in flight should finish, as with net/http's Shutdown), and fasthttp
// reuses it for the connection's next request, while a read that timed
// out may still use its context until its next Redis call.
func adapt(h http.Handler) fasthttp.RequestHandler {
	h = secure.NoBody(h)
	return fasthttpadaptor.NewFastHTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.Background()))
	}))
}

// maxRequestBody is the body fasthttp reads before the handler refuses it
// (413, secure.NoBody); a larger one is refused as it is announced.
const maxRequestBody = 1 << 10

// newFastServer is a server of h with http's limits: a request (a request
// line and headers: bodies are refused) must arrive within the shorter of
// http.read_header_timeout and http.read_timeout, and fit in
// http.max_header_bytes, the connection's read buffer.
func newFastServer(h config.HTTP, log *slog.Logger, handler fasthttp.RequestHandler) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                      handler,
		ErrorHandler:                 requestError,
		ReadTimeout:                  min(h.ReadHeaderTimeout, h.ReadTimeout),
		WriteTimeout:                 h.WriteTimeout,
		IdleTimeout:                  h.IdleTimeout,
		ReadBufferSize:               h.MaxHeaderBytes,
		MaxRequestBodySize:           maxRequestBody,
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		CloseOnShutdown:              true,
		Logger:                       fastLogger{slog.NewLogLogger(log.Handler(), slog.LevelWarn)},
	}
}

// requestError answers a request fasthttp could not read, in the API's
// error format; the connection is closed after it.
func requestError(ctx *fasthttp.RequestCtx, err error) {
	status, code, msg := fasthttp.StatusBadRequest, "bad_request", "malformed HTTP request"
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.As(err, &small):
		status, code, msg = fasthttp.StatusRequestHeaderFieldsTooLarge, "headers_too_large", "request line and headers exceed http.max_header_bytes"
		drain(ctx.Conn())
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		status, code, msg = fasthttp.StatusRequestEntityTooLarge, "body_not_allowed", "request bodies are not accepted"
		drain(ctx.Conn())
	case errors.As(err, &ne) && ne.Timeout():
		status, code, msg = fasthttp.StatusRequestTimeout, "request_timeout", "the request did not arrive in time"
	}
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json; charset=utf-8")
	ctx.SetBodyString(`{"error":"` + msg + `","code":"` + code + `"}` + "\n")
}

// drain reads and discards what the client still sends of a request
// refused before its end (up to drainBytes, until it pauses drainGap or for
// drainFor at most), so that the connection closes after the answer
// without unread input: closing with unread input resets the connection,
// and the client, still writing, would see the reset instead of the
// answer (net/http's server does the same, as "lingering close").
func drain(c net.Conn) {
	if c == nil {
		return
	}
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	buf := make([]byte, 16<<10)
	end := time.Now().Add(drainFor)
	for n := 0; n < drainBytes; {
		at := time.Now().Add(drainGap)
		if at.After(end) {
			at = end
		}
		_ = c.SetReadDeadline(at)
		k, err := c.Read(buf)
		n += k
		if err != nil {
			return
		}
	}
}

const (
	drainBytes = 1 << 20
	drainGap   = 50 * time.Millisecond
	drainFor   = 500 * time.Millisecond
)

// fastLogger is fasthttp's logger on slog (at warn).
type fastLogger struct{ l *log.Logger }

func (f fastLogger) Printf(format string, args ...any) { f.l.Printf(format, args...) }

// quietPinger is the readiness check of a dependency whose errors name
// internal details (addresses, server messages): /readyz, which is open,
// answers "<name> is unavailable", and the error itself is logged (at most
// every 30s).
type quietPinger struct {
	p      httpapi.Pinger
	name   string
	log    *slog.Logger
	logged atomic.Int64 // unix ns of the last log line
}

func (q *quietPinger) Ping(ctx context.Context) error {
	err := q.p.Ping(ctx)
	if err == nil {
		return nil
	}
	now := time.Now().UnixNano()
	if last := q.logged.Load(); now-last > int64(30*time.Second) && q.logged.CompareAndSwap(last, now) {
		q.log.Warn("readiness: "+q.name+" check failed", "err", err)
	}
	return errors.New(q.name + " is unavailable")
}

// Preflight checks at start that the Redis and Kafka settings work: a
// misconfiguration (wrong password, untrusted certificate, TLS on one side
// only) is returned, to stop with a clear error instead of retrying
// forever; an outage is logged and rankd starts anyway (its clients retry
// and /readyz says not ready). It also logs the settings that weaken
// security (config.Warnings).
func Preflight(ctx context.Context, cfg *config.Config, rdb redis.UniversalClient, log *slog.Logger) error {
	for _, w := range cfg.Warnings() {
		log.Warn("config: " + strings.TrimPrefix(w, "warning: "))
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var errs []error
	check := func(service string, err error) {
		var me *secure.MisconfigError
		switch {
		case err == nil:
		case errors.As(err, &me):
			errs = append(errs, err)
		default:
			log.Warn(service+" is not reachable at start; starting anyway, retrying", "err", err)
		}
	}
	check("redis", secure.CheckRedis(ctx, rdb, cfg.Redis))
	check("kafka", secure.CheckKafka(ctx, secure.KafkaDialer(cfg.Kafka), cfg.Kafka.Brokers))
	return errors.Join(errs...)
}

// listenMetrics opens http.metrics_listen, if set.
func listenMetrics(cfg config.HTTP) (net.Listener, error) {
	if cfg.MetricsListen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("http metrics listen: %w", err)
	}
	return ln, nil
}

// metricsAddr is the address of the metrics listener for the log, or "".
func metricsAddr(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}
