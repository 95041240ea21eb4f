package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-dtn/sluice/store"
)

func TestSelectors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []Selector
	}{
		{`up{job="sluice"} == 0`, []Selector{{"up", []Matcher{{"job", "=", "sluice"}}}}},
		{`sum by (reason) (rate(sluice_files_failed_total[15m])) / on () group_left () sum(rate(x_total[5m]))`,
			[]Selector{{Metric: "sluice_files_failed_total"}, {Metric: "x_total"}}},
		{`sum(rate(a[1m])) by (le) and without_metric`, []Selector{{Metric: "a"}, {Metric: "without_metric"}}},
		{`count without (instance) (b) or vector(0)`, []Selector{{Metric: "b"}}},
		{`histogram_quantile(0.99, sum by (le, operation) (rate(s_bucket{operation=~"A|B", instance=~"$instance"}[$__rate_interval])))`,
			[]Selector{{"s_bucket", []Matcher{{"operation", "=~", "A|B"}, {"instance", "=~", "$instance"}}}}},
		{`time() - max by (endpoint) (hb_seconds) > 6 * 3600 and on (endpoint) c{kind="a}b"} == bool 0`,
			[]Selector{{Metric: "hb_seconds"}, {"c", []Matcher{{"kind", "=", "a}b"}}}}},
		{"rate(d[5m] offset 1h) # a comment naming e_total\n+ f", []Selector{{Metric: "d"}, {Metric: "f"}}},
		{`max_over_time(g[1h:5m]) * ${factor} + 1e3 + Inf`, []Selector{{Metric: "g"}}},
		{`label_replace(h, "dst", "$1", "destination", "(.*)")`, []Selector{{Metric: "h"}}},
	} {
		got, err := Selectors(tc.expr)
		if err != nil {
			t.Errorf("Selectors(%q): %v", tc.expr, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Selectors(%q) = %+v, want %+v", tc.expr, got, tc.want)
		}
	}
	for _, bad := range []string{`{__name__="x"}`, `x{a="b"`, `x{a=b}`, `rate(x[5m)`, `"open`} {
		if got, err := Selectors(bad); err == nil {
			t.Errorf("Selectors(%q) = %v, want an error", bad, got)
		}
	}
}

// TestQueries: the rules and every panel and variable of the dashboard
// are read, and each selects at least one metric.
func TestQueries(t *testing.T) {
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	var alerts, panels, vars int
	for _, q := range qs {
		switch {
		case strings.HasPrefix(q.Where, "alert "):
			alerts++
		case strings.HasPrefix(q.Where, "panel "):
			panels++
		case strings.HasPrefix(q.Where, "variable "):
			vars++
		}
		sels, err := Selectors(q.Expr)
		if err != nil {
			t.Errorf("%s: %v", q.Where, err)
		} else if len(sels) == 0 {
			t.Errorf("%s: %q selects no metric", q.Where, q.Expr)
		}
	}
	if alerts < 8 || panels < 20 || vars != 1 {
		t.Errorf("read %d alerts, %d panel targets, %d variables: the files hold more", alerts, panels, vars)
	}
}

// TestStoreOperations: the operations the rules and the dashboard name
// (sluice_store_operation_seconds{operation=~"A|B"}) are the store's
// methods, as the server labels its calls: a renamed method would leave
// an alert watching nothing.
func TestStoreOperations(t *testing.T) {
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]bool{}
	st := reflect.TypeFor[store.Store]()
	for i := range st.NumMethod() {
		methods[st.Method(i).Name] = true
	}
	plain := regexp.MustCompile(`^[A-Za-z]+(\|[A-Za-z]+)*$`)
	n := 0
	for _, q := range qs {
		sels, _ := Selectors(q.Expr)
		for _, s := range sels {
			for _, m := range s.Matchers {
				if !strings.HasPrefix(s.Metric, "sluice_store_") || m.Name != "operation" {
					continue
				}
				if !plain.MatchString(m.Value) {
					t.Errorf("%s: operation %s %q: name the operations (A|B|C)", q.Where, m.Op, m.Value)
					continue
				}
				for _, op := range strings.Split(m.Value, "|") {
					n++
					if !methods[op] {
						t.Errorf("%s: operation %q is no method of store.Store", q.Where, op)
					}
				}
			}
		}
	}
	if n == 0 {
		t.Error("no operation named: SluiceStoreSlow names the loop's writes")
	}
}

// TestDashboardLayout: panels have unique IDs, use the dashboard's data
// source variable, and do not overlap on Grafana's 24-column grid.
func TestDashboardLayout(t *testing.T) {
	var d struct {
		Panels []struct {
			ID         int
			Title      string
			Datasource *struct{ UID string }
			GridPos    struct{ X, Y, W, H int } `json:"gridPos"`
		}
	}
	if err := json.Unmarshal(Dashboard, &d); err != nil {
		t.Fatal(err)
	}
	ids := map[int]string{}
	cells := map[[2]int]string{}
	for _, p := range d.Panels {
		if other, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q share id %d", p.Title, other, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Datasource != nil && p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: data source %q, want the ${datasource} variable", p.Title, p.Datasource.UID)
		}
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v off the 24-column grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := cells[[2]int{x, y}]; ok {
					t.Errorf("panels %q and %q overlap at %d,%d", p.Title, other, x, y)
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
	}
}

// promtool is Debian's prometheus package's tool (scripts/ci-deps.sh
// sets SLUICE_PROMTOOL); the test skips without it.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SLUICE_PROMTOOL"); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found (Debian's prometheus package; scripts/ci-deps.sh fetches it and sets SLUICE_PROMTOOL)")
	}
	return p
}

// TestPromtool: promtool finds the rules valid, their unit tests pass,
// and the dashboard's queries are valid PromQL (checked as recording
// rules, Grafana's variables replaced by values of their kind).
func TestPromtool(t *testing.T) {
	tool := promtool(t)
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(tool, args...)
		cmd.Dir = "." // alerts.test.yml names alerts.yml beside it
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("check", "rules", "alerts.yml")
	run("test", "rules", "alerts.test.yml")

	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", "2m", "$__range", "6h", "$instance", ".*")
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, q := range qs {
		if strings.HasPrefix(q.Where, "panel ") || strings.HasPrefix(q.Where, "variable ") {
			rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: vars.Replace(q.Expr)})
		}
	}
	doc, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(doc), "$") {
		t.Errorf("a dashboard query holds a Grafana variable the check does not replace:\n%s", doc)
	}
	f := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(f, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	run("check", "rules", f)
}
