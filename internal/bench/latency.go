package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/workload"
)

const (
	// The marker events: gifts of 1 coin to one anchor, read back from
	// the all-time board.
	markerBoard  = "anchor_total"
	markerAnchor = "abench-marker"
	// latencyTick is how often the producer writes what is due, one marker
	// first.
	latencyTick = 10 * time.Millisecond
	// latencyWait bounds the wait for the last markers to show.
	latencyWait = 30 * time.Second
)

// latency measures event-to-visible latency at a fixed produce rate. The
// rankd stack consumes the topics on (on the group of the rankd drain, so
// from where it stopped); a producer writes rate events/s of the standard
// workload with wall-clock event times, in a chunk every 10 ms, and the
// first event of every chunk is a marker: a gift of 1 coin to a dedicated
// anchor, so marker k makes that anchor's value on the all-time board k.
// A poller asks the HTTP API for that member every PollInterval; marker k
// is visible at the end of the first poll that answers k or more. Its
// latency is that instant minus the instant its chunk was handed to the
// producer (WriteMessages, synchronous; kafka-go batches of up to 1 ms):
// produce, fetch, batching (linger), decode, route, apply, then the read.
// The markers of one anchor share a partition, applied in order, so the
// value is monotonic. Resolution: the poll period (reported).
func (e *env) latency(ctx context.Context, rate float64) (*Latency, error) {
	cfg, err := e.config(rankdGroup, rankdPrefix)
	if err != nil {
		return nil, err
	}
	rs, err := e.startStack(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rs.stop() }()
	lag := newLagWatch(e.brokers, rankdGroup)
	defer lag.close()
	e.prog.set("latency: rankd catching up", lag.progress(int64(e.o.Events)))
	if _, err := lag.wait(ctx, rs.done, int64(e.o.Events)); err != nil {
		return nil, err
	}
	if err := e.resetStats(ctx); err != nil {
		return nil, err
	}
	updates0, err := counterSum(rs.Metrics(), "rankd_sink_updates_applied_total")
	if err != nil {
		return nil, err
	}

	url := "http://" + rs.HTTPAddr() + "/v1/boards/" + markerBoard + "/members/" + markerAnchor
	hc := &http.Client{Timeout: 5 * time.Second}
	base, err := pollMember(ctx, hc, url) // 0, unless markers of an earlier run are there
	if err != nil {
		return nil, err
	}

	var mu sync.Mutex
	var sent, visible []time.Time // by marker number - 1
	var produceDurs []time.Duration
	var produced int64
	producing := true

	// The poller.
	pollErr := make(chan error, 1)
	var polls int
	pctx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	var pollWG sync.WaitGroup
	pollStart := time.Now()
	var pollEnd time.Time
	pollWG.Go(func() {
		defer func() { pollEnd = time.Now() }()
		var seen int64
		deadline := time.Time{}
		for {
			v, err := pollMember(pctx, hc, url)
			now := time.Now()
			if err != nil {
				if pctx.Err() != nil {
					pollErr <- nil
				} else {
					pollErr <- err
				}
				return
			}
			polls++
			v -= base
			mu.Lock()
			for ; seen < v && int(seen) < len(sent); seen++ {
				visible = append(visible, now)
			}
			all := !producing && int(seen) == len(sent)
			if !producing && deadline.IsZero() {
				deadline = now.Add(latencyWait)
			}
			n := len(sent)
			mu.Unlock()
			if all {
				pollErr <- nil
				return
			}
			if !deadline.IsZero() && now.After(deadline) {
				pollErr <- fmt.Errorf("%d of %d markers visible %v after the producer stopped", seen, n, latencyWait)
				return
			}
			select {
			case <-pctx.Done():
				pollErr <- nil
				return
			case <-time.After(e.o.PollInterval):
			}
		}
	})

	// The producer.
	wl, err := workload.New(workload.Config{Seed: e.o.Seed + 1})
	if err != nil {
		return nil, err
	}
	w := newWriter(e.brokers, time.Millisecond)
	defer w.Close()
	e.prog.set(fmt.Sprintf("latency at %.0f events/s", rate), func() (int64, int64) {
		mu.Lock()
		defer mu.Unlock()
		return produced, int64(rate * e.o.LatencyDuration.Seconds())
	})
	before, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	tick := time.NewTicker(latencyTick)
	var werr error
	for time.Since(start) < e.o.LatencyDuration {
		due := min(int64(rate*time.Since(start).Seconds())-produced, 4096)
		if due <= 0 {
			select {
			case <-ctx.Done():
				werr = ctx.Err()
			case <-tick.C:
			}
			if werr != nil {
				break
			}
			continue
		}
		msgs := make([]kafka.Message, 0, due)
		mu.Lock()
		k := len(sent) + 1
		mu.Unlock()
		msgs = append(msgs, markerMessage(e.o.Seed, k))
		for range due - 1 {
			ev := wl.Next()
			msgs = append(msgs, kafka.Message{Topic: ev.Topic, Key: ev.Key, Value: ev.Value})
		}
		t0 := time.Now()
		mu.Lock()
		sent = append(sent, t0)
		mu.Unlock()
		if werr = w.WriteMessages(ctx, msgs...); werr != nil {
			werr = fmt.Errorf("producing: %w", writeErr(werr))
			break
		}
		mu.Lock()
		produceDurs = append(produceDurs, time.Since(t0))
		produced += int64(len(msgs))
		mu.Unlock()
	}
	tick.Stop()
	producedFor := time.Since(start)
	mu.Lock()
	producing = false
	mu.Unlock()
	if werr != nil {
		stopPoll()
	}
	pollWG.Wait()
	if err := errors.Join(werr, <-pollErr); err != nil {
		return nil, err
	}
	after, err := e.meter(ctx)
	if err != nil {
		return nil, err
	}
	updates1, err := counterSum(rs.Metrics(), "rankd_sink_updates_applied_total")
	if err != nil {
		return nil, err
	}
	if err := rs.stop(); err != nil {
		return nil, err
	}

	lat := make([]time.Duration, len(sent))
	for i := range sent {
		lat[i] = visible[i].Sub(sent[i])
	}
	slices.Sort(lat)
	slices.Sort(produceDurs)
	l := &Latency{Rate: round(rate, 0), ProducedRate: round(float64(produced)/producedFor.Seconds(), 0),
		Seconds: round(producedFor.Seconds(), 2), Events: produced, Markers: len(sent),
		P50Ms: ms(quantile(lat, 0.5)), P99Ms: ms(quantile(lat, 0.99)), MaxMs: ms(quantile(lat, 1)),
		ProduceP50Ms: ms(quantile(produceDurs, 0.5)),
		PollMs:       round(float64(pollEnd.Sub(pollStart).Microseconds())/1e3/float64(max(polls, 1)), 2)}
	l.CPU = cpu(before, after, produced, int64(updates1-updates0), after.at.Sub(before.at))
	return l, nil
}

// markerMessage is marker k: a gift of 1 coin to markerAnchor, now.
func markerMessage(seed int64, k int) kafka.Message {
	v := `{"id":"marker-` + strconv.FormatInt(seed, 10) + "-" + strconv.Itoa(k) + `","ts":` + strconv.FormatInt(time.Now().UnixMilli(), 10) +
		`,"user_id":"ubench-marker","anchor_id":"` + markerAnchor + `","room_id":"rbench-marker","zone":"north","gift_id":"rose","count":1,"coins":1}`
	return kafka.Message{Topic: "gift", Key: []byte(markerAnchor), Value: []byte(v)}
}

// pollMember returns the member's raw value on the board, 0 when it is not
// there (404).
func pollMember(ctx context.Context, hc *http.Client, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return 0, nil
	default:
		return 0, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	var m struct {
		Raw int64 `json:"raw"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	return m.Raw, nil
}

// quantile returns the q quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return round(float64(d.Microseconds())/1e3, 2) }
