package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Positions: the sink owns its position.
//
// Redis can lose its last writes while Kafka keeps its committed offsets
// (an asynchronous replica promoted, a restart from an older snapshot or
// without persistence, a FLUSHALL). So where live consumption of a
// partition stands is kept in Redis, beside the effects: the hash
// <base>:pos holds per "<topic>|<partition>" a position record, written by
// the same script calls that apply the batch (ApplyFrom). Every call of a
// batch states the record it expects and the record it leaves, and is
// refused before it changes anything when Redis holds another one. On a
// standalone Redis (or one behind Sentinel) writes are applied, persisted
// and replicated in order, and a loss takes a suffix of them; a record
// present therefore means that every effect written before it is present
// too, and a record that differs from the caller's tells exactly where
// Redis stands.
//
// A record names the batch that wrote it, [From, To), and how far its calls
// got: a batch of n calls leaves "k of n" (with a nonce of the attempt)
// after its k-th call, and only the n-th (the last, which also writes the
// batch's stream time marks) makes it Done. Live consumption resumes at To of a Done record and at From of any
// other (the dedupe keys of the calls that ran make them no-ops again).
//
// On a Redis Cluster the calls of a batch run on several nodes, which lose
// writes independently, so there is no single order to check: there,
// ApplyFrom writes the Done record after every call succeeded (like the
// marks), only where it moves the record forward (writePositions), and
// checks nothing; positions are read when a partition is assigned.

// Span is one partition's share of a live batch (ApplyFrom): its messages
// run from offset From up to To (exclusive); FromTime and ToTime are the
// partition's stream time at those offsets (see Mark). Expect is the
// partition's position record as the caller last saw it in Redis
// (Position.Record; "" for none). ApplyFrom sets Left to the record the
// batch left, which the partition's next batch expects.
type Span struct {
	Topic            string
	Partition        int
	From, To         int64
	FromTime, ToTime time.Time
	Expect           string
	Left             string
}

// Position is a partition's position record.
type Position struct {
	Topic     string
	Partition int
	// Record is the record as stored ("" when Redis holds none): what the
	// next ApplyFrom of the partition must Expect.
	Record string
	// From, To, FromTime and ToTime are the span of the batch that wrote
	// the record; Done reports whether all of it was applied.
	From, To         int64
	FromTime, ToTime time.Time
	Done             bool
	// Legacy reports a partition without a record whose latest stream time
	// mark (written by rankd versions before position records) stands in
	// for one: Done at the mark's offset, Record "". A replay's marks are
	// never latest marks (see lastMark), so they never stand in for one.
	Legacy bool
}

// Exists reports whether Redis knows where the partition stands.
func (p Position) Exists() bool { return p.Record != "" || p.Legacy }

// Resume returns the offset from which live consumption continues and the
// stream time there.
func (p Position) Resume() (int64, time.Time) {
	if p.Done {
		return p.To, p.ToTime
	}
	return p.From, p.FromTime
}

func (p Position) String() string {
	if !p.Exists() {
		return "none"
	}
	off, _ := p.Resume()
	if p.Done {
		return "offset " + strconv.FormatInt(off, 10)
	}
	return fmt.Sprintf("offset %d (a batch up to %d half applied)", off, p.To)
}

func posField(topic string, partition int) string { return topic + "|" + strconv.Itoa(partition) }

// posKey is the hash of every partition's position record. Positions
// belong to the log, not to a key generation.
func (s *Store) posKey() string { return s.base + ":pos" }

// record renders the record that call k of n of one attempt at a batch
// leaves. The attempt's nonce makes the records of its calls its own: a
// call after the first expects a record only the call before it in the
// same attempt can have written (not the same call of an earlier attempt,
// which Redis may hold and which may have carried other events).
func (sp *Span) record(k, n int, nonce string) string {
	return strconv.FormatInt(sp.From, 10) + ":" + strconv.FormatInt(markMs(sp.FromTime), 10) + ":" +
		strconv.FormatInt(sp.To, 10) + ":" + strconv.FormatInt(markMs(sp.ToTime), 10) + ":" +
		strconv.Itoa(k) + ":" + strconv.Itoa(n) + ":" + nonce
}

