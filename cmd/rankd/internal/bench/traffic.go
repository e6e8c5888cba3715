package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/cmd/rankd/internal/loadgen"
	"github.com/rankd/rankd/internal/workload"
)

// The traffic of the latency and reads phases (the producer at a fixed
// rate and the markers' two pollers) runs in a child process of its own,
// as producers and readers run apart from rankd in production: in this
// process they would wait for the CPU behind rankd's own goroutines (1,000
// HTTP handlers in the reads phase), and their delays would count as
// rankd's event-to-visible latency. The child is this executable started
// again (loadgen.Spawn, kind "traffic"; main calls TrafficChild first).
// Over its stdin and stdout, one line each: the settings (JSON), "ready"
// once it reads the marker's value in Redis, "start", then the producer's
// figures (JSON) when it stops producing, and the pollers' (JSON) once
// every marker is visible.

const (
	trafficKind = "traffic"
)

// TrafficChild runs this process as the traffic child of a `rankd bench`
// when it was started to be one (ok true); otherwise it returns at once.
//
// The child runs on one CPU at a time (GOMAXPROCS 1): it needs a fraction
// of one, and a second P only adds idle spinning and a garbage collector
// running beside the producer, CPU that rankd, Redis and the broker on the
// same machine then lack (at 44,000 events/s: 0.29-0.30 of a CPU with
// two, 0.25 with one, 2026-11-29). A poller that waits for the P behind
// the producer sees its marker later, never sooner.
func TrafficChild() (code int, ok bool) {
	if loadgen.ChildKind() != trafficKind {
		return 0, false
	}
	runtime.GOMAXPROCS(1)
	return trafficMain(os.Stdin, os.Stdout), true
}

// trafficSettings configure a traffic child.
type trafficSettings struct {
	Brokers   []string `json:"brokers"`
	RedisAddr string   `json:"redis_addr"`
	// RedisKey is the marker board's sorted set (its active generation),
	// APIURL the marker member's URL.
	RedisKey string `json:"redis_key"`
	APIURL   string `json:"api_url"`
	// Base is the marker's value before the first marker.
	Base     int64         `json:"base"`
	Rate     float64       `json:"rate"`
	Duration time.Duration `json:"duration"`
	// WorkloadSeed seeds the standard workload; marker k (from 1) is
	// markerMessage(MarkerSeed, MarkerFrom+k).
	WorkloadSeed int64 `json:"workload_seed"`
	MarkerSeed   int64 `json:"marker_seed"`
	MarkerFrom   int   `json:"marker_from"`
	// PollRedis and PollAPI are the pollers' pauses between reads;
	// Retry503: the API poller counts a 503 and reads again.
	PollRedis time.Duration `json:"poll_redis"`
	PollAPI   time.Duration `json:"poll_api"`
	Retry503  bool          `json:"retry_503"`
}

// trafficProduced is what the producer did.
type trafficProduced struct {
	Events       int64   `json:"events"`
	Seconds      float64 `json:"seconds"`
	Markers      int     `json:"markers"`
	ProduceP50Ms float64 `json:"produce_p50_ms"`
	Err          string  `json:"err,omitempty"`
}

// trafficResult is what the pollers saw.
type trafficResult struct {
	Redis      Visible `json:"redis"`
	API        Visible `json:"api"`
	APIRefused int     `json:"api_refused"`
	Err        string  `json:"err,omitempty"`
}

