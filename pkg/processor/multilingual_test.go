package processor

import (
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentmem/agentmem/pkg/bm25"
)

// rememberRequests are the requests to remember of rememberOtherRes' languages
// in their forms (full-width, half-width, upper case: the patterns read the
// folded text), and a few that are not one; rememberBodies what is to be
// remembered.
var (
	rememberRequests = []string{
		"请记住", "记得", "记下", "别忘了", "不要忘记", "不要忘了", "麻烦你记住", "记住哦", "记得啊", "请你记下", "我记住了",
		"Merk dir", "merke dir", "MERKE DIR", "ＭＥＲＫ ＤＩＲ", "Vergiss nicht", "denk daran", "Denke daran", "notiere dir", "Bitte notier dir",
		"覚えておいて", "覚えといて", "覚えてね", "忘れないでください", "メモしておいて", "ﾒﾓして", "기억해 줘", "기억하세요", "잊지 마세요", "잊지 말아 줘",
		"remember", "merkwürdig", "denken",
	}
	rememberBodies = []string{"娘の名前はさくらです", "我的女儿叫小美", "die Rechnung geht am 25. raus", "내 딸 이름은 지우야", "the report is due Friday", ""}
	rememberSeps   = []string{"：", ": ", "，", "、", "。", "! ", " ", " dass ", "ということを", "って", "ちゃんと", ""}
)

// TestPropertyRememberOtherWordsFilterNothingTheyMatch: rememberOther's word
// filter only skips texts the patterns would not match, so it answers as the
// patterns alone do, the request first or last.
func TestPropertyRememberOtherWordsFilterNothingTheyMatch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		req := rapid.SampledFrom(rememberRequests).Draw(t, "request")
		sep := rapid.SampledFrom(rememberSeps).Draw(t, "sep")
		body := rapid.SampledFrom(rememberBodies).Draw(t, "body")
		text := req + sep + body
		if rapid.Bool().Draw(t, "request last") {
			text = body + sep + req
		}
		got, ok := rememberOther(text)
		trimmed := strings.TrimSpace(text)
		want, wantOK := rememberOtherBody(trimmed, bm25.Fold(trimmed))
		if got != want || ok != wantOK {
			t.Fatalf("rememberOther(%q) = %q, %v; the patterns alone give %q, %v", text, got, ok, want, wantOK)
		}
	})
}
