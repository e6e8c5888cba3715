package ingest

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
	"github.com/rankd/rankd/ranking"
)

// compileRoute compiles one route; the errors' Index is left to the caller.
func compileRoute(rt Route, s *Schema, boards map[string]*ranking.Board, codecs map[string]ranking.Codec) (*compiledRoute, []*RouteError) {
	var errs []*RouteError
	fail := func(field string, format string, args ...any) {
		errs = append(errs, &RouteError{Field: field, Err: fmt.Errorf(format, args...)})
	}
	env := s.env()
	compile := func(field, src string, kind exprKind) *vm.Program {
		p, err := compileExpr(src, env, kind)
		if err != nil {
			errs = append(errs, &RouteError{Field: field, Err: err})
		}
		return p
	}
	cr := &compiledRoute{memberSrc: rt.Member, maxKey: s.MaxKeyLen}
	if rt.When != "" {
		cr.when = compile("when", rt.When, kindBool)
	}
	if rt.Member == "" {
		fail("member", "missing member expression")
	} else {
		cr.member = compile("member", rt.Member, kindMember)
	}
	score := rt.Score
	if score == "" {
		score = "1"
	}
	cr.score = compile("score", score, kindNumber)
	if rt.Base != "" {
		cr.base = compile("base", rt.Base, kindNumber)
	}
	cr.sortNames = slices.Sorted(maps.Keys(rt.Sort))
	usedFactors := map[string]bool{}
	for _, name := range cr.sortNames {
		cr.sort = append(cr.sort, compile("sort."+name, rt.Sort[name], kindNumber))
	}
	if len(rt.Boards) == 0 {
		fail("boards", "no boards")
	}
	for j, name := range rt.Boards {
		field := fmt.Sprintf("boards[%d]", j)
		b, ok := boards[name]
		if !ok {
			fail(field, "unknown board %q", name)
			continue
		}
		if k := slices.Index(rt.Boards, name); k < j {
			// Every event would update the board twice (a sum counted twice).
			fail(field, "board %q is listed twice (also boards[%d])", name, k)
			continue
		}
		rb := routeBoard{b: b, max: codecs[name].MaxValue(), dims: b.Dims, needDims: make([]bool, len(b.Dims))}
		for i, d := range b.Dims {
			for _, f := range s.Fields {
				if f.Name == d {
					rb.needDims[i] = f.Default == nil
				}
			}
			switch t, ok := s.Field(d); {
			case !ok:
				fail(field, "board %q: dims field %q is not a field of topic %q", name, d, rt.Topic)
			case t == TypeFloat:
				fail(field, "board %q: dims field %q is a float", name, d)
			}
		}
		if rt.Base != "" && !b.HasBase {
			fail("base", "board %q does not take a base", name)
		}
		if b.Decimals < 0 || b.Decimals >= len(pow10) {
			fail(field, "board %q: decimals %d out of [0, %d]", name, b.Decimals, len(pow10)-1)
		}
		if len(b.Sort) == 0 {
			cr.needScore = true
			if len(rt.Sort) > 0 {
				fail(field, "board %q has no sort factors, but the route gives sort", name)
			}
		} else {
			var want []string
			for _, f := range b.Sort {
				k, found := slices.BinarySearch(cr.sortNames, f.Name)
				want = append(want, f.Name)
				rb.sortIdx = append(rb.sortIdx, k)
				usedFactors[f.Name] = true
				if !found {
					fail(field, "board %q needs sort factor %q (factors: %s)", name, f.Name, strings.Join(want, ", "))
				}
			}
		}
		cr.boards = append(cr.boards, rb)
	}
	cr.memberSC = shortcutOf(cr.member, s, "member", env)
	cr.scoreSC = shortcutOf(cr.score, s, "score", env)
	cr.baseSC = shortcutOf(cr.base, s, "base", env)
	for i, p := range cr.sort {
		cr.sortSC = append(cr.sortSC, shortcutOf(p, s, "sort."+cr.sortNames[i], env))
	}
	if rt.Score != "" && !cr.needScore && len(cr.boards) > 0 {
		fail("score", "every board of the route is multi-factor: give sort instead of score")
	}
	for _, name := range cr.sortNames {
		if !usedFactors[name] {
			fail("sort."+name, "no board of the route has sort factor %q", name)
		}
	}
	return cr, errs
}

// shortcut is how an expression that needs no VM runs: one that is a
// field of the event gives the field's value (what the VM would give); a
// number constant gives the number (and error) it gave once at compile
// time.
type shortcut struct {
	field  int       // position of the field (id, ts, then declared), or -1
	typ    FieldType // the field's type
	konst  bool      // a number constant: num, numErr
	num    number
	numErr error
}

// shortcutOf returns the shortcut of p (nil: none), an expression of the
// fields of s (whose environment is env) given as what in errors.
func shortcutOf(p *vm.Program, s *Schema, what string, env map[string]any) shortcut {
	sc := shortcut{field: -1}
	if p == nil {
		return sc
	}
	switch n := p.Node().(type) {
	case *ast.IdentifierNode:
		for i := 0; i < len(s.Fields)+2; i++ {
			if name, t := s.at(i); name == n.Value {
				sc.field, sc.typ = i, t
			}
		}
	case *ast.IntegerNode, *ast.FloatNode:
		v, err := vm.Run(p, env)
		if err == nil {
			sc.num, sc.numErr = toNumber(what, v)
			sc.konst = true
		}
	}
	return sc
}

