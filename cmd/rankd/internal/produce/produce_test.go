package produce_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/cmd/rankd/internal/produce"
	"github.com/rankd/rankd/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fakeWriter records what Pace writes (Pace's unit tests; Run writes to a
// real broker below).
type fakeWriter struct {
	mu    sync.Mutex
	msgs  []kafka.Message
	calls int
	fail  error
}

func (f *fakeWriter) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.calls++
	f.msgs = append(f.msgs, msgs...)
	return nil
}

// counter is an endless source of numbered messages.
func counter() produce.Source {
	n := 0
	return func() (kafka.Message, bool, error) {
		n++
		return kafka.Message{Topic: "t", Value: fmt.Appendf(nil, "%d", n)}, true, nil
	}
}

func TestPace(t *testing.T) {
	t.Run("count", func(t *testing.T) {
		w := &fakeWriter{}
		n, err := produce.Pace(t.Context(), w, counter(), produce.Options{Count: 10000})
		if err != nil || n != 10000 || len(w.msgs) != 10000 || w.calls != 3 {
			t.Fatalf("Pace = %d, %v; wrote %d in %d calls; want 10000 in 3 (chunks of %d)", n, err, len(w.msgs), w.calls, produce.Chunk)
		}
		if got := string(w.msgs[9999].Value); got != "10000" {
			t.Errorf("last message %q, want 10000 (in order)", got)
		}
	})
	t.Run("rate and count", func(t *testing.T) {
		w := &fakeWriter{}
		n, err := produce.Pace(t.Context(), w, counter(), produce.Options{Rate: 20000, Count: 500})
		if err != nil || n != 500 || w.calls < 2 {
			t.Fatalf("Pace = %d, %v in %d calls; want 500 in several paced calls", n, err, w.calls)
		}
	})
	t.Run("duration", func(t *testing.T) {
		w := &fakeWriter{}
		n, err := produce.Pace(t.Context(), w, counter(), produce.Options{Rate: 100, Duration: 50 * time.Millisecond})
		if err != nil || n > 10 {
			t.Fatalf("Pace = %d, %v; want at most 10 messages in 50ms at 100/s", n, err)
		}
	})
	t.Run("source ends", func(t *testing.T) {
		w := &fakeWriter{}
		src := produce.FileSource(strings.NewReader("{\"topic\":\"gift\",\"anchor_id\":\"a1\"}\n\n# comment\n{\"anchor_id\":7}\nnot json\n"), "like", "anchor_id")
		n, err := produce.Pace(t.Context(), w, src, produce.Options{})
		if err != nil || n != 3 {
			t.Fatalf("Pace = %d, %v; want 3", n, err)
		}
		got := fmt.Sprint(w.msgs[0].Topic, string(w.msgs[0].Key), w.msgs[1].Topic, string(w.msgs[1].Key), w.msgs[2].Topic, string(w.msgs[2].Value))
		if got != "gifta1like7likenot json" {
			t.Errorf("messages %q", got)
		}
	})
	t.Run("no topic", func(t *testing.T) {
		_, err := produce.Pace(t.Context(), &fakeWriter{}, produce.FileSource(strings.NewReader("\n{}\n"), "", "anchor_id"), produce.Options{})
		if err == nil || err.Error() != `line 2: no topic: add a "topic" field or give --topic` {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("write error", func(t *testing.T) {
		_, err := produce.Pace(t.Context(), &fakeWriter{fail: errors.New("broker down")}, counter(), produce.Options{Count: 5})
		if err == nil || err.Error() != "writing 5 messages: broker down" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("per-message write errors", func(t *testing.T) {
		we := kafka.WriteErrors{nil, kafka.MessageSizeTooLarge, kafka.MessageSizeTooLarge}
		_, err := produce.Pace(t.Context(), &fakeWriter{fail: we}, counter(), produce.Options{Count: 3})
		if err == nil || !strings.HasPrefix(err.Error(), "writing 3 messages: 2 of 3 failed, first: ") || !errors.Is(err, kafka.MessageSizeTooLarge) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("throttled", func(t *testing.T) {
		// 12 messages at 10/s: the 11th is held back, and that is said once.
		calls := 0
		n, err := produce.Pace(t.Context(), &fakeWriter{}, counter(), produce.Options{Rate: 10, Count: 12, Throttled: func() { calls++ }})
		if err != nil || n != 12 || calls != 1 {
			t.Fatalf("Pace = %d, %v with %d throttle notes; want 12, nil, 1", n, err, calls)
		}
		// 3 messages at 1000/s are never held back after a second's worth.
		calls = 0
		src := produce.FileSource(strings.NewReader("a\nb\nc\n"), "t", "k")
		if n, err := produce.Pace(t.Context(), &fakeWriter{}, src, produce.Options{Rate: 1000, Throttled: func() { calls++ }}); err != nil || n != 3 || calls != 0 {
			t.Fatalf("Pace = %d, %v with %d throttle notes; want 3, nil, 0", n, err, calls)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		n, err := produce.Pace(ctx, &fakeWriter{}, counter(), produce.Options{Rate: 10})
		if err != nil || n != 0 {
			t.Fatalf("Pace after cancel = %d, %v; want 0, nil", n, err)
		}
	})
}

// TestRun sends a file's lines to a broker and reads them back.
func TestRun(t *testing.T) {
	broker := testenv.NewKafka(t, testenv.KafkaOptions{SeedTopics: map[string]int{"gift": 1, "like": 1}})
	lines := "{\"topic\":\"gift\",\"id\":\"1\",\"anchor_id\":\"a1\"}\n{\"id\":\"2\",\"anchor_id\":\"a2\"}\nnot json\n"
	var progress bytes.Buffer
	res, err := produce.Run(t.Context(), broker.Addrs(), produce.FileSource(strings.NewReader(lines), "like", "anchor_id"), produce.Options{}, &progress)
	if err != nil || res.Sent != 3 {
		t.Fatalf("Run = %+v, %v; want 3 sent", res, err)
	}
	if !strings.HasPrefix(res.String(), "sent 3 events in ") || !strings.HasSuffix(res.String(), " events/s)") {
		t.Errorf("result line %q", res)
	}
	if progress.Len() != 0 {
		t.Errorf("progress after a run shorter than %v: %q", produce.ProgressInterval, progress.String())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got := map[string][]string{}
	for topic, n := range map[string]int{"gift": 1, "like": 2} {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: broker.Addrs(), Topic: topic, Partition: 0, MaxWait: 100 * time.Millisecond})
		for range n {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got[topic] = append(got[topic], string(m.Key)+" "+string(m.Value))
		}
		r.Close()
	}
	want := map[string][]string{
		"gift": {`a1 {"topic":"gift","id":"1","anchor_id":"a1"}`},
		"like": {`a2 {"id":"2","anchor_id":"a2"}`, " not json"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read back %q, want %q", got, want)
	}
}

// TestRestamp: every ts moves by the offset that makes the latest now;
// lines without one, comments and non-JSON lines stay.
func TestRestamp(t *testing.T) {
	in := "# events\n" +
		`{"topic":"gift","id":"g-1","ts":1763720000000,"anchor_id":"a7","coins":20}` + "\n" +
		`{"id":"l-1","ts":1763720001500}` + "\n" +
		`{"id":"n-1"}` + "\n" +
		"not json\n"
	now := time.UnixMilli(1795000000000)
	out, shift, n, err := produce.Restamp(strings.NewReader(in), "ts", now)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(out)
	want := "# events\n" +
		`{"anchor_id":"a7","coins":20,"id":"g-1","topic":"gift","ts":1794999998500}` + "\n" +
		`{"id":"l-1","ts":1795000000000}` + "\n" +
		`{"id":"n-1"}` + "\n" +
		"not json\n"
	if string(b) != want || n != 2 || shift != 31279998500*time.Millisecond {
		t.Errorf("Restamp = %d lines moved by %v:\n%s\nwant 2 moved by %v:\n%s", n, shift, b, 31279998500*time.Millisecond, want)
	}
	if _, _, _, err := produce.Restamp(strings.NewReader(`{"ts":"2026-11-21T00:00:00Z"}`), "ts", now); err == nil ||
		err.Error() != `line 1: "ts" is not integer milliseconds: "2026-11-21T00:00:00Z"` {
		t.Errorf("a string ts: err = %v", err)
	}
}
