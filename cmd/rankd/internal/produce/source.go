package produce

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/rankd/rankd/internal/workload"
)

// Workload returns the messages of a workload generator, without end.
func Workload(w *workload.Generator) Source {
	return func() (kafka.Message, bool, error) {
		ev := w.Next()
		return kafka.Message{Topic: ev.Topic, Key: ev.Key, Value: ev.Value}, true, nil
	}
}

// SourceOptions say where `rankd produce` takes its messages: the lines of
// File (FileSource), or the standard workload.
type SourceOptions struct {
	// File is the file of lines to send ("-": Stdin); "": the workload.
	File string
	// Topic and KeyField: see FileSource.
	Topic, KeyField string
	// Restamp moves the "ts" of every line of File so that the latest is
	// now (see Restamp).
	Restamp bool
	Stdin   io.Reader
	// Workload configures the workload; Seed 0: a random one.
	Workload workload.Config
}

// Open returns the source of o and what closes it. It writes to notes the
// workload's seed, or how far Restamp moved the lines. Its errors are the
// command line's: they name the flag at fault.
func Open(o SourceOptions, notes io.Writer) (src Source, closeFn func(), err error) {
	closeFn = func() {}
	if o.File == "" {
		wc := o.Workload
		if wc.Seed == 0 {
			wc.Seed = rand.Int64N(1 << 40)
		}
		w, err := workload.New(wc)
		if err != nil {
			return nil, nil, fmt.Errorf("--topics: %v", err)
		}
		fmt.Fprintf(notes, "rankd produce: seed %d (rerun with --seed %d for the same events)\n", wc.Seed, wc.Seed)
		return Workload(w), closeFn, nil
	}
	r := o.Stdin
	if o.File != "-" {
		f, err := os.Open(o.File)
		if err != nil {
			return nil, nil, fmt.Errorf("--file: %v", err)
		}
		r, closeFn = f, func() { _ = f.Close() }
	}
	if o.Restamp {
		var shift time.Duration
		var n int
		if r, shift, n, err = Restamp(r, "ts", time.Now()); err != nil {
			closeFn()
			return nil, nil, fmt.Errorf("--file %s: --restamp: %v", o.File, err)
		}
		fmt.Fprintf(notes, "rankd produce: --restamp: ts of %d events moved by %s (the latest is now)\n", n, shift.Round(time.Millisecond))
	}
	return FileSource(r, o.Topic, o.KeyField), closeFn, nil
}
