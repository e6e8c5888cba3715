package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rankd/rankd/ranking"
)

// Sealed standings.
//
// When a period of a board is final (every partition feeding the board
// has passed its end plus the grace: Store.Final), its standings are
// sealed: for every dims value with members in the period, the top N, the
// member count and the period are rendered once as deterministic JSON (no
// wall-clock time in it, fields in a fixed sorted order) and kept as a
// snapshot
//
//	<base>:std:{<tag>}:<period>   hash: rev, sum, gen, json, pub
//
// under the board+dims hash tag (one slot, one script per snapshot), for
// its own retention (Publish.Retention, from when it was written), outside
// the key generations (a replay's switch and drop leave it alone). The
// payload is what RunStandings publishes to Kafka and what the API's
// /standings returns, byte for byte.
//
// Revisions: after a replay switched a board to a new generation, the
// sealed periods still readable there are read again; when a period's
// content differs from its snapshot, revision rev+1 is stored and
// published (same key, new ID). A snapshot only moves to a newer
// generation, so two processes cannot flip it back and forth.

var standingsScript = mustScript("standings.lua")

// Publish is a board's publication of sealed standings.
type Publish struct {
	// Top is how many members each snapshot lists (1..MaxLimit).
	Top int
	// Retention is how long a snapshot is kept after it was written
	// (DefaultStandingsRetention).
	Retention time.Duration
}

// DefaultStandingsRetention is how long sealed snapshots are kept.
const DefaultStandingsRetention = 90 * 24 * time.Hour

// ErrNoStandings is returned by Standings when no snapshot exists: the
// period is not sealed yet, had no members, or its snapshot expired.
var ErrNoStandings = errors.New("no sealed standings")

// StandingsMessage is one snapshot revision to publish.
type StandingsMessage struct {
	Board, Tag, Period string
	Revision           int
	// Key is "<tag>/<period>" (every revision of a snapshot goes to one
	// partition, in order); ID is Key + "/" + revision.
	Key, ID string
	Value   []byte
}

func (s *Store) standingsKey(tag, period string) string {
	return s.base + ":std:{" + tag + "}:" + period
}
func (s *Store) standingsStateKey() string { return s.base + ":std:state" }
func (s *Store) standingsLockKey() string  { return s.base + ":std:lock" }

// StandingsID returns the message key and ID of a snapshot revision.
func StandingsID(tag, period string, rev int) (key, id string) {
	key = tag + "/" + period
	return key, key + "/" + strconv.Itoa(rev)
}

// Standings returns the latest revision of the sealed snapshot of
// board+dims in period (an id, or "previous"/"current"), as published.
func (s *Store) Standings(ctx context.Context, board string, dims []string, period string) ([]byte, error) {
	st, err := s.board(board)
	if err != nil {
		return nil, err
	}
	if err := s.checkDims(st, dims); err != nil {
		return nil, err
	}
	p, err := s.resolve(st, period)
	if err != nil {
		return nil, err
	}
	root := s
	if s.root != nil {
		root = s.root
	}
	v, err := root.rdb.HGet(ctx, root.standingsKey(Tag(board, dims), p.ID), snapJSON).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w for board %q, dims %q, period %s", ErrNoStandings, board, dims, p.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("reading standings: %w", err)
	}
	return v, nil
}

// standingsDoc is the payload. Fields are in sorted order, so that
// encoding/json writes the same bytes for the same content.
type standingsDoc struct {
	Board    string            `json:"board"`
	Counts   standingsCounts   `json:"counts"`
	Dims     map[string]string `json:"dims"`
	Entries  []standingsEntry  `json:"entries"`
	ID       string            `json:"id"`
	Period   standingsPeriod   `json:"period"`
	Revision int               `json:"revision"`
	Top      int               `json:"top"`
}

type standingsCounts struct {
	Members int64 `json:"members"`
	// Events is the updates applied to the period (for a rolling board,
	// to the periods of its window): one per event and route.
	Events int64 `json:"events"`
}

