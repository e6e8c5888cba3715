package workload

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/rankd/rankd/config"
)

// TestWorkload checks the standard workload: its mix, skew and fields, that
// every event decodes and routes through the example config, and that a
// seed reproduces it.
func TestWorkload(t *testing.T) {
	const n = 50000
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	wl, err := New(Config{Seed: 42, Start: start, Step: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadBytes("example.yaml", config.Example())
	if err != nil {
		t.Fatal(err)
	}
	router, err := cfg.Router()
	if err != nil {
		t.Fatal(err)
	}
	topics := map[string]int{}
	anchors := map[string]int{}
	ids := map[string]bool{}
	var coins, news, updates int
	gifts := map[string]int{}
	for i := range n {
		ev := wl.Next()
		topics[ev.Topic]++
		if ids[ev.ID] {
			t.Fatalf("id %s twice", ev.ID)
		}
		ids[ev.ID] = true
		if want := start.Add(time.Duration(i) * 10 * time.Millisecond); !ev.Time.Equal(want) {
			t.Fatalf("event %d at %v, want %v", i, ev.Time, want)
		}
		var f map[string]any
		if err := json.Unmarshal(ev.Value, &f); err != nil {
			t.Fatalf("event %d is not JSON: %v: %s", i, err, ev.Value)
		}
		if f["id"] != ev.ID || int64(f["ts"].(float64)) != ev.Time.UnixMilli() || f["anchor_id"] != string(ev.Key) {
			t.Fatalf("event %d: id, ts or key differ from the JSON: %+v %s", i, ev, ev.Value)
		}
		anchor := f["anchor_id"].(string)
		anchors[anchor]++
		if f["room_id"] != "r"+anchor[1:] {
			t.Fatalf("room %v of anchor %s", f["room_id"], anchor)
		}
		switch ev.Topic {
		case "gift":
			gifts[f["gift_id"].(string)]++
			coins += int(f["coins"].(float64))
		case "comment":
			if f["news_id"] != nil {
				news++
			}
		}
		e, err := cfg.Schemas()[ev.Topic].Decode(ev.Topic, 0, int64(i), ev.Value, nil, ev.Time)
		if err != nil {
			t.Fatalf("event %d does not decode: %v: %s", i, err, ev.Value)
		}
		ups, err := router.Route(e)
		if err != nil {
			t.Fatalf("event %d does not route: %v: %s", i, err, ev.Value)
		}
		updates += len(ups)
	}
	share := func(topic string) float64 { return float64(topics[topic]) / n }
	for topic, want := range map[string]float64{"like": 0.7, "comment": 0.2, "gift": 0.1} {
		if got := share(topic); math.Abs(got-want) > 0.01 {
			t.Errorf("%s: %.3f of the events, want %.2f", topic, got, want)
		}
	}
	counts := slices.Sorted(func(yield func(int) bool) {
		for _, c := range anchors {
			if !yield(c) {
				return
			}
		}
	})
	top := counts[len(counts)-1]
	if float64(top)/n < 0.05 || len(anchors) < 5000 {
		t.Errorf("anchors not zipf-like: the top one has %d of %d events, %d distinct", top, n, len(anchors))
	}
	if s := float64(news) / float64(topics["comment"]); math.Abs(s-0.3) > 0.03 {
		t.Errorf("%.2f of comments have a news_id, want 0.3", s)
	}
	if len(gifts) != len(giftTable) || gifts["rose"] < gifts["carnival"] {
		t.Errorf("gift mix %v", gifts)
	}
	t.Logf("%d events: %v, %d anchors (top %d), gifts %v, %d coins, %d updates", n, topics, len(anchors), top, gifts, coins, updates)

	again, _ := New(Config{Seed: 42, Start: start, Step: 10 * time.Millisecond})
	first, _ := New(Config{Seed: 42, Start: start, Step: 10 * time.Millisecond})
	other, _ := New(Config{Seed: 43, Start: start, Step: 10 * time.Millisecond})
	for range 100 {
		a, b, c := again.Next(), first.Next(), other.Next()
		if string(a.Value) != string(b.Value) || a.Topic != b.Topic || string(a.Key) != string(b.Key) {
			t.Fatalf("same seed, different events:\n%s\n%s", a.Value, b.Value)
		}
		if a.ID == c.ID {
			t.Fatalf("seeds 42 and 43 share id %s", a.ID)
		}
	}
}

func TestWorkloadTopicsAndClock(t *testing.T) {
	wl, err := New(Config{Seed: 1, Topics: []string{"gift", "comment"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	before := time.Now().Add(-time.Second)
	for range 3000 {
		ev := wl.Next()
		seen[ev.Topic]++
		if ev.Time.Before(before) || ev.Time.After(time.Now().Add(time.Second)) {
			t.Fatalf("without Start, ts %v is not the wall clock", ev.Time)
		}
	}
	if seen["like"] != 0 || seen["gift"] == 0 || seen["comment"] < seen["gift"] {
		t.Errorf("topics gift,comment gave %v (want comment:gift ~ 2:1, no like)", seen)
	}
	if _, err := New(Config{Topics: []string{"follow"}}); err == nil {
		t.Error("unknown topic accepted")
	}
}
