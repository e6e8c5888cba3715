package ingest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/rankd/rankd/ranking"
)

// Defaults of the decoder limits.
const (
	// DefaultMaxMessageBytes is the largest message Decode accepts by default.
	DefaultMaxMessageBytes = 1 << 20
	// DefaultFutureSkew is how far ahead of the clock an event time may be by
	// default.
	DefaultFutureSkew = time.Minute
	// DefaultMaxIDLen is the longest message ID, in bytes, of the default
	// schemas: it becomes a dedupe key.
	DefaultMaxIDLen = 256
	// DefaultMaxKeyLen is the longest member and dims value, in bytes, of
	// the default schemas (they become sorted set members and key names),
	// and the max_len of their identifier fields.
	DefaultMaxKeyLen = 256
)

// DefaultMinTime is the event-time floor of the default schemas,
// 2000-01-01T00:00:00Z: earlier events (a ts of 0, say) are invalid.
func DefaultMinTime() time.Time { return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) }

// maxEventMilli is the last millisecond of year 9999, the latest event time.
const maxEventMilli = 253402300799999

// Event is one decoded message: where it came from, its identity, its event
// time and its declared fields (see Fields).
type Event struct {
	Topic     string
	Partition int
	Offset    int64
	// ID is the message ID used for dedupe: the id field, else the header
	// "id", else "topic/partition/offset".
	ID string
	// Time is the event time: the ts field (Unix milliseconds), else the
	// message timestamp.
	Time time.Time
	// Missing lists the declared fields the message did not give (or gave
	// as null): they hold their default in Fields. A field absent from
	// Fields counts as missing too.
	Missing []string

	// A decoded event holds its fields by position: the id field, the ts
	// field, then schema.Fields; one built by NewEvent holds them by name.
	schema  *Schema
	vals    []fieldValue
	fields  map[string]any
	missBuf []string // the memory of Missing, kept for DecodeTo
}

// Reset drops what ev holds, keeping its memory for DecodeTo.
func (ev *Event) Reset() {
	vals, miss := ev.vals[:0], ev.missBuf[:0]
	clear(vals[:cap(vals)])
	*ev = Event{vals: vals, missBuf: miss}
}

// NewEvent returns an event built by hand, not decoded: fields holds its
// fields by name (their Go types are checked when it is routed; missing
// ones take their default, the id and ts fields ev.ID and ev.Time). The
// event keeps the map.
func NewEvent(topic, id string, t time.Time, fields map[string]any) *Event {
	return &Event{Topic: topic, ID: id, Time: t, fields: fields}
}

// Fields returns the fields of the event, in a new map. For a decoded event
// they are every declared field of the schema, typed as the schema says
// (string, int64, float64, bool), missing ones with their default; plus the
// id field (the resolved ID) and the ts field (Time in Unix ms, int64). For
// an event of NewEvent, they are those it was given.
func (ev *Event) Fields() map[string]any {
	if ev.schema == nil {
		m := make(map[string]any, len(ev.fields))
		for k, v := range ev.fields {
			m[k] = v
		}
		return m
	}
	m := make(map[string]any, len(ev.vals))
	for i, v := range ev.vals {
		name, t := ev.schema.at(i)
		m[name] = t.box(v)
	}
	return m
}

// Field returns the value of one field of Fields.
func (ev *Event) Field(name string) (any, bool) {
	if ev.schema == nil {
		v, ok := ev.fields[name]
		return v, ok
	}
	for i, v := range ev.vals {
		if n, t := ev.schema.at(i); n == name {
			return t.box(v), true
		}
	}
	return nil, false
}

// missing reports whether the message did not give field name.
func (ev *Event) missing(name string) bool {
	if ev.schema == nil {
		if _, ok := ev.fields[name]; !ok {
			return true
		}
	}
	return slices.Contains(ev.Missing, name)
}

// at returns the name and type of the field at position i of a decoded
// event: the id field, the ts field, then Fields.
func (s *Schema) at(i int) (string, FieldType) {
	switch i {
	case 0:
		return s.IDField, TypeString
	case 1:
		return s.TSField, TypeInt
	}
	return s.Fields[i-2].Name, s.Fields[i-2].Type
}

// Header is one message header, as a Kafka client gives it.
type Header struct {
	Key   string
	Value []byte
}

