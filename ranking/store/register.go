package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rankd/rankd/ranking"
	"github.com/redis/go-redis/v9"
)

var registerScript = mustScript("register.lua")

// HeldID is a message ID for RegisterIDs: its key and, when not every
// update of its event was applied, the statuses of its updates in order
// (a later delivery repeats them: late and out of range are dead-lettered
// again).
type HeldID struct {
	Key      IDKey
	Statuses []ranking.Status // nil: all applied
}

// registerCallIDs is the most IDs one register.lua add holds (a few ms of
// Redis), and registerPipeline how many such calls go in one pipeline.
const (
	registerCallIDs  = 4000
	registerPipeline = 8
)

// CanDecide reports whether a replay may decide which messages are new
// (Event.Decided) and hold them with RegisterIDs: not on a cluster.
func (s *Store) CanDecide() bool { return !s.cluster }

// RegisterIDs holds ids in this generation's dedupe as Apply would have
// held them had their events not been Decided, so that a later delivery
// of one (live consumption writing the generation once it is built, or
// the rest of the replay) is a duplicate, repeating its verdict. It
// groups the IDs by the set they go to: a few SADDs of many members
// instead of one per ID. The generation must be one no one else writes
// yet (ReserveBuild), on a standalone Redis; RegisterIDs may be run again
// with the same IDs. It returns how many IDs it added.
func (s *Store) RegisterIDs(ctx context.Context, ids []HeldID) (int, error) {
	if s.cluster {
		return 0, errors.New("store: RegisterIDs on a cluster (a cluster holds an ID in each slot its updates went to)")
	}
	if len(ids) == 0 {
		return 0, nil
	}
	prefix := s.dedupePrefix(0)
	head := registerArgs{meta: prefix + ddMeta, op: regOpOpen, dprefix: prefix,
		dedupeArgs: dedupeArgs{ttlMs: s.ttl.Milliseconds(), minSets: s.ddMinSets}, n: len(ids)}
	for attempt := 1; ; attempt++ {
		head.op = regOpOpen
		v, err := registerScript.Run(ctx, s.rdb, head.keys(), head.add(nil)...).Slice()
		if err != nil {
			return 0, fmt.Errorf("holding message IDs: %w", err)
		}
		if len(v) != 4 {
			return 0, fmt.Errorf("holding message IDs: unexpected reply %v", v)
		}
		head.op = regOpAdd
		head.bucket, head.inc = fmt.Sprint(v[0]), fmt.Sprint(v[1])
		head.layer = fmt.Sprint(v[2])
		bits, _ := v[3].(int64)
		n, err := s.registerIn(ctx, head, ids, int(bits))
		if err != nil && redis.HasErrorPrefix(err, "DDMOVED") && attempt < 3 {
			continue // the bucket turned over: hold them all in the new one
		}
		return n, err
	}
}

// registerIn holds ids in the bucket and layer of head, whose sets are
// picked by the last bits of the shard hash.
func (s *Store) registerIn(ctx context.Context, head registerArgs, ids []HeldID, bits int) (int, error) {
	mask := uint32(1)<<bits - 1
	// the IDs in the order of their sets (a counting sort)
	start := make([]int, mask+2)
	for i := range ids {
		start[ids[i].Key.shard()&mask+1]++
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	order := make([]int, len(ids))
	at := append([]int(nil), start[:mask+1]...)
	for i := range ids {
		set := ids[i].Key.shard() & mask
		order[at[set]] = i
		at[set]++
	}
	if err := registerScript.Load(ctx, s.rdb).Err(); err != nil { // the adds are EVALSHA in a pipeline
		return 0, fmt.Errorf("loading the register script: %w", err)
	}
	added := 0
	var pending []*redis.Cmd
	pipe := s.rdb.Pipeline()
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		_, _ = pipe.Exec(ctx)
		for _, c := range pending {
			n, err := c.Int()
			if err != nil {
				return fmt.Errorf("holding message IDs: %w", err)
			}
			added += n
		}
		pending = pending[:0]
		return nil
	}
	for lo := 0; lo < len(order); {
		hi := min(lo+registerCallIDs, len(order))
		args := head.add(nil)
		var verdicts []any
		ngroups, groupsAt := 0, len(args)
		args = append(args, 0) // the number of groups, set below
		for i := lo; i < hi; {
			set := ids[order[i]].Key.shard() & mask
			j := i
			for j < hi && ids[order[j]].Key.shard()&mask == set {
				j++
			}
			args = append(args, setSuffix(set, bits), j-i)
			for _, k := range order[i:j] {
				fp := ids[k].Key.fp()
				args = append(args, fp)
				if st := ids[k].Statuses; st != nil {
					verdicts = append(verdicts, fp, verdictOf(st))
				}
			}
			ngroups++
			i = j
		}
		args[groupsAt] = ngroups
		args = append(append(args, len(verdicts)/2), verdicts...)
		pending = append(pending, registerScript.EvalSha(ctx, pipe, head.keys(), args...))
		if len(pending) == registerPipeline {
			if err := flush(); err != nil {
				return added, err
			}
		}
		lo = hi
	}
	err := flush()
	return added, err
}

// setSuffix renders set as the last bits binary digits of a shard hash,
// the suffix apply.lua takes of idKey.sh.
func setSuffix(set uint32, bits int) string {
	d := strconv.FormatUint(uint64(set), 2)
	if len(d) < bits {
		d = strings.Repeat("0", bits-len(d)) + d
	}
	return d
}

// verdictOf renders an event's statuses as apply.lua keeps its verdict.
func verdictOf(st []ranking.Status) string {
	b := make([]byte, len(st))
	for i, x := range st {
		b[i] = byte(luaStatusOf(x))
	}
	return string(b)
}
