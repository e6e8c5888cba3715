package ingest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
	"github.com/rankd/rankd/ranking"
)

// Route maps events of one topic to updates of some boards. Expressions use
// the expr language (github.com/expr-lang/expr) over the fields of the
// topic's Schema (declared fields plus the id and ts fields); the builtin
// now() is not available, so that a replay routes exactly like the live run.
type Route struct {
	Topic string
	// When filters events: a bool expression; empty means always.
	When string
	// Member names the member: a string or integer expression (an integer
	// becomes its decimal text). Required.
	Member string
	// Score is the value of boards without Sort: a numeric expression;
	// empty means 1. It becomes round(score * 10^Decimals).
	Score string
	// Sort gives, for boards with Sort, one integer expression per factor,
	// keyed by factor name; the factors are packed with PackSort.
	Sort map[string]string
	// Base is the member's starting value on boards with HasBase: a numeric
	// expression; empty means no base.
	Base   string
	Boards []string
}

// RouteError is an error in one route, found by NewRouter.
type RouteError struct {
	Index int // index of the route in the slice given to NewRouter
	// Field is the path of the offending part within the route: "topic",
	// "when", "member", "score", "base", "sort", "sort.<factor>" or
	// "boards[<i>]".
	Field string
	Err   error
}

// Error returns "routes[<index>].<field>: <error>".
func (e *RouteError) Error() string {
	return fmt.Sprintf("routes[%d].%s: %v", e.Index, e.Field, e.Err)
}

// Unwrap returns the underlying error.
func (e *RouteError) Unwrap() error { return e.Err }

// Router turns events into board updates. It is safe for concurrent use.
type Router struct {
	topics map[string]*topicRouter
}

// topicRouter holds the compiled routes of one topic and pooled evaluation
// state (a VM and an environment map, reused across events).
type topicRouter struct {
	schema   *Schema
	names    []string    // environment fields: id, ts, then declared
	types    []FieldType // their types
	defaults []any       // values of missing declared fields
	// used[i]: some expression of the routes may read names[i] (the
	// environment holds only those of a decoded event)
	used   []bool
	routes []*compiledRoute
	pool   sync.Pool // *evalState
}

type evalState struct {
	vm     vm.VM
	env    map[string]any
	fields []fieldValue // an event built by hand: its fields by position, as a decoded event holds them
	vals   []int64      // sort factor values
	pack   []int64      // one board's factors in board order
}

type compiledRoute struct {
	when, member, score, base *vm.Program // when, base: nil when absent
	memberSrc                 string
	maxKey                    int      // Schema.MaxKeyLen: longest member and dims value; 0: no limit
	needScore                 bool     // some board has no sort factors
	sortNames                 []string // sorted factor names
	sort                      []*vm.Program
	boards                    []routeBoard
	// how member, score, base and sort run without the VM, when they can
	memberSC, scoreSC, baseSC shortcut
	sortSC                    []shortcut
}

type routeBoard struct {
	b    *ranking.Board
	max  int64 // Codec.MaxValue
	dims []string
	// needDims[i]: dims[i] is a declared field without a default, which a
	// message must give (else a gift without room_id would land on the
	// room "" board).
	needDims []bool
	dimIdx   []int       // dims[i] is the environment field dimIdx[i]
	dimTypes []FieldType // of type dimTypes[i]
	sortIdx  []int       // board factor i is route factor sortIdx[i]
}

