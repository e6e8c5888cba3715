package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rankd/rankd/ranking"
	"github.com/redis/go-redis/v9"
)

// Key generations.
//
// Every board's keys live in a generation: generation 0 under the store's
// prefix, generation g > 0 under "<prefix>:g<g>". A hash, <prefix>:gens,
// holds per board the active generation (the one every reader and writer
// uses) and, while a replay rebuilds the board, the generation it builds.
// While a board has a generation being built, Store.Apply writes every
// update into both (statuses come from the active one; each generation has
// its own dedupe keys), so the rebuilt generation misses nothing that live
// traffic applied; the replay switches the board to it with one atomic
// change of the hash, then deletes the old generation.
//
// A generation being built counts only while the replay that builds it
// holds the replay lock (a field of the same hash with an expiry): a replay
// that died stops the dual writes within the lock's TTL, and its partial
// generation is deleted by the next replay.

var gensScript = mustScript("gens.lua")

// BoardGen is a board's generations: the active one and the one being built
// (-1: none).
type BoardGen struct {
	Active, Building int
}

// ErrReplayLock is returned when the replay lock is held by another replay,
// or was lost.
var ErrReplayLock = errors.New("replay lock")

// genRefresh is how long readers (the API, rollover) reuse the generations
// they read; writers read them with every Apply.
const genRefresh = time.Second

func (s *Store) gensKey() string { return s.base + ":gens" }

// genPrefix returns the key prefix of generation g.
func genPrefix(base string, g int) string {
	if g == 0 {
		return base
	}
	return base + ":g" + strconv.Itoa(g)
}

// Generations reads every board's generations from Redis (boards never
// replayed are absent: active 0, none building).
func (s *Store) Generations(ctx context.Context) (map[string]BoardGen, error) {
	out, err := s.gens(ctx, gensArgs{op: gensOpRead})
	if err != nil {
		return nil, fmt.Errorf("reading generations: %w", err)
	}
	flat, _ := out.([]any)
	if len(flat) > 0 {
		flat = flat[1:] // the counter (see GensIntact)
	}
	gs := make(map[string]BoardGen, len(flat)/3)
	for i := 0; i+2 < len(flat); i += 3 {
		b, _ := flat[i].(string)
		a, _ := strconv.Atoi(fmt.Sprint(flat[i+1]))
		bl, _ := strconv.Atoi(fmt.Sprint(flat[i+2]))
		gs[b] = BoardGen{Active: a, Building: bl}
	}
	s.genMu.Lock()
	s.genCache, s.genAt = gs, time.Now()
	s.genMu.Unlock()
	return gs, nil
}

// gens runs one gens.lua op on this store's gens hash.
func (s *Store) gens(ctx context.Context, a gensArgs) (any, error) {
	a.key = s.gensKey()
	return gensScript.Run(ctx, s.rdb, a.keys(), a.add(nil)...).Result() // EVALSHA, EVAL on NOSCRIPT
}

// cachedGen returns board's generations as read at most genRefresh ago.
func (s *Store) cachedGen(ctx context.Context, board string) (BoardGen, error) {
	s.genMu.Lock()
	gs, at := s.genCache, s.genAt
	s.genMu.Unlock()
	if gs == nil || time.Since(at) > genRefresh {
		var err error
		if gs, err = s.Generations(ctx); err != nil {
			return BoardGen{}, err
		}
	}
	if g, ok := gs[board]; ok {
		return g, nil
	}
	return BoardGen{Building: -1}, nil
}

// reader returns the store of board's active generation.
func (s *Store) reader(ctx context.Context, board string) (*Store, error) {
	if s.root != nil {
		return s, nil
	}
	g, err := s.cachedGen(ctx, board)
	if err != nil {
		return nil, err
	}
	return s.view(g.Active), nil
}

