// Package fetch reads one Kafka partition with fetch requests sent straight
// to its leader, handing each response over in chunks as it reads it.
//
// kafka-go's Reader hands its messages over one at a time, through a
// channel fed by a goroutine of its own, and sets the connection's read
// deadline for every message; with the consumer's own channel behind it,
// that was about a seventh of rankd's CPU in a drain. A Partition hands
// over chunks of messages on the caller's goroutine and sets the deadline
// once per fetch and once per chunk.
//
// A Partition never skips: a fetch that finds its offset deleted by
// retention returns a *TruncatedError, and every other failure returns its
// error with the offset unchanged, so that the caller retries (or halts)
// from exactly where it stood.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Config is how a Partition connects and fetches.
type Config struct {
	Brokers []string
	Dialer  *kafka.Dialer // nil: kafka.DefaultDialer
	// MinBytes and MaxBytes bound a fetch's response (0: 1 and 1 MB);
	// MaxWait is how long the broker may wait for MinBytes (0: 250ms).
	MinBytes int
	MaxBytes int
	MaxWait  time.Duration
}

// readTimeout bounds reading a fetch's response beyond MaxWait.
const readTimeout = 10 * time.Second

// Partition reads one partition from an offset. It is not safe for
// concurrent use.
type Partition struct {
	cfg       Config
	topic     string
	partition int
	offset    int64 // of the next message; kafka.FirstOffset or LastOffset until resolved
	conn      *kafka.Conn
	// last is the messages the last Fetch handed over: a chunk starts with
	// room for about as many, so that a partition keeping up, whose
	// fetches bring a few messages, does not allocate a whole chunk each
	last int
}

// minChunk is the least room a chunk starts with.
const minChunk = 16

// New returns a Partition that reads topic/partition from offset (or
// kafka.FirstOffset / kafka.LastOffset). It connects on the first Fetch.
func New(cfg Config, topic string, partition int, offset int64) *Partition {
	if cfg.Dialer == nil {
		cfg.Dialer = kafka.DefaultDialer
	}
	if cfg.MinBytes <= 0 {
		cfg.MinBytes = 1
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 1_000_000
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 250 * time.Millisecond
	}
	return &Partition{cfg: cfg, topic: topic, partition: partition, offset: offset}
}

// Offset is the offset of the next message a Fetch returns (negative until
// the first Fetch resolves kafka.FirstOffset or LastOffset).
func (p *Partition) Offset() int64 { return p.offset }

// TruncatedError is a fetch from an offset Kafka no longer holds: retention
// deleted the messages from Offset to First.
type TruncatedError struct {
	Topic     string
	Partition int
	Offset    int64
	First     int64
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("%s/%d: offset %d is deleted: the partition starts at %d", e.Topic, e.Partition, e.Offset, e.First)
}

