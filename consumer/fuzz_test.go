package consumer

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/ingest"
	"github.com/rankd/rankd/ranking/store"
)

// FuzzSink fuzzes the decode and route half of RankingSink (no Redis) with
// the example config: whatever the bytes, a message is either dead-lettered
// with a known reason and no updates, or decoded into updates that the
// store can take (known board, right dims, non-empty member, the event's ID
// and time, a value within the board's range); a second copy of it in the
// same batch adds no updates and gets the same verdict; planning is
// deterministic. The seed corpus (below and testdata/fuzz/FuzzSink) runs in
// the default suite; explore with
//
//	go test ./consumer -run '^$' -fuzz FuzzSink -fuzztime 1m
func FuzzSink(f *testing.F) {
	cfg := loadExample(f)
	router, err := cfg.Router()
	if err != nil {
		f.Fatal(err)
	}
	// The store is never called: plan only decodes and routes.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	st, err := store.New(rdb, cfg.Boards())
	if err != nil {
		f.Fatal(err)
	}
	sink, err := NewRankingSink(cfg.Schemas(), router, st)
	if err != nil {
		f.Fatal(err)
	}
	boards := map[string]*ranking.Board{}
	for _, b := range cfg.Boards() {
		boards[b.Name] = b
	}
	reasons := []string{ingest.ReasonDecode, ingest.ReasonValidation, ingest.ReasonTooLarge, ingest.ReasonFuture,
		ingest.ReasonOutOfRange, ingest.ReasonNoMember, ingest.ReasonExpression, ingest.ReasonNoRoute}
	topics := []string{"gift", "like", "comment", "other"}
	msgTime := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

	f.Add(uint8(0), []byte(`{"id":"g1","ts":1763726400000,"user_id":"u1","anchor_id":"a1","room_id":"r1","zone":"z1","gift_id":"ice_castle","count":2,"coins":500}`), []byte(nil))
	f.Add(uint8(1), []byte(`{"id":"l1","ts":1763726400000,"anchor_id":"a1"}`), []byte(nil))
	f.Add(uint8(1), []byte(`{"anchor_id":7,"count":3}`), []byte("hdr-id"))
	f.Add(uint8(2), []byte(`{"id":"c1","ts":1763726400000,"anchor_id":"a1","news_id":"n1","news_ts":1763700000000,"text":"hi"}`), []byte(nil))
	f.Add(uint8(2), []byte(`{"id":"c2","news_id":"","text":"filtered"}`), []byte(nil))
	f.Add(uint8(0), []byte(`{"id":"x","coins":1e400}`), []byte(nil))
	f.Add(uint8(0), []byte(`{"id":"x","anchor_id":"a","coins":9007199254740991}`), []byte(nil))
	f.Add(uint8(0), []byte(`{"id":"x","coins":NaN}`), []byte(nil))
	f.Add(uint8(0), []byte("{\"id\":\"\xff\"}"), []byte("\xfe"))
	f.Add(uint8(0), []byte(`{"id":"x","ts":99999999999999,"anchor_id":"a"}`), []byte(nil))
	f.Add(uint8(3), []byte(`{"id":"o"}`), []byte(nil))
	f.Add(uint8(1), []byte(`null`), []byte(nil))
	f.Add(uint8(1), []byte(`{"id":"d","count":-1.0e0,"anchor_id":"a"}`), []byte(nil))

	f.Fuzz(func(t *testing.T, topic uint8, value, hdrID []byte) {
		m := kafka.Message{Topic: topics[int(topic)%len(topics)], Partition: 1, Offset: 7, Value: value, Time: msgTime}
		if len(hdrID) > 0 {
			m.Headers = []kafka.Header{{Key: "id", Value: hdrID}}
		}
		start := map[partitionKey]streamPos{{m.Topic, m.Partition}: {next: m.Offset}}
		p := sink.plan([]kafka.Message{m, m}, start)
		first, second := p.msgs[0], p.msgs[1]
		if first.reason != "" {
			if !slices.Contains(reasons, first.reason) {
				t.Fatalf("unknown reason %q (%v)", first.reason, first.err)
			}
			if first.err == nil || first.hi != first.lo {
				t.Fatalf("dead letter %q with error %v and %d updates", first.reason, first.err, first.hi-first.lo)
			}
			if second.reason != first.reason || second.dupOf != -1 {
				t.Fatalf("copy of a failed message: reason %q, dupOf %d; want %q, -1", second.reason, second.dupOf, first.reason)
			}
		} else {
			if first.ev == nil {
				t.Fatal("no dead-letter reason and no event")
			}
			for _, u := range p.ups[first.lo:first.hi] {
				b := boards[u.Board]
				codec, ok := st.Codec(u.Board)
				switch {
				case b == nil || !ok:
					t.Fatalf("update for unknown board %q", u.Board)
				case len(u.Dims) != len(b.Dims):
					t.Fatalf("board %s: %d dims, want %d", u.Board, len(u.Dims), len(b.Dims))
				case u.Member == "":
					t.Fatalf("board %s: empty member", u.Board)
				case u.MsgID != first.ev.ID || u.MsgID == "" || !u.Time.Equal(first.ev.Time):
					t.Fatalf("update %+v does not carry the event's ID %q and time %v", u, first.ev.ID, first.ev.Time)
				case u.Value > codec.MaxValue() || u.Value < -codec.MaxValue():
					t.Fatalf("board %s: value %d beyond ±%d", u.Board, u.Value, codec.MaxValue())
				}
			}
		}
		if first.ev != nil && first.reason == "" && (second.dupOf != 0 || second.hi != second.lo) {
			t.Fatalf("in-batch copy: dupOf %d, %d updates; want 0 and none", second.dupOf, second.hi-second.lo)
		}
		if again := sink.plan([]kafka.Message{m, m}, start); !reflect.DeepEqual(again.ups, p.ups) {
			t.Fatalf("planning is not deterministic:\n%+v\n%+v", p.ups, again.ups)
		}
	})
}
