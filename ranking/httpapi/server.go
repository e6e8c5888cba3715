package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/store"
)

// Option configures the handler returned by New.
type Option func(*config)

type config struct {
	log        *slog.Logger
	reg        prometheus.Registerer
	timeout    time.Duration
	expensive  int
	queueWait  time.Duration
	denseSteps int
	rate       float64
	cacheTTL   time.Duration
	cacheBytes int
	changes    *Changes      // WithChanges; nil: the TTL alone
	refresh    time.Duration // WithChanges
	budget     float64
	reads      int
	clock      func() time.Time
	behind     func() bool
	// latency and latencyTarget: WithLatencyTarget
	latency       func() time.Duration
	latencyTarget time.Duration
}

// WithLogger sets the logger of store failures (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithClock sets the clock of the cache's TTL and of the Redis-time
// budget (default time.Now). Periods end by the store's clock: its Now
// method, when it has one (*store.Store does), else this one.
func WithClock(now func() time.Time) Option { return func(c *config) { c.clock = now } }

// WithRegisterer registers the handler's metrics on reg:
// rankd_http_requests_total{route,code} and
// rankd_http_request_duration_seconds{route}. Collectors reg already holds
// are reused, so several handlers may share one registerer. Without it no
// metrics are kept.
func WithRegisterer(reg prometheus.Registerer) Option { return func(c *config) { c.reg = reg } }

// Store is what the API reads; *store.Store implements it. Every method
// reads one board (see ranking/store for the semantics and the cost
// bounds); errors are classified with store.IsUnavailable and the store's
// sentinel errors.
type Store interface {
	Boards() []*ranking.Board
	Codec(board string) (ranking.Codec, bool)
	ResolvePeriod(board, period string) (ranking.Period, error)
	Final(ctx context.Context, board string, p ranking.Period) (bool, error)
	KnownDims(ctx context.Context, board string, dims []string) error
	ListDims(ctx context.Context, board, period, cursor string, limit int) (store.DimsPage, error)
	Top(ctx context.Context, board string, dims []string, period string, limit int, mode store.RankMode) (store.Page, error)
	TopPercent(ctx context.Context, board string, dims []string, period string, hundredths int64, mode store.RankMode) (store.Page, error)
	Around(ctx context.Context, board string, dims []string, member, period string, n int, mode store.RankMode) (store.Page, error)
	Member(ctx context.Context, board string, dims []string, member, period string, mode store.RankMode) (store.MemberInfo, error)
	Ranks(ctx context.Context, board string, dims []string, period string, members []string, mode store.RankMode) ([]store.MemberRank, error)
}

var _ Store = (*store.Store)(nil)

// server holds the store and the boards it serves.
type server struct {
	store  Store
	boards map[string]*ranking.Board
	order  []*ranking.Board
	log    *slog.Logger
	m      *metrics

	// limits.go
	timeout    time.Duration
	slots      chan struct{} // one per expensive read in progress
	queueWait  time.Duration
	denseSteps int
	bucket     *tokenBucket // expensive reads per second

	cache  *respCache    // cache.go; nil: off
	budget *budget       // budget.go; nil: off
	sizes  *sizes        // member counts seen, for estimates
	reads  chan struct{} // one per read whose Redis work runs; nil: no bound
	hot    chan struct{} // hotReads more, for refreshes of entries read by others (hot)

	clock      func() time.Time
	storeClock interface{ Now() time.Time } // the store's, if it has one
	routes     map[string]*routeMetrics     // by route name; nil values without metrics

	gov *governor // priority.go; nil: no priority to ingestion

	model   store.CostModel                                    // of estimates and the real costs
	observe func(route string, estimate, counted store.Counts) // tests: each read's counts
}

// api is the handler New returns: cache hits first, then the routes.
type api struct {
	s   *server
	mux *http.ServeMux
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.s.cache != nil && a.s.serveHit(w, r) {
		return
	}
	a.mux.ServeHTTP(w, r)
}

