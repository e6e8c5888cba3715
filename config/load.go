package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Error is one configuration error at a position of the file.
type Error struct {
	File   string
	Line   int // 0 when the error has no position (e.g. from the environment)
	Column int
	Field  string // path of the offending field, e.g. "boards[3].every"
	Msg    string
}

// Error returns "file:line:column: field: message".
func (e *Error) Error() string {
	var sb strings.Builder
	sb.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&sb, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&sb, ":%d", e.Column)
		}
	}
	sb.WriteString(": ")
	if e.Field != "" {
		sb.WriteString(e.Field + ": ")
	}
	sb.WriteString(e.Msg)
	return sb.String()
}

// Load reads, decodes and validates the configuration file at path. All
// errors are returned together (errors.Join of *Error, sorted by position).
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return LoadBytes(path, data)
}

// LoadBytes is Load for a file already read; name is used in errors.
func LoadBytes(name string, data []byte) (*Config, error) {
	l := &loader{file: name, pos: map[string]pos{}}
	c := defaults()
	c.File = name
	root, err := parse(data)
	if err != nil {
		l.addParseError(data, err)
		return nil, l.err()
	}
	var spec spec
	l.decodeRoot(root, c, &spec)
	l.applyEnv(c, os.LookupEnv)
	l.validate(c, &spec)
	if err := l.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// parse parses a single YAML document whose root is a mapping.
func parse(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, errors.New("empty config")
		}
		return nil, &syntaxError{err}
	}
	var more yaml.Node
	if err := dec.Decode(&more); err != io.EOF {
		return nil, errors.New("more than one YAML document")
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, errors.New("empty config")
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the config must be a mapping", root.Line)
	}
	return root, nil
}

// pos is a position in the file.
type pos struct{ line, col int }