// view returns the store of generation g (the root itself for 0).
func (s *Store) view(g int) *Store {
	if s.root != nil {
		s = s.root
	}
	if g == 0 {
		return s
	}
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if v := s.views[g]; v != nil {
		return v
	}
	v := &Store{
		rdb: s.rdb, cluster: s.cluster, boards: s.boards, order: s.order, base: s.base,
		prefix: genPrefix(s.base, g), root: s, ttl: s.ttl, ddMinSets: s.ddMinSets, now: s.now, log: s.log,
		maxCall: s.maxCall, chunk: s.chunk, lockTTL: s.lockTTL, known: map[dimsKey]time.Time{}, rollWait: s.rollWait, pack: s.pack, enc: s.enc,
	}
	s.views[g] = v
	return v
}

// Generation returns a store that reads and writes generation g only, for a
// replay that builds it. Its Apply writes the marks it is given to the
// partitions' sorted sets of marks (marks belong to the log, not to a
// generation), not to the latest marks, which live consumption writes with
// its position records (see lastMark).
func (s *Store) Generation(g int) *Store { return s.view(g) }

// parts splits evs into the shares that go to each generation. On a
// generation's store that is all of them, to it. On the root store every
// update goes to its board's active generation, and also to the
// generation being built if there is one; statuses are the active
// generation's (its parts come first).
func (s *Store) parts(ctx context.Context, evs []Event) ([]*genPart, error) {
	all := func(v *Store) []*genPart {
		p := &genPart{view: v, evs: evs, idx: make([]int, nUpdates(evs))}
		for i := range p.idx {
			p.idx[i] = i
		}
		return []*genPart{p}
	}
	if s.root != nil {
		return all(s), nil
	}
	gs, err := s.Generations(ctx)
	if err != nil {
		return nil, err
	}
	if g, ok := singleGen(gs, evs); ok { // the usual case: no build under way
		return all(s.view(g)), nil
	}
	active, building := map[int]*genPart{}, map[int]*genPart{}
	var order, border []int
	add := func(parts map[int]*genPart, order *[]int, build bool, g, e, i int, u ranking.Update) {
		p := parts[g]
		if p == nil {
			p = &genPart{view: s.view(g), building: build}
			parts[g] = p
			*order = append(*order, g)
		}
		if p.last != e || len(p.evs) == 0 {
			p.evs = append(p.evs, Event{ID: evs[e].ID})
			p.last = e
		}
		ev := &p.evs[len(p.evs)-1]
		ev.Updates = append(ev.Updates, u)
		p.idx = append(p.idx, i)
	}
	i := 0
	for e := range evs {
		for _, u := range evs[e].Updates {
			g, ok := gs[u.Board]
			if !ok {
				g = BoardGen{Building: -1}
			}
			add(active, &order, false, g.Active, e, i, u)
			if g.Building >= 0 {
				add(building, &border, true, g.Building, e, i, u)
			}
			i++
		}
	}
	var parts []*genPart
	for _, g := range order {
		parts = append(parts, active[g])
	}
	for _, g := range border {
		parts = append(parts, building[g])
	}
	return parts, nil
}

// singleGen returns the active generation of every board of evs when they
// share one and none is being built, so that the events go as they are.
func singleGen(gs map[string]BoardGen, evs []Event) (int, bool) {
	g, first := 0, true
	for i := range evs {
		for k := range evs[i].Updates {
			bg, ok := gs[evs[i].Updates[k].Board]
			if !ok {
				bg = BoardGen{Building: -1}
			}
			if bg.Building >= 0 || (!first && bg.Active != g) {
				return 0, false
			}
			g, first = bg.Active, false
		}
	}
	return g, true
}

// genPart is the share of an Apply that goes to one generation: its events
// (each with the updates of its boards in that generation), the positions
// of those updates in the Apply input, and, once planned, the dims tags it
// registers and its verdicts.
type genPart struct {
	view     *Store
	building bool // a generation being built: its verdicts are not the Apply's
	evs      []Event
	idx      []int
	last     int // index in the Apply input of the last event added
	tags     map[string][]any
	res      ranking.Result
}