// New returns the HTTP handler of the read API and the HTML page for the
// boards of store. It is safe for concurrent use. Without WithCache every
// request reads Redis through store; without WithRedisBudget only the
// per-request limits apply. New panics if WithRegisterer's
// registerer holds a conflicting collector of the same name.
func New(st Store, opts ...Option) http.Handler {
	c := config{log: slog.Default(), timeout: DefaultTimeout, expensive: DefaultExpensive,
		queueWait: DefaultQueueWait, denseSteps: DefaultDenseBudget, rate: DefaultExpensiveRate, reads: DefaultReads,
		clock: time.Now}
	for _, o := range opts {
		o(&c)
	}
	s := &server{store: st, boards: map[string]*ranking.Board{}, order: st.Boards(), log: c.log,
		timeout: c.timeout, slots: make(chan struct{}, c.expensive), queueWait: c.queueWait, denseSteps: c.denseSteps,
		bucket: newTokenBucket(c.rate, c.expensive), clock: c.clock, routes: map[string]*routeMetrics{}, model: store.DefaultCostModel}
	s.storeClock, _ = st.(interface{ Now() time.Time })
	names := make([]string, 0, len(s.order))
	for _, b := range s.order {
		s.boards[b.Name] = b
		names = append(names, b.Name)
	}
	s.sizes = newSizes(names)
	if c.cacheTTL > 0 && c.cacheBytes > 0 {
		s.cache = newRespCache(c.cacheTTL, c.cacheBytes)
		if c.changes != nil {
			s.cache.changes, s.cache.refresh = c.changes, int64(c.refresh)
		}
	}
	if c.budget > 0 {
		s.budget = newBudget(c.budget, c.clock)
	}
	if c.reads > 0 {
		s.reads = make(chan struct{}, c.reads)
		s.hot = make(chan struct{}, hotReads)
	}
	if c.behind != nil {
		s.gov = newGovernor(c.behind, c.clock)
		if c.latency != nil && c.latencyTarget > 0 {
			s.gov.slow = func() bool { return c.latency() > c.latencyTarget }
		}
	}
	if c.reg != nil {
		s.m = newMetrics(c.reg, s)
	}
	for _, name := range routeNames {
		s.routes[name] = s.m.route(name)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/boards", s.route("boards", s.admitted(s.handleBoards)))
	mux.Handle("GET /v1/boards/{board}/top", s.route("top", s.cachedRead("top", s.topBody)))
	mux.Handle("GET /v1/boards/{board}/dims", s.route("dims", s.cachedRead("dims", s.dimsBody)))
	mux.Handle("GET /v1/boards/{board}/standings", s.route("standings", s.admitted(s.handleStandings))) // standings.go
	mux.Handle("GET /v1/boards/{board}/members/{member}", s.route("member", s.cachedRead("member", s.memberBody)))
	mux.Handle("GET /v1/boards/{board}/members/{member}/around", s.route("around", s.cachedRead("around", s.aroundBody)))
	mux.Handle("GET /{$}", s.route("page", s.admitted(s.handlePage)))
	mux.Handle("/", s.route("other", s.admitted(s.handleOther)))
	return &api{s: s, mux: mux}
}

// routeNames are the routes' names, as the metrics label them.
var routeNames = []string{"boards", "top", "dims", "standings", "member", "around", "page", "other"}

// handlerFunc serves one request; a returned error becomes the JSON error
// response (see writeError).
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// route wraps h with the common headers, error responses and metrics.
func (s *server) route(name string, h handlerFunc) http.Handler {
	rm := s.routes[name]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.clock()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		hdr := sw.Header()
		hdr["Cache-Control"] = noStore
		hdr["X-Content-Type-Options"] = nosniff
		if err := h(sw, r); err != nil {
			s.writeError(sw, r, err)
		}
		// counted before the response leaves: a client that has it sees
		// it counted
		rm.served(sw.status, s.clock().Sub(start))
	})
}

// statusWriter records the status code for metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writeJSON writes v as the 200 response.
func writeJSON(w http.ResponseWriter, v any) error {
	body, err := marshalBody(v)
	if err != nil {
		return err
	}
	writeBody(w, body)
	return nil
}

// marshalBody renders v as a response body.
func marshalBody(v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(body, '\n'), nil
}

// writeBody writes a rendered body as the 200 response.
func writeBody(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body) // a client that went away is not an error of ours
}

