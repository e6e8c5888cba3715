// Package workload generates the standard workload of rankd's load
// generator (`rankd produce`, `rankd dev`) and benchmark (`rankd bench`),
// and of the tests and store benchmarks that send it. It is shared by the
// binary and by tests outside cmd/rankd (ranking/store's
// BenchmarkApplyWorkload), hence here and not under cmd/rankd/internal.
package workload

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// The standard workload: the traffic of a live-streaming platform, as the
// example config expects it (gift, like and comment JSON).
//
//   - topics: 70% like, 20% comment, 10% gift (renormalized over the
//     topics asked for);
//   - anchors: zipf(s=1.1) over 100,000; users: zipf(s=1.05) over 1,000,000;
//   - room and zone derived from the anchor (one room per anchor, 8 zones);
//   - gifts from a small price table, mostly single, sometimes combos;
//     coins = price × count;
//   - likes: count absent (1) most of the time, else a burst of 2..10;
//   - comments: a short text; 30% comment a news item (zipf over 2,000),
//     with news_id and the item's fixed publish time news_ts.
//
// Event IDs are "<seed>-<n>": unique within a seed and the same for the
// same seed, so a rerun with a seed resends the same events (which rankd
// deduplicates) and different seeds never collide.
const (
	numAnchors = 100_000
	numUsers   = 1_000_000
	numNews    = 2_000
	numZones   = 8
)

// Config configures a Generator.
type Config struct {
	Seed int64
	// Topics to generate, among gift, like and comment; empty: all three.
	Topics []string
	// Start, if set, is the ts of the first event and Step the ts increment
	// per event (reproducible runs); otherwise every event has the wall
	// clock's time.
	Start time.Time
	Step  time.Duration
}

// topicShares are the topics of the standard workload with their share.
var topicShares = []topicShare{{"like", 70}, {"comment", 20}, {"gift", 10}}

type topicShare struct {
	name   string
	weight int
}

// gift is one entry of the price table.
type gift struct {
	id     string
	coins  int64
	weight int
}

var giftTable = []gift{
	{"rose", 1, 50},
	{"heart", 10, 25},
	{"ice_castle", 520, 12},
	{"sports_car", 1000, 8},
	{"rocket", 5000, 4},
	{"carnival", 30000, 1},
}

var zones = [numZones]string{"north", "south", "east", "west", "central", "northeast", "northwest", "southwest"}

var commentTexts = []string{"666", "hello", "好看", "主播加油", "nice song", "first time here", "哈哈哈", "again!"}

// Generator generates the standard workload. It is not safe for concurrent
// use.
type Generator struct {
	cfg       Config
	rng       *rand.Rand
	anchors   *rand.Zipf
	users     *rand.Zipf
	news      *rand.Zipf
	topics    []string // cumulative weights below
	cum       []int
	giftCum   []int
	newsEpoch time.Time // news item k was published at newsEpoch - k×37min
	prefix    string
	n         int64
	buf       []byte
}

// Event is one generated event.
type Event struct {
	Topic string
	Key   []byte // the anchor id: keeps an anchor's events in one partition
	Value []byte // the JSON event; owned by the caller
	ID    string
	Time  time.Time
}

// New returns a Generator; it fails for an unknown topic.
func New(cfg Config) (*Generator, error) {
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x72616e6b64))
	w := &Generator{
		cfg:     cfg,
		rng:     rng,
		anchors: rand.NewZipf(rng, 1.1, 1, numAnchors-1),
		users:   rand.NewZipf(rng, 1.05, 1, numUsers-1),
		news:    rand.NewZipf(rng, 1.2, 1, numNews-1),
		prefix:  strconv.FormatInt(cfg.Seed, 10) + "-",
	}
	for _, t := range cfg.Topics {
		if !slices.ContainsFunc(topicShares, func(wt topicShare) bool { return wt.name == t }) {
			return nil, fmt.Errorf("unknown topic %q: the workload has gift, like and comment", t)
		}
	}
	total := 0
	for _, t := range topicShares {
		if len(cfg.Topics) == 0 || slices.Contains(cfg.Topics, t.name) {
			total += t.weight
			w.topics = append(w.topics, t.name)
			w.cum = append(w.cum, total)
		}
	}
	total = 0
	for _, g := range giftTable {
		total += g.weight
		w.giftCum = append(w.giftCum, total)
	}
	w.newsEpoch = cfg.Start
	if w.newsEpoch.IsZero() {
		w.newsEpoch = time.Now()
	}
	w.newsEpoch = w.newsEpoch.Truncate(time.Hour)
	return w, nil
}