// LockReplay takes or renews the replay lock for token, for ttl. It
// returns an ErrReplayLock error naming the holder when another replay
// holds it.
func (s *Store) LockReplay(ctx context.Context, token string, ttl time.Duration) error {
	v, err := s.gens(ctx, gensArgs{op: gensOpLock, token: token, ttlMs: ttl.Milliseconds()})
	if err != nil {
		return fmt.Errorf("taking the replay lock: %w", err)
	}
	if n, ok := v.(int64); ok && n == 1 {
		return nil
	}
	holder, _ := v.(string)
	tok, exp, _ := strings.Cut(holder, "|")
	ms, _ := strconv.ParseInt(exp, 10, 64)
	return fmt.Errorf("%w: another replay (token %s) holds it until %s", ErrReplayLock, tok,
		time.UnixMilli(ms).UTC().Format(time.RFC3339))
}

// RenewReplay renews the replay lock held by token for ttl. It returns an
// ErrReplayLock error when token does not hold it: another replay took it
// after it expired, or Redis lost it (with whatever else the replay
// wrote).
func (s *Store) RenewReplay(ctx context.Context, token string, ttl time.Duration) error {
	if _, err := s.gens(ctx, gensArgs{op: gensOpRenew, token: token, ttlMs: ttl.Milliseconds()}); err != nil {
		return lockErr("renewing the replay lock", err)
	}
	return nil
}

// UnlockReplay releases the replay lock if token holds it.
func (s *Store) UnlockReplay(ctx context.Context, token string) error {
	_, err := s.gens(ctx, gensArgs{op: gensOpUnlock, token: token})
	return err
}

// BeginBuild hands out a new generation and marks it as being built for
// boards; from the next Apply on, live writes go to it too. The replay lock
// must be held by token. stale maps each board whose previous build never
// switched (a replay that died) to that generation, for the caller to drop.
func (s *Store) BeginBuild(ctx context.Context, token string, boards []string) (g int, stale map[string]int, err error) {
	return s.beginBuild(ctx, token, 0, boards)
}

// ReserveBuild hands out a new generation for boards without marking it
// as being built: live writers do not know of it, so that a replay can
// write it alone (and decide what live writes would race with) before
// BeginReservedBuild. Until then it is listed among the generations to
// delete (PendingDrops), so that the next replay deletes it if this one
// dies. The replay lock must be held by token.
func (s *Store) ReserveBuild(ctx context.Context, token string, boards []string) (int, error) {
	if err := s.knownBoards(boards); err != nil {
		return 0, err
	}
	v, err := s.gens(ctx, gensArgs{op: gensOpReserve, token: token, boards: boards})
	if err != nil {
		return 0, lockErr("reserving a generation", err)
	}
	g, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("reserving a generation: unexpected reply %v", v)
	}
	return int(g), nil
}

// BeginReservedBuild is BeginBuild of generation g, which ReserveBuild
// handed out (and which stops being listed to delete).
func (s *Store) BeginReservedBuild(ctx context.Context, token string, g int, boards []string) (stale map[string]int, err error) {
	if g <= 0 {
		return nil, fmt.Errorf("starting generation %d: not a reserved generation", g)
	}
	_, stale, err = s.beginBuild(ctx, token, g, boards)
	return stale, err
}

func (s *Store) beginBuild(ctx context.Context, token string, reserved int, boards []string) (g int, stale map[string]int, err error) {
	if err := s.knownBoards(boards); err != nil {
		return 0, nil, err
	}
	v, err := s.gens(ctx, gensArgs{op: gensOpBuild, token: token, gen: reserved, boards: boards})
	if err != nil {
		return 0, nil, lockErr("starting a generation", err)
	}
	out, _ := v.([]any)
	if len(out) == 0 {
		return 0, nil, fmt.Errorf("starting a generation: unexpected reply %v", v)
	}
	n, _ := out[0].(int64)
	stale = map[string]int{}
	for i := 1; i+1 < len(out); i += 2 {
		b, _ := out[i].(string)
		old, _ := strconv.Atoi(fmt.Sprint(out[i+1]))
		if old >= 0 {
			stale[b] = old
		}
	}
	_, _ = s.Generations(ctx) // refreshes the cache only
	return int(n), stale, nil
}