// Error codes of the JSON error responses.
const (
	codeUnknownBoard = "unknown_board"
	codeBadDims      = "bad_dims"
	codeUnknownDims  = "unknown_dims"
	codeBadPeriod    = "bad_period"
	codeBadRequest   = "bad_request"
	codeNotFound     = "not_found"
	codeMethod       = "method_not_allowed"
	codeUnavailable  = "unavailable"
	codeInternal     = "internal"
)

// apiError is an error with its HTTP status and code; msg is what the
// client reads, cause (if any) what is logged.
type apiError struct {
	status     int
	code       string
	msg        string
	cause      error
	retryAfter int // seconds, for 503 (default 1)
}

func (e *apiError) Error() string {
	if e.cause != nil {
		return e.msg + ": " + e.cause.Error()
	}
	return e.msg
}

func (e *apiError) Unwrap() error { return e.cause }

func badRequest(code, msg string) error {
	return &apiError{status: http.StatusBadRequest, code: code, msg: msg}
}

// classify maps an error to its status and code: the store's input errors
// are 4xx, a Redis that cannot be reached is 503, anything else 500.
func classify(err error) (int, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.code
	case errors.Is(err, store.ErrUnknownBoard):
		return http.StatusNotFound, codeUnknownBoard
	case errors.Is(err, store.ErrUnknownDims):
		return http.StatusNotFound, codeUnknownDims
	case errors.Is(err, store.ErrMemberNotFound):
		return http.StatusNotFound, codeNotFound
	case errors.Is(err, store.ErrBadDims):
		return http.StatusBadRequest, codeBadDims
	case errors.Is(err, store.ErrBadPeriod):
		return http.StatusBadRequest, codeBadPeriod
	case errors.Is(err, store.ErrBadLimit), errors.Is(err, store.ErrBadRankMode), errors.Is(err, store.ErrBadCursor):
		return http.StatusBadRequest, codeBadRequest
	case errors.Is(err, store.ErrTooExpensive):
		return http.StatusBadRequest, codeTooExpensive
	case store.IsUnavailable(err), store.IsAuthFailure(err):
		return http.StatusServiceUnavailable, codeUnavailable
	}
	return http.StatusInternalServerError, codeInternal
}

// errorBody is the JSON of an error response.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// writeError writes err as a JSON error response. 4xx and the 503s of the
// request limits (timeout, overloaded) carry their own message; other 5xx a
// generic one, and the error is logged (unless the client went away).
// Timeouts are logged as warnings; overloaded answers are only counted.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg, retry := s.errorReply(r, err)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retry)
	}
	body, _ := json.Marshal(errorBody{Error: msg, Code: code})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// errorReply classifies err and logs it as writeError says: it returns the
