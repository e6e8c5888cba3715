package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/redis/go-redis/v9"
)

// Mark is the stream time of one topic-partition at one offset: the
// greatest event time of the valid messages below Offset (zero: none).
// It is a function of the log, so any process that computes it writes the
// same value; the consumer writes one per partition with every applied
// batch (Offset = the offset after the batch) and reads it back when it
// takes a partition over, so stream times survive restarts and
// rebalances.
type Mark struct {
	Topic     string
	Partition int
	Offset    int64
	Time      time.Time
}

// PartitionMark is the latest mark of a partition with the wall-clock time
// it was written (for finality: a partition that writes no mark for a while
// is idle).
type PartitionMark struct {
	Mark
	Written time.Time
}

// marksKept is how many marks per partition stay in Redis: a consumer
// resumes from its group's committed offset, which is at most a few
// batches behind the latest mark (more only when commits keep failing).
const marksKept = 1000

// markKey is the sorted set of a partition's marks (score: offset). The
// braces spread partitions over a cluster's slots. Marks belong to the log,
// not to a key generation.
func (s *Store) markKey(topic string, partition int) string {
	return s.base + ":wm:{" + topic + "|" + strconv.Itoa(partition) + "}"
}

// lastMarksKey is the hash of every partition's latest mark.
func (s *Store) lastMarksKey() string { return s.base + ":wm:last" }

// markValue renders m for its partition's sorted set of marks:
// "<offset>:<stream ms>".
func markValue(m Mark) string {
	return strconv.FormatInt(m.Offset, 10) + ":" + strconv.FormatInt(markMs(m.Time), 10)
}

// lastMark renders a partition's latest mark, v (markValue), written at
// now, for the hash of latest marks: "<offset>:<stream ms>:<written ms>".
// That hash says how far the boards readers use were applied: it is
// written by the root store's applies (live consumption, beside its
// position records) and by RaisePositions at a replay's switch; it is the
// finality of LowWatermark, and for a partition without a position record
// it stands in for one (Position.Legacy). A replay's marks (the Apply of a
// Generation's store) go to the sorted sets only: they must neither make
// periods final nor resume halted partitions before the switch.
func lastMark(v string, now int64) string { return v + ":" + strconv.FormatInt(now, 10) }

// writeMarks queues the writes of marks on pipe, and of the partitions'
// latest marks when latest (see lastMark).
func (s *Store) writeMarks(ctx context.Context, pipe redis.Pipeliner, marks []Mark, latest bool) []redis.Cmder {
	if len(marks) == 0 {
		return nil
	}
	var cmds []redis.Cmder
	for _, m := range marks {
		k := s.markKey(m.Topic, m.Partition)
		cmds = append(cmds,
			pipe.ZAdd(ctx, k, redis.Z{Score: float64(m.Offset), Member: markValue(m)}),
			pipe.ZRemRangeByRank(ctx, k, 0, -marksKept-1))
	}
	if !latest {
		return cmds
	}
	return append(cmds, s.raiseLastMarks(ctx, pipe, marks))
}

// raiseLastMarks raises the partitions' latest marks to marks (marks.lua:
// a latest mark never moves back), on c: a pipeline, or the client.
func (s *Store) raiseLastMarks(ctx context.Context, c redis.Scripter, marks []Mark) *redis.Cmd {
	now := s.now().UnixMilli()
	last := make([]any, 0, len(lastMarkFields)*len(marks))
	for _, m := range marks {
		lm := lastMarkArgs{field: posField(m.Topic, m.Partition), offset: m.Offset, value: lastMark(markValue(m), now)}
		last = lm.add(last)
	}
	// EVAL, not EVALSHA: a NOSCRIPT in a pipeline would fail the whole batch.
	return marksScript.Eval(ctx, c, []string{s.lastMarksKey()}, last...) // KEYS: marksKeys
}

var marksScript = mustScript("marks.lua")