// clusterNonce is the nonce of the records written on a cluster (one
// unchecked write per batch).
const clusterNonce = "c"

// newNonce returns a fresh attempt nonce.
var newNonce = func() string { return strconv.FormatUint(rand.Uint64()>>16, 36) } // a var: tests fix it

// parsePosition parses a stored record.
func parsePosition(topic string, partition int, rec string) (Position, error) {
	p := Position{Topic: topic, Partition: partition, Record: rec}
	if rec == "" {
		return p, nil
	}
	f := strings.Split(rec, ":")
	var n [6]int64
	if len(f) != len(n)+1 {
		return p, fmt.Errorf("malformed position record %q of %s/%d", rec, topic, partition)
	}
	for i := range n {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return p, fmt.Errorf("malformed position record %q of %s/%d", rec, topic, partition)
		}
		n[i] = v
	}
	p.From, p.FromTime, p.To, p.ToTime = n[0], markTime(n[1]), n[2], markTime(n[3])
	p.Done = n[4] == n[5]
	return p, nil
}

// PositionError is ApplyFrom's refusal: Redis does not hold the positions
// the call expected, and nothing of the refused call was applied (earlier
// calls of the same batch may have been; their records say so). Positions
// are the records Redis holds for the spans, in span order, when a position
// differed; GensGone reports that the generation counter the call expected
// is gone (Redis lost the gens hash: the boards' generation pointers).
type PositionError struct {
	Positions []Position
	// Gens and GensExpected are the gens hash's counter as stored and as
	// expected, when they differed.
	Gens, GensExpected string
}

func (e *PositionError) Error() string {
	if e.Gens != e.GensExpected {
		if e.GensGone() {
			return "redis lost the boards' generation pointers (the gens hash)"
		}
		return fmt.Sprintf("the boards' generations changed (counter %s, expected %s)", e.Gens, e.GensExpected)
	}
	var parts []string
	for _, p := range e.Positions {
		parts = append(parts, fmt.Sprintf("%s/%d at %s", p.Topic, p.Partition, p))
	}
	return "redis holds other positions than expected: " + strings.Join(parts, ", ")
}

// GensGone reports that the gens hash, which existed, is gone.
func (e *PositionError) GensGone() bool { return e.GensExpected != gensNone && e.Gens == gensNone }

// IsPositionError reports whether err is (or wraps) a *PositionError.
func IsPositionError(err error) (*PositionError, bool) {
	var pe *PositionError
	ok := errors.As(err, &pe)
	return pe, ok
}

// Positions returns the position records of the given partitions (Span's
// Topic and Partition; the rest is ignored). A partition without a record
// falls back to its latest stream time mark (Position.Legacy), if any.
func (s *Store) Positions(ctx context.Context, at []Span) ([]Position, error) {
	out := make([]Position, len(at))
	if len(at) == 0 {
		return out, nil
	}
	fields := make([]string, len(at))
	for i, a := range at {
		fields[i] = posField(a.Topic, a.Partition)
	}
	pipe := s.rdb.Pipeline()
	recs := pipe.HMGet(ctx, s.posKey(), fields...)
	lasts := pipe.HMGet(ctx, s.lastMarksKey(), fields...)
	_, _ = pipe.Exec(ctx)
	rv, err := recs.Result()
	if err != nil {
		return nil, fmt.Errorf("reading positions: %w", err)
	}
	lv, err := lasts.Result()
	if err != nil {
		return nil, fmt.Errorf("reading stream times: %w", err)
	}
	for i, a := range at {
		rec, _ := rv[i].(string)
		if out[i], err = parsePosition(a.Topic, a.Partition, rec); err != nil {
			return nil, err
		}
		if last, ok := lv[i].(string); ok && rec == "" {
			off, ms, err := parseMark(last)
			if err != nil {
				return nil, err
			}
			out[i].Legacy, out[i].Done = true, true
			out[i].From, out[i].To = off, off
			out[i].FromTime, out[i].ToTime = markTime(ms), markTime(ms)
		}
	}
	return out, nil
}

var positionsScript = mustScript("positions.lua")

