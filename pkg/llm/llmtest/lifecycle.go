package llmtest

import (
	"regexp"
	"strings"
	"sync"
)

// Steps of the Markdown memory's lifecycle (pkg/lifecycle), answered like the
// others by the first words of their system prompts.
const (
	StepCompress  = "compress"
	StepSummarize = "summarize"
	StepReflect   = "reflect"
)

// extraPrompts are the openings of the lifecycle steps' system prompts; kept
// apart from stepPrompts so that new steps need no edit of model.go.
var extraPrompts = []struct{ prefix, step string }{
	{"You compress a long-term memory file", StepCompress},
	{"You summarise the earlier part of a conversation", StepSummarize},
	{"You tune the memory policy", StepReflect},
}

func extraStep(system string) string {
	for _, p := range extraPrompts {
		if strings.HasPrefix(system, p.prefix) {
			return p.step
		}
	}
	return StepUnknown
}

var (
	compressDocRE = regexp.MustCompile(`(?s)^MEMORY\.md \(\d+ characters\):\n(.*)$`)
	summaryMsgRE  = regexp.MustCompile(`(?m)^\[\d+\] (\w+): (.+)$`)
	prevSummaryRE = regexp.MustCompile(`(?s)Summary so far:\n(.*?)\n\nNew messages`)
)

// extraAnswers are what a cooperative model answers the lifecycle steps:
// compress returns the file with its white space tightened (it loses nothing),
// summarize the previous summary plus the first words of each new message,
// reflect no change.
var extraAnswers = map[string]func(user string) any{
	StepCompress: func(user string) any {
		doc := user
		if m := compressDocRE.FindStringSubmatch(user); m != nil {
			doc = m[1]
		}
		var b strings.Builder
		for line := range strings.Lines(doc) {
			b.WriteString(strings.TrimRight(line, " \t\r\n") + "\n")
		}
		return map[string]any{"memory": strings.TrimSpace(regexp.MustCompile(`\n{3,}`).ReplaceAllString(b.String(), "\n\n"))}
	},
	StepSummarize: func(user string) any {
		var parts []string
		if m := prevSummaryRE.FindStringSubmatch(user); m != nil && strings.TrimSpace(m[1]) != "(none)" {
			parts = append(parts, strings.TrimSpace(m[1]))
		}
		for _, m := range summaryMsgRE.FindAllStringSubmatch(user, -1) {
			words := strings.Fields(m[2])
			parts = append(parts, m[1]+": "+strings.Join(words[:min(len(words), 8)], " "))
		}
		return map[string]any{"summary": strings.Join(parts, " | ")}
	},
	StepReflect: func(string) any {
		return map[string]any{"changes": map[string]any{}, "reason": "fake model: the policy fits"}
	},
}

// answers are per-Model replies that replace a step's default (SetAnswer).
var answers sync.Map // *Model → *sync.Map(step → func(string) string)

// SetAnswer makes m answer step with fn(user prompt) (the raw reply content);
// nil restores the default.
func (m *Model) SetAnswer(step string, fn func(user string) string) {
	v, _ := answers.LoadOrStore(m, &sync.Map{})
	if fn == nil {
		v.(*sync.Map).Delete(step)
		return
	}
	v.(*sync.Map).Store(step, fn)
}

func (m *Model) answerOf(step string, req chatRequest) string {
	if v, ok := answers.Load(m); ok {
		if fn, ok := v.(*sync.Map).Load(step); ok {
			return fn.(func(string) string)(userPrompt(req))
		}
	}
	return answer(step, req)
}