func markMs(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

func markTime(ms int64) time.Time {
	if ms < 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// StreamTimes returns, for each mark's topic, partition and offset, the
// stream time at that offset: the time of the partition's latest mark at or
// below the offset (zero when there is none: a partition read from its
// start). Offsets without a mark between that one and the offset hold no
// message (the consumer writes a mark at the end of every batch), so the
// result is exact whenever the offset was reached by a committed batch.
func (s *Store) StreamTimes(ctx context.Context, at []Mark) ([]time.Time, error) {
	out := make([]time.Time, len(at))
	if len(at) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(at))
	for i, m := range at {
		cmds[i] = pipe.ZRevRangeByScore(ctx, s.markKey(m.Topic, m.Partition), &redis.ZRangeBy{
			Max: strconv.FormatInt(m.Offset, 10), Min: "-inf", Count: 1})
	}
	_, _ = pipe.Exec(ctx)
	for i, c := range cmds {
		vs, err := c.Result()
		if err != nil {
			return nil, fmt.Errorf("reading stream time of %s/%d: %w", at[i].Topic, at[i].Partition, err)
		}
		if len(vs) == 0 {
			continue
		}
		_, ms, err := parseMark(vs[0])
		if err != nil {
			return nil, err
		}
		out[i] = markTime(ms)
	}
	return out, nil
}

func parseMark(v string) (offset, ms int64, err error) {
	o, t, ok := strings.Cut(v, ":")
	if ok {
		t, _, _ = strings.Cut(t, ":")
		offset, err = strconv.ParseInt(o, 10, 64)
		if err == nil {
			ms, err = strconv.ParseInt(t, 10, 64)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("malformed stream time mark %q", v)
	}
	return offset, ms, nil
}

// LastMarks returns the latest mark of every partition that ever wrote one.
func (s *Store) LastMarks(ctx context.Context) ([]PartitionMark, error) {
	h, err := s.rdb.HGetAll(ctx, s.lastMarksKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("reading stream times: %w", err)
	}
	out := make([]PartitionMark, 0, len(h))
	for tp, v := range h {
		i := strings.LastIndexByte(tp, '|')
		p, err := strconv.Atoi(tp[i+1:])
		if i < 0 || err != nil {
			continue
		}
		off, ms, err := parseMark(v)
		if err != nil {
			continue
		}
		wall := int64(0)
		if j := strings.LastIndexByte(v, ':'); j >= 0 {
			wall, _ = strconv.ParseInt(v[j+1:], 10, 64)
		}
		out = append(out, PartitionMark{
			Mark:    Mark{Topic: tp[:i], Partition: p, Offset: off, Time: markTime(ms)},
			Written: time.UnixMilli(wall).UTC(),
		})
	}
	return out, nil
}

func (st *boardState) late(p ranking.Period, streamTime time.Time) bool {
	return st.b.Late(p, streamTime)
}

// DefaultIdleTimeout is how long a partition may write no mark before it
// stops holding boards open (see LowWatermark).
const DefaultIdleTimeout = 5 * time.Minute

// WithBoardTopics tells the store which Kafka topics feed each board, for
// LowWatermark; a board without an entry is fed by every partition.
func WithBoardTopics(m map[string][]string) Option { return func(s *Store) { s.boardTopics = m } }

// WithIdleTimeout sets how long a partition may write no mark before it
// stops holding boards open (default DefaultIdleTimeout). It affects
// finality only, never a verdict.
func WithIdleTimeout(d time.Duration) Option { return func(s *Store) { s.idle = d } }

// LowWatermark returns the stream time up to which every partition feeding
// board has progressed: the least stream time of their latest marks,
// leaving out partitions that wrote no mark for the idle timeout (unless
// all are idle). ok is false before any partition wrote a mark. Marks are
// read at most once a second.
func (s *Store) LowWatermark(ctx context.Context, board string) (low time.Time, ok bool, err error) {
	if s.root != nil {
		return s.root.LowWatermark(ctx, board)
	}
	s.markMu.Lock()
	marks, at := s.markCache, s.markAt
	s.markMu.Unlock()
	if at.IsZero() || time.Since(at) > genRefresh {
		if marks, err = s.LastMarks(ctx); err != nil {
			return time.Time{}, false, err
		}
		s.markMu.Lock()
		s.markCache, s.markAt = marks, time.Now()
		s.markMu.Unlock()
	}
	topics, scoped := s.boardTopics[board]
	now := s.now()
	var lowAll, lowActive time.Time
	var any, active bool
	for _, m := range marks {
		if scoped && !slices.Contains(topics, m.Topic) {
			continue
		}
		if !any || m.Time.Before(lowAll) {
			lowAll = m.Time
		}
		any = true
		if now.Sub(m.Written) <= s.idle {
			if !active || m.Time.Before(lowActive) {
				lowActive = m.Time
			}
			active = true
		}
	}
	switch {
	case active:
		return lowActive, true, nil
	case any:
		return lowAll, true, nil
	}
	return time.Time{}, false, nil
}

// Final reports whether period p of board is final: every partition
// feeding the board (see LowWatermark) has passed p.End + Grace, so no
// update can change it any more. Total boards are never final.
func (s *Store) Final(ctx context.Context, board string, p ranking.Period) (bool, error) {
	st, err := s.board(board)
	if err != nil {
		return false, err
	}
	low, ok, err := s.LowWatermark(ctx, board)
	if err != nil || !ok {
		return false, err
	}
	return st.b.Late(p, low), nil
}

// OldestOpen returns the oldest period of board that is not final (zero
// Period when nothing is known yet, or for total boards).
func (s *Store) OldestOpen(ctx context.Context, board string) (ranking.Period, error) {
	st, err := s.board(board)
	if err != nil || st.b.Window == ranking.WindowTotal {
		return ranking.Period{}, err
	}
	low, ok, err := s.LowWatermark(ctx, board)
	if err != nil || !ok {
		return ranking.Period{}, err
	}
	// P is open while low < P.End + Grace, i.e. P.End > low - Grace: the
	// period containing low - Grace is the first such.
	return st.cal.At(low.Add(-st.b.Grace)), nil
}

// LastMarkOffsets returns, per "topic|partition", the offset of the
// partition's latest mark: everything below it was applied.
func (s *Store) LastMarkOffsets(ctx context.Context) (map[string]int64, error) {
	ms, err := s.LastMarks(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(ms))
	for _, m := range ms {
		out[m.Topic+"|"+strconv.Itoa(m.Partition)] = m.Offset
	}
	return out, nil
}