// RaisePositions records that everything below each mark's offset is
// applied, with the mark's stream time there, for partitions whose record
// is missing or resumes below it, and raises their latest marks (the
// finality of LowWatermark) to the marks; it returns how many records it
// raised. `rankd replay` calls it after its switch: the new generation
// holds every board up to those offsets, so live consumption of a
// partition that Redis had forgotten (it stopped, see ApplyFrom) resumes
// there, and the boards' periods are final as far as the replay reached.
func (s *Store) RaisePositions(ctx context.Context, marks []Mark) (int, error) {
	if s.root != nil {
		s = s.root
	}
	next, err := s.rdb.HGet(ctx, s.gensKey(), gensNext).Result()
	if errors.Is(err, redis.Nil) {
		next, err = gensNone, nil
	}
	if err != nil {
		return 0, fmt.Errorf("raising positions: %w", err)
	}
	head := raiseHeadArgs{gens: next}
	args := head.add(make([]any, 0, len(raiseHeadFields)+len(raiseFields)*len(marks)))
	for _, m := range marks {
		sp := Span{From: m.Offset, To: m.Offset, FromTime: m.Time, ToTime: m.Time}
		ra := raiseArgs{field: posField(m.Topic, m.Partition), offset: m.Offset, record: sp.record(1, 1, "r")}
		args = ra.add(args)
	}
	n, err := positionsScript.Run(ctx, s.rdb, []string{s.posKey()}, args...).Int() // KEYS: raiseKeys; EVALSHA, EVAL on NOSCRIPT
	if err != nil {
		return 0, fmt.Errorf("raising positions: %w", err)
	}
	// then the latest marks, in a call of their own: the two hashes are in
	// different slots of a cluster
	if len(marks) > 0 {
		if err := s.raiseLastMarks(ctx, s.rdb, marks).Err(); err != nil {
			return n, fmt.Errorf("raising the latest marks: %w", err)
		}
	}
	return n, nil
}

// writePositions queues on pipe the Done records of spans (a cluster,
// where they are written after every call of the batch succeeded,
// unchecked by the calls), each only where it moves the partition's
// record forward: a worker of an ended group generation that finishes a
// batch late (it retried through an outage while the partition moved to
// another consumer, which applied and committed further) must not set the
// record back, which would read as Redis having lost the newer batches.
// The function it returns, called once pipe ran, reports the outcome (it
// runs the script on its own when Redis did not have it cached).
func (s *Store) writePositions(ctx context.Context, pipe redis.Pipeliner, spans []Span) func() error {
	if len(spans) == 0 {
		return func() error { return nil }
	}
	head := raiseHeadArgs{gens: posGensKeep}
	args := head.add(make([]any, 0, len(raiseHeadFields)+len(raiseFields)*len(spans)))
	for i := range spans {
		ra := raiseArgs{field: posField(spans[i].Topic, spans[i].Partition), offset: spans[i].To, record: spans[i].record(1, 1, clusterNonce)}
		args = ra.add(args)
	}
	keys := []string{s.posKey()} // raiseKeys
	cmd := positionsScript.EvalSha(ctx, pipe, keys, args...)
	return func() error {
		if err := cmd.Err(); !isNoScript(err) {
			return err
		}
		return positionsScript.Run(ctx, s.rdb, keys, args...).Err() // EVALSHA, EVAL on NOSCRIPT
	}
}

// GensIntact reports whether the gens hash holds the boards' generation
// pointers that live consumption last saw: false when the hash, or its
// counter, went back or away since (Redis lost it) and no replay rebuilt
// the boards since (RaisePositions).
func (s *Store) GensIntact(ctx context.Context) (bool, error) {
	if s.root != nil {
		s = s.root
	}
	pipe := s.rdb.Pipeline()
	gc := pipe.HGet(ctx, s.gensKey(), gensNext)
	pc := pipe.HGet(ctx, s.posKey(), posGens)
	_, _ = pipe.Exec(ctx)
	g, err1 := gc.Int64()
	p, err2 := pc.Int64()
	if errors.Is(err2, redis.Nil) {
		return true, nil
	}
	if err2 != nil {
		return false, fmt.Errorf("reading the generation counter: %w", err2)
	}
	if errors.Is(err1, redis.Nil) {
		return false, nil
	}
	if err1 != nil {
		return false, fmt.Errorf("reading the generation counter: %w", err1)
	}
	return g >= p, nil
}