// Schema describes the JSON messages of one topic and decodes them. A Schema
// must pass Validate before Decode is used; it is then safe for concurrent
// use.
type Schema struct {
	IDField string  // name of the message ID field (string)
	TSField string  // name of the event time field (int, Unix milliseconds)
	Fields  []Field // declared fields, excluding IDField and TSField
	// MaxBytes rejects larger messages with ReasonTooLarge; 0: no limit.
	MaxBytes int
	// FutureSkew rejects event times later than the message timestamp +
	// FutureSkew with ReasonFuture (Now() + FutureSkew for a message
	// without a timestamp); 0: no check.
	FutureSkew time.Duration
	Now        func() time.Time // clock for FutureSkew without a message timestamp; nil: time.Now
	// MaxIDLen rejects a message ID given by the message (the id field or
	// the "id" header) longer than this many bytes with ReasonValidation;
	// 0: no limit. The ID becomes a dedupe key.
	MaxIDLen int
	// MinTime rejects event times (from the ts field or the message
	// timestamp) before it with ReasonValidation; zero: no floor.
	MinTime time.Time
	// MaxKeyLen is the longest member and dims value, in bytes, the Router
	// gives for this topic's events; longer ones are rejected with
	// ReasonValidation. 0: no limit.
	MaxKeyLen int
}

// DefaultSchemas returns new schemas of the gift, like and comment topics of
// the example config, keyed by topic, with the default limits.
func DefaultSchemas() map[string]*Schema {
	// Identifiers become members and dims values: bounded like them.
	ident := func(names ...string) []Field {
		fs := make([]Field, len(names))
		for i, n := range names {
			fs[i] = Field{Name: n, Type: TypeString, MaxLen: DefaultMaxKeyLen}
		}
		return fs
	}
	common := func(extra ...Field) *Schema {
		return &Schema{
			IDField:    "id",
			TSField:    "ts",
			Fields:     append(ident("user_id", "anchor_id", "room_id", "zone"), extra...),
			MaxBytes:   DefaultMaxMessageBytes,
			FutureSkew: DefaultFutureSkew,
			MaxIDLen:   DefaultMaxIDLen,
			MinTime:    DefaultMinTime(),
			MaxKeyLen:  DefaultMaxKeyLen,
		}
	}
	return map[string]*Schema{
		"gift": common(
			Field{Name: "gift_id", Type: TypeString, MaxLen: DefaultMaxKeyLen},
			Field{Name: "count", Type: TypeInt, Min: int64(1)},
			Field{Name: "coins", Type: TypeInt, Min: int64(0)},
		),
		"like": common(
			Field{Name: "count", Type: TypeInt, Default: int64(1), Min: int64(1)},
		),
		"comment": common(
			Field{Name: "news_id", Type: TypeString, MaxLen: DefaultMaxKeyLen},
			Field{Name: "news_ts", Type: TypeInt},
			Field{Name: "text", Type: TypeString},
		),
	}
}

// Validate checks field names and types, that defaults match their types
// and lie within the bounds, the bounds and the limits. It reports every
// problem.
func (s *Schema) Validate() error {
	var errs []error
	if !ranking.IsIdent(s.IDField) {
		errs = append(errs, fmt.Errorf("id field %q is not an identifier", s.IDField))
	}
	if !ranking.IsIdent(s.TSField) {
		errs = append(errs, fmt.Errorf("ts field %q is not an identifier", s.TSField))
	}
	if s.IDField == s.TSField {
		errs = append(errs, fmt.Errorf("id and ts fields are both %q", s.IDField))
	}
	if s.MaxBytes < 0 || s.FutureSkew < 0 {
		errs = append(errs, errors.New("negative max bytes or future skew"))
	}
	if s.MaxIDLen < 0 {
		errs = append(errs, fmt.Errorf("negative max_id_len %d", s.MaxIDLen))
	}
	if s.MaxKeyLen < 0 {
		errs = append(errs, fmt.Errorf("negative max_key_len %d", s.MaxKeyLen))
	}
	seen := map[string]bool{s.IDField: true, s.TSField: true}
	for _, f := range s.Fields {
		switch {
		case !ranking.IsIdent(f.Name):
			errs = append(errs, fmt.Errorf("field %q is not an identifier", f.Name))
		case seen[f.Name]:
			errs = append(errs, fmt.Errorf("field %q declared twice (or as the id or ts field)", f.Name))
		default:
			errs = f.validate(errs)
		}
		seen[f.Name] = true
	}
	return errors.Join(errs...)
}