// member is memberString of the field's value v.
func (sc *shortcut) member(v fieldValue) (string, error) {
	switch sc.typ {
	case TypeString:
		return v.s, nil
	case TypeInt:
		return strconv.FormatInt(int64(v.n), 10), nil
	}
	return memberString(sc.typ.box(v))
}

// number is toNumber of the field's value v.
func (sc *shortcut) number(v fieldValue, what string) (number, error) {
	switch sc.typ {
	case TypeInt:
		return number{i: int64(v.n)}, nil
	case TypeFloat:
		f := math.Float64frombits(v.n)
		return number{f: f, isFloat: true}, finiteOrErr(what, f)
	}
	return toNumber(what, sc.typ.box(v))
}

// exprKind is the type an expression must produce.
type exprKind int

const (
	kindBool exprKind = iota
	kindMember
	kindNumber
)

// compileExpr compiles src against env and checks its static type; an
// expression of unknown static type (any) is checked when it runs.
func compileExpr(src string, env map[string]any, kind exprKind) (*vm.Program, error) {
	opts := []expr.Option{expr.Env(env), expr.DisableBuiltin("now")}
	if kind == kindBool {
		opts = append(opts, expr.AsBool())
	}
	p, err := expr.Compile(src, opts...)
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return nil, fmt.Errorf("%q: %s", src, msg)
	}
	t := p.Node().Type()
	if t == nil || t.Kind() == reflect.Interface {
		return p, nil
	}
	switch {
	case kind == kindMember && (t.Kind() == reflect.String || isIntKind(t.Kind())):
	case kind == kindNumber && (isIntKind(t.Kind()) || t.Kind() == reflect.Float64 || t.Kind() == reflect.Float32):
	case kind == kindBool:
	default:
		want := map[exprKind]string{kindMember: "a string or an integer", kindNumber: "a number"}[kind]
		return nil, fmt.Errorf("%q: want %s, got %v", src, want, t)
	}
	return p, nil
}

func isIntKind(k reflect.Kind) bool {
	return reflect.Int <= k && k <= reflect.Uint64
}

// pow10[d] is 10^d; the largest is the largest power of ten in an int64.
var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// finiteOrErr rejects NaN and infinities with ReasonOutOfRange.
func finiteOrErr(what string, f float64) error {
	if !finite(f) {
		return permanent(ReasonOutOfRange, "%s is %v", what, f)
	}
	return nil
}

// number is an expression result: an integer or a float.
type number struct {
	i       int64
	f       float64
	isFloat bool
}

// toNumber converts an expression result to a number.
func toNumber(what string, v any) (number, error) {
	switch x := v.(type) {
	case int:
		return number{i: int64(x)}, nil
	case int64:
		return number{i: x}, nil
	case float64:
		return number{f: x, isFloat: true}, finiteOrErr(what, x)
	case float32:
		return number{f: float64(x), isFloat: true}, finiteOrErr(what, float64(x))
	}
	rv := reflect.ValueOf(v)
	switch {
	case rv.CanInt():
		return number{i: rv.Int()}, nil
	case rv.CanUint():
		if rv.Uint() > math.MaxInt64 {
			return number{}, permanent(ReasonOutOfRange, "%s %d does not fit an int64", what, rv.Uint())
		}
		return number{i: int64(rv.Uint())}, nil
	}
	return number{}, permanent(ReasonExpression, "%s: want a number, got %T", what, v)
}

// fixed returns round(n * 10^decimals), half away from zero.
func (n number) fixed(what string, decimals int) (int64, error) {
	scale := pow10[decimals]
	if !n.isFloat {
		if n.i > math.MaxInt64/scale || n.i < math.MinInt64/scale {
			return 0, permanent(ReasonOutOfRange, "%s %d × 10^%d does not fit an int64", what, n.i, decimals)
		}
		return n.i * scale, nil
	}
	x := math.Round(n.f * float64(scale))
	if !(x >= math.MinInt64 && x < math.MaxInt64) {
		return 0, permanent(ReasonOutOfRange, "%s %v × 10^%d does not fit an int64", what, n.f, decimals)
	}
	return int64(x), nil
}

// integer returns n when it is integral (a sort factor).
func (n number) integer(what string) (int64, error) {
	if !n.isFloat {
		return n.i, nil
	}
	if n.f != math.Trunc(n.f) || !(n.f >= math.MinInt64 && n.f < math.MaxInt64) {
		return 0, permanent(ReasonOutOfRange, "%s %v is not an int64 integer", what, n.f)
	}
	return int64(n.f), nil
}

// memberString converts a member expression result.
func memberString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	rv := reflect.ValueOf(v)
	switch {
	case rv.CanInt():
		return strconv.FormatInt(rv.Int(), 10), nil
	case rv.CanUint():
		return strconv.FormatUint(rv.Uint(), 10), nil
	}
	return "", permanent(ReasonExpression, "member: want a string or an integer, got %T", v)
}
