package httpapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rankd/rankd/ranking"
)

// The built-in HTML page at /: plain HTML rendered by the server, with a
// little JS and no build step. It shows the top PageTop of one board, dims
// value and period, with trend arrows, as /top?trend=1 reads them (through
// the response cache); the first paint holds the board, so it shows without
// JS. JS refreshes it every 2 s from /?...&part=view (the same rendering),
// and for a board with dims offers a picker of the dims values that have
// members in the period (/dims, up to 500 values); the Dims box takes any.
//
// URL parameters: board (a board name; default the first declared), period
// (current, previous or a period id, as the API takes it; default current),
// dims (the board's dims values as the Dims box takes them: name:value
// pairs joined by ",", a "," inside a value written %2C and a "%" %25).
// Times are shown in the board's time zone, named on the page; periods by
// labels ("26 Nov 2026 14:00–14:30", "week of 23 Nov 2026", "last 7 days").
//
//go:embed page.html
var pageSource string

var pageTemplate = template.Must(template.New("page").Parse(pageSource))

// PageTop is the number of members the HTML page shows.
const PageTop = 20

// pageView is what the page's template renders.
type pageView struct {
	Boards          []boardOption
	Board           string // "" when no board is declared
	HasDims         bool
	DimNames        string // "zone, room"
	Dims            string // the dims parameter, as given
	DimsPlaceholder string
	Periods         []periodOption

	Title       string
	Status      string // instead of the period line, when there is no read
	PeriodLabel string
	Final       bool
	Members     string // "812 members"
	Zone        string // "Asia/Shanghai, UTC+8"
	Updated     string // wall-clock time of the rendering, in the zone
	Error       string
	Trend       bool // the trend column (periodic and rolling boards)
	Details     bool // the details column (tie times, sort factors)
	Rows        []rowView
	Empty       string
	Columns     int
}

type boardOption struct {
	Name, Title, Dims string
	Selected          bool
}

type periodOption struct {
	Value, Label string
	Selected     bool
}

type rowView struct {
	Rank                   int64
	Member, Value, Details string
	Move, Arrow, PrevTitle string
}

var arrows = map[string]string{"up": "▲", "down": "▼", "same": "=", "new": "new"}