// Field returns the type of the named field; the id field is a string and
// the ts field an int.
func (s *Schema) Field(name string) (FieldType, bool) {
	switch name {
	case s.IDField:
		return TypeString, true
	case s.TSField:
		return TypeInt, true
	}
	for _, f := range s.Fields {
		if f.Name == name {
			return f.Type, true
		}
	}
	return 0, false
}

// env returns the fields an event of this schema has, with zero values of
// their Go types: the expression environment.
func (s *Schema) env() map[string]any {
	env := make(map[string]any, len(s.Fields)+2)
	env[s.IDField] = ""
	env[s.TSField] = int64(0)
	for _, f := range s.Fields {
		env[f.Name] = f.Type.zero()
	}
	return env
}

// Decode decodes the value of a message into an Event. Every error is a
// *PermanentError: too_large, decode (not a UTF-8 JSON object), validation
// (wrong type, missing required field, a value outside its field's Min,
// Max or MaxLen, an ID longer than MaxIDLen, an event time before MinTime,
// no event time), out_of_range (a number beyond int64 or float64) or
// future. Fields not declared are ignored; a JSON null counts as absent.
func (s *Schema) Decode(topic string, partition int, offset int64, value []byte, headers []Header, msgTime time.Time) (*Event, error) {
	d := &decoded{}
	d.ev.vals, d.ev.missBuf = d.vals[:0], d.miss[:0]
	if err := s.DecodeTo(&d.ev, topic, partition, offset, value, headers, msgTime); err != nil {
		return nil, err
	}
	return &d.ev, nil
}

// DecodeTo is Decode into ev, reusing its memory: ev is a new Event, or
// one of an earlier Decode or DecodeTo that is not used any more. On error
// ev holds no event.
func (s *Schema) DecodeTo(ev *Event, topic string, partition int, offset int64, value []byte, headers []Header, msgTime time.Time) error {
	return s.decodeReset(ev, topic, partition, offset, value, headers, msgTime, false)
}

// DecodeToKept is DecodeTo of a value that stays as it is for as long as
// ev, or any string it gave out, is in use: their strings point into value
// instead of into a copy of it (a message's value read from Kafka is its
// own allocation, which no one writes after).
func (s *Schema) DecodeToKept(ev *Event, topic string, partition int, offset int64, value []byte, headers []Header, msgTime time.Time) error {
	return s.decodeReset(ev, topic, partition, offset, value, headers, msgTime, true)
}

func (s *Schema) decodeReset(ev *Event, topic string, partition int, offset int64, value []byte, headers []Header, msgTime time.Time, kept bool) error {
	ev.Reset()
	if err := s.decodeTo(ev, topic, partition, offset, value, headers, msgTime, kept); err != nil {
		ev.Reset()
		return err
	}
	return nil
}

// decodeTo is DecodeTo into ev, just Reset; with kept, DecodeToKept.
func (s *Schema) decodeTo(ev *Event, topic string, partition int, offset int64, value []byte, headers []Header, msgTime time.Time, kept bool) error {
	if s.MaxBytes > 0 && len(value) > s.MaxBytes {
		return permanent(ReasonTooLarge, "message of %d bytes exceeds %d", len(value), s.MaxBytes)
	}
	if !utf8.Valid(value) {
		return permanent(ReasonDecode, "message is not valid UTF-8")
	}
	var buf [24]member
	members, err := scanObject(value, buf[:0])
	if err != nil {
		return &PermanentError{Reason: ReasonDecode, Err: err}
	}
	// Later duplicates win, as with encoding/json.
	idIdx, tsIdx := -1, -1
	var foundBuf [32]int // declared field -> index+1 of its member
	var found []int
	if len(s.Fields) <= len(foundBuf) {
		found = foundBuf[:len(s.Fields)]
	} else {
		found = make([]int, len(s.Fields))
	}
	for mi, m := range members {
		key := m.key.raw(value)
		if m.key.esc {
			key = []byte(m.key.str(value))
		}
		switch string(key) {
		case s.IDField:
			idIdx = mi
			continue
		case s.TSField:
			tsIdx = mi
			continue
		}
		for fi := range s.Fields {
			if s.Fields[fi].Name == string(key) {
				found[fi] = mi + 1
				break
			}
		}
	}

	ev.Topic, ev.Partition, ev.Offset, ev.schema = topic, partition, offset, s
	if n := len(s.Fields) + 2; n <= cap(ev.vals) {
		ev.vals = ev.vals[:n] // zero (Reset)
	} else {
		ev.vals = make([]fieldValue, n)
	}
	ev.Missing = ev.missBuf[:0]
	// The strings of small messages share one copy of it (kept: share it).
	msg := ""
	switch {
	case len(value) > maxSharedMessage || len(value) == 0:
	case kept:
		msg = unsafe.String(&value[0], len(value))
	default:
		msg = string(value)
	}
	if err := s.decodeFields(ev, value, members, found, msg); err != nil {
		return err
	}
	if err := s.decodeID(ev, value, members, idIdx, headers, msg); err != nil {
		return err
	}
	if err := s.decodeTime(ev, value, members, tsIdx, msgTime); err != nil {
		return err
	}
	ev.missBuf = ev.Missing[:0]
	if len(ev.Missing) == 0 {
		ev.Missing = nil
	}
	ev.vals[0] = fieldValue{s: ev.ID}
	ev.vals[1] = fieldValue{n: uint64(ev.Time.UnixMilli())}
	return nil
}

