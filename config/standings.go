package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rankd/rankd/ranking"
)

// Standings configures the publication of sealed standings (the
// standings section, and each board's publish section): see
// store.RunStandings.
type Standings struct {
	// Topic receives the sealed standings; default DefaultStandingsTopic.
	Topic string
	// Interval is how often the publisher looks for final periods;
	// default DefaultStandingsInterval.
	Interval time.Duration
	// LockTTL is the publisher lock's TTL: another instance takes over
	// this long after the holder died; default DefaultStandingsLockTTL.
	LockTTL time.Duration
	// Boards maps every board with a publish section to it.
	Boards map[string]Publish
}

// Publish is a board's publish section.
type Publish struct {
	// Top is how many members each snapshot lists (1..MaxPublishTop,
	// required).
	Top int
	// Retention is how long a snapshot is kept after it was written;
	// default DefaultStandingsRetention.
	Retention time.Duration
}

// MaxPublishTop is the most members a snapshot lists (the API's page
// limit).
const MaxPublishTop = 1000

// DefaultStandingsRetention is how long sealed snapshots are kept.
const DefaultStandingsRetention = 90 * 24 * time.Hour

func (l *loader) standingsSection(s *Standings) field {
	return func(n *yaml.Node, p string) {
		l.mapping(n, p, map[string]field{
			"topic":    l.str(&s.Topic),
			"interval": l.duration(&s.Interval),
			"lock_ttl": l.duration(&s.LockTTL),
		})
	}
}

// publish decodes the publish section of the board at path.
func (l *loader) publish(path string) field {
	return func(n *yaml.Node, p string) {
		pub := Publish{Retention: DefaultStandingsRetention}
		l.mapping(n, p, map[string]field{
			"top":       l.integer(&pub.Top),
			"retention": l.duration(&pub.Retention),
		})
		if l.pubs == nil {
			l.pubs = map[string]Publish{}
		}
		l.pubs[path] = pub
	}
}

// validateStandings checks the standings section and the boards' publish
// sections, and fills c.Standings.Boards.
func (l *loader) validateStandings(c *Config, s *spec) {
	st := &c.Standings
	if st.Topic == "" {
		l.errorf("standings.topic", "empty topic name")
	}
	if slices.Contains(c.Kafka.Topics, st.Topic) {
		l.errorf("standings.topic", "the standings topic %q is also consumed", st.Topic)
	}
	if st.Topic == c.Kafka.DeadLetterTopic {
		l.errorf("standings.topic", "the standings topic %q is the dead-letter topic", st.Topic)
	}
	if st.Interval <= 0 {
		l.errorf("standings.interval", "must be positive, got %v", st.Interval)
	}
	if st.LockTTL <= st.Interval {
		l.errorf("standings.lock_ttl", "must be longer than standings.interval (%v), got %v", st.Interval, st.LockTTL)
	}
	st.Boards = map[string]Publish{}
	for i, b := range s.boards {
		p := fmt.Sprintf("boards[%d]", i)
		pub, ok := l.pubs[p]
		if !ok {
			continue
		}
		if !l.has(p + ".publish.top") {
			l.errorf(p+".publish.top", "required: how many members each sealed snapshot lists (1..%d)", MaxPublishTop)
		} else if pub.Top < 1 || pub.Top > MaxPublishTop {
			l.errorf(p+".publish.top", "must be 1..%d, got %d", MaxPublishTop, pub.Top)
		}
		if pub.Retention <= 0 {
			l.errorf(p+".publish.retention", "must be positive, got %v", pub.Retention)
		}
		if b.Window == ranking.WindowTotal {
			l.errorf(p+".publish", "a total board is never final: only periodic and rolling boards publish standings")
		}
		if b.Name != "" && !strings.ContainsAny(b.Name, "{}") {
			st.Boards[b.Name] = pub
		}
	}
}