// NewRouter compiles every route once against the schema of its topic. It
// reports every problem as a *RouteError, joined: unknown topic or board,
// expressions that do not compile, use unknown fields or have the wrong type,
// dims fields the topic lacks, sort factors that do not match the board,
// and a base for a board without HasBase.
func NewRouter(boards []*ranking.Board, schemas map[string]*Schema, routes []Route) (*Router, error) {
	byName := make(map[string]*ranking.Board, len(boards))
	codecs := make(map[string]ranking.Codec, len(boards))
	var errs []error
	for _, b := range boards {
		c, err := ranking.NewCodec(b)
		if err != nil {
			// Keep the board known, so that its routes are still checked.
			errs = append(errs, err)
		}
		byName[b.Name], codecs[b.Name] = b, c
	}
	r := &Router{topics: map[string]*topicRouter{}}
	for i, rt := range routes {
		fail := func(field string, err error) {
			errs = append(errs, &RouteError{Index: i, Field: field, Err: err})
		}
		s := schemas[rt.Topic]
		if s == nil {
			fail("topic", fmt.Errorf("no schema for topic %q", rt.Topic))
			continue
		}
		tr := r.topics[rt.Topic]
		if tr == nil {
			if err := s.Validate(); err != nil {
				fail("topic", fmt.Errorf("topic %q: %w", rt.Topic, err))
				continue
			}
			tr = newTopicRouter(s)
			r.topics[rt.Topic] = tr
		}
		cr, routeErrs := compileRoute(rt, s, byName, codecs)
		for _, e := range routeErrs {
			e.Index = i
			errs = append(errs, e)
		}
		if len(routeErrs) == 0 {
			tr.routes = append(tr.routes, cr)
			tr.use(cr)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

func newTopicRouter(s *Schema) *topicRouter {
	tr := &topicRouter{schema: s}
	tr.names = append(tr.names, s.IDField, s.TSField)
	tr.types = append(tr.types, TypeString, TypeInt)
	tr.defaults = append(tr.defaults, nil, nil)
	for _, f := range s.Fields {
		tr.names = append(tr.names, f.Name)
		tr.types = append(tr.types, f.Type)
		tr.defaults = append(tr.defaults, f.defaultValue())
	}
	tr.used = make([]bool, len(tr.names))
	tr.pool.New = func() any { return &evalState{env: s.env()} }
	return tr
}

// use marks the environment fields the expressions of cr read, and the
// positions of its boards' dims fields.
func (tr *topicRouter) use(cr *compiledRoute) {
	ids := map[string]bool{}
	vmRuns := func(p *vm.Program, sc shortcut) {
		if p != nil && sc.field < 0 && !sc.konst {
			identifiers(p.Node(), ids)
		}
	}
	vmRuns(cr.when, shortcut{field: -1})
	vmRuns(cr.member, cr.memberSC)
	vmRuns(cr.score, cr.scoreSC)
	vmRuns(cr.base, cr.baseSC)
	for i, p := range cr.sort {
		vmRuns(p, cr.sortSC[i])
	}
	for i, name := range tr.names {
		// $env reads the environment as a whole
		tr.used[i] = tr.used[i] || ids[name] || ids["$env"]
	}
	for bi := range cr.boards {
		rb := &cr.boards[bi]
		rb.dimIdx = make([]int, len(rb.dims))
		for i, d := range rb.dims {
			rb.dimIdx[i] = slices.Index(tr.names, d)
			rb.dimTypes = append(rb.dimTypes, tr.types[rb.dimIdx[i]])
		}
	}
}

// identifiers adds the names of the identifiers of an expression to ids.
func identifiers(n ast.Node, ids map[string]bool) {
	ast.Walk(&n, identVisitor(ids))
}

type identVisitor map[string]bool

func (v identVisitor) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok {
		v[id.Value] = true
	}
}

// Route returns the updates of ev: for each route of ev.Topic whose When
// holds, one update per board, in route then board order. All updates share
// ev.ID and ev.Time. It is all or nothing: on error no update is returned.
// Every error is a *PermanentError: no_route (no route for the topic),
// validation (a field of the wrong Go type in an event of NewEvent),
// expression (a run-time failure or a result of the wrong type), no_member
// (an empty member), validation (a member or dims value longer than the schema's
// MaxKeyLen, or a dims field without a default that the event lacks) or
// out_of_range (a non-finite score, or a value or base outside
// int64 or the board's exact range, or a sort factor outside its bits).
// An event no route's When accepts gives no updates and no error.
func (r *Router) Route(ev *Event) ([]ranking.Update, error) {
	ups, err := r.AppendRoute(nil, ev)
	if err != nil {
		return nil, err
	}
	return ups, nil
}

// AppendRoute is Route appending to dst; on error it returns dst unchanged.
func (r *Router) AppendRoute(dst []ranking.Update, ev *Event) ([]ranking.Update, error) {
	tr := r.topics[ev.Topic]
	if tr == nil {
		return dst, permanent(ReasonNoRoute, "no route for topic %q", ev.Topic)
	}
	st := tr.pool.Get().(*evalState)
	defer tr.pool.Put(st)
	fields, err := tr.fill(st, ev)
	if err != nil {
		return dst, err
	}
	n := len(dst)
	for _, cr := range tr.routes {
		var err error
		if dst, err = cr.eval(st, ev, fields, dst); err != nil {
			clear(dst[n:])
			return dst[:n], err
		}
	}
	return dst, nil
}

// fill sets the environment of st to the event's fields and returns them
// by position (names, types). A decoded event gives them by position (of
// a schema with the same fields), and the environment gets those an
// expression may read; one built by hand gives them by name, with their Go
// types checked. Missing fields take their default; the id and ts fields
// default to ev.ID and ev.Time.
func (tr *topicRouter) fill(st *evalState, ev *Event) ([]fieldValue, error) {
	if ev.schema != nil && tr.fits(ev.schema) {
		for i, name := range tr.names {
			if tr.used[i] {
				st.env[name] = tr.types[i].box(ev.vals[i])
			}
		}
		return ev.vals, nil
	}
	fields := ev.fields
	if ev.schema != nil {
		fields = ev.Fields()
	}
	st.fields = slices.Grow(st.fields[:0], len(tr.names))[:len(tr.names)]
	for i, name := range tr.names {
		v, ok := fields[name]
		switch {
		case ok && !tr.types[i].holds(v):
			return nil, permanent(ReasonValidation, "field %q: want %s, got %T", name, tr.types[i].goType(), v)
		case ok:
		case i == 0:
			v = ev.ID
		case i == 1:
			v = ev.Time.UnixMilli()
		default:
			v = tr.defaults[i]
		}
		st.env[name] = v
		st.fields[i] = tr.types[i].valueOf(v)
	}
	return st.fields, nil
}

// fits reports whether the fields of an event of schema s have the
// positions, names and types of tr's.
func (tr *topicRouter) fits(s *Schema) bool {
	if s == tr.schema {
		return true
	}
	if len(s.Fields)+2 != len(tr.names) {
		return false
	}
	for i := range tr.names {
		if name, t := s.at(i); name != tr.names[i] || t != tr.types[i] {
			return false
		}
	}
	return true
}

// run runs p on the state's environment.
func (st *evalState) run(p *vm.Program, what string) (any, error) {
	v, err := st.vm.Run(p, st.env)
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return nil, permanent(ReasonExpression, "%s: %s", what, msg)
	}
	return v, nil
}

// eval appends the route's updates of one event to dst; fields are the
// event's fields by position (fill).
func (cr *compiledRoute) eval(st *evalState, ev *Event, fields []fieldValue, dst []ranking.Update) ([]ranking.Update, error) {
	if cr.when != nil {
		ok, err := st.run(cr.when, "when")
		if err != nil {
			return dst, err
		}
		if ok != true {
			return dst, nil
		}
	}
	var member string
	var err error
	if sc := &cr.memberSC; sc.field >= 0 {
		member, err = sc.member(fields[sc.field])
	} else {
		var mv any
		if mv, err = st.run(cr.member, "member"); err == nil {
			member, err = memberString(mv)
		}
	}
	if err != nil {
		return dst, err
	}
	if member == "" {
		return dst, permanent(ReasonNoMember, "empty member from %q", cr.memberSrc)
	}
	if cr.maxKey > 0 && len(member) > cr.maxKey {
		return dst, permanent(ReasonValidation, "member from %q: %d bytes exceed max_key_len %d", cr.memberSrc, len(member), cr.maxKey)
	}
	var score, base number
	if cr.needScore {
		if score, err = cr.number(st, fields, cr.score, &cr.scoreSC, "score"); err != nil {
			return dst, err
		}
	}
	if cr.base != nil {
		if base, err = cr.number(st, fields, cr.base, &cr.baseSC, "base"); err != nil {
			return dst, err
		}
	}
	st.vals = st.vals[:0]
	for i, p := range cr.sort {
		what := "sort." + cr.sortNames[i]
		n, err := cr.number(st, fields, p, &cr.sortSC[i], what)
		if err != nil {
			return dst, err
		}
		v, err := n.integer(what)
		if err != nil {
			return dst, err
		}
		st.vals = append(st.vals, v)
	}
	for _, rb := range cr.boards {
		u := ranking.Update{Board: rb.b.Name, Member: member, Time: ev.Time, MsgID: ev.ID}
		if len(rb.dims) > 0 {
			u.Dims = make([]string, len(rb.dims))
			for i, d := range rb.dims {
				if rb.needDims[i] && ev.missing(d) {
					return dst, permanent(ReasonValidation, "board %q: missing dims field %q (give it, or a default under topics.%s.fields)",
						rb.b.Name, d, ev.Topic)
				}
				u.Dims[i] = dimString(fields[rb.dimIdx[i]], rb.dimTypes[i])
				if cr.maxKey > 0 && len(u.Dims[i]) > cr.maxKey {
					return dst, permanent(ReasonValidation, "board %q: dims field %q: %d bytes exceed max_key_len %d",
						rb.b.Name, d, len(u.Dims[i]), cr.maxKey)
				}
			}
		}
		if len(rb.b.Sort) > 0 {
			st.pack = st.pack[:0]
			for _, k := range rb.sortIdx {
				st.pack = append(st.pack, st.vals[k])
			}
			if u.Value, err = ranking.PackSort(rb.b.Sort, st.pack); err != nil {
				return dst, &PermanentError{Reason: ReasonOutOfRange, Err: fmt.Errorf("board %q: %w", rb.b.Name, err)}
			}
		} else if u.Value, err = score.fixed("score", rb.b.Decimals); err != nil {
			return dst, err
		}
		if u.Value > rb.max || u.Value < -rb.max {
			return dst, permanent(ReasonOutOfRange, "board %q: value %d outside ±%d", rb.b.Name, u.Value, rb.max)
		}
		if cr.base != nil {
			if u.Base, err = base.fixed("base", rb.b.Decimals); err != nil {
				return dst, err
			}
			if u.Base > rb.max || u.Base < -rb.max {
				return dst, permanent(ReasonOutOfRange, "board %q: base %d outside ±%d", rb.b.Name, u.Base, rb.max)
			}
			u.HasBase = true
		}
		dst = append(dst, u)
	}
	return dst, nil
}

// number runs a numeric expression (sc: its shortcut).
func (cr *compiledRoute) number(st *evalState, fields []fieldValue, p *vm.Program, sc *shortcut, what string) (number, error) {
	switch {
	case sc.konst:
		return sc.num, sc.numErr
	case sc.field >= 0:
		return sc.number(fields[sc.field], what)
	}
	v, err := st.run(p, what)
	if err != nil {
		return number{}, err
	}
	return toNumber(what, v)
}

// dimString formats a dims field value (string, int or bool).
func dimString(v fieldValue, t FieldType) string {
	switch t {
	case TypeString:
		return v.s
	case TypeInt:
		return strconv.FormatInt(int64(v.n), 10)
	case TypeBool:
		return strconv.FormatBool(v.n != 0)
	}
	return fmt.Sprint(t.box(v))
}
