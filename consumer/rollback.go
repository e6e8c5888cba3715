package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrRedisBehind is returned by RankingSink.Apply while Redis is behind
// Kafka: the group committed offsets that Redis has no record of applying
// (Redis lost writes: a restart without persistence, a failover to a stale
// replica, a restore of an old snapshot). Applying on top would rebuild
// boards from the middle of the log, so the sink refuses until the boards
// are rebuilt (`rankd replay`), which records the partitions' progress
// again.
var ErrRedisBehind = errors.New("redis is behind kafka")

// committedChecker is implemented by sinks that can tell whether their
// store holds everything the group committed (RankingSink). The consumer
// calls CheckCommitted before its workers start and after every lag
// computation; Behind makes the consumer unready.
type committedChecker interface {
	CheckCommitted(ctx context.Context, lags []PartitionLag) error
	Behind() bool
}

// CheckCommitted compares the group's committed offsets with the latest
// stream time mark of every partition in Redis (written with every applied
// batch, before its commit, so that a mark is never below a committed
// offset). Partitions where Redis is behind make Apply fail with
// ErrRedisBehind and are counted in rankd_sink_partitions_behind; when none
// is behind any more (after a rebuild), Apply works again.
func (s *RankingSink) CheckCommitted(ctx context.Context, lags []PartitionLag) error {
	ms, ok := s.store.(interface {
		LastMarkOffsets(ctx context.Context) (map[string]int64, error)
	})
	if !ok {
		return nil
	}
	last, err := ms.LastMarkOffsets(ctx)
	if err != nil {
		return fmt.Errorf("reading stream time marks: %w", err)
	}
	var behind []string
	for _, l := range lags {
		if l.Committed <= 0 {
			continue
		}
		k := l.Topic + "|" + strconv.Itoa(l.Partition)
		if off, ok := last[k]; !ok || off < l.Committed {
			have := "nothing"
			if ok {
				have = "offset " + strconv.FormatInt(off, 10)
			}
			behind = append(behind, fmt.Sprintf("%s/%d committed %d, redis has %s", l.Topic, l.Partition, l.Committed, have))
		}
	}
	s.m.behind.Set(float64(len(behind)))
	if len(behind) == 0 {
		s.behind.Store(nil)
		return nil
	}
	err = fmt.Errorf("%w: %d partitions (%s): rebuild the boards with `rankd replay`", ErrRedisBehind, len(behind),
		strings.Join(behind[:min(len(behind), 3)], "; "))
	s.behind.Store(&err)
	return err
}

// Behind reports whether the last CheckCommitted found Redis behind Kafka.
func (s *RankingSink) Behind() bool { return s.behind.Load() != nil }
