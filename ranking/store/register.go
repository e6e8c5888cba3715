package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

var registerScript = mustScript("register.lua")

// HeldBucket is the IDs for RegisterIDs whose messages' times fall in one
// dedupe bucket (DedupeBucket; 0: unknown), with the statuses, in order, of
// the updates of those whose events were not all applied (a later delivery
// repeats them: late and out of range are dead-lettered again). IDs holds
// keys alone, 12 bytes each and no pointer: a replay hands millions over.
type HeldBucket struct {
	Bucket   int64
	IDs      []IDKey
	Verdicts map[IDKey][]ranking.Status // of IDs in IDs; nil: all applied
}

// registerPipeline is how many commands one pipeline of RegisterIDs
// holds, and registerVerdicts the most verdicts one HSET writes.
const (
	registerPipeline = 4096
	registerVerdicts = 1000
	registerInFlight = 2 // pipelines of RegisterIDs running at once
)

// CanDecide reports whether a replay may decide which messages are new
// (Event.Decided) and hold them with RegisterIDs: not on a cluster.
func (s *Store) CanDecide() bool { return !s.cluster }

// DedupeBucket returns the dedupe bucket that holds the ID of a message
// applied at t: buckets are one dedupe TTL wide, counted from the Unix
// epoch (apply.lua counts them by Redis' clock).
func (s *Store) DedupeBucket(t time.Time) int64 { return t.UnixMilli() / s.ttl.Milliseconds() }

// DedupeTTL is how long an ID is held at least (WithDedupeTTL): the width
// of a dedupe bucket.
func (s *Store) DedupeTTL() time.Duration { return s.ttl }

// Registered is what RegisterIDs did: Added IDs were not held yet, and
// Expired ones were not held at all, their bucket being older than the
// previous one (live consumption would have forgotten them).
type Registered struct{ Added, Expired int }

// RegisterIDs holds the IDs of held in this generation's dedupe as Apply
// would have held them had their events not been Decided and been applied
// at the time of their bucket, so that a later delivery of one (live
// consumption writing the generation once it is built, or the rest of the
// replay) is a duplicate, repeating its verdict. IDs go to their own bucket
// when that is the current or the previous one (Redis' clock), to the
// current one when their bucket is later or unknown (0), and nowhere when
// it is older: live consumption has deleted that bucket. It groups the IDs
// by the set they go to: a few SADDs of many members instead of one per
// ID. The generation must be one no one else writes yet (ReserveBuild), on
// a standalone Redis; RegisterIDs may be run again with the same IDs.
func (s *Store) RegisterIDs(ctx context.Context, held []HeldBucket) (Registered, error) {
	if s.cluster {
		return Registered{}, errors.New("store: RegisterIDs on a cluster (a cluster holds an ID in each slot its updates went to)")
	}
	prefix := s.dedupePrefix(0)
	for attempt := 1; ; attempt++ {
		now, err := s.rdb.Time(ctx).Result()
		if err != nil {
			return Registered{}, fmt.Errorf("holding message IDs: %w", err)
		}
		cur := s.DedupeBucket(now)
		var res Registered
		var into [2][]HeldBucket // the previous bucket's, the current's
		for _, h := range held {
			switch b := h.Bucket; {
			case b != 0 && b < cur-1:
				res.Expired += len(h.IDs)
			case b == cur-1:
				into[0] = append(into[0], h)
			default:
				into[1] = append(into[1], h)
			}
		}
		var moved bool
		for i, ids := range into {
			if len(ids) == 0 {
				continue
			}
			b := cur - 1 + int64(i)
			head := registerArgs{meta: prefix + ddMeta, dprefix: prefix, ttlMs: s.ttl.Milliseconds(), minSets: s.ddMinSets}
			added, err := s.registerBucket(ctx, head, strconv.FormatInt(b, 10), ids)
			if err != nil && redis.HasErrorPrefix(err, "DDMOVED") && attempt < 3 {
				moved = true // the clock turned a bucket over meanwhile: again, by the new one
				break
			}
			if err != nil {
				return Registered{}, fmt.Errorf("holding message IDs: %w", err)
			}
			res.Added += added
		}
		if !moved {
			return res, nil
		}
	}
}

