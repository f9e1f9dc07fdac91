package eval

import (
	"regexp"
	"strings"
)

// EvidenceStats counts what ParseEvidence met. LoCoMo has a few malformed evidence
// strings ("D8:6; D9:17", "D:11:26", "D", space-joined lists) and ids of turns that do
// not exist; the evaluation parses them leniently and reports these counts.
type EvidenceStats struct {
	// IDs is how many usable evidence ids were returned.
	IDs int `json:"ids"`
	// Joined counts strings holding more than one id (split on ";", "," or spaces).
	Joined int `json:"joined"`
	// Repaired counts ids rewritten to D<session>:<turn> ("D:11:26" → "D11:26").
	Repaired int `json:"repaired"`
	// Bare counts tokens with no numbers at all ("D"), dropped.
	Bare int `json:"bare"`
	// Malformed counts tokens that could not be read as one id, dropped.
	Malformed int `json:"malformed"`
	// Unknown counts well-formed ids of turns the conversation does not have, dropped.
	Unknown int `json:"unknown"`
	// Duplicate counts ids given twice for one question, counted once.
	Duplicate int `json:"duplicate"`
}

// Add accumulates o into s.
func (s *EvidenceStats) Add(o EvidenceStats) {
	s.IDs += o.IDs
	s.Joined += o.Joined
	s.Repaired += o.Repaired
	s.Bare += o.Bare
	s.Malformed += o.Malformed
	s.Unknown += o.Unknown
	s.Duplicate += o.Duplicate
}

var (
	wellFormed = regexp.MustCompile(`^D([0-9]+):([0-9]+)$`)
	digitRuns  = regexp.MustCompile(`[0-9]+`)
)

// ParseEvidence turns a question's evidence strings into dia ids of the form
// D<session>:<turn>, in order, without duplicates. Each string is split on ";", ","
// and white space; a token is taken as is when well formed, repaired when it starts
// with "D" and holds exactly two numbers ("D:11:26" → "D11:26", "d3-4" → "D3:4"),
// and dropped otherwise. known, when not nil, says whether the conversation has a
// turn; ids it rejects are dropped as unknown.
func ParseEvidence(raw []string, known func(id string) bool) ([]string, EvidenceStats) {
	var (
		out   []string
		st    EvidenceStats
		seen  = map[string]bool{}
		split = func(r rune) bool { return r == ';' || r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' }
	)
	for _, s := range raw {
		tokens := strings.FieldsFunc(s, split)
		if len(tokens) > 1 {
			st.Joined++
		}
		for _, tok := range tokens {
			id, ok := canonicalID(tok, &st)
			switch {
			case !ok:
			case known != nil && !known(id):
				st.Unknown++
			case seen[id]:
				st.Duplicate++
			default:
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	st.IDs = len(out)
	return out, st
}

// canonicalID reads one token as a dia id, counting a repair or a drop in st.
func canonicalID(tok string, st *EvidenceStats) (string, bool) {
	if m := wellFormed.FindStringSubmatch(tok); m != nil {
		return "D" + trimZeros(m[1]) + ":" + trimZeros(m[2]), true
	}
	if !strings.HasPrefix(strings.ToUpper(tok), "D") {
		st.Malformed++
		return "", false
	}
	nums := digitRuns.FindAllString(tok, -1)
	switch len(nums) {
	case 0:
		st.Bare++
		return "", false
	case 2:
		st.Repaired++
		return "D" + trimZeros(nums[0]) + ":" + trimZeros(nums[1]), true
	}
	st.Malformed++
	return "", false
}

// trimZeros writes a number without leading zeros, as dia ids do ("07" → "7").
func trimZeros(n string) string {
	n = strings.TrimLeft(n, "0")
	if n == "" {
		return "0"
	}
	return n
}