type standingsEntry struct {
	Factors map[string]int64 `json:"factors,omitempty"`
	Member  string           `json:"member"`
	Rank    int64            `json:"rank"`
	Raw     int64            `json:"raw"`
	TieTime string           `json:"tie_time,omitempty"`
	Value   json.Number      `json:"value"`
}

type standingsPeriod struct {
	End         string `json:"end"`
	ID          string `json:"id"`
	Start       string `json:"start"`
	Timezone    string `json:"timezone"`
	WindowStart string `json:"window_start,omitempty"`
}

// render returns the payload of revision rev, and the content digest (of
// the payload without id and revision).
func (d standingsDoc) render(tag string, rev int) (payload []byte, sum string, err error) {
	d.ID, d.Revision = "", 0
	content, err := json.Marshal(d)
	if err != nil {
		return nil, "", err
	}
	h := sha256.Sum256(content)
	_, d.ID = StandingsID(tag, d.Period.ID, rev)
	d.Revision = rev
	payload, err = json.Marshal(d)
	return payload, hex.EncodeToString(h[:]), err
}

// readStandings reads the top of one board+dims in period p of the
// store gs (a generation); ok is false when the period has no members.
func (s *Store) readStandings(ctx context.Context, gs *Store, st *boardState, tag string, p ranking.Period, top int) (standingsDoc, bool, error) {
	board, dims, err := ParseTag(tag)
	if err != nil {
		return standingsDoc{}, false, err
	}
	key, partial, err := gs.zkey(ctx, st, tag, p, false)
	if err != nil {
		return standingsDoc{}, false, err
	}
	v := &view{s: gs, st: st, dims: dims, p: p, key: key, partial: partial}
	pipe := s.rdb.TxPipeline()
	rng := pipe.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: key, Start: 0, Stop: int64(top - 1), Rev: v.desc()})
	sz := v.queueSizes(ctx, pipe)
	var fields []string
	switch st.b.Window {
	case ranking.WindowRolling:
		for w := st.cal.WindowStart(p, st.b.Periods); !w.Start.After(p.Start); w = st.cal.Next(w) {
			fields = append(fields, w.ID)
		}
	default:
		fields = []string{p.ID}
	}
	evs := pipe.HMGet(ctx, Key(gs.prefix, tag, KindCount, ""), fields...)
	_, _ = pipe.Exec(ctx) // errors checked per command
	_, count, _, err := sz.result()
	if err != nil {
		return standingsDoc{}, false, fmt.Errorf("reading %s: %w", key, err)
	}
	zs, err := rng.Result()
	if err != nil {
		return standingsDoc{}, false, fmt.Errorf("reading %s: %w", key, err)
	}
	if count == 0 || len(zs) == 0 {
		return standingsDoc{}, false, nil
	}
	ev, err := evs.Result()
	if err != nil {
		return standingsDoc{}, false, fmt.Errorf("reading the event counts of %s: %w", tag, err)
	}
	events, err := sumCounts(ev)
	if err != nil {
		return standingsDoc{}, false, fmt.Errorf("%s: %w", tag, err)
	}
	b := st.b
	loc := b.Location
	if loc == nil {
		loc = time.UTC
	}
	d := standingsDoc{Board: board, Counts: standingsCounts{Members: count, Events: events}, Dims: map[string]string{}, Top: top,
		Period: standingsPeriod{ID: p.ID, Start: p.Start.In(loc).Format(time.RFC3339), End: p.End.In(loc).Format(time.RFC3339),
			Timezone: loc.String()}}
	for i, name := range b.Dims {
		d.Dims[name] = dims[i]
	}
	if b.Window == ranking.WindowRolling {
		ws, _ := st.window(p)
		d.Period.WindowStart = ws.In(loc).Format(time.RFC3339)
	}
	for _, e := range v.entries(zs, 1) {
		se := standingsEntry{Member: e.Member, Rank: e.Rank, Raw: e.Value, Value: fixedDecimal(e.Value, b.Decimals)}
		if !e.TieTime.IsZero() {
			se.TieTime = e.TieTime.In(loc).Format(time.RFC3339Nano)
		}
		if len(b.Sort) > 0 {
			vals := ranking.UnpackSort(b.Sort, e.Value)
			se.Factors = make(map[string]int64, len(vals))
			for i, f := range b.Sort {
				se.Factors[f.Name] = vals[i]
			}
		}
		d.Entries = append(d.Entries, se)
	}
	return d, true, nil
}