// pick returns the index of the first cumulative weight above a random
// draw.
func (w *Generator) pick(cum []int) int {
	r := w.rng.IntN(cum[len(cum)-1])
	for i, c := range cum {
		if r < c {
			return i
		}
	}
	return len(cum) - 1
}

// scramble maps a popularity rank to an id of n digits' range, so that
// the most popular anchor is not the first id: n + a bijection of [0, n)
// (n coprime with 7919).
func scramble(rank uint64, n uint64) uint64 { return n + rank*7919%n }

// Next returns the next event.
func (w *Generator) Next() Event {
	n := w.n
	w.n++
	ts := time.Now()
	if !w.cfg.Start.IsZero() {
		ts = w.cfg.Start.Add(time.Duration(n) * w.cfg.Step)
	}
	ms := ts.UnixMilli()
	topic := w.topics[w.pick(w.cum)]
	anchor := scramble(w.anchors.Uint64(), numAnchors)
	user := scramble(w.users.Uint64(), numUsers)
	id := w.prefix + strconv.FormatInt(n, 10)

	b := w.buf[:0]
	b = append(b, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","ts":`...)
	b = strconv.AppendInt(b, ms, 10)
	b = append(b, `,"user_id":"u`...)
	b = strconv.AppendUint(b, user, 10)
	b = append(b, `","anchor_id":"a`...)
	keyStart := len(b) - 1
	b = strconv.AppendUint(b, anchor, 10)
	key := slices.Clone(b[keyStart:])
	b = append(b, `","room_id":"r`...)
	b = strconv.AppendUint(b, anchor, 10)
	b = append(b, `","zone":"`...)
	b = append(b, zones[anchor*31%numZones]...)
	b = append(b, '"')
	switch topic {
	case "gift":
		g := giftTable[w.pick(w.giftCum)]
		count := int64(1)
		switch r := w.rng.IntN(100); {
		case r < 5:
			count = []int64{10, 66, 99, 520}[w.rng.IntN(4)]
		case r < 20:
			count = 2 + w.rng.Int64N(4)
		}
		b = append(b, `,"gift_id":"`...)
		b = append(b, g.id...)
		b = append(b, `","count":`...)
		b = strconv.AppendInt(b, count, 10)
		b = append(b, `,"coins":`...)
		b = strconv.AppendInt(b, g.coins*count, 10)
	case "like":
		if w.rng.IntN(5) == 0 {
			b = append(b, `,"count":`...)
			b = strconv.AppendInt(b, 2+w.rng.Int64N(9), 10)
		}
	case "comment":
		if w.rng.IntN(10) < 3 {
			k := w.news.Uint64()
			b = append(b, `,"news_id":"n`...)
			b = strconv.AppendUint(b, k, 10)
			b = append(b, `","news_ts":`...)
			b = strconv.AppendInt(b, w.newsEpoch.Add(-time.Duration(k)*37*time.Minute).UnixMilli(), 10)
		}
		b = append(b, `,"text":"`...)
		b = append(b, commentTexts[w.rng.IntN(len(commentTexts))]...)
		b = append(b, '"')
	}
	b = append(b, '}')
	w.buf = b
	return Event{Topic: topic, Key: key, Value: slices.Clone(b), ID: id, Time: time.UnixMilli(ms)}
}