// DimsCount returns how many dims values a board has seen in this store's
// generation (1 for a board without dims that has data).
func (s *Store) DimsCount(ctx context.Context, board string) (int64, error) {
	if _, err := s.board(board); err != nil {
		return 0, err
	}
	return s.rdb.SCard(ctx, s.dimsKey(board)).Result()
}

// Switch makes generation g active for boards (those still building g),
// in one atomic change. The replay lock must be held by token, and every
// board must still be building g (or have switched to it): otherwise
// Redis lost the build's writes, and Switch fails with ErrReplayLock.
func (s *Store) Switch(ctx context.Context, token string, g int, boards []string) error {
	if _, err := s.gens(ctx, gensArgs{op: gensOpSwitch, token: token, gen: g, boards: boards}); err != nil {
		return lockErr("switching generations", err)
	}
	if _, err := s.Generations(ctx); err != nil {
		return err
	}
	// the API servers read the boards again, from the new generation
	// (WatchChanges drops their generations): a notice lost costs at most
	// their caches' TTL and genRefresh
	if err := s.PublishChanges(ctx, nil); err != nil && s.log != nil {
		s.log.Warn("the switch's change notice was not published", "err", err)
	}
	return nil
}

// PendingDrops returns, per board, the generations left to delete: the
// old active generation of every switch and the builds of replays that
// died, until MarkDropped.
func (s *Store) PendingDrops(ctx context.Context) (map[string][]int, error) {
	v, err := s.gens(ctx, gensArgs{op: gensOpPending})
	if err != nil {
		return nil, fmt.Errorf("reading generations to delete: %w", err)
	}
	flat, _ := v.([]any)
	out := map[string][]int{}
	for i := 0; i+1 < len(flat); i += 2 {
		b, _ := flat[i].(string)
		list, _ := flat[i+1].(string)
		for _, g := range strings.Split(list, ",") {
			if n, err := strconv.Atoi(g); err == nil && !slices.Contains(out[b], n) {
				out[b] = append(out[b], n)
			}
		}
	}
	return out, nil
}

// MarkDropped records that generation g of board is deleted. The replay
// lock must be held by token.
func (s *Store) MarkDropped(ctx context.Context, token, board string, g int) error {
	if _, err := s.gens(ctx, gensArgs{op: gensOpDropped, token: token, gen: g, boards: []string{board}}); err != nil {
		return lockErr("recording a deleted generation", err)
	}
	return nil
}

