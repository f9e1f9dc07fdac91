package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/app/apptest"
	"github.com/agentmem/agentmem/pkg/bus/bustest"
	"github.com/agentmem/agentmem/pkg/llm/llmtest"
)

// ruleFile is the part of a Prometheus rule file the test reads.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
			For   string `yaml:"for"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// The alerts every deployment needs (issue 32), by rule name.
var requiredAlerts = []string{
	"AgentmemConsumerLag",          // consumer lag
	"AgentmemDeadLettersGrowing",   // dead letters growing
	"AgentmemModelCircuitOpen",     // a circuit open
	"AgentmemContextP99OverTarget", // context p99 over target
	"AgentmemReplicaLostLease",     // a replica missing its lease
}

// Every expression of deploy/monitoring (alerting rules and dashboard panels)
// parses as PromQL and selects only series a running `agentmem up` exports: each
// metric name, each label a selector matches or an aggregation groups by, and
// each label value a selector asks for exactly. The stack runs with a chat model
// and a remote embedder (their endpoint series) and serves one observation and
// one context request first (the request-labelled series).
func TestMonitoringExpressionsSelectExportedSeries(t *testing.T) {
	exported := scrapeRunningStack(t)
	var rules ruleFile
	readYAML(t, "../monitoring/alerts.yml", &rules)
	var names []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			checkExpr(t, "alert "+r.Alert, r.Expr, exported)
		}
	}
	for _, want := range requiredAlerts {
		if !slices.Contains(names, want) {
			t.Errorf("alerts.yml has no rule %s (has %v)", want, names)
		}
	}
	data, err := os.ReadFile("../monitoring/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash dashboard
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	exprs := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			checkExpr(t, fmt.Sprintf("panel %q", p.Title), target.Expr, exported)
			exprs++
		}
	}
	if exprs == 0 {
		t.Error("dashboard.json has no panel expressions")
	}
}

// series are the label sets a scrape exported under one series name.
type series []map[string]string

// scrapeRunningStack runs `agentmem up` with a fake chat model and embedder,
// serves one observation and one context request, and returns its /metrics by
// series name (a histogram's as name_bucket, name_sum and name_count).
func scrapeRunningStack(t *testing.T) map[string]series {
	t.Helper()
	m := llmtest.NewModel(t)
	ops := bustest.FreeAddr(t)
	stack, _ := apptest.Up(t,
		"AGENTMEM_HTTP_LISTEN="+ops,
		"AGENTMEM_LLM_BASE_URL="+m.URL(),
		"AGENTMEM_LLM_MODEL=fake",
		"AGENTMEM_EMBED_PROVIDER=openai",
		"AGENTMEM_EMBED_BASE_URL="+m.URL(),
		"AGENTMEM_EMBED_MODEL=fake-embedding",
		"AGENTMEM_EMBED_DIMENSIONS=64",
	)
	cl := apptest.Client(t, stack, "acme")
	ctx := context.Background()
	if _, err := cl.Say(ctx, "alice", "s1", events.RoleUser, "Remember that I moved to Berlin in May.", nil); err != nil {
		t.Fatal(err)
	}
	apptest.WaitIdle(t, stack)
	if _, err := cl.Context(ctx, events.ContextRequest{UserID: "alice", Query: "where do I live?"}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	out := map[string]series{}
	for name, mf := range families {
		for _, metric := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM:
				for _, b := range metric.GetHistogram().GetBucket() {
					out[name+"_bucket"] = append(out[name+"_bucket"], with(labels, "le", fmt.Sprint(b.GetUpperBound())))
				}
				out[name+"_sum"] = append(out[name+"_sum"], labels)
				out[name+"_count"] = append(out[name+"_count"], labels)
			case dto.MetricType_SUMMARY:
				out[name+"_sum"] = append(out[name+"_sum"], labels)
				out[name+"_count"] = append(out[name+"_count"], labels)
				out[name] = append(out[name], with(labels, "quantile", ""))
			default:
				out[name] = append(out[name], labels)
			}
		}
	}
	return out
}

// with is labels plus name=value.
func with(labels map[string]string, name, value string) map[string]string {
	out := map[string]string{name: value}
	for k, v := range labels {
		out[k] = v
	}
	return out
}

// checkExpr reports where expr does not parse or selects what exported lacks.
func checkExpr(t *testing.T, where, expr string, exported map[string]series) {
	t.Helper()
	e, err := parser.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return
	}
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			checkSelector(t, where, n, exported)
		case *parser.AggregateExpr:
			for _, label := range n.Grouping {
				if !anyHasLabel(selectorsIn(n.Expr), exported, label) {
					t.Errorf("%s: groups by %q, which no series it aggregates has", where, label)
				}
			}
		}
		return nil
	})
}

// checkSelector reports a metric name that is not exported, and a matcher no
// exported series of that name satisfies.
func checkSelector(t *testing.T, where string, vs *parser.VectorSelector, exported map[string]series) {
	t.Helper()
	got, ok := exported[vs.Name]
	if !ok {
		t.Errorf("%s: selects %s, which the binaries do not export", where, vs.Name)
		return
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel {
			continue
		}
		if !slices.ContainsFunc(got, func(labels map[string]string) bool {
			v, has := labels[m.Name]
			return has && m.Matches(v)
		}) {
			t.Errorf("%s: no exported series %s has %s", where, vs.Name, m)
		}
	}
}

// selectorsIn lists the vector selectors under e.
func selectorsIn(e parser.Expr) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

// anyHasLabel reports whether an exported series of one of vss has label.
func anyHasLabel(vss []*parser.VectorSelector, exported map[string]series, label string) bool {
	for _, vs := range vss {
		for _, labels := range exported[vs.Name] {
			if _, ok := labels[label]; ok {
				return true
			}
		}
	}
	return false
}

func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