// registerBucket holds the IDs of ids in bucket (the current or the
// previous one) and counts them there; it returns how many it added.
func (s *Store) registerBucket(ctx context.Context, head registerArgs, bucket string, ids []HeldBucket) (int, error) {
	n := 0
	for _, g := range ids {
		n += len(g.IDs)
	}
	head.op, head.n, head.bucket = regOpOpen, n, bucket
	v, err := registerScript.Run(ctx, s.rdb, head.keys(), head.add(nil)...).Slice()
	if err != nil {
		return 0, err
	}
	if len(v) != 4 {
		return 0, fmt.Errorf("unexpected reply %v", v)
	}
	head.bucket, head.inc, head.layer = fmt.Sprint(v[0]), fmt.Sprint(v[1]), fmt.Sprint(v[2])
	bits, _ := v[3].(int64)
	added, err := s.registerIn(ctx, head, ids, n, int(bits))
	if err != nil {
		return 0, err
	}
	head.op, head.n = regOpCount, added
	return added, registerScript.Run(ctx, s.rdb, head.keys(), head.add(nil)...).Err()
}

// registerIn adds ids to the sets of the bucket, incarnation and layer of
// head, picked by the last bits of their shard hash, with one SADD per set
// for all its IDs, and their verdicts, in pipelines (registerInFlight at
// a time); it returns how many it added. The keys are named as apply.lua's
// open() names them: <dedupe prefix><bucket>.<incarnation>.<layer>:<set
// suffix>, and the verdicts' hash
// <dedupe prefix><bucket>.<incarnation>.<ddVerdicts>.
func (s *Store) registerIn(ctx context.Context, head registerArgs, ids []HeldBucket, n, bits int) (int, error) {
	mask := uint32(1)<<bits - 1
	// the IDs in the order of their sets (a counting sort), and the
	// verdicts of all (HSET field and value pairs)
	start := make([]int, mask+2)
	var verdicts []any
	for _, g := range ids {
		for _, k := range g.IDs {
			start[k.shard()&mask+1]++
		}
		for k, st := range g.Verdicts {
			if st != nil {
				verdicts = append(verdicts, k.fp(), verdictString(st))
			}
		}
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	order := make([]IDKey, n)
	at := append([]int(nil), start[:mask+1]...)
	for _, g := range ids {
		for _, k := range g.IDs {
			set := k.shard() & mask
			order[at[set]] = k
			at[set]++
		}
	}
	base := head.dprefix + head.bucket + "." + head.inc + "."
	layer := base + head.layer + ":"
	// Pipelines run registerInFlight at a time, each on its connection:
	// one is encoded while Redis runs another. SADD and HSET may run in
	// any order, and again.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(registerInFlight)
	var added atomic.Int64
	pipe := s.rdb.Pipeline()
	var adds []*redis.IntCmd
	queued := 0
	flush := func() {
		if queued == 0 {
			return
		}
		p, a := pipe, adds
		pipe, adds, queued = s.rdb.Pipeline(), nil, 0
		g.Go(func() error {
			if err := execChecked(gctx, p, "holding message IDs"); err != nil {
				return err
			}
			var n int64
			for _, c := range a {
				n += c.Val()
			}
			added.Add(n)
			return nil
		})
	}
	for len(verdicts) > 0 {
		c := min(len(verdicts), 2*registerVerdicts)
		pipe.HSet(gctx, base+ddVerdicts, verdicts[:c]...)
		queued++
		verdicts = verdicts[c:]
	}
	i := 0
	for i < len(order) && gctx.Err() == nil {
		set := order[i].shard() & mask
		j := i
		fps := make([]any, 0, 16)
		for ; j < len(order) && order[j].shard()&mask == set; j++ {
			fps = append(fps, order[j].fp())
		}
		adds = append(adds, pipe.SAdd(gctx, layer+setSuffix(set, bits), fps...))
		queued++
		if queued >= registerPipeline {
			flush()
		}
		i = j
	}
	flush()
	err := g.Wait()
	if err == nil && i < len(order) {
		err = ctx.Err() // cut short between two pipelines
	}
	return int(added.Load()), err
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

// verdictString renders an event's statuses as apply.lua keeps its verdict.
func verdictString(st []ranking.Status) string {
	b := make([]byte, len(st))
	for i, x := range st {
		b[i] = byte(luaStatusOf(x))
	}
	return string(b)
}
