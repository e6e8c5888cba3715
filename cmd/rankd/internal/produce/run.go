package produce

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// ProgressInterval is how often Run prints a progress line.
const ProgressInterval = 10 * time.Second

// Result is what a Run sent.
type Result struct {
	Sent    int64
	Elapsed time.Duration
}

// String is the line `rankd produce` ends with.
func (r Result) String() string {
	return fmt.Sprintf("sent %d events in %s (%.0f events/s)", r.Sent, r.Elapsed.Round(time.Millisecond), float64(r.Sent)/r.Elapsed.Seconds())
}

// Run sends the messages of src to brokers with a NewWriter, paced by
// opts, and writes a progress line to progress (if not nil) every
// ProgressInterval (prefixed with "rankd produce: "). It returns what was sent, also when it
// fails; being stopped by ctx is not an error.
func Run(ctx context.Context, brokers []string, src Source, opts Options, progress io.Writer) (Result, error) {
	writer := NewWriter(brokers)
	sent := opts.Sent
	if sent == nil {
		sent = new(atomic.Int64)
		opts.Sent = sent
	}
	before := sent.Load()
	start := time.Now()
	progressDone := make(chan struct{})
	var wg sync.WaitGroup
	if progress != nil {
		wg.Go(func() { // progress for long runs; stopped below
			t := time.NewTicker(ProgressInterval)
			defer t.Stop()
			for {
				select {
				case <-progressDone:
					return
				case <-t.C:
					n := sent.Load() - before
					fmt.Fprintf(progress, "rankd produce: %d events sent (%.0f/s)\n", n, float64(n)/time.Since(start).Seconds())
				}
			}
		})
	}
	n, err := Pace(ctx, writer, src, opts)
	close(progressDone)
	wg.Wait()
	if cerr := writer.Close(); err == nil && cerr != nil && ctx.Err() == nil {
		err = fmt.Errorf("closing the writer: %w", cerr)
	}
	return Result{Sent: n, Elapsed: time.Since(start)}, err
}