func trafficMain(in io.Reader, out io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(out, "error:", err)
		return 1
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() {
		return fail(errors.New("no settings on stdin"))
	}
	var s trafficSettings
	if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
		return fail(fmt.Errorf("settings: %w", err))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: s.RedisAddr, PoolSize: 1})
	defer rdb.Close()
	readRedis := zscoreReader(rdb, s.RedisKey)
	hc := &http.Client{Timeout: 5 * time.Second}
	readAPI := func(ctx context.Context) (int64, error) { return pollMember(ctx, hc, s.APIURL) }
	if v, err := readRedis(ctx); err != nil || v != s.Base {
		return fail(fmt.Errorf("the marker's value in Redis is %d (%v), want %d", v, err, s.Base))
	}
	wl, err := workload.New(workload.Config{Seed: s.WorkloadSeed})
	if err != nil {
		return fail(err)
	}
	w := newBatchProducer(s.Brokers)
	defer w.Close()
	fmt.Fprintln(out, "ready")
	if !sc.Scan() || sc.Text() != "start" {
		return 0 // the parent went away
	}
	go func() { // the parent going away ends the child
		for sc.Scan() {
		}
		cancel()
	}()
	st := &markers{}
	pollers := []*poller{
		{read: readRedis, base: s.Base, every: s.PollRedis},
		{read: readAPI, base: s.Base, every: s.PollAPI, retry503: s.Retry503},
	}
	pctx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	errs := make([]error, len(pollers))
	var wg sync.WaitGroup
	for i, p := range pollers {
		wg.Go(func() { errs[i] = p.run(pctx, st) })
	}
	pr, werr := produce(ctx, w, wl, s, st)
	st.done()
	if werr != nil {
		pr.Err = werr.Error()
		stopPoll()
	}
	line, _ := json.Marshal(pr)
	fmt.Fprintln(out, string(line))
	wg.Wait()
	res := trafficResult{Redis: pollers[0].stats(st.sent), API: pollers[1].stats(st.sent), APIRefused: pollers[1].refused}
	if err := errors.Join(errs...); err != nil {
		res.Err = err.Error()
	}
	line, _ = json.Marshal(res)
	fmt.Fprintln(out, string(line))
	return 0
}

// produce writes s.Rate events/s of the workload for s.Duration: every
// latencyTick, what is due in one synchronous Produce request for all its
// partitions (batchProducer), the first event of every request a marker.
// (Writing again as soon as a call returns made calls of a few dozen
// events: three times the calls, and the producer's CPU with them.)
func produce(ctx context.Context, w *batchProducer, wl *workload.Generator, s trafficSettings, st *markers) (trafficProduced, error) {
	var durs []time.Duration
	var n int64
	start := time.Now()
	tick := time.NewTicker(latencyTick)
	defer tick.Stop()
	for time.Since(start) < s.Duration {
		select {
		case <-ctx.Done():
			return trafficProduced{}, ctx.Err()
		case <-tick.C:
		}
		due := min(int64(s.Rate*time.Since(start).Seconds())-n, 4096)
		if due <= 0 {
			continue
		}
		msgs := make([]kafka.Message, 0, due)
		msgs = append(msgs, markerMessage(s.MarkerSeed, s.MarkerFrom+st.count()+1))
		for range due - 1 {
			ev := wl.Next()
			msgs = append(msgs, kafka.Message{Topic: ev.Topic, Key: ev.Key, Value: ev.Value})
		}
		t0 := st.send()
		if err := w.Write(ctx, msgs); err != nil {
			return trafficProduced{}, fmt.Errorf("producing: %w", writeErr(err))
		}
		durs = append(durs, time.Since(t0))
		n += int64(len(msgs))
	}
	slices.Sort(durs)
	return trafficProduced{Events: n, Seconds: time.Since(start).Seconds(), Markers: st.count(),
		ProduceP50Ms: ms(quantile(durs, 0.5))}, nil
}

// traffic is a running traffic child.
type traffic struct{ c *loadgen.Proc }

// startTraffic starts a traffic child and returns once it is ready.
func startTraffic(ctx context.Context, s trafficSettings) (*traffic, error) {
	c, err := loadgen.Spawn(ctx, trafficKind, s, time.Minute)
	if err != nil {
		return nil, err
	}
	return &traffic{c: c}, nil
}

// PID is the child's process id.
func (t *traffic) PID() int { return t.c.PID() }

// start starts the pollers and the producer.
func (t *traffic) start() error { return t.c.Send("start") }

// produced waits for the producer to stop (up to d and a minute).
func (t *traffic) produced(ctx context.Context, d time.Duration) (trafficProduced, error) {
	var p trafficProduced
	err := t.await(ctx, d+time.Minute, &p, &p.Err)
	return p, err
}

// result waits for the pollers to see every marker.
func (t *traffic) result(ctx context.Context) (trafficResult, error) {
	var r trafficResult
	err := t.await(ctx, latencyWait+time.Minute, &r, &r.Err)
	return r, err
}

// await reads the child's next line into v, whose field failed is the
// child's error ("": none).
func (t *traffic) await(ctx context.Context, d time.Duration, v any, failed *string) error {
	line, err := t.c.Await(ctx, "", d)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(line), v); err != nil {
		return fmt.Errorf("traffic child said %q: %w", line, err)
	}
	if *failed != "" {
		return errors.New(*failed)
	}
	return nil
}

// close stops the child.
func (t *traffic) close() { t.c.Close() }