// handlePage serves the HTML page at / (with part=view, only the board's
// part of it and the period list, for the page's refresh).
func (s *server) handlePage(w http.ResponseWriter, r *http.Request) error {
	v, status := s.pageView(r)
	name := "page"
	if r.URL.Query().Get("part") == "view" {
		name = "part"
	}
	var buf bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&buf, name, v); err != nil {
		return fmt.Errorf("rendering the page: %w", err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	return nil
}

// pageView reads what the page shows for the request's board, period and
// dims, and the status of the response: a failed read shows its error
// message and answers the API's status for it.
func (s *server) pageView(r *http.Request) (*pageView, int) {
	vals := r.URL.Query()
	v := &pageView{}
	if len(s.order) == 0 {
		v.Status = "No boards are declared."
		return v, http.StatusOK
	}
	b, ok := s.boards[vals.Get("board")]
	if !ok {
		b = s.order[0]
		if name := vals.Get("board"); name != "" {
			v.Error = fmt.Sprintf("There is no board %s: showing %s.", quote(name), b.Name)
		}
	}
	for _, o := range s.order {
		v.Boards = append(v.Boards, boardOption{Name: o.Name, Title: o.Title, Dims: strings.Join(o.Dims, ","), Selected: o == b})
	}
	v.Board, v.Title = b.Name, b.Title
	if v.Title == "" {
		v.Title = b.Name
	}
	v.HasDims, v.DimNames = len(b.Dims) > 0, strings.Join(b.Dims, ", ")
	for i, d := range b.Dims {
		if i > 0 {
			v.DimsPlaceholder += ","
		}
		v.DimsPlaceholder += d + ":…"
	}
	v.Trend, v.Details = b.Window != ranking.WindowTotal, b.Tiebreak != ranking.TieNone || len(b.Sort) > 0
	v.Columns = 3
	if v.Trend {
		v.Columns++
	}
	if v.Details {
		v.Columns++
	}

	period := vals.Get("period")
	if period == "" {
		period = "current"
	}
	cur, err := s.store.ResolvePeriod(b.Name, "current")
	if err != nil {
		status, _, msg, _ := s.errorReply(r, err)
		v.Error = msg
		return v, status
	}
	v.Periods = s.periodOptions(b, cur, period)

	dims, given, err := pageDims(b, r)
	switch {
	case err != nil:
		v.Dims = vals.Get("dims")
		status, _, msg, _ := s.errorReply(r, err)
		v.Status, v.Error = "Nothing to show.", msg
		return v, status
	case len(b.Dims) > 0 && !given:
		v.Status = "Pick a value of " + v.DimNames + " to see this board."
		return v, http.StatusOK
	case len(b.Dims) > 0:
		v.Dims = dimsText(b, dims)
	}
	req := r.Clone(r.Context())
	req.URL = &url.URL{Path: "/v1/boards/" + url.PathEscape(b.Name) + "/top",
		RawQuery: "limit=" + strconv.Itoa(PageTop) + "&trend=1&period=" + url.QueryEscape(period) + "&dims=" + dimsQuery(b, dims)}
	req.SetPathValue("board", b.Name)
	body, err := s.readBody("top", s.topBody, req)
	if err != nil {
		status, _, msg, _ := s.errorReply(req, err)
		v.Status, v.Error = "Nothing to show.", msg
		return v, status
	}
	if err := v.fill(b, body, cur); err != nil {
		status, _, msg, _ := s.errorReply(req, err)
		v.Error = msg
		return v, status
	}
	return v, http.StatusOK
}

// periodOptions lists the periods the page offers: current and previous
// (all time alone for a total board), and the requested period id if it is
// neither, each with its label.
func (s *server) periodOptions(b *ranking.Board, cur ranking.Period, period string) []periodOption {
	if b.Window == ranking.WindowTotal {
		return []periodOption{{Value: "current", Label: periodLabel(b, cur, true), Selected: true}}
	}
	opts := []periodOption{{Value: "current", Label: periodLabel(b, cur, true)}}
	if prev, err := s.store.ResolvePeriod(b.Name, "previous"); err == nil {
		opts = append(opts, periodOption{Value: "previous", Label: periodLabel(b, prev, false)})
	}
	if period != "current" && period != "previous" {
		label := period
		if p, err := s.store.ResolvePeriod(b.Name, period); err == nil {
			label = periodLabel(b, p, p.ID == cur.ID)
		}
		opts = append(opts, periodOption{Value: period, Label: label})
	}
	for i := range opts {
		opts[i].Selected = opts[i].Value == period
	}
	return opts
}

// topPage is the part of a /top response that the page shows.
type topPage struct {
	Period  periodJSON `json:"period"`
	Count   int64      `json:"count"`
	Entries []struct {
		Rank     int64           `json:"rank"`
		Member   string          `json:"member"`
		Value    json.Number     `json:"value"`
		TieTime  string          `json:"tie_time"`
		Factors  json.RawMessage `json:"factors"`
		PrevRank *int64          `json:"prev_rank"`
		Trend    string          `json:"trend"`
	} `json:"entries"`
}

// fill sets the view's period line and rows from a /top body of board b.
func (v *pageView) fill(b *ranking.Board, body []byte, cur ranking.Period) error {
	var pg topPage
	if err := json.Unmarshal(body, &pg); err != nil {
		return fmt.Errorf("reading the board's page: %w", err)
	}
	p := ranking.Period{ID: pg.Period.ID}
	p.Start, _ = time.Parse(time.RFC3339, pg.Period.Start)
	p.End, _ = time.Parse(time.RFC3339, pg.Period.End)
	now := time.Now()
	v.PeriodLabel = periodLabel(b, p, p.ID == cur.ID)
	v.Final = pg.Period.Final != nil && *pg.Period.Final
	v.Members = plural(pg.Count, "member")
	v.Zone = zoneLabel(b, now)
	v.Updated = now.In(boardZone(b)).Format("15:04:05")
	for _, e := range pg.Entries {
		row := rowView{Rank: e.Rank, Member: e.Member, Value: groupDigits(e.Value.String()), Move: e.Trend, Arrow: arrows[e.Trend]}
		switch {
		case e.PrevRank != nil:
			row.PrevTitle = "previous rank " + strconv.FormatInt(*e.PrevRank, 10)
		case e.Trend == "new":
			row.PrevTitle = "not on the board in the previous period"
		}
		var details []string
		if f := factorsText(e.Factors); f != "" {
			details = append(details, f)
		}
		if t, err := time.Parse(time.RFC3339Nano, e.TieTime); err == nil {
			details = append(details, "reached at "+tieLabel(b, t))
		}
		row.Details = strings.Join(details, " · ")
		v.Rows = append(v.Rows, row)
	}
	if len(pg.Entries) == 0 {
		v.Empty = "No members in this period yet."
	}
	return nil
}

// factorsText writes a factors object in its order: "kills 10 · deaths 2".
func factorsText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	var parts []string
	for dec.More() {
		k, err1 := dec.Token()
		val, err2 := dec.Token()
		if err1 != nil || err2 != nil {
			break
		}
		parts = append(parts, fmt.Sprint(k, " ", val))
	}
	return strings.Join(parts, " · ")
}

// pageDims reads the page's dims parameter, whether it was given (not
// empty), and its values in the board's dims order. It takes the API's
// form (pairs split on a "," before percent-decoding, so that %2C belongs
// to a value: dims=zone:3,room:a%2Cb) and, when the parameter holds no
// plain "," or ":", the Dims box's text as a form or URLSearchParams
// encodes it (dims=zone%3A3%2Croom%3Aa%252Cb: decoded once, it is the
// text, whose "," inside a value is %2C).
func pageDims(b *ranking.Board, r *http.Request) ([]string, bool, error) {
	var raw []string
	for part := range strings.SplitSeq(r.URL.RawQuery, "&") {
		k, v, _ := strings.Cut(part, "=")
		if key, err := url.QueryUnescape(k); err == nil && key == "dims" && v != "" {
			raw = append(raw, v)
		}
	}
	if len(raw) == 0 {
		return nil, false, nil
	}
	if strings.ContainsAny(strings.Join(raw, ""), ",:") {
		dims, err := parseDims(b, r.URL.RawQuery)
		return dims, true, err
	}
	var text []string
	for _, v := range raw {
		t, err := url.QueryUnescape(v)
		if err != nil {
			t = v
		}
		text = append(text, t)
	}
	dims, err := parseDims(b, "dims="+textQuery(strings.Join(text, ",")))
	return dims, true, err
}

// textQuery turns the Dims box's text into the API's dims parameter:
// pairs split on "," and on the first ":", each name and value
// percent-decoded (so %2C is a "," of the value) and encoded.
func textQuery(text string) string {
	dec := func(s string) string {
		if u, err := url.PathUnescape(strings.TrimSpace(s)); err == nil {
			return u
		}
		return strings.TrimSpace(s)
	}
	var parts []string
	for p := range strings.SplitSeq(text, ",") {
		if strings.TrimSpace(p) == "" {
			continue
		}
		name, value, ok := strings.Cut(p, ":")
		if !ok {
			parts = append(parts, url.QueryEscape(dec(p)))
			continue
		}
		parts = append(parts, url.QueryEscape(dec(name))+":"+url.QueryEscape(dec(value)))
	}
	return strings.Join(parts, ",")
}

// dimsQuery writes dims values of b as the API's dims parameter, in the
// board's dims order.
func dimsQuery(b *ranking.Board, dims []string) string {
	parts := make([]string, len(b.Dims))
	for i, d := range b.Dims {
		parts[i] = url.QueryEscape(d) + ":" + url.QueryEscape(dims[i])
	}
	return strings.Join(parts, ",")
}

// groupDigits writes a decimal number with its integer digits in groups
// of three: "1,250,000", "-1,234.50".
func groupDigits(num string) string {
	sign, digits := "", num
	if strings.HasPrefix(digits, "-") {
		sign, digits = "-", digits[1:]
	}
	whole, frac, _ := strings.Cut(digits, ".")
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	if frac != "" {
		whole += "." + frac
	}
	return sign + whole
}

// plural writes "1 member", "1,234 members".
func plural(n int64, what string) string {
	s := groupDigits(strconv.FormatInt(n, 10))
	if n == 1 {
		return s + " " + what
	}
	return s + " " + what + "s"
}
