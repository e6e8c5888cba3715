package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// memory measures Redis' memory after the rankd drain: MEMORY USAGE of
// every key (SAMPLES 0: exact), with ZCARD of the boards' sorted sets and
// SCARD of the dedupe sets (the IDs held); INFO memory's used_memory against that of the
// emptied server (read after the flush, before the drain).
func (e *env) memory(ctx context.Context) (*Memory, error) {
	if e.o.skipped(PhaseRankd) {
		return nil, fmt.Errorf("needs the rankd drain (do not skip %s)", PhaseRankd)
	}
	e.prog.set("memory", nil)
	m := &Memory{UsedMemoryEmpty: e.emptyMemory}
	used, err := e.usedMemory(ctx)
	if err != nil {
		return nil, err
	}
	m.UsedMemory = used
	// Board keys are "<prefix>:{tag}:...", dedupe keys "<prefix>:d:..."
	// (ID sets, verdict hashes, the buckets' meta hash); the rest (dims
	// registries, stream-time marks, generations) is other.
	dedupe := rankdPrefix + ":d:"
	boardPrefix := rankdPrefix + ":{"
	err = e.scan(ctx, "*", func(keys []string) error {
		pipe := e.admin.Pipeline()
		types := make([]*redis.StatusCmd, len(keys))
		for i, k := range keys {
			types[i] = pipe.Type(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		usage := make([]*redis.IntCmd, len(keys))
		cards := make([]*redis.IntCmd, len(keys))
		for i, k := range keys {
			usage[i] = pipe.MemoryUsage(ctx, k, 0)
			switch {
			case types[i].Val() == "zset" && strings.HasPrefix(k, boardPrefix):
				cards[i] = pipe.ZCard(ctx, k)
			case types[i].Val() == "set" && strings.HasPrefix(k, dedupe):
				cards[i] = pipe.SCard(ctx, k)
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		for i, k := range keys {
			switch {
			case strings.HasPrefix(k, dedupe):
				m.DedupeKeys++
				m.DedupeBytes += usage[i].Val()
				if cards[i] != nil {
					m.DedupeIDs += cards[i].Val()
				}
			case cards[i] != nil:
				m.BoardKeys++
				m.BoardMembers += cards[i].Val()
				m.BoardBytes += usage[i].Val()
			default:
				m.OtherKeys++
				m.OtherBytes += usage[i].Val()
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scanning keys: %w", err)
	}
	if m.BoardMembers > 0 {
		m.BytesPerBoardMember = round(float64(m.BoardBytes)/float64(m.BoardMembers), 1)
	}
	if m.DedupeIDs > 0 {
		m.BytesPerDedupeID = round(float64(m.DedupeBytes)/float64(m.DedupeIDs), 1)
		m.BytesPerDedupeIDAll = round(float64(m.UsedMemory-m.UsedMemoryEmpty-m.BoardBytes-m.OtherBytes)/float64(m.DedupeIDs), 1)
	}
	m.BytesPerEvent = round(float64(m.UsedMemory-m.UsedMemoryEmpty)/float64(e.o.Events), 1)
	return m, nil
}

// usedMemory returns used_memory from INFO memory.
func (e *env) usedMemory(ctx context.Context) (int64, error) {
	info, err := e.admin.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO memory: %w", err)
	}
	n, err := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("INFO memory: used_memory: %w", err)
	}
	return n, nil
}

// scan calls f with every page of keys matching pattern.
func (e *env) scan(ctx context.Context, pattern string, f func(keys []string) error) error {
	var cursor uint64
	for {
		keys, next, err := e.admin.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := f(keys); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}
