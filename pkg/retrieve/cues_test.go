package retrieve

import (
	"testing"

	"github.com/agentmem/agentmem/pkg/bm25"
)

// Japanese and Korean queries about preferences or files load the topic files,
// as Chinese and German ones do (issue 29): these languages join words, so
// only a cue found inside the query finds them.
func TestTopicCuesJapaneseKorean(t *testing.T) {
	for _, tc := range []struct {
		query       string
		pref, files bool
	}{
		{"どのグラフが好み？", true, false},
		{"回答の形式は？", true, false},
		{"어떤 그래프를 선호해?", true, false},
		{"顧客データのファイルはどれ？", false, true},
		{"결과 파일 이름", false, true},
		{"娘の名前は何でしたか？", false, false},
		{"딸 이름이 뭐였지?", false, false},
	} {
		folded := bm25.Fold(tc.query)
		if got := mentionsCue(folded, preferenceCues); got != tc.pref {
			t.Errorf("%q: preference cue %v, want %v", tc.query, got, tc.pref)
		}
		if got := mentionsCue(folded, fileStructureCues); got != tc.files {
			t.Errorf("%q: file cue %v, want %v", tc.query, got, tc.files)
		}
	}
}