// Fetch sends one fetch request and hands the messages of its response to
// each as it reads them, in order, all from Offset on, in chunks of at
// most n (each chunk a new slice: each may keep it); Offset moves past
// every chunk handed over. each returning false stops the fetch (the rest
// of the response is dropped). Fetch waits at most MaxWait for messages
// (plus connecting, when it must); with none it hands over nothing and
// returns no error. A chunk that each blocks on does not hold the rest of
// the response: it stays in the socket meanwhile. After an error the next
// Fetch reconnects, from Offset.
func (p *Partition) Fetch(ctx context.Context, n int, each func([]kafka.Message) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.conn == nil {
		if err := p.connect(ctx); err != nil {
			return err
		}
	}
	conn := p.conn
	// a cancelled ctx ends a fetch waiting on the connection
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if p.offset < 0 {
		var err error
		if p.offset == kafka.FirstOffset {
			p.offset, err = conn.ReadFirstOffset()
		} else {
			p.offset, err = conn.ReadLastOffset()
		}
		if err != nil {
			return p.fail(ctx, fmt.Errorf("reading the partition's offsets: %w", err))
		}
	}
	if _, err := conn.Seek(p.offset, kafka.SeekAbsolute|kafka.SeekDontCheck); err != nil {
		return p.fail(ctx, err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(p.cfg.MaxWait + readTimeout)); err != nil {
		return p.fail(ctx, err)
	}
	batch := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: p.cfg.MinBytes, MaxBytes: p.cfg.MaxBytes, MaxWait: p.cfg.MaxWait})
	n = max(n, 1)
	room := min(n, max(p.last, minChunk))
	p.last = 0
	var chunk []kafka.Message
	stopped := false
	hand := func() {
		if stopped = !each(chunk); !stopped {
			// the time each took is not the broker's: the rest of the
			// response gets readTimeout from now (unless ctx ended
			// meanwhile: its deadline of now stands)
			_ = conn.SetReadDeadline(time.Now().Add(readTimeout))
			if ctx.Err() != nil {
				_ = conn.SetDeadline(time.Now())
			}
		}
		p.offset = chunk[len(chunk)-1].Offset + 1
		chunk = nil
	}
	for !stopped {
		m, err := batch.ReadMessage()
		if err != nil {
			break
		}
		if m.Offset < p.offset {
			continue // a record batch fetched from its middle
		}
		if chunk == nil {
			chunk = make([]kafka.Message, 0, room)
		}
		chunk = append(chunk, m)
		p.last++
		if len(chunk) == n {
			hand()
		}
	}
	if len(chunk) > 0 && !stopped {
		hand()
	}
	err := batch.Close()
	switch {
	case stopped:
		if err != nil {
			p.close() // the rest of the response may be left unread
		}
		return nil
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return p.fail(ctx, err)
	case errors.Is(err, kafka.RequestTimedOut):
		return nil // nothing within MaxWait
	case errors.Is(err, kafka.OffsetOutOfRange):
		// (the connection is of no use after the failed fetch: ask on a
		// new one)
		p.close()
		first, last, oerr := p.offsets(ctx)
		if oerr != nil {
			return p.fail(ctx, fmt.Errorf("%w (reading the partition's offsets: %v)", err, oerr))
		}
		if p.offset < first {
			return &TruncatedError{Topic: p.topic, Partition: p.partition, Offset: p.offset, First: first}
		}
		if p.offset <= last {
			return nil // produced meanwhile: fetch again
		}
		return p.fail(ctx, fmt.Errorf("%w: offset %d is past the partition's end %d", err, p.offset, last))
	}
	return p.fail(ctx, err)
}

// fail closes the connection (the next Fetch reconnects) and returns err,
// or ctx's error when ctx ended the fetch.
func (p *Partition) fail(ctx context.Context, err error) error {
	p.close()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("fetching %s/%d at offset %d: %w", p.topic, p.partition, p.offset, err)
}

// offsets returns the first and last offsets the partition holds, asked
// on a new connection.
func (p *Partition) offsets(ctx context.Context) (first, last int64, err error) {
	if err := p.connect(ctx); err != nil {
		return 0, 0, err
	}
	stop := context.AfterFunc(ctx, func() { _ = p.conn.SetDeadline(time.Now()) })
	defer stop()
	if err := p.conn.SetDeadline(time.Now().Add(readTimeout)); err != nil {
		return 0, 0, err
	}
	first, last, err = p.conn.ReadOffsets()
	_ = p.conn.SetDeadline(time.Time{})
	return first, last, err
}

// connect dials the partition's leader through the first broker that
// answers.
func (p *Partition) connect(ctx context.Context) error {
	var errs []error
	for _, b := range p.cfg.Brokers {
		conn, err := p.cfg.Dialer.DialLeader(ctx, "tcp", b, p.topic, p.partition)
		if err == nil {
			p.conn = conn
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return errors.New("fetch: no brokers")
	}
	return fmt.Errorf("connecting to the leader of %s/%d: %w", p.topic, p.partition, errors.Join(errs...))
}

func (p *Partition) close() {
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn = nil
	}
}

// Close closes the connection.
func (p *Partition) Close() error {
	p.close()
	return nil
}
