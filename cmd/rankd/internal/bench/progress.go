package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress prints one line on stderr while the benchmark runs: the phase,
// its progress and rate. On a terminal the line is rewritten in place every
// half second; otherwise a line is printed every 5 seconds.
type progress struct {
	w     io.Writer
	tty   bool
	mu    sync.Mutex
	phase string
	count func() (done, total int64) // nil: no counts
	since time.Time
	last  int // length of the line on the terminal
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, done: make(chan struct{}), since: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	every := 5 * time.Second
	if p.tty {
		every = 500 * time.Millisecond
	}
	p.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-t.C:
				p.print()
			}
		}
	})
	return p
}

// set starts a phase; count, if not nil, reports its progress.
func (p *progress) set(phase string, count func() (done, total int64)) {
	p.mu.Lock()
	p.phase, p.count, p.since = phase, count, time.Now()
	p.mu.Unlock()
	if !p.tty {
		p.print()
	}
}

func (p *progress) print() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.phase == "" {
		return
	}
	el := time.Since(p.since)
	line := fmt.Sprintf("bench: %s %s", p.phase, el.Round(time.Second))
	if p.count != nil {
		done, total := p.count()
		line = fmt.Sprintf("bench: %s %d/%d (%.0f/s) %s", p.phase, done, total, float64(done)/max(el.Seconds(), 1e-3), el.Round(time.Second))
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r%-*s", p.last, line)
		p.last = len(line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

// stop ends the progress line; it may be called more than once.
func (p *progress) stop() {
	p.once.Do(func() {
		close(p.done)
		p.wg.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.tty && p.last > 0 {
			fmt.Fprintf(p.w, "\r%*s\r", p.last, "")
		}
	})
}
