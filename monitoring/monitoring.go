// Package monitoring owns what Sluice ships for Prometheus and Grafana:
// the alert rules (alerts.yml, with their promtool unit tests in
// alerts.test.yml) and the dashboard (dashboard.json), embedded, and the
// reading of the PromQL queries they hold down to the metrics they select
// (Queries, Selectors), so that tests can check every one against the
// metrics a running server exports.
package monitoring

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Rules is alerts.yml, the Prometheus alert rules.
//
//go:embed alerts.yml
var Rules []byte

// Dashboard is dashboard.json, the Grafana dashboard.
//
//go:embed dashboard.json
var Dashboard []byte

// Query is one PromQL expression of the rules or the dashboard.
type Query struct {
	// Where names it: "alert NAME", or "panel TITLE" (target REFID), or
	// "variable NAME".
	Where string
	// Expr is the expression as written; a dashboard's may hold
	// Grafana's variables ($__rate_interval, $instance).
	Expr string
}

// Queries returns every expression of the alert rules and of the
// dashboard's panels and variables.
func Queries() ([]Query, error) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(Rules, &rules); err != nil {
		return nil, fmt.Errorf("monitoring: alerts.yml: %w", err)
	}
	var qs []Query
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			name := "alert " + r.Alert
			if r.Record != "" {
				name = "record " + r.Record
			}
			qs = append(qs, Query{Where: name, Expr: r.Expr})
		}
	}
	var dash struct {
		Panels     []panel
		Templating struct {
			List []struct {
				Name, Type string
				Query      json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(Dashboard, &dash); err != nil {
		return nil, fmt.Errorf("monitoring: dashboard.json: %w", err)
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				qs = append(qs, Query{Where: fmt.Sprintf("panel %q (target %s)", p.Title, t.RefID), Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		// A query variable's query is a string or {"query": ...}.
		var q string
		if json.Unmarshal(v.Query, &q) != nil {
			var o struct{ Query string }
			if err := json.Unmarshal(v.Query, &o); err != nil {
				return nil, fmt.Errorf("monitoring: dashboard.json: variable %s: %w", v.Name, err)
			}
			q = o.Query
		}
		// Grafana's label_values(SELECTOR, LABEL) is not PromQL: its
		// selector is.
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			return nil, fmt.Errorf("monitoring: dashboard.json: variable %s: %q is not label_values(SELECTOR, LABEL)", v.Name, q)
		}
		qs = append(qs, Query{Where: "variable " + v.Name, Expr: m[1]})
	}
	return qs, nil
}

// panel is what Queries reads of a dashboard panel (a row holds others).
type panel struct {
	Title   string
	Targets []struct {
		Expr  string
		RefID string `json:"refId"`
	}
	Panels []panel
}

var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// Selector is one metric an expression selects, with its label
// matchers.
type Selector struct {
	Metric   string
	Matchers []Matcher
}

// Matcher is one label matcher of a selector: Name Op "Value".
type Matcher struct {
	Name, Op, Value string
}

// Selectors returns the metrics a PromQL expression selects, in order,
// each with the label matchers written after it. It reads the expression
// as PromQL's lexer does, as far as needed for that: strings, label
// matchers ({...}), ranges and subqueries ([...]), numbers and
// durations, Grafana's variables ($name, ${name}) and comments are
// skipped; an identifier followed by "(" is a function or an
// aggregation, one followed by "by" or "without" an aggregation, the
// keywords of binary operators and grouping (by, on, group_left, ...)
// are not metrics, and neither are the labels listed after grouping
// keywords. Every other identifier is a metric name. A selector by
// {__name__=...} is refused: the metrics it selects cannot be told
// from the text.
func Selectors(expr string) ([]Selector, error) {
	var out []Selector
	l := lexer{s: expr}
	for {
		l.space()
		if l.i >= len(l.s) {
			return out, nil
		}
		c := l.s[l.i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			if _, err := l.str(); err != nil {
				return nil, err
			}
		case c == '{':
			// Matchers of a selector with no name before them.
			ms, err := l.matchers()
			if err != nil {
				return nil, err
			}
			for _, m := range ms {
				if m.Name == "__name__" {
					return nil, fmt.Errorf("monitoring: %q: a selector by __name__; name the metric", expr)
				}
			}
		case c == '[':
			if err := l.skipTo(']'); err != nil {
				return nil, err
			}
		case c == '$':
			l.variable()
		case isDigit(c) || c == '.' && l.i+1 < len(l.s) && isDigit(l.s[l.i+1]):
			for l.i < len(l.s) && (isIdent(l.s[l.i]) || l.s[l.i] == '.') {
				l.i++
			}
		case isIdentStart(c):
			word := l.ident()
			l.space()
			next := byte(0)
			if l.i < len(l.s) {
				next = l.s[l.i]
			}
			switch kw := strings.ToLower(word); {
			case grouping[kw]:
				if next == '(' {
					if err := l.skipTo(')'); err != nil {
						return nil, err
					}
				}
			case keywords[kw]:
			case next == '(':
				// A function's or an aggregation's name.
			case aggregations[kw] && l.followedBy("by", "without"):
			default:
				sel := Selector{Metric: word}
				if next == '{' {
					ms, err := l.matchers()
					if err != nil {
						return nil, err
					}
					sel.Matchers = ms
				}
				out = append(out, sel)
			}
		default:
			l.i++ // an operator, a parenthesis, a comma
		}
	}
}

// grouping are the keywords that a list of labels in parentheses may
// follow; keywords the other words of PromQL that are not metrics.
var (
	grouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true,
		"group_left": true, "group_right": true}
	keywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true,
		"offset": true, "atan2": true, "inf": true, "nan": true}
	aggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true,
		"group": true, "stddev": true, "stdvar": true, "count": true, "count_values": true,
		"bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true}
)

type lexer struct {
	s string
	i int
}

func (l *lexer) space() {
	for l.i < len(l.s) {
		switch c := l.s[l.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			l.i++
		case c == '#':
			for l.i < len(l.s) && l.s[l.i] != '\n' {
				l.i++
			}
		default:
			return
		}
	}
}

func (l *lexer) ident() string {
	start := l.i
	for l.i < len(l.s) && isIdent(l.s[l.i]) {
		l.i++
	}
	return l.s[start:l.i]
}

// followedBy reports whether the next word is one of words (it stays
// unread).
func (l *lexer) followedBy(words ...string) bool {
	j := l.i
	for j < len(l.s) && isIdent(l.s[j]) {
		j++
	}
	w := strings.ToLower(l.s[l.i:j])
	for _, x := range words {
		if w == x {
			return true
		}
	}
	return false
}

// str reads a quoted string and returns its contents (escapes kept).
func (l *lexer) str() (string, error) {
	q := l.s[l.i]
	start := l.i
	l.i++
	for l.i < len(l.s) {
		switch l.s[l.i] {
		case '\\':
			if q != '`' {
				l.i++
			}
		case q:
			l.i++
			return l.s[start+1 : l.i-1], nil
		}
		l.i++
	}
	return "", fmt.Errorf("monitoring: %q: a string not closed", l.s)
}

// variable skips a Grafana variable: $name, ${name...} or $__name.
func (l *lexer) variable() {
	l.i++
	if l.i < len(l.s) && l.s[l.i] == '{' {
		for l.i < len(l.s) && l.s[l.i] != '}' {
			l.i++
		}
		l.i++
		return
	}
	l.ident()
}

// skipTo skips past the close that ends the bracket at l.i, strings and
// nested brackets included.
func (l *lexer) skipTo(close byte) error {
	open := l.s[l.i]
	depth := 0
	for l.i < len(l.s) {
		switch c := l.s[l.i]; {
		case c == '"' || c == '\'' || c == '`':
			if _, err := l.str(); err != nil {
				return err
			}
			continue
		case c == open:
			depth++
		case c == close:
			depth--
			if depth == 0 {
				l.i++
				return nil
			}
		}
		l.i++
	}
	return fmt.Errorf("monitoring: %q: %q not closed", l.s, open)
}

// matchers reads {name op "value", ...}.
func (l *lexer) matchers() ([]Matcher, error) {
	var ms []Matcher
	l.i++ // {
	for {
		l.space()
		if l.i >= len(l.s) {
			return nil, fmt.Errorf("monitoring: %q: '{' not closed", l.s)
		}
		switch c := l.s[l.i]; {
		case c == '}':
			l.i++
			return ms, nil
		case c == ',':
			l.i++
		case isIdentStart(c):
			name := l.ident()
			l.space()
			start := l.i
			for l.i < len(l.s) && strings.IndexByte("=!~", l.s[l.i]) >= 0 {
				l.i++
			}
			op := l.s[start:l.i]
			l.space()
			if l.i >= len(l.s) || strings.IndexByte("\"'`", l.s[l.i]) < 0 {
				return nil, fmt.Errorf("monitoring: %q: label %s: no quoted value", l.s, name)
			}
			v, err := l.str()
			if err != nil {
				return nil, err
			}
			ms = append(ms, Matcher{Name: name, Op: op, Value: v})
		default:
			return nil, fmt.Errorf("monitoring: %q: unexpected %q in label matchers", l.s, c)
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isIdent(c byte) bool { return isIdentStart(c) || isDigit(c) }
