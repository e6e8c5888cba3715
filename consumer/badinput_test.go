package consumer

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/internal/testenv/world"
	"github.com/rankd/rankd/ranking/ingest"
)

// TestBadInput produces a table of malformed messages between good ones
// (one partition per topic, so the order is known) and checks that each
// lands on the dead-letter topic with the expected reason and origin
// headers, that the good messages around them are applied (boards equal the
// oracle, including a late event that still counts on its total board),
// that the group commits everything, and that the worker keeps consuming.
func TestBadInput(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), 1)
	now := time.Now()
	at := now.Add(-2 * time.Hour).Truncate(time.Hour).Add(10 * time.Minute)
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	gift := func(id string, ts int64, extra string) string {
		return fmt.Sprintf(`{"id":%q,"ts":%d,"user_id":"u1","anchor_id":"a1","room_id":"r1","zone":"z1","gift_id":"rose","count":1,"coins":10%s}`,
			id, ts, extra)
	}
	big := `{"id":"big","ts":` + strconv.FormatInt(ms(at), 10) + `,"anchor_id":"a1","pad":"` + strings.Repeat("x", 2<<20) + `"}`

	tests := []struct {
		name   string
		topic  string
		value  string
		header []kafka.Header
		reason string // "" for a message that must not be dead-lettered
	}{
		{name: "good before", topic: "gift", value: gift("g1", ms(at), "")},
		{name: "not JSON", topic: "gift", value: `{"id":"nj","ts":`, reason: ingest.ReasonDecode},
		{name: "JSON array", topic: "gift", value: `[1,2,3]`, reason: ingest.ReasonDecode},
		{name: "JSON null", topic: "like", value: `null`, reason: ingest.ReasonDecode},
		{name: "empty value", topic: "comment", value: ``, reason: ingest.ReasonDecode},
		{name: "trailing data", topic: "gift", value: gift("td", ms(at), "") + `{}`, reason: ingest.ReasonDecode},
		{name: "wrong type", topic: "gift", value: `{"id":"wt","ts":1,"anchor_id":"a1","coins":"lots"}`, reason: ingest.ReasonValidation},
		{name: "ts not a number", topic: "like", value: `{"id":"ts","ts":"yesterday","anchor_id":"a1"}`, reason: ingest.ReasonValidation},
		{name: "fractional count", topic: "like", value: `{"id":"fc","ts":1,"anchor_id":"a1","count":1.5}`, reason: ingest.ReasonValidation},
		{name: "NaN", topic: "gift", value: `{"id":"nan","ts":1,"anchor_id":"a1","coins":NaN}`, reason: ingest.ReasonDecode},
		{name: "huge number", topic: "gift", value: gift("huge", ms(at), `,"count":1e400`), reason: ingest.ReasonOutOfRange},
		{name: "beyond int64", topic: "gift", value: gift("i65", ms(at), `,"coins":99999999999999999999`), reason: ingest.ReasonOutOfRange},
		{name: "beyond the board's exact range", topic: "gift", value: gift("range", ms(at), `,"coins":9007199254740991`), reason: ingest.ReasonOutOfRange},
		{name: "missing dims field", topic: "gift", value: `{"id":"nd","ts":` + strconv.FormatInt(ms(at), 10) + `,"anchor_id":"a1","user_id":"u1","zone":"z1","coins":5}`, reason: ingest.ReasonValidation},
		{name: "missing member", topic: "gift", value: `{"id":"nm","ts":` + strconv.FormatInt(ms(at), 10) + `,"coins":5}`, reason: ingest.ReasonNoMember},
		{name: "invalid UTF-8", topic: "gift", value: "{\"id\":\"bad\xff\",\"ts\":1,\"anchor_id\":\"a1\"}", reason: ingest.ReasonDecode},
		{name: "invalid UTF-8 id header", topic: "like", value: `{"ts":1,"anchor_id":"a1"}`,
			header: []kafka.Header{{Key: "id", Value: []byte("\xfe\xff")}}, reason: ingest.ReasonValidation},
		{name: "2 MB payload", topic: "gift", value: big, reason: ingest.ReasonTooLarge},
		{name: "ts far in the future", topic: "gift", value: gift("fut", ms(now.AddDate(1, 0, 0)), ""), reason: ingest.ReasonFuture},
		{name: "good later", topic: "gift", value: gift("g2", ms(at.Add(time.Hour)), "")},
		{name: "late", topic: "gift", value: gift("late", ms(at), ""), reason: ingest.ReasonLate},
		{name: "duplicate of a good one", topic: "gift", value: gift("g1", ms(at), "")},
		{name: "duplicate of the late one", topic: "gift", value: gift("late", ms(at), ""), reason: ingest.ReasonLate},
		{name: "filtered comment", topic: "comment", value: `{"id":"c0","ts":` + strconv.FormatInt(ms(at), 10) + `,"anchor_id":"a1","news_id":""}`},
		{name: "negative like", topic: "like", value: `{"id":"neg","ts":` + strconv.FormatInt(ms(at), 10) + `,"anchor_id":"a2","count":-5}`, reason: ingest.ReasonValidation},
		{name: "ts 0", topic: "like", value: `{"id":"t0","ts":0,"anchor_id":"a2"}`, reason: ingest.ReasonValidation},
		{name: "10,000-char member id", topic: "like", value: `{"id":"lm","ts":` + strconv.FormatInt(ms(at), 10) + `,"anchor_id":"` + strings.Repeat("a", 10000) + `"}`, reason: ingest.ReasonValidation},
		{name: "5 KB room id", topic: "gift", value: gift("lr", ms(at), `,"room_id":"`+strings.Repeat("r", 5000)+`"`), reason: ingest.ReasonValidation},
		{name: "9 KB message id", topic: "gift", value: gift(strings.Repeat("i", 9000), ms(at), ""), reason: ingest.ReasonValidation},
		{name: "good after", topic: "like", value: `{"id":"l9","ts":` + strconv.FormatInt(ms(at.Add(time.Hour)), 10) + `,"anchor_id":"a3"}`},
	}
	type origin struct {
		topic  string
		offset int64
	}
	var msgs []world.Msg
	want := map[origin]string{}
	names := map[origin]string{}
	offsets := map[string]int64{}
	for _, tt := range tests {
		msgs = append(msgs, world.Msg{Topic: tt.topic, Key: "k", Value: []byte(tt.value), Headers: tt.header})
		o := origin{f.KafkaOf[tt.topic], offsets[tt.topic]}
		names[o] = tt.name
		if tt.reason != "" {
			want[o] = tt.reason
		}
		offsets[tt.topic]++
	}

	r := f.start(f.consumerConfig(), f.sink())
	f.waitReady(r) // exactly-once dead letters hold only without a rebalance mid-batch
	f.Produce(f.NewWriter(), msgs)
	f.waitCommitted(time.Minute, r)

	// The dead-letter topic holds exactly the bad messages.
	t.Logf("%d messages produced, %d of them bad", len(msgs), len(want))
	got := map[origin]string{}
	lateBoards := map[origin]string{} // the boards header of late dead letters
	for _, m := range readAll(t, f.Broker.Addrs(), f.DLQ, len(want)) {
		h := map[string]string{}
		for _, x := range m.Headers {
			if _, dup := h[x.Key]; !dup {
				h[x.Key] = string(x.Value)
			}
		}
		off, err := strconv.ParseInt(h[HeaderOffset], 10, 64)
		if err != nil || h[HeaderPartition] != "0" || h[HeaderError] == "" {
			t.Errorf("dead letter with headers %q", h)
		}
		o := origin{h[HeaderTopic], off}
		got[o] = h[HeaderReason]
		if h[HeaderReason] == ingest.ReasonLate {
			lateBoards[o] = h[HeaderBoards]
		}
		if h[HeaderReason] == ingest.ReasonTooLarge {
			if len(m.Value) != 0 || h[HeaderTruncated] != strconv.Itoa(len(big)) {
				t.Errorf("too_large dead letter: value of %d bytes, truncated header %q; want none and %d", len(m.Value), h[HeaderTruncated], len(big))
			}
		} else if want[o] != "" && h[HeaderTruncated] != "" {
			t.Errorf("dead letter %v truncated", o)
		}
	}
	for o, reason := range want {
		if got[o] != reason {
			t.Errorf("%s: dead-lettered as %q, want %q", names[o], got[o], reason)
		}
	}
	for o, reason := range got {
		if want[o] == "" {
			t.Errorf("%s (%s@%d): dead-lettered as %q, want applied", names[o], o.topic, o.offset, reason)
		}
	}
	for _, reason := range []string{ingest.ReasonDecode, ingest.ReasonValidation, ingest.ReasonOutOfRange,
		ingest.ReasonNoMember, ingest.ReasonTooLarge, ingest.ReasonFuture, ingest.ReasonLate} {
		n := 0
		for _, r := range want {
			if r == reason {
				n++
			}
		}
		if c := testutil.ToFloat64(f.metrics().deadLetters.WithLabelValues(reason)); c != float64(n) {
			t.Errorf("rankd_consumer_dead_letters_total{reason=%q} = %v, want %d", reason, c, n)
		}
	}
	if total(f.metrics().late) == 0 || testutil.ToFloat64(f.metrics().duplicates) == 0 {
		t.Error("late or duplicate updates not counted")
	}
	// Both copies of the late message name the same boards; its updates are
	// counted late once, not again for the duplicate.
	var lateHdr []string
	for o, b := range lateBoards {
		if names[o] == "late" || names[o] == "duplicate of the late one" {
			lateHdr = append(lateHdr, b)
		}
	}
	if len(lateHdr) != 2 || lateHdr[0] != lateHdr[1] || !strings.Contains(lateHdr[0], "anchor_hot_30m") {
		t.Errorf("boards headers of the late message and its duplicate = %q, want two equal lists naming anchor_hot_30m", lateHdr)
	} else if n := float64(len(strings.Split(lateHdr[0], ","))); total(f.metrics().late) != n {
		t.Errorf("rankd_sink_late_total = %v, want %v (the late message's boards, once)", total(f.metrics().late), n)
	}

	// The worker is still there: a message produced now is applied.
	if r.exited() {
		t.Fatalf("Run returned: %v", r.err)
	}
	more := world.Msg{Topic: "gift", Key: "k", Value: []byte(gift("g3", ms(at.Add(time.Hour)), ""))}
	f.Produce(f.NewWriter(), []world.Msg{more})
	f.waitCommitted(time.Minute, r)
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	o, _ := f.Reference(append(msgs, more))
	f.Compare(o)
}

// readAll reads n messages from partition 0 of topic from the start and
// checks that no more follow.
func readAll(t *testing.T, addrs []string, topic string, n int) []kafka.Message {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: topic, Partition: 0,
		MaxBytes: 4 << 20, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	if err := r.SetOffset(kafka.FirstOffset); err != nil {
		t.Fatal(err)
	}
	var out []kafka.Message
	for len(out) < n {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		m, err := r.ReadMessage(ctx)
		cancel()
		if err != nil {
			t.Fatalf("reading %s after %d of %d messages: %v", topic, len(out), n, err)
		}
		out = append(out, m)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if m, err := r.ReadMessage(ctx); err == nil {
		t.Errorf("%s holds more than %d messages: offset %d %q", topic, n, m.Offset, slices.Clip(m.Value))
	}
	return out
}
