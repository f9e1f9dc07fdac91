package bench

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/agentmem/agentmem/events"
)

// Word lists for the generated memories, queries and conversations. They are
// combined at random, so that the partitions' vectors and BM25 terms are as varied
// as real first-person memories rather than near-copies of one sentence.
var (
	relations  = []string{"sister", "brother", "mother", "father", "manager", "colleague", "neighbour", "daughter", "son", "partner", "best friend", "cousin"}
	places     = []string{"Lisbon", "Denver", "Osaka", "Toronto", "Nairobi", "Krakow", "Austin", "Melbourne", "Bergen", "Seville", "Montreal", "Hanoi", "Dublin", "Porto", "Zurich"}
	activities = []string{"bouldering", "playing the cello", "learning Portuguese", "running half marathons", "baking sourdough", "sailing", "woodworking", "photography", "chess", "birdwatching", "gardening", "salsa dancing"}
	datasets   = []string{"sales", "inventory", "payroll", "marketing", "shipping", "support ticket", "survey", "budget", "customer", "invoice", "timesheet", "web traffic"}
	columns    = []string{"date", "region", "product", "qty", "price", "customer_id", "sku", "channel", "amount", "status", "country", "category", "cost", "margin", "store", "week"}
	charts     = []string{"bar", "line", "stacked area", "scatter", "pie", "waterfall", "heatmap"}
	reports    = []string{"monthly revenue", "quarterly budget", "weekly sales", "churn", "headcount", "inventory aging", "campaign"}
	projects   = []string{"migration", "forecasting", "dashboard", "pricing", "onboarding", "warehouse", "reporting"}
	foods      = []string{"ramen", "tacos", "falafel", "dumplings", "paella", "curry", "pho", "pierogi"}
	tools      = []string{"pandas", "Excel", "Power BI", "Tableau", "SQL", "Google Sheets", "R"}
	seasons    = []string{"last spring", "in 2019", "two years ago", "last winter", "in March", "since college", "this year"}
	errorsSeen = []string{"KeyError: 'region'", "#REF! in the summary sheet", "ValueError: could not convert string to float", "#DIV/0! in the margin column", "UnicodeDecodeError while reading the export"}
	fixes      = []string{"renaming the column header to region", "removing the deleted rows from the range", "stripping the currency symbols first", "wrapping the formula in IFERROR", "reading the file with encoding latin-1"}
)

// texts generates the project's synthetic first-person content from a seeded
// source, so a run is reproducible.
type texts struct{ r *rand.Rand }

func newTexts(seed uint64) *texts { return &texts{r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))} }

func pick[T any](t *texts, list []T) T { return list[t.r.IntN(len(list))] }

// columnList is 3–5 distinct columns, "a, b and c".
func (t *texts) columnList() string {
	n := 3 + t.r.IntN(3)
	perm := t.r.Perm(len(columns))[:n]
	cs := make([]string, n)
	for i, p := range perm {
		cs[i] = columns[p]
	}
	return strings.Join(cs[:n-1], ", ") + " and " + cs[n-1]
}

// fact is one first-person statement the offline write decider keeps (the
// property test checks it), like the memories users actually leave.
func (t *texts) fact() string {
	switch t.r.IntN(9) {
	case 0:
		return fmt.Sprintf("My %s moved to %s %s.", pick(t, relations), pick(t, places), pick(t, seasons))
	case 1:
		return fmt.Sprintf("I started %s %s and I practise every weekend.", pick(t, activities), pick(t, seasons))
	case 2:
		return fmt.Sprintf("My %s files have columns %s.", pick(t, datasets), t.columnList())
	case 3:
		return fmt.Sprintf("I prefer %s charts for the %s report.", pick(t, charts), pick(t, reports))
	case 4:
		return fmt.Sprintf("I have been leading the %s %s project for %d months.", pick(t, datasets), pick(t, projects), 2+t.r.IntN(30))
	case 5:
		return fmt.Sprintf("My favourite dinner is %s from the place near my office in %s.", pick(t, foods), pick(t, places))
	case 6:
		return fmt.Sprintf("I usually build the %s report in %s every %s.", pick(t, reports), pick(t, tools), pick(t, []string{"Monday", "Friday", "month end", "quarter"}))
	case 7:
		return fmt.Sprintf("My %s is visiting me in %s next %s.", pick(t, relations), pick(t, places), pick(t, []string{"week", "month", "summer", "weekend"}))
	default:
		return fmt.Sprintf("I fixed %s in my %s workbook by %s.", pick(t, errorsSeen), pick(t, datasets), pick(t, fixes))
	}
}

// query is a context question of an agent, sometimes about file structure or
// preferences, so topic files are loaded on demand as in real use.
func (t *texts) query() string {
	switch t.r.IntN(6) {
	case 0:
		return fmt.Sprintf("which columns do my %s files have?", pick(t, datasets))
	case 1:
		return fmt.Sprintf("what chart style should I use for the %s report?", pick(t, reports))
	case 2:
		return fmt.Sprintf("where does my %s live now?", pick(t, relations))
	case 3:
		return fmt.Sprintf("how did I fix the %s error last time?", pick(t, errorsSeen))
	case 4:
		return fmt.Sprintf("what do you know about my %s hobby and %s?", pick(t, activities), pick(t, places))
	default:
		return fmt.Sprintf("summarise my %s project status", pick(t, projects))
	}
}

// chat is a message of the asked user's open session that the write decider does
// not keep (requests and questions), so the stored memory count stays exact.
func (t *texts) chat(role events.Role) string {
	if role == events.RoleAssistant {
		return fmt.Sprintf("Here is the %s chart of the %s report.", pick(t, charts), pick(t, reports))
	}
	return fmt.Sprintf("Can you plot the %s report by %s?", pick(t, reports), pick(t, columns))
}

// session is a realistic conversation of about ten messages that the offline
// extractor turns into entries: a file structure, a preference, an error and its
// fix, an explicit remember, and some chit-chat.
func (t *texts) session() []events.Observation {
	data, report := pick(t, datasets), pick(t, reports)
	file := strings.ReplaceAll(data, " ", "_") + fmt.Sprintf("_%d.csv", 2020+t.r.IntN(7))
	errText, fix := pick(t, errorsSeen), pick(t, fixes)
	msg := func(role events.Role, format string, args ...any) events.Observation {
		return events.Observation{Role: role, Text: fmt.Sprintf(format, args...)}
	}
	return []events.Observation{
		msg(events.RoleUser, "Good morning!"),
		msg(events.RoleAssistant, "Good morning, how can I help?"),
		msg(events.RoleUser, "I uploaded %s, it has columns %s and about %d rows.", file, t.columnList(), 500+t.r.IntN(20000)),
		msg(events.RoleAssistant, "Loaded %s. Which chart do you need?", file),
		msg(events.RoleUser, "I prefer %s charts with values in EUR for the %s report.", pick(t, charts), report),
		msg(events.RoleAssistant, "Here is the chart."),
		msg(events.RoleUser, "I get an error: %s", errText),
		msg(events.RoleAssistant, "Try %s.", fix),
		msg(events.RoleUser, "Thanks, that worked."),
		msg(events.RoleUser, "Remember that my fiscal year starts in %s.", pick(t, []string{"April", "July", "October", "February"})),
	}
}
