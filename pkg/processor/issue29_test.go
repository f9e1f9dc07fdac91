package processor

import (
	"context"
	"testing"
	"time"

	"github.com/agentmem/agentmem/pkg/records"
)

// decideUser decides a user message said after before (oldest first, role then
// text).
func decideUser(t *testing.T, text string, before ...string) records.Episode {
	t.Helper()
	obs := records.Observation{Role: "user", Text: text, ChatID: "c1", TS: time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)}
	for i := 0; i+1 < len(before); i += 2 {
		obs.Before = append(obs.Before, records.Utterance{Role: before[i], Text: before[i+1]})
	}
	ep, err := NewRuleDecider().Decide(context.Background(), obs)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// Remember requests in every language the tokenizer segments leave a memory of
// what was asked, and only of that (issue 29 item 5).
func TestRuleDeciderRememberJapaneseKorean(t *testing.T) {
	for _, tc := range []struct{ text, thing string }{
		{"娘の名前はさくらです。覚えておいてね。", "娘の名前はさくらです."},
		{"覚えておいて：請求書は毎月二十五日に送ります", "請求書は毎月二十五日に送ります."},
		{"プロジェクトの締め切りは金曜日だということを覚えておいてください", "プロジェクトの締め切りは金曜日だ."},
		{"忘れないでね、経理の担当は田中さんです", "経理の担当は田中さんです."},
		{"내 딸 이름은 지우야. 기억해 줘.", "내 딸 이름은 지우야."},
		{"기억해 주세요: 보고서는 매주 월요일에 보내요", "보고서는 매주 월요일에 보내요."},
		{"우리 팀 회의는 목요일 오후 세 시야, 잊지 마", "우리 팀 회의는 목요일 오후 세 시야."},
		{"周五交季度报告，别忘了", "周五交季度报告."},
	} {
		ep := decideUser(t, tc.text)
		if !ep.Write || ep.Reason != ReasonRemember || ep.Thing != tc.thing {
			t.Errorf("%q: write %v, reason %q, thing %q; want a remember request keeping %q", tc.text, ep.Write, ep.Reason, ep.Thing, tc.thing)
		}
	}
	// Saying one remembers, or asking whether the assistant does, is no request.
	for _, text := range []string{"この公式はもう覚えてる", "私のこと覚えてる？", "그거 기억해?", "这个公式我记住了"} {
		if ep := decideUser(t, text); ep.Reason == ReasonRemember {
			t.Errorf("%q taken as a remember request (thing %q)", text, ep.Thing)
		}
	}
}

// A short agreement with the assistant's statement or yes-no question about the
// user makes it the user's statement; agreeing to an offer, or a yes to a
// question about something else, keeps nothing (issue 29 item 6).
func TestRuleDeciderAgreementMakesTheStatementTheUsers(t *testing.T) {
	for _, tc := range []struct{ assistant, reply, thing string }{
		{"Got it. So your fiscal year starts in April, right?", "Yes, exactly.", "My fiscal year starts in April."},
		{"You're based in Munich?", "yep", "I'm based in Munich."},
		{"Do you use Poetry for dependency management?", "That's right", "I use Poetry for dependency management."},
		{"Ihr Geschäftsjahr beginnt also im April, richtig?", "Ja genau.", "User confirmed: Ihr Geschäftsjahr beginnt also im April."},
		{"你的报表每周一发给财务部，对吧？", "对", "User confirmed: 你的报表每周一发给财务部."},
	} {
		ep := decideUser(t, tc.reply, "user", "Let me tell you about my setup.", "assistant", tc.assistant)
		if !ep.Write || ep.Reason != ReasonAgreement || ep.Thing != tc.thing {
			t.Errorf("%q / %q: write %v, reason %q, thing %q; want %q", tc.assistant, tc.reply, ep.Write, ep.Reason, ep.Thing, tc.thing)
		}
	}
	for _, tc := range []struct{ assistant, reply string }{
		{"Shall I plot the revenue as a bar chart?", "Yes"},
		{"Do you want me to email the report to your manager?", "yes"},
		{"Would you like me to round your totals to two decimals?", "Yes, exactly"},
		{"Soll ich Ihre Tabelle nach Datum sortieren?", "Ja"},
		{"The capital of Australia is Canberra.", "Right"},
		{"So your fiscal year starts in April, right?", "No, in July."},
	} {
		if ep := decideUser(t, tc.reply, "assistant", tc.assistant); ep.Reason == ReasonAgreement {
			t.Errorf("%q / %q kept %q as the user's statement", tc.assistant, tc.reply, ep.Thing)
		}
	}
}

// A written statement is capitalised as a sentence, but code opening it keeps
// its case (issue 29 item 9).
func TestRuleDeciderKeepsTheCaseOfCode(t *testing.T) {
	for text, thing := range map[string]string{
		"read_csv needs sep=';' for our exports":          "read_csv needs sep=';' for our exports.",
		"kubectl -n prod is how we reach the cluster":     "kubectl -n prod is how we reach the cluster.",
		"customers_q3.parquet holds the cleaned accounts": "customers_q3.parquet holds the cleaned accounts.",
		"our deploys go through Argo CD":                  "Our deploys go through Argo CD.",
	} {
		if ep := decideUser(t, text); !ep.Write || ep.Thing != thing {
			t.Errorf("%q: write %v, thing %q; want %q", text, ep.Write, ep.Thing, thing)
		}
	}
}