// fixedDecimal is ranking.FixedDecimal as a JSON number.
func fixedDecimal(v int64, d int) json.Number { return json.Number(ranking.FixedDecimal(v, d)) }

// snapRecord is a snapshot's state as the script answers it.
type snapRecord struct {
	status   int64
	rev, pub int
	json     []byte
}

// standingsOp runs a seal or revise of standings.lua: the snapshot's state
// after it.
func (s *Store) standingsOp(ctx context.Context, args standingsArgs) (snapRecord, error) {
	v, err := s.standingsRaw(ctx, args)
	if err != nil {
		return snapRecord{}, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 4 {
		return snapRecord{}, fmt.Errorf("standings: unexpected reply %v", v)
	}
	st, _ := a[0].(int64)
	rev, _ := a[1].(int64)
	pub, _ := a[2].(int64)
	body, _ := a[3].(string)
	r := snapRecord{status: st, rev: int(rev), pub: int(pub)}
	if body != "" {
		r.json = []byte(body)
	}
	return r, nil
}

// sealResult is what sealing or revising one period did.
type sealResult struct {
	msgs             []StandingsMessage // to publish (pub < rev)
	keys             []string           // their snapshot keys
	sealed, revised  int
	empty, unchanged int
}

// sealPeriod seals (or, with revise, re-checks) period p of board for
// every dims value of generation gen; it returns the revisions to publish.
func (s *Store) sealPeriod(ctx context.Context, board string, p ranking.Period, pub Publish, gen int, revise bool) (sealResult, error) {
	var res sealResult
	st, err := s.board(board)
	if err != nil {
		return res, err
	}
	gs := s.view(gen)
	ttl := pub.Retention
	if ttl <= 0 {
		ttl = DefaultStandingsRetention
	}
	var cursor uint64
	for {
		tags, next, err := s.rdb.SScan(ctx, gs.dimsKey(board), cursor, "", 1000).Result()
		if err != nil {
			return res, fmt.Errorf("listing dims of %q: %w", board, err)
		}
		for _, tag := range tags {
			if err := s.sealTag(ctx, gs, st, tag, p, pub.Top, ttl, gen, revise, &res); err != nil {
				return res, fmt.Errorf("sealing %s %s: %w", tag, p.ID, err)
			}
		}
		if cursor = next; cursor == 0 {
			return res, nil
		}
	}
}

func (s *Store) sealTag(ctx context.Context, gs *Store, st *boardState, tag string, p ranking.Period, top int, ttl time.Duration, gen int, revise bool, res *sealResult) error {
	key := s.standingsKey(tag, p.ID)
	doc, ok, err := s.readStandings(ctx, gs, st, tag, p, top)
	if err != nil {
		return err
	}
	if !ok {
		res.empty++
		return nil
	}
	var rec snapRecord
	for attempt := 0; ; attempt++ {
		expected := -1
		if revise {
			cur, err := s.rdb.HGet(ctx, key, snapRev).Int()
			switch {
			case err == nil:
				expected = cur
			case !errors.Is(err, redis.Nil):
				return err
			}
		}
		payload, sum, err := doc.render(tag, expected+1)
		if err != nil {
			return err
		}
		a := standingsArgs{key: key, op: snapOpSeal, gen: gen, sum: sum, json: payload, ttlMs: ttl.Milliseconds(), rev: -1}
		if revise {
			a.op, a.rev = snapOpRevise, expected
		}
		if rec, err = s.standingsOp(ctx, a); err != nil {
			return err
		}
		if rec.status != -1 {
			break
		}
		if attempt == 5 {
			return fmt.Errorf("the snapshot's revision keeps moving")
		}
	}
	switch {
	case rec.status == 1 && rec.rev == 0:
		res.sealed++
	case rec.status == 1:
		res.revised++
	default:
		res.unchanged++
	}
	if rec.pub < rec.rev && rec.json != nil {
		k, id := StandingsID(tag, p.ID, rec.rev)
		res.msgs = append(res.msgs, StandingsMessage{Board: st.b.Name, Tag: tag, Period: p.ID, Revision: rec.rev, Key: k, ID: id, Value: rec.json})
		res.keys = append(res.keys, key)
	}
	return nil
}

// markPublished records that msgs (with their snapshot keys) were
// acknowledged by Kafka.
func (s *Store) markPublished(ctx context.Context, keys []string, msgs []StandingsMessage) error {
	for i, m := range msgs {
		if _, err := s.standingsRaw(ctx, standingsArgs{key: keys[i], op: snapOpPub, rev: m.Revision}); err != nil {
			return err
		}
	}
	return nil
}

// standingsRaw runs one standings.lua op: its reply as Redis gives it.
func (s *Store) standingsRaw(ctx context.Context, a standingsArgs) (any, error) {
	return standingsScript.Run(ctx, s.rdb, a.keys(), a.add(nil)...).Result() // EVALSHA, EVAL on NOSCRIPT
}

// lockStandings takes or renews the publisher's lock for token.
func (s *Store) lockStandings(ctx context.Context, token string, ttl time.Duration) (bool, error) {
	v, err := s.standingsRaw(ctx, standingsArgs{key: s.standingsLockKey(), op: snapOpLock, token: token, ttlMs: ttl.Milliseconds()})
	if err != nil {
		return false, err
	}
	n, _ := v.(int64)
	return n == 1, nil
}

func (s *Store) unlockStandings(ctx context.Context, token string) {
	u := unlockArgs{key: s.standingsLockKey(), token: token}
	_ = unlockScript.Run(ctx, s.rdb, u.keys(), u.add(nil)...).Err()
}

// StandingsLockHolder returns the token of the process that holds the
// publisher's lock ("" when none): "<host>/<pid>/<random>".
func (s *Store) StandingsLockHolder(ctx context.Context) (string, error) {
	v, err := s.rdb.Get(ctx, s.standingsLockKey()).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

// standingsState is a board's sealing cursor: next, the first period not
// sealed yet; gen, the generation the sealed periods were last checked
// against.
type standingsState struct {
	next time.Time
	gen  int
	has  bool
}

func (s *Store) readStandingsState(ctx context.Context, board string) (standingsState, error) {
	v, err := s.rdb.HMGet(ctx, s.standingsStateKey(), board+":next", board+":gen").Result()
	if err != nil {
		return standingsState{}, err
	}
	var out standingsState
	if str, ok := v[0].(string); ok {
		ms, err := strconv.ParseInt(str, 10, 64)
		if err != nil {
			return out, fmt.Errorf("malformed standings cursor %q", str)
		}
		out.next, out.has = time.UnixMilli(ms).UTC(), true
	}
	if str, ok := v[1].(string); ok {
		out.gen, _ = strconv.Atoi(str)
	}
	return out, nil
}

func (s *Store) writeStandingsState(ctx context.Context, board string, st standingsState) error {
	return s.rdb.HSet(ctx, s.standingsStateKey(), board+":next", strconv.FormatInt(st.next.UnixMilli(), 10),
		board+":gen", strconv.Itoa(st.gen)).Err()
}
