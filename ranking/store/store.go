package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

func mustScript(name string) *redis.Script {
	src, err := luaFS.ReadFile("lua/" + name)
	if err != nil {
		panic(err)
	}
	return redis.NewScript(luaPrelude() + string(src))
}

var (
	applyScript    = mustScript("apply.lua")
	rolloverScript = mustScript("rollover.lua")
)

// Store applies updates to Redis sorted sets and answers queries. It is safe
// for concurrent use. On a *redis.ClusterClient it groups work per hash slot;
// on any other client one script call may cover many boards.
type Store struct {
	rdb       redis.UniversalClient
	cluster   bool
	boards    map[string]*boardState
	order     []string
	prefix    string
	ttl       time.Duration
	ddMinSets int // sets of a new dedupe bucket's first layer, at least
	now       func() time.Time
	log       *slog.Logger
	maxCall   int // updates per script call
	chunk     int // members per rollover chunk
	lockTTL   time.Duration
	pack      bool         // packed apply calls (WithPacking)
	enc       *argEncoding // how apply calls send their arguments (args.go), shared by the views
	replanned atomic.Int64 // when a packed call last gave up (unix ns): calls go per update for replanPause
	replans   atomic.Int64 // packed calls that gave up
	packs     atomic.Int64 // packed calls that held
	knownMu   sync.Mutex
	known     map[dimsKey]time.Time // dims tags registered in Redis, and when
	rollWait  time.Duration

	// Generations (store_gen.go): prefix is the key prefix of this store's
	// generation; base is the configured prefix (gens, marks). A
	// generation's store is a view of the root store, which follows the
	// active generations.
	base     string
	root     *Store // nil on the root
	viewMu   sync.Mutex
	views    map[int]*Store
	genMu    sync.Mutex
	genCache map[string]BoardGen
	genAt    time.Time

	// Finality (store_marks.go).
	boardTopics map[string][]string
	idle        time.Duration
	markMu      sync.Mutex
	markCache   []PartitionMark
	markAt      time.Time
}

// Defaults of a Store's options.
const (
	// DefaultPrefix starts every key (WithPrefix).
	DefaultPrefix = "rankd"
	// DefaultDedupeTTL is how long message IDs are remembered
	// (WithDedupeTTL).
	DefaultDedupeTTL = 24 * time.Hour
	// DefaultDedupeMinSets is the least number of sets a new dedupe
	// bucket starts with (WithDedupeMinSets).
	DefaultDedupeMinSets = 16384
)

// Option configures a Store.
type Option func(*Store)

// WithPrefix sets the key prefix (default DefaultPrefix).
func WithPrefix(p string) Option { return func(s *Store) { s.prefix = p } }

// WithDedupeTTL sets how long message IDs are remembered (default
// DefaultDedupeTTL).
func WithDedupeTTL(d time.Duration) Option { return func(s *Store) { s.ttl = d } }

// WithDedupeMinSets sets the least number of sets a new dedupe bucket
// starts with, a power of two (default DefaultDedupeMinSets). A bucket is
// sized from the previous one's count; the first bucket of a key prefix
// or a generation (a replay's) has none to go by, and takes a new layer,
// one more lookup per ID, each time its sets hold 64 IDs on average: with
// 16,384 sets, after about a million IDs (docs/dedupe.md).
func WithDedupeMinSets(n int) Option { return func(s *Store) { s.ddMinSets = n } }

// WithClock sets the wall clock used to resolve "current" periods in queries.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// WithPacking turns packed apply calls on or off (default on). A packed
// call carries the updates of sum boards without keep_top or base folded
// per member and judged by rankd, and only the others one by one; it is
// sent again per update when it meets a duplicate or a member near its
// range (see apply.lua), and calls are sent per update for replanPause
// after that. Off: every call is per update, as before; tests compare the
// two.
func WithPacking(on bool) Option { return func(s *Store) { s.pack = on } }

// replanPause is how long calls go per update after a packed call gave
// up: duplicates come in runs (a redelivery after a crash or rebalance).
// A variable for tests.
var replanPause = 2 * time.Second

// PackedCalls returns how many packed apply calls held, and how many met a
// duplicate or a member near its range and were sent again per update.
func (s *Store) PackedCalls() (held, replanned int64) { return s.packs.Load(), s.replans.Load() }

// DefaultCallSize is the updates one script call carries at most unless
// WithCallSize says otherwise.
const DefaultCallSize = 1000

// WithCallSize bounds the updates carried by one script call (default
// DefaultCallSize), which bounds how long one call blocks Redis.
func WithCallSize(n int) Option { return func(s *Store) { s.maxCall = n } }

// WithRolloverChunk sets how many members of S(k-1) one rollover script
// call carries (default 128: about 1 ms of Redis time on a 1M-member board
// on this project's benchmark machine, see docs/benchmarks.md).
func WithRolloverChunk(n int) Option { return func(s *Store) { s.chunk = n } }

// boardState is a board plus everything derived from it once.
type boardState struct {
	b       *ranking.Board
	cal     ranking.Calendar
	codec   ranking.Codec
	tieMode luaTie
	lo, hi  int64 // accepted value range (per period for rolling boards)
	retMs   int64 // TTL of period keys after the period ends (0 = keep)
	metaTTL int64
	epochMs int64
	graceMs int64
	unitMs  int64
	fast    bool   // sum board without keep_top or base: the script folds a call's updates per member before it reads
	tag     string // the board's tag when it has no dims
	slot    int    // its slot (cluster)
}