// loader decodes nodes, remembering the position of every field path, and
// collects errors.
type loader struct {
	file string
	pos  map[string]pos
	errs []*Error
	pubs map[string]Publish // boards[i] -> its publish section (standings.go)
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// syntaxError is an error of the YAML parser on the first document.
type syntaxError struct{ err error }

func (e *syntaxError) Error() string { return e.err.Error() }

func (l *loader) addParseError(data []byte, err error) {
	e := &Error{File: l.file}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	e.Msg = strings.TrimPrefix(msg, "yaml: ")
	if m := yamlLine.FindStringSubmatch(e.Msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Msg = m[2]
	}
	if se, ok := err.(*syntaxError); ok {
		if line, col := syntaxPos(data, se.err.Error()); line > 0 {
			e.Line, e.Column = line, col
		}
	}
	if e.Line > 0 {
		lines := strings.Split(string(data), "\n")
		if e.Line <= len(lines) {
			text := lines[e.Line-1]
			if indent := text[:len(text)-len(strings.TrimLeft(text, " \t"))]; strings.Contains(indent, "\t") {
				e.Msg += " (this line is indented with a tab: YAML indents with spaces only)"
			}
		}
	}
	l.errs = append(l.errs, e)
}

// syntaxPos returns the 1-based line and column (in characters) of the
// YAML syntax error msg in data, or 0, 0. yaml.v3 reports no column, and
// its line is that of the enclosing construct, sometimes counted from 0,
// or missing; so the position is found instead as the last character of
// the shortest prefix of data from which on every longer prefix fails with
// the same message: the parser reads forward, so a prefix fails the same
// way as soon as it holds the character where the parser gave up (for an
// unclosed quote or bracket, the opening one).
func syntaxPos(data []byte, msg string) (line, col int) {
	want := yamlMessage(msg)
	fails := func(k int) bool {
		var doc yaml.Node
		err := yaml.NewDecoder(bytes.NewReader(data[:k])).Decode(&doc)
		return err != nil && yamlMessage(err.Error()) == want
	}
	// Gallop back from the end to a prefix that does not fail so, then
	// bisect: ok does not fail, bad fails.
	ok, bad := 0, len(data)
	for step := 1; ; step *= 2 {
		ok = max(len(data)-step, 0)
		if !fails(ok) {
			break
		}
		bad = ok
		if ok == 0 {
			return 0, 0
		}
	}
	for bad-ok > 1 {
		mid := (ok + bad) / 2
		if fails(mid) {
			bad = mid
		} else {
			ok = mid
		}
	}
	last := bad - 1
	start := bytes.LastIndexByte(data[:last], '\n') + 1
	return 1 + bytes.Count(data[:start], []byte("\n")), 1 + utf8.RuneCount(data[start:last])
}

// yamlMessage is a yaml.v3 error message without its "yaml: line N: ".
func yamlMessage(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	s = strings.TrimPrefix(s, "yaml: ")
	if m := yamlLine.FindStringSubmatch(s); m != nil {
		return m[2]
	}
	return s
}

// err returns the errors sorted by position, joined, or nil.
func (l *loader) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(l.errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	var errs []error
	for _, e := range mergeShared(l.errs) {
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// index matches the list indexes of a field path.
var index = regexp.MustCompile(`\[\d+\]`)

// mergeShared reports once an error that several fields share because
// they take one line of the file (a YAML merge key or alias, "<<:
// *shanghai" in several boards): the first such field's error names the
// others. errs are sorted by position.
func mergeShared(errs []*Error) []*Error {
	var out []*Error
	var others [][]string
	for _, e := range errs {
		merged := false
		if e.Line > 0 {
			for i, o := range out {
				if o.Line == e.Line && o.Column == e.Column && o.Msg == e.Msg && o.Field != e.Field &&
					index.ReplaceAllString(o.Field, "[]") == index.ReplaceAllString(e.Field, "[]") {
					others[i] = append(others[i], e.Field)
					merged = true
					break
				}
			}
		}
		if !merged {
			out = append(out, e)
			others = append(others, nil)
		}
	}
	for i, o := range others {
		if len(o) > 0 {
			e := *out[i]
			e.Msg += "; also " + strings.Join(o, ", ") + ", which take this line"
			out[i] = &e
		}
	}
	return out
}

// at returns the position of path, or of its nearest recorded parent.
func (l *loader) at(path string) pos {
	for {
		if p, ok := l.pos[path]; ok {
			return p
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return pos{}
		}
		path = path[:i]
	}
}

// has reports whether the file sets path.
func (l *loader) has(path string) bool {
	_, ok := l.pos[path]
	return ok
}

// errorf records an error at the position of path.
func (l *loader) errorf(path, format string, args ...any) {
	p := l.at(path)
	l.errs = append(l.errs, &Error{File: l.file, Line: p.line, Column: p.col, Field: path, Msg: fmt.Sprintf(format, args...)})
}

// errorAt records an error at the position of node n.
func (l *loader) errorAt(n *yaml.Node, path, format string, args ...any) {
	l.errs = append(l.errs, &Error{File: l.file, Line: n.Line, Column: n.Column, Field: path, Msg: fmt.Sprintf(format, args...)})
}

// join appends a key or index to a path.
func join(path, key string) string {
	if path == "" || strings.HasPrefix(key, "[") {
		return path + key
	}
	return path + "." + key
}

// deref resolves aliases.
func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// field decodes one value; path is the value's field path.
type field func(v *yaml.Node, path string)

// mapping decodes the keys of mapping n with the given field decoders,
// reporting unknown and duplicate keys. Merge keys (<<) are honoured.
func (l *loader) mapping(n *yaml.Node, path string, fields map[string]field) {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		l.errorAt(n, path, "want a mapping, got %s", kindName(n))
		return
	}
	seen := map[string]bool{}
	// Each merged mapping is walked once: a merge of a mapping into itself
	// (a cycle) is an error, and a repeated merge adds nothing, so the work
	// stays linear in the file whatever the aliases.
	merged := map[*yaml.Node]bool{n: true}
	var walk func(n *yaml.Node, merged bool)
	walk = func(w *yaml.Node, isMerged bool) {
		for i := 0; i+1 < len(w.Content); i += 2 {
			k, v := w.Content[i], deref(w.Content[i+1])
			if k.Value == "<<" && k.Tag == "!!merge" {
				items := []*yaml.Node{w.Content[i+1]}
				if v.Kind == yaml.SequenceNode {
					items = v.Content
				}
				for _, a := range items {
					m := deref(a)
					if m.Kind != yaml.MappingNode {
						continue
					}
					if m == n {
						l.errorAt(a, path, "merge key (<<) merges the mapping into itself")
						continue
					}
					if merged[m] {
						continue
					}
					merged[m] = true
					walk(m, true)
				}
				continue
			}
			p := join(path, k.Value)
			if path == "" && strings.HasPrefix(k.Value, "x-") {
				continue // extension keys: holders of YAML anchors
			}
			if seen[k.Value] {
				if !isMerged {
					l.errorAt(k, p, "duplicate key")
				}
				continue
			}
			f, ok := fields[k.Value]
			if !ok {
				l.errorAt(k, p, "unknown key %q (want %s)", k.Value, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
				continue
			}
			seen[k.Value] = true
			l.pos[p] = pos{v.Line, v.Column}
			f(v, p)
		}
	}
	// Keys written in the mapping win over merged ones: walk them first.
	direct := &yaml.Node{Kind: yaml.MappingNode}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "<<" && n.Content[i].Tag == "!!merge" {
			merges = append(merges, n.Content[i], n.Content[i+1])
		} else {
			direct.Content = append(direct.Content, n.Content[i], n.Content[i+1])
		}
	}
	walk(direct, false)
	walk(&yaml.Node{Kind: yaml.MappingNode, Content: merges}, true)
}

// sequence calls item for each element of sequence n.
func (l *loader) sequence(n *yaml.Node, path string, item func(v *yaml.Node, path string)) {
	n = deref(n)
	if n.Kind != yaml.SequenceNode {
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return
		}
		l.errorAt(n, path, "want a list, got %s", kindName(n))
		return
	}
	for i, v := range n.Content {
		v = deref(v)
		p := fmt.Sprintf("%s[%d]", path, i)
		l.pos[p] = pos{v.Line, v.Column}
		item(v, p)
	}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.Tag == "!!null" {
		return "nothing"
	}
	return fmt.Sprintf("%q", n.Value)
}

// scalar returns the text of scalar n, or false after reporting an error.
func (l *loader) scalar(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		l.errorAt(n, path, "want a single value, got %s", kindName(n))
		return "", false
	}
	if n.Tag == "!!null" {
		return "", true
	}
	return n.Value, true
}

func (l *loader) str(dst *string) field {
	return func(n *yaml.Node, path string) {
		if s, ok := l.scalar(n, path); ok {
			*dst = s
		}
	}
}

func (l *loader) strs(dst *[]string) field {
	return func(n *yaml.Node, path string) {
		*dst = nil
		l.sequence(n, path, func(v *yaml.Node, p string) {
			if s, ok := l.scalar(v, p); ok {
				*dst = append(*dst, s)
			}
		})
	}
}

func (l *loader) integer(dst *int) field {
	return func(n *yaml.Node, path string) {
		s, ok := l.scalar(n, path)
		if !ok {
			return
		}
		i, err := strconv.Atoi(s)
		if err != nil {
			l.errorAt(n, path, "want an integer, got %q", s)
			return
		}
		*dst = i
	}
}

func (l *loader) boolean(dst *bool) field {
	return func(n *yaml.Node, path string) {
		switch s, _ := l.scalar(n, path); s {
		case "true":
			*dst = true
		case "false":
			*dst = false
		default:
			l.errorAt(n, path, "want true or false, got %q", s)
		}
	}
}

func (l *loader) duration(dst *time.Duration) field {
	return func(n *yaml.Node, path string) {
		s, ok := l.scalar(n, path)
		if !ok {
			return
		}
		d, err := parseDuration(s)
		if err != nil {
			l.errorAt(n, path, "%v", err)
			return
		}
		*dst = d
	}
}

// parseDuration parses a Go duration ("90s", "1h30m") or whole days or
// weeks ("7d", "2w"); "0" is zero.
func parseDuration(s string) (time.Duration, error) {
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			if i, err := strconv.Atoi(n); err == nil && i >= 0 && int64(i) < int64(1<<62)/int64(unit) {
				return time.Duration(i) * unit, nil
			}
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (want e.g. 500ms, 30s, 10m, 24h, 7d)", s)
	}
	return d, nil
}

// applyEnv overrides addresses and secrets from the environment.
func (l *loader) applyEnv(c *Config, lookup func(string) (string, bool)) {
	list := func(s string) []string {
		var out []string
		for p := range strings.SplitSeq(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	if v, ok := lookup(EnvKafkaBrokers); ok && v != "" {
		c.Kafka.Brokers = list(v)
	}
	// The address variables choose how Redis is reached: one of them
	// replaces the file's addresses of every kind.
	var set []string
	vals := map[string]string{}
	for _, k := range []string{EnvRedisAddr, EnvRedisAddrs, EnvRedisSentinelAddrs} {
		if v, ok := lookup(k); ok && v != "" {
			set = append(set, k)
			vals[k] = v
		}
	}
	r := &c.Redis
	switch {
	case len(set) == 2:
		l.errs = append(l.errs, &Error{File: l.file, Field: "redis", Msg: "both " + set[0] + " and " + set[1] + " are set"})
	case len(set) == 3:
		l.errs = append(l.errs, &Error{File: l.file, Field: "redis", Msg: strings.Join(set[:2], ", ") + " and " + set[2] + " are all set"})
	case len(set) == 1 && set[0] == EnvRedisAddr:
		r.Addr, r.Addrs, r.Sentinel = vals[EnvRedisAddr], nil, Sentinel{}
	case len(set) == 1 && set[0] == EnvRedisAddrs:
		r.Addr, r.Addrs, r.Sentinel = "", list(vals[EnvRedisAddrs]), Sentinel{}
	case len(set) == 1:
		r.Addr, r.Addrs = "", nil
		r.Sentinel.Addrs, r.Sentinel.declared = list(vals[EnvRedisSentinelAddrs]), true
	}
	if v, ok := lookup(EnvRedisPassword); ok && v != "" {
		c.Redis.Password = Secret(v)
	}
	if v, ok := lookup(EnvHTTPListen); ok && v != "" {
		c.HTTP.Listen = v
	}
	l.applySecureEnv(c, lookup)
}
