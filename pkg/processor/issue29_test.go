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