// status, code and message of the reply, and the Retry-After of a 503.
func (s *server) errorReply(r *http.Request, err error) (status int, code, msg, retry string) {
	if errors.Is(err, store.ErrTooExpensive) {
		err = s.tooExpensive(err)
	}
	status, code = classify(err)
	var ae *apiError
	if errors.As(err, &ae) {
		msg = ae.msg
	} else if status < 500 {
		msg = publicMessage(r, err)
	}
	switch {
	case status < 500:
	case code == codeTimeout:
		s.log.Warn("http request timed out", "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery, "err", err)
	case code == codeOverloaded:
	default:
		if r.Context().Err() == nil {
			s.log.Error("http request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
		}
		switch {
		case errors.Is(err, store.ErrRolloverBusy):
			msg = "the board is being rolled over by another process; retry shortly"
		case store.IsAuthFailure(err):
			msg = "redis refused rankd's credentials or its ACL refused a command (NOAUTH, WRONGPASS or NOPERM): " +
				"check redis.username, the password and the user's ACL; the details are in rankd's log"
		case status == http.StatusServiceUnavailable:
			msg = "redis is unavailable"
		default:
			msg = "internal error reading the board"
		}
	}
	if status == http.StatusServiceUnavailable {
		retry = retryAfter(ae)
	}
	return status, code, msg, retry
}

// handleOther answers paths and methods that no route serves.
func (s *server) handleOther(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return &apiError{status: http.StatusMethodNotAllowed, code: codeMethod, msg: "method " + r.Method + " not allowed: the API is read-only"}
	}
	return &apiError{status: http.StatusNotFound, code: codeNotFound, msg: "no route for " + quote(r.URL.Path)}
}

var noStore = []string{"no-store"}

// routeMetrics are the request metrics of one route, the children of the
// common statuses resolved at their first use (a series appears once it
// counts something). A nil *routeMetrics counts nothing.
type routeMetrics struct {
	name            string
	m               *metrics
	ok, notModified atomic.Pointer[prometheus.Counter]
	duration        atomic.Pointer[prometheus.Observer]
}

// route returns the metrics of route name; nil when m is.
func (m *metrics) route(name string) *routeMetrics {
	if m == nil {
		return nil
	}
	return &routeMetrics{name: name, m: m}
}

// served counts a request answered with status after d.
func (rm *routeMetrics) served(status int, d time.Duration) {
	if rm == nil {
		return
	}
	var c prometheus.Counter
	switch status {
	case http.StatusOK:
		c = child(&rm.ok, func() prometheus.Counter { return rm.m.requests.WithLabelValues(rm.name, "200") })
	case http.StatusNotModified:
		c = child(&rm.notModified, func() prometheus.Counter { return rm.m.requests.WithLabelValues(rm.name, "304") })
	default:
		c = rm.m.requests.WithLabelValues(rm.name, strconv.Itoa(status))
	}
	c.Inc()
	child(&rm.duration, func() prometheus.Observer { return rm.m.duration.WithLabelValues(rm.name) }).Observe(d.Seconds())
}

// child returns *p, resolving it with get the first time.
func child[T any](p *atomic.Pointer[T], get func() T) T {
	if v := p.Load(); v != nil {
		return *v
	}
	v := get()
	p.Store(&v)
	return v
}

// metrics are the handler's collectors.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// cache results (hit, miss, coalesced), pre-resolved for the hot path
	hit, stale, miss, coalesced prometheus.Counter
	refused                     *prometheus.CounterVec
	redisTime                   *prometheus.CounterVec
	redisEstimated              *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, s *server) *metrics {
	m := &metrics{
		requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rankd", Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests served, per route and status code."}, []string{"route", "code"})),
		duration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rankd", Subsystem: "http", Name: "request_duration_seconds",
			Help:    "Duration of HTTP requests, per route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}, []string{"route"})), // 0.5ms .. 4s
		refused: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rankd", Subsystem: "http", Name: "budget_refusals_total",
			Help: "Reads refused by the Redis-time budget before any work, per code (overloaded, too_expensive)."}, []string{"code"})),
		redisTime: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rankd", Subsystem: "http", Name: "redis_seconds_total",
			Help: "Redis time of the reads, per route, as the cost model counts it from the work they did (round trips, commands, reply elements, dense steps)."}, []string{"route"})),
		redisEstimated: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rankd", Subsystem: "http", Name: "redis_estimated_seconds_total",
			Help: "Redis time of the reads, per route, as estimated before the work from their parameters and the board's size."}, []string{"route"})),
	}
	cache := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "rankd", Subsystem: "http", Name: "cache_requests_total",
		Help: "Board reads per cache result: hit (served from memory), stale (served from memory, expired, while another request reads it again), miss (read Redis), coalesced (waited for another request's read)."}, []string{"result"}))
	m.hit, m.stale, m.miss, m.coalesced = cache.WithLabelValues("hit"), cache.WithLabelValues("stale"), cache.WithLabelValues("miss"), cache.WithLabelValues("coalesced")
	m.refused.WithLabelValues(codeOverloaded)
	m.refused.WithLabelValues(codeTooExpensive)
	if g := s.gov; g != nil && g.slow != nil {
		register(reg, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "rankd", Subsystem: "http", Name: "yield_pauses_total",
			Help: "Times the API stopped yielding to a slow consumer (api.yield_latency) for a while because yielding all it could did not make the consumer fast."},
			func() float64 { return float64(g.Paused()) }))
	}
	return m
}

// register registers c on reg, or returns the equal collector reg already
// holds; it panics on any other error.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic("httpapi: registering metrics: " + err.Error())
	}
	return c
}