// tieOutOfRange reports whether an update with tie q (floor(ms / tie
// unit)) leaves the board's tie horizon: only a total board with a tie
// has one (apply.lua judges the same).
func (st *boardState) tieOutOfRange(q int64) bool {
	if st.b.Window != ranking.WindowTotal || st.tieMode == luaTieNone {
		return false
	}
	off := q - ranking.FloorDiv(st.epochMs, st.unitMs)
	return off < 0 || off > st.codec.MaxTie()
}

// dimsKey names a (board, dims) stream of the dims registry: the board and
// its tag.
type dimsKey struct{ board, tag string }

// newBoardState derives the state of a board that passed Validate and
// Normalize.
func newBoardState(b *ranking.Board) (*boardState, error) {
	c, err := ranking.NewCodec(b)
	if err != nil {
		return nil, err
	}
	st := &boardState{b: b, cal: b.Calendar(), codec: c, graceMs: b.Grace.Milliseconds(), tag: Tag(b.Name, nil)}
	st.slot = Slot("{" + st.tag + "}")
	st.unitMs = c.TieUnit.Milliseconds()
	if b.Tiebreak != ranking.TieNone {
		if (b.Tiebreak == ranking.TieFirst) == (b.Order == ranking.Asc) {
			st.tieMode = luaTieUp
		} else {
			st.tieMode = luaTieDown
		}
	}
	st.fast = b.Aggregate == ranking.AggSum && b.KeepTop == 0 && !b.HasBase
	st.hi = c.MaxValue()
	st.lo = -st.hi
	if len(b.Sort) > 0 {
		st.lo = 0
	}
	epoch := b.TieEpoch
	if epoch.IsZero() {
		epoch = ranking.DefaultTieEpoch()
	}
	st.epochMs = epoch.UnixMilli()
	switch b.Window {
	case ranking.WindowPeriodic:
		st.retMs = b.Retention.Milliseconds() // at least the grace (Validate)
	case ranking.WindowRolling:
		st.hi /= int64(b.Periods)
		st.lo = -st.hi
		st.retMs = max(b.Retention, b.DefaultRetention()).Milliseconds()
	}
	if st.retMs > 0 {
		st.metaTTL = 2*st.retMs + b.Every.MaxLength().Milliseconds()
	}
	return st, nil
}

// New returns a Store for the given boards, which must pass
// ranking.Board.Validate. The store keeps normalized copies
// (ranking.Board.Normalize): Boards returns those.
func New(rdb redis.UniversalClient, boards []*ranking.Board, opts ...Option) (*Store, error) {
	s := &Store{
		rdb: rdb, boards: map[string]*boardState{}, prefix: DefaultPrefix, ttl: DefaultDedupeTTL, ddMinSets: DefaultDedupeMinSets,
		now: time.Now, log: slog.Default(), maxCall: DefaultCallSize, pack: true, chunk: 128, lockTTL: 30 * time.Second,
		known: map[dimsKey]time.Time{}, rollWait: 30 * time.Second, idle: DefaultIdleTimeout, enc: &argEncoding{},
	}
	_, s.cluster = rdb.(*redis.ClusterClient)
	addCostHook(rdb)
	for _, o := range opts {
		o(s)
	}
	if err := ValidatePrefix(s.prefix); err != nil {
		return nil, err
	}
	if n := s.ddMinSets; n < 1 || n > 1<<shDigits || n&(n-1) != 0 {
		return nil, fmt.Errorf("dedupe min sets %d: want a power of two from 1 to 2^%d", n, shDigits)
	}
	s.base, s.views = s.prefix, map[int]*Store{}
	for _, b := range boards {
		if _, dup := s.boards[b.Name]; dup {
			return nil, fmt.Errorf("board %q declared twice", b.Name)
		}
		if err := b.Validate(); err != nil {
			return nil, err
		}
		nb := *b
		nb.Normalize()
		st, err := newBoardState(&nb)
		if err != nil {
			return nil, err
		}
		s.boards[b.Name] = st
		s.order = append(s.order, b.Name)
	}
	return s, nil
}

// Boards returns the store's boards in declaration order.
func (s *Store) Boards() []*ranking.Board {
	out := make([]*ranking.Board, len(s.order))
	for i, n := range s.order {
		out[i] = s.boards[n].b
	}
	return out
}

// Codec returns the score codec of a board.
func (s *Store) Codec(board string) (ranking.Codec, bool) {
	st, ok := s.boards[board]
	if !ok {
		return ranking.Codec{}, false
	}
	return st.codec, true
}

// ErrUnknownBoard is returned for a board name the store does not know.
var ErrUnknownBoard = errors.New("unknown board")

func (s *Store) board(name string) (*boardState, error) {
	st, ok := s.boards[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownBoard, name)
	}
	return st, nil
}

func (s *Store) dimsKey(board string) string { return s.prefix + ":dims:" + board }

func (s *Store) metaKey(tag string) string { return Key(s.prefix, tag, KindMeta, "") }

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }

// isNoScript reports a NOSCRIPT reply.
func isNoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }
