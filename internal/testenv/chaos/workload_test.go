package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// The workload: the gift, like and comment JSON events of the example
// config, as a live-streaming platform sends them, with what a real feed
// has besides:
//
//   - duplicates (3%): an event sent again, same ID, key and value, a few
//     hundred messages later, as a producer retry would;
//   - disorder (30%): event times up to 3 minutes behind the clock, within
//     the default grace (5m);
//   - late events (0.5%): 40 minutes to 3 hours behind the clock, past the
//     grace of the half-hour boards: dead-lettered as late;
//   - bad messages (0.05%): not JSON, a bad ts, a missing field, a time far
//     in the future: dead-lettered.
//
// Event times follow an accelerated clock (eventClock), so that a run of a
// minute covers a day and more of boards (half-hour periods, days,
// rolling windows) without ever reaching the present.
const (
	wlAnchors = 3000
	wlUsers   = 50_000
	wlNews    = 500
	wlZones   = 8

	wlDupP      = 0.03
	wlBadP      = 0.0005
	wlLateP     = 0.005
	wlDisorderP = 0.30
)

var (
	wlZoneNames = [wlZones]string{"north", "south", "east", "west", "central", "northeast", "northwest", "southwest"}
	wlTexts     = []string{"666", "hello", "好看", "主播加油", "nice song", "哈哈哈"}
	wlGifts     = []struct {
		id     string
		coins  int64
		weight int
	}{{"rose", 1, 50}, {"heart", 10, 25}, {"ice_castle", 520, 12}, {"sports_car", 1000, 8}, {"rocket", 5000, 4}, {"carnival", 30000, 1}}
)

// eventClock is the event time of the workload: t0 plus the wall time
// since wall0 times speed, never later than an hour before the present
// (future_skew and the grace of the current periods stay out of play).
type eventClock struct {
	t0    time.Time
	wall0 time.Time
	speed float64
}

func (c eventClock) now() time.Time {
	t := c.t0.Add(time.Duration(float64(time.Since(c.wall0)) * c.speed))
	if limit := time.Now().Add(-time.Hour); t.After(limit) {
		t = limit
	}
	return t
}

// newEventClock returns a clock that covers span of event time in run of
// wall time, starting 40 hours ago (so a run may last twice as long as
// planned before the clock stops at its limit).
func newEventClock(span, run time.Duration) eventClock {
	now := time.Now()
	return eventClock{t0: now.Add(-40 * time.Hour).Truncate(time.Second), wall0: now, speed: float64(span) / float64(run)}
}

// workloadStats counts what a workload generated.
type workloadStats struct {
	Fresh, Dups, Disordered, Late, Bad int64
}

// workload generates the messages. It is not safe for concurrent use.
type workload struct {
	rng       *rand.Rand
	anchors   *rand.Zipf
	users     *rand.Zipf
	news      *rand.Zipf
	clock     func() time.Time
	prefix    string
	n         int64
	newsEpoch time.Time
	recent    []kafka.Message // the latest valid messages, to duplicate
	pending   []kafka.Message // duplicates due
	stats     workloadStats
}

func newWorkload(seed int64, clock func() time.Time) *workload {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xc4a05))
	return &workload{
		rng:       rng,
		anchors:   rand.NewZipf(rng, 1.1, 1, wlAnchors-1),
		users:     rand.NewZipf(rng, 1.05, 1, wlUsers-1),
		news:      rand.NewZipf(rng, 1.2, 1, wlNews-1),
		clock:     clock,
		prefix:    strconv.FormatInt(seed, 36) + "-",
		newsEpoch: clock().Truncate(time.Hour),
	}
}

// next returns the next message.
func (w *workload) next() kafka.Message {
	if len(w.pending) > 0 && w.rng.IntN(4) == 0 {
		m := w.pending[0]
		w.pending = w.pending[1:]
		w.stats.Dups++
		return m
	}
	if w.rng.Float64() < wlBadP {
		w.stats.Bad++
		return w.bad()
	}
	m := w.fresh()
	w.recent = append(w.recent, m)
	if len(w.recent) > 512 {
		w.recent = w.recent[len(w.recent)-512:]
	}
	if w.rng.Float64() < wlDupP {
		w.pending = append(w.pending, w.recent[w.rng.IntN(len(w.recent))])
	}
	return m
}

// fresh returns a new event.
func (w *workload) fresh() kafka.Message {
	n := w.n
	w.n++
	w.stats.Fresh++
	ts := w.clock()
	switch r := w.rng.Float64(); {
	case r < wlLateP:
		ts = ts.Add(-time.Duration(40*60+w.rng.IntN(140*60)) * time.Second)
		w.stats.Late++
	case r < wlLateP+wlDisorderP:
		ts = ts.Add(-time.Duration(w.rng.IntN(180_000)) * time.Millisecond)
		w.stats.Disordered++
	}
	var topic string
	switch r := w.rng.IntN(100); {
	case r < 70:
		topic = "like"
	case r < 90:
		topic = "comment"
	default:
		topic = "gift"
	}
	anchor := wlAnchors + w.anchors.Uint64()*7919%wlAnchors
	user := wlUsers + w.users.Uint64()*7919%wlUsers
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"id":"%s%d","ts":%d,"user_id":"u%d","anchor_id":"a%d","room_id":"r%d","zone":"%s"`,
		w.prefix, n, ts.UnixMilli(), user, anchor, anchor, wlZoneNames[anchor*31%wlZones])
	switch topic {
	case "gift":
		total := 0
		for _, g := range wlGifts {
			total += g.weight
		}
		r := w.rng.IntN(total)
		g := wlGifts[0]
		for _, x := range wlGifts {
			if r < x.weight {
				g = x
				break
			}
			r -= x.weight
		}
		count := int64(1)
		if w.rng.IntN(10) == 0 {
			count = 2 + w.rng.Int64N(8)
		}
		fmt.Fprintf(&b, `,"gift_id":"%s","count":%d,"coins":%d`, g.id, count, g.coins*count)
	case "like":
		if w.rng.IntN(5) == 0 {
			fmt.Fprintf(&b, `,"count":%d`, 2+w.rng.Int64N(9))
		}
	case "comment":
		if w.rng.IntN(10) < 3 {
			k := w.news.Uint64()
			fmt.Fprintf(&b, `,"news_id":"n%d","news_ts":%d`, k, w.newsEpoch.Add(-time.Duration(k)*37*time.Minute).UnixMilli())
		}
		fmt.Fprintf(&b, `,"text":"%s"`, wlTexts[w.rng.IntN(len(wlTexts))])
	}
	b.WriteByte('}')
	return kafka.Message{Topic: topic, Key: []byte("a" + strconv.FormatUint(anchor, 10)), Value: b.Bytes()}
}

// bad returns a message that must be dead-lettered; each is unique.
func (w *workload) bad() kafka.Message {
	n := w.n
	w.n++
	id := w.prefix + "bad" + strconv.FormatInt(n, 10)
	var topic, value string
	switch w.rng.IntN(4) {
	case 0:
		topic, value = "gift", "not json at all "+id
	case 1:
		topic, value = "like", `{"id":"`+id+`","ts":"yesterday","anchor_id":"a1"}`
	case 2:
		topic, value = "gift", `{"id":"`+id+`","ts":1700000000000,"coins":5}`
	default:
		topic, value = "comment", `{"id":"`+id+`","ts":9999999999999,"news_id":"n1"}`
	}
	return kafka.Message{Topic: topic, Key: []byte("bad"), Value: []byte(value)}
}

// messageID returns the "id" of a JSON event, or "" when it has none.
func messageID(value []byte) string {
	var ev struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(value, &ev) != nil {
		return ""
	}
	return ev.ID
}

// logKey identifies a message's event: its ID, or its whole value when it
// has none.
func logKey(value []byte) string {
	if id := messageID(value); id != "" {
		return id
	}
	return string(value)
}

// producer sends the workload at a steady rate through outages: a write
// that fails is retried (the messages the broker acknowledged are not sent
// again) until it is acknowledged or the producer stops. It records what
// was acknowledged: every such message must be in the log.
type producer struct {
	w    *kafka.Writer
	wl   *workload
	rate float64 // messages per second

	mu     sync.Mutex
	acked  map[string]bool // IDs of acknowledged events, values of bad messages
	maybe  map[string]bool // the same of messages whose write was cut short by the end
	nAcked int64           // acknowledged messages, duplicates included
	bytes  int64           // their keys and values

	retries   atomic.Int64 // failed writes retried
	resent    atomic.Int64 // messages sent again after a failed write
	longestMu sync.Mutex
	longest   time.Duration // longest time a write waited for its acknowledgement
}

func newProducer(brokers []string, wl *workload, rate float64) *producer {
	return &producer{
		w: &kafka.Writer{
			Addr:         kafka.TCP(brokers...),
			Balancer:     &kafka.Hash{},
			BatchSize:    1000,
			BatchBytes:   4 << 20,
			BatchTimeout: 5 * time.Millisecond,
			RequiredAcks: kafka.RequireAll,
			// Fail fast; run retries with its own loop, logging nothing.
			MaxAttempts:     2,
			WriteBackoffMin: 50 * time.Millisecond,
			WriteBackoffMax: 200 * time.Millisecond,
			Transport:       &kafka.Transport{},
		},
		wl:    wl,
		rate:  rate,
		acked: map[string]bool{},
		maybe: map[string]bool{},
	}
}

// run sends until ctx is done. A producer that fell behind its rate (an
// outage) catches up by at most two seconds' worth of messages.
func (p *producer) run(ctx context.Context) {
	const chunk = 500
	start := time.Now()
	var generated int64
	for ctx.Err() == nil {
		due := int64(p.rate*time.Since(start).Seconds()) - generated
		if lim := int64(2 * p.rate); due > lim {
			generated += due - lim
			due = lim
		}
		if due <= 0 {
			sleepCtx(ctx, 10*time.Millisecond)
			continue
		}
		n := min(due, chunk)
		msgs := make([]kafka.Message, n)
		for i := range msgs {
			msgs[i] = p.wl.next()
		}
		generated += n
		p.write(ctx, msgs)
	}
}

// send writes n messages of the workload at full speed (retrying) and
// returns when they are acknowledged or ctx is done.
func (p *producer) send(ctx context.Context, n int) {
	const chunk = 2000
	for n > 0 && ctx.Err() == nil {
		msgs := make([]kafka.Message, min(n, chunk))
		for i := range msgs {
			msgs[i] = p.wl.next()
		}
		n -= len(msgs)
		p.write(ctx, msgs)
	}
}

func (p *producer) write(ctx context.Context, msgs []kafka.Message) {
	start := time.Now()
	pending := msgs
	for len(pending) > 0 {
		err := p.w.WriteMessages(ctx, pending...)
		if err == nil {
			p.ack(pending)
			break
		}
		var we kafka.WriteErrors
		if errors.As(err, &we) && len(we) == len(pending) {
			var ok, failed []kafka.Message
			for i, e := range we {
				if e == nil {
					ok = append(ok, pending[i])
				} else {
					failed = append(failed, pending[i])
				}
			}
			p.ack(ok)
			pending = failed
		}
		if ctx.Err() != nil {
			p.mu.Lock()
			for _, m := range pending {
				p.maybe[logKey(m.Value)] = true
			}
			p.mu.Unlock()
			return
		}
		p.retries.Add(1)
		p.resent.Add(int64(len(pending)))
		sleepCtx(ctx, 100*time.Millisecond)
	}
	p.longestMu.Lock()
	p.longest = max(p.longest, time.Since(start))
	p.longestMu.Unlock()
}

func (p *producer) ack(msgs []kafka.Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		p.acked[logKey(m.Value)] = true
		p.bytes += int64(len(m.Key) + len(m.Value))
	}
	p.nAcked += int64(len(msgs))
}

// ackedKeys returns the logKeys of the acknowledged messages, and the
// number of acknowledged messages.
func (p *producer) ackedKeys() ([]string, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]string, 0, len(p.acked))
	for k := range p.acked {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, p.nAcked
}

// sentKey reports whether the producer sent the message of key: it was
// acknowledged, or its write was cut short when the producer stopped.
func (p *producer) sentKey(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked[key] || p.maybe[key]
}

// cutShort returns how many distinct messages had their write cut short
// by the producer's stop (in the log or not).
func (p *producer) cutShort() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.maybe)
}

func (p *producer) ackedBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes
}

func (p *producer) acknowledged() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nAcked
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