func lockErr(what string, err error) error {
	if redis.HasErrorPrefix(err, "REPLAYLOCK") || redis.HasErrorPrefix(err, "REPLAYLOST") {
		return fmt.Errorf("%s: %w: %v", what, ErrReplayLock, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (s *Store) knownBoards(boards []string) error {
	for _, b := range boards {
		if _, err := s.board(b); err != nil {
			return err
		}
	}
	return nil
}

// DropGeneration deletes every key of boards in generation g (their sorted
// sets, hashes, meta and dims registry) and, once no board is active or
// building in g, the generation's message IDs (shared by its boards). It
// makes one SCAN pass over the generation's board keys (on a cluster, over
// every master) and UNLINKs in chunks of chunk keys, so no call blocks
// Redis for long (UNLINK frees large values in the background). It returns
// the number of keys deleted.
func (s *Store) DropGeneration(ctx context.Context, g int, boards []string, chunk int) (int, error) {
	if chunk <= 0 {
		chunk = 200
	}
	if err := s.knownBoards(boards); err != nil {
		return 0, err
	}
	v := s.view(g)
	drop := map[string]bool{}
	var dims []string
	for _, b := range boards {
		drop[b] = true
		dims = append(dims, v.dimsKey(b))
	}
	pattern := globEscape(v.prefix) + ":{*"
	mine := func(key string) bool {
		rest := key[len(v.prefix)+2:] // after "<prefix>:{"
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return false
		}
		board, _, err := ParseTag(rest[:end])
		return err == nil && drop[board]
	}
	total, err := s.scanUnlink(ctx, v, pattern, mine, chunk)
	if err != nil {
		return total, err
	}
	n, err := v.unlinkKeys(ctx, dims)
	total += n
	if err != nil {
		return total, err
	}
	n, err = s.dropDedupe(ctx, g, chunk)
	return total + n, err
}

// dropDedupe deletes the message IDs of generation g (its dedupe
// namespace, docs/dedupe.md) once no board is active or building there:
// nothing writes it any more, so nothing would sweep it. It returns the
// keys deleted.
func (s *Store) dropDedupe(ctx context.Context, g int, chunk int) (int, error) {
	gens, err := s.Generations(ctx)
	if err != nil {
		return 0, err
	}
	for _, bg := range gens {
		if bg.Active == g || bg.Building == g {
			return 0, nil
		}
	}
	if g == 0 {
		for name := range s.boards {
			if _, ok := gens[name]; !ok {
				return 0, nil // never replayed: still in generation 0
			}
		}
	}
	v := s.view(g)
	pattern := globEscape(v.prefix) + ":d:*"
	if s.cluster {
		pattern = globEscape(v.prefix) + ":{*}:d:*"
	}
	return s.scanUnlink(ctx, v, pattern, func(string) bool { return true }, chunk)
}

// scanUnlink makes one SCAN pass over the keys matching pattern (on a
// cluster, over every master) and UNLINKs those that keep accepts, in
// chunks of chunk keys. It returns the number deleted.
func (s *Store) scanUnlink(ctx context.Context, v *Store, pattern string, keep func(string) bool, chunk int) (int, error) {
	scan := func(ctx context.Context, c redis.Cmdable) (int, error) {
		deleted := 0
		var cursor uint64
		var batch []string
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return deleted, err
			}
			for _, k := range keys {
				if keep(k) {
					batch = append(batch, k)
				}
			}
			for len(batch) >= chunk || (next == 0 && len(batch) > 0) {
				n := min(chunk, len(batch))
				d, err := v.unlinkKeys(ctx, batch[:n])
				deleted += d
				if err != nil {
					return deleted, err
				}
				batch = batch[n:]
			}
			if cursor = next; cursor == 0 {
				return deleted, nil
			}
		}
	}
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		total := 0
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			n, err := scan(ctx, c)
			mu.Lock()
			total += n
			mu.Unlock()
			return err
		})
		return total, err
	}
	return scan(ctx, s.rdb)
}

// unlinkKeys unlinks keys one command each (keys of a cluster live in
// different slots), in one pipeline.
func (s *Store) unlinkKeys(ctx context.Context, keys []string) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Unlink(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
	n := 0
	for _, c := range cmds {
		d, err := c.Result()
		if err != nil {
			return n, fmt.Errorf("deleting keys: %w", err)
		}
		n += int(d)
	}
	return n, nil
}

// globEscape escapes the glob metacharacters of SCAN MATCH.
func globEscape(s string) string {
	var sb strings.Builder
	for _, c := range []byte(s) {
		switch c {
		case '*', '?', '[', ']', '\\':
			sb.WriteByte('\\')
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// forgetGens drops the generations read (the next read reads them again)
// and returns the root store.
func (s *Store) forgetGens() *Store {
	root := s
	if s.root != nil {
		root = s.root
	}
	root.genMu.Lock()
	root.genCache, root.genAt = nil, time.Time{}
	root.genMu.Unlock()
	return root
}

// Forget drops what the store caches of Redis state (the dims values it
// registered, the generations and marks it read), so that the next writes
// and reads go to Redis: the caller found that Redis lost writes.
func (s *Store) Forget() {
	s.forgetDims()
	root := s.forgetGens()
	root.markMu.Lock()
	root.markCache, root.markAt = nil, time.Time{}
	root.markMu.Unlock()
}