// maxSharedMessage is the size of the largest message whose field strings
// share one copy of it: a larger one's are copied one by one, so that a
// field kept does not keep a large message.
const maxSharedMessage = 4096

// decoded is an Event with room for the values and missing fields of
// common schemas: one allocation.
type decoded struct {
	ev   Event
	vals [12]fieldValue
	miss [4]string
}

// decodeFields sets the declared fields of ev from members of the message b (found: the
// index+1 of each field's member, 0 when absent): converted and checked,
// or their default when absent or null and not required. msg is the
// message for parse.
func (s *Schema) decodeFields(ev *Event, b []byte, members []member, found []int, msg string) error {
	for fi := range s.Fields {
		f := &s.Fields[fi]
		at := found[fi]
		if at == 0 || members[at-1].val.kind == jsonNull {
			if f.Required {
				return permanent(ReasonValidation, "missing required field %q", f.Name)
			}
			if f.Default != nil {
				ev.vals[fi+2] = f.Type.valueOf(f.Default)
			}
			ev.Missing = append(ev.Missing, f.Name)
			continue
		}
		v, err := f.Type.parse(members[at-1].val, b, msg)
		if err != nil {
			return fieldError(f.Name, err)
		}
		if err := f.check(v); err != nil {
			return fieldError(f.Name, err)
		}
		ev.vals[fi+2] = v
	}
	return nil
}

// decodeID sets ev's message ID: the ID field (members[idIdx]; -1: none),
// else the "id" header, else "<topic>/<partition>/<offset>". msg is the
// message for parse.
func (s *Schema) decodeID(ev *Event, b []byte, members []member, idIdx int, headers []Header, msg string) error {
	if idIdx >= 0 && members[idIdx].val.kind != jsonNull {
		v, err := TypeString.parse(members[idIdx].val, b, msg)
		if err != nil {
			return fieldError(s.IDField, err)
		}
		ev.ID = v.s
		if s.MaxIDLen > 0 && len(ev.ID) > s.MaxIDLen {
			return permanent(ReasonValidation, "field %q: message ID of %d bytes exceeds max_id_len %d", s.IDField, len(ev.ID), s.MaxIDLen)
		}
	}
	if ev.ID == "" {
		for _, h := range headers {
			if h.Key == "id" && len(h.Value) > 0 {
				if s.MaxIDLen > 0 && len(h.Value) > s.MaxIDLen {
					return permanent(ReasonValidation, "header \"id\": message ID of %d bytes exceeds max_id_len %d", len(h.Value), s.MaxIDLen)
				}
				if !utf8.Valid(h.Value) {
					return permanent(ReasonValidation, "header \"id\" is not valid UTF-8")
				}
				ev.ID = string(h.Value)
				break
			}
		}
	}
	if ev.ID == "" {
		ev.ID = ev.Topic + "/" + strconv.Itoa(ev.Partition) + "/" + strconv.FormatInt(ev.Offset, 10)
	}
	return nil
}

