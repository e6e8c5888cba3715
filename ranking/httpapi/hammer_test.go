package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rankd/rankd/internal/testenv"
	"github.com/rankd/rankd/ranking"
	"github.com/rankd/rankd/ranking/httpapi"
	"github.com/rankd/rankd/ranking/store"
)

// TestReadsDoNotStallApply: clients hammer the worst expensive read while
// events are applied to the same Redis. The instance starts at most
// DefaultExpensiveRate expensive reads per second (bursts up to the
// expensive limit) and answers the rest 503 overloaded at once, so the
// reads' share of Redis is bounded. The apply rate with and without the
// hammering is logged (a figure, not asserted).
func TestReadsDoNotStallApply(t *testing.T) {
	rdb := testenv.NewRedis(t, testenv.RedisOptions{}).Client(t)
	prefix := testenv.Prefix(t)
	costFixture(t, rdb, prefix)
	st, err := store.New(rdb, costBoards(t), store.WithPrefix(prefix), store.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(st))
	t.Cleanup(srv.Close)

	unit, _ := ranking.ParseUnit("1d")
	sink := &ranking.Board{Name: "ingest", Window: ranking.WindowPeriodic, Every: unit, Grace: time.Hour}
	ingest, err := store.New(rdb, []*ranking.Board{sink}, store.WithPrefix(prefix+"_ingest"))
	if err != nil {
		t.Fatal(err)
	}
	var seq atomic.Int64
	applyFor := func(d time.Duration) float64 {
		n := 0
		start := time.Now()
		for time.Since(start) < d {
			ups := make([]ranking.Update, 500)
			for i := range ups {
				k := seq.Add(1)
				ups[i] = ranking.Update{Board: "ingest", Member: fmt.Sprint("m", k%5000), Value: 1, Time: now, MsgID: fmt.Sprint("e", k)}
			}
			if _, err := ingest.Apply(t.Context(), store.Group(ups)); err != nil {
				t.Error(err)
				return 0
			}
			n += len(ups)
		}
		return float64(n) / time.Since(start).Seconds()
	}

	cpu := func() float64 { // Redis CPU seconds so far
		info := rdb.Info(t.Context(), "cpu").Val()
		var total float64
		for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if i := strings.Index(info, f); i >= 0 {
				v, _ := strconv.ParseFloat(strings.Fields(info[i+len(f):])[0], 64)
				total += v
			}
		}
		return total
	}
	c0 := cpu()
	quiet := applyFor(2 * time.Second)
	quietCPU := cpu() - c0
	const phase = 2 * time.Second
	var served, overloaded atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 5 * time.Second}
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Get(srv.URL + "/v1/boards/rev/top?limit=1000&trend=1&rank=competition")
				if err != nil {
					continue
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusServiceUnavailable {
					overloaded.Add(1)
				} else {
					served.Add(1)
				}
			}
		})
	}
	start := time.Now()
	c1 := cpu()
	loud := applyFor(phase)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	loudCPU := cpu() - c1
	// At most the burst (the expensive limit) plus the rate over the phase.
	limit := int64(float64(httpapi.DefaultExpensive) + httpapi.DefaultExpensiveRate*elapsed.Seconds() + 1)
	if served.Load() > limit {
		t.Fatalf("%d expensive reads served in %v, want at most %d", served.Load(), elapsed, limit)
	}
	if overloaded.Load() == 0 {
		t.Fatal("no read was refused: the clients did not hammer")
	}
	t.Logf("apply: %.0f updates/s alone, %.0f updates/s while 8 clients hammer (%d reads served, %d refused 503 overloaded); "+
		"Redis busy %.0f%% alone, %.0f%% hammered (the rest of the drop is the clients, the API and the applier sharing this process's 2 cores)",
		quiet, loud, served.Load(), overloaded.Load(), 100*quietCPU/2, 100*loudCPU/elapsed.Seconds())
}