// decodeTime sets ev's event time: the time field (members[tsIdx]; -1:
// none), else the message timestamp msgTime; it must be at or after
// MinTime and, with FutureSkew, not further ahead of the message timestamp.
func (s *Schema) decodeTime(ev *Event, b []byte, members []member, tsIdx int, msgTime time.Time) error {
	ev.Time = msgTime
	fromTS := false
	if tsIdx >= 0 && members[tsIdx].val.kind != jsonNull {
		v, err := TypeInt.parse(members[tsIdx].val, b, "")
		if err != nil {
			return fieldError(s.TSField, err)
		}
		ms := int64(v.n)
		if ms < 0 || ms > maxEventMilli {
			return permanent(ReasonOutOfRange, "field %q: %d ms is outside years 1970 to 9999", s.TSField, ms)
		}
		ev.Time = time.UnixMilli(ms).UTC()
		fromTS = true
	}
	if ev.Time.IsZero() {
		return permanent(ReasonValidation, "no %q field and no message timestamp", s.TSField)
	}
	if !s.MinTime.IsZero() && ev.Time.Before(s.MinTime) {
		src := "message timestamp"
		if fromTS {
			src = fmt.Sprintf("field %q", s.TSField)
		}
		return permanent(ReasonValidation, "%s: event time %s is before min_time %s", src,
			ev.Time.UTC().Format(time.RFC3339Nano), s.MinTime.UTC().Format(time.RFC3339Nano))
	}
	if s.FutureSkew > 0 {
		// Judged against the message's own timestamp, which is part of the
		// log, so that a replay decides as the live run did; the clock only
		// when the message has no timestamp.
		ref := msgTime
		if ref.IsZero() {
			ref = time.Now()
			if s.Now != nil {
				ref = s.Now()
			}
		}
		if limit := ref.Add(s.FutureSkew); ev.Time.After(limit) {
			return permanent(ReasonFuture, "event time %s is more than %v ahead of the message timestamp %s",
				ev.Time.UTC().Format(time.RFC3339Nano), s.FutureSkew, ref.UTC().Format(time.RFC3339Nano))
		}
	}
	return nil
}

// fieldError wraps a conversion error of field name, keeping its reason.
func fieldError(name string, err error) error {
	var pe *PermanentError
	if errors.As(err, &pe) {
		return &PermanentError{Reason: pe.Reason, Err: fmt.Errorf("field %q: %w", name, pe.Err)}
	}
	return &PermanentError{Reason: ReasonValidation, Err: fmt.Errorf("field %q: %w", name, err)}
}

// finite reports whether f is neither NaN nor infinite.
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Reasons of permanent errors. They name the dead-letter header and the
// label of the dead-letter metric, so they are stable.
const (
	// ReasonDecode: the message is not a UTF-8 JSON object.
	ReasonDecode = "decode"
	// ReasonValidation: a field has the wrong type, a required field is
	// missing, or a value exceeds a limit of the schema (a field's min, max
	// or max_len, the ID length, the event-time floor, the length of a
	// routed member or dims value).
	ReasonValidation = "validation"
	// ReasonTooLarge: the message exceeds the configured maximum size.
	ReasonTooLarge = "too_large"
	// ReasonFuture: the event time is too far ahead of the clock.
	ReasonFuture = "future"
	// ReasonLate: the stream time of the event's partition had passed its period's end plus the grace (reported by the store).
	ReasonLate = "late"
	// ReasonOutOfRange: a number does not fit (int64, a board's exact
	// range, a sort factor's bits).
	ReasonOutOfRange = "out_of_range"
	// ReasonNoMember: a route's member expression gave an empty member.
	ReasonNoMember = "no_member"
	// ReasonExpression: a route expression failed at run time (e.g. an
	// integer division by zero) or gave a value of the wrong type.
	ReasonExpression = "expression"
	// ReasonNoRoute: no route is declared for the event's topic.
	ReasonNoRoute = "no_route"
)

// Reasons returns every dead-letter reason of decoding and routing, and of
// the store's verdicts, in a fixed order (for metrics that must exist from
// the start).
func Reasons() []string {
	return []string{ReasonDecode, ReasonValidation, ReasonTooLarge, ReasonFuture, ReasonLate,
		ReasonOutOfRange, ReasonNoMember, ReasonExpression, ReasonNoRoute}
}

// PermanentError is an error that retrying cannot fix: the message is
// dead-lettered with Reason and its offset committed.
type PermanentError struct {
	Reason string // one of the Reason constants
	Err    error
}

// Error returns the reason and the underlying error.
func (e *PermanentError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *PermanentError) Unwrap() error { return e.Err }

// IsPermanent reports whether err is, or wraps, a *PermanentError.
func IsPermanent(err error) bool {
	var pe *PermanentError
	return errors.As(err, &pe)
}

// Reason returns the reason of the first *PermanentError in err's chain, or
// "" when err is not permanent.
func Reason(err error) string {
	var pe *PermanentError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return ""
}

// permanent returns a *PermanentError with a formatted message.
func permanent(reason, format string, args ...any) error {
	return &PermanentError{Reason: reason, Err: fmt.Errorf(format, args...)}
}
