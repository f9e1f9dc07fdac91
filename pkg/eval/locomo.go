package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Category is a LoCoMo question category, as numbered by the official evaluation code.
type Category int

// LoCoMo question categories.
const (
	MultiHop    Category = 1
	Temporal    Category = 2
	OpenDomain  Category = 3
	SingleHop   Category = 4
	Adversarial Category = 5
)

// Categories lists the categories in report order.
var Categories = []Category{MultiHop, Temporal, OpenDomain, SingleHop, Adversarial}

// String is the category's name.
func (c Category) String() string {
	switch c {
	case MultiHop:
		return "multi-hop"
	case Temporal:
		return "temporal"
	case OpenDomain:
		return "open-domain"
	case SingleHop:
		return "single-hop"
	case Adversarial:
		return "adversarial"
	}
	return "category-" + strconv.Itoa(int(c))
}

// Turn is one dialog turn.
type Turn struct {
	DiaID   string
	Speaker string
	// Text is what was said; a shared photo is appended as "[shares a photo: <caption>]"
	// so that every system sees the same words.
	Text string
}

// Line is the turn as one line of a transcript: "Speaker: text". It is what the
// baselines index and what the conversation's token count is measured on.
func (t Turn) Line() string { return t.Speaker + ": " + t.Text }

// Session is one dated session of a conversation.
type Session struct {
	Number int
	// Start is the session's date; when the file's date cannot be parsed it is the
	// previous session's start plus one day (DateParsed false).
	Start      time.Time
	DateParsed bool
	Turns      []Turn
}

// Question is one LoCoMo question with its evidence as written in the file.
type Question struct {
	Text     string
	Category Category
	Evidence []string
}

// Conversation is one LoCoMo sample.
type Conversation struct {
	SampleID  string
	Sessions  []Session // in session order
	Questions []Question
}

// Turns returns every turn in conversation order.
func (c Conversation) Turns() []Turn {
	var out []Turn
	for _, s := range c.Sessions {
		out = append(out, s.Turns...)
	}
	return out
}

// The file format (snap-research/LoCoMo data/locomo10.json): a list of samples.
type rawSample struct {
	SampleID     string                     `json:"sample_id"`
	Conversation map[string]json.RawMessage `json:"conversation"`
	QA           []rawQuestion              `json:"qa"`
}

type rawQuestion struct {
	Question string `json:"question"`
	Category int    `json:"category"`
	// Evidence is a list of dia_id strings; a few files hold a lone string.
	Evidence json.RawMessage `json:"evidence"`
}

type rawTurn struct {
	Speaker     string `json:"speaker"`
	DiaID       string `json:"dia_id"`
	Text        string `json:"text"`
	BlipCaption string `json:"blip_caption"`
}

var sessionKey = regexp.MustCompile(`^session_(\d+)$`)

// ParseLoCoMo reads a LoCoMo-format file. Malformed evidence is kept as written
// (ParseEvidence deals with it); a structural problem (not JSON, a session that is
// not a list of turns) is an error wrapping ErrInvalidData that names the sample.
func ParseLoCoMo(r io.Reader) ([]Conversation, error) {
	var samples []rawSample
	if err := json.NewDecoder(r).Decode(&samples); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidData, err)
	}
	out := make([]Conversation, 0, len(samples))
	for i, s := range samples {
		c, err := convertSample(s)
		if err != nil {
			return nil, fmt.Errorf("%w: sample %d (%q): %w", ErrInvalidData, i, s.SampleID, err)
		}
		if c.SampleID == "" {
			c.SampleID = "conv-" + strconv.Itoa(i+1)
		}
		out = append(out, c)
	}
	return out, nil
}

func convertSample(s rawSample) (Conversation, error) {
	c := Conversation{SampleID: s.SampleID}
	for key, raw := range s.Conversation {
		m := sessionKey.FindStringSubmatch(key)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		var turns []rawTurn
		if err := json.Unmarshal(raw, &turns); err != nil {
			return c, fmt.Errorf("%s: %w", key, err)
		}
		sess := Session{Number: n}
		for _, t := range turns {
			text := strings.Join(strings.Fields(t.Text), " ")
			if caption := strings.TrimSpace(t.BlipCaption); caption != "" {
				text = strings.TrimSpace(text + " [shares a photo: " + caption + "]")
			}
			sess.Turns = append(sess.Turns, Turn{DiaID: strings.TrimSpace(t.DiaID), Speaker: strings.TrimSpace(t.Speaker), Text: text})
		}
		var date string
		if d, ok := s.Conversation[key+"_date_time"]; ok {
			_ = json.Unmarshal(d, &date) // a non-string date is an unparsed date
		}
		sess.Start, sess.DateParsed = parseSessionDate(date)
		c.Sessions = append(c.Sessions, sess)
	}
	slices.SortFunc(c.Sessions, func(a, b Session) int { return a.Number - b.Number })
	// Sessions without a usable date follow the previous one by a day, so event time
	// still runs forward.
	for i := range c.Sessions {
		if c.Sessions[i].DateParsed {
			continue
		}
		prev := time.Date(2023, time.January, 1, 12, 0, 0, 0, time.UTC)
		if i > 0 {
			prev = c.Sessions[i-1].Start
		}
		c.Sessions[i].Start = prev.Add(24 * time.Hour)
	}
	for _, q := range s.QA {
		c.Questions = append(c.Questions, Question{Text: q.Question, Category: Category(q.Category), Evidence: evidenceStrings(q.Evidence)})
	}
	return c, nil
}

// evidenceStrings accepts a list of strings or a single string; anything else is
// no evidence.
func evidenceStrings(raw json.RawMessage) []string {
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list
	}
	var one string
	if json.Unmarshal(raw, &one) == nil && one != "" {
		return []string{one}
	}
	return nil
}

// dateLayouts are the forms of session_N_date_time seen in LoCoMo ("1:56 pm on 8
// May, 2023") and close variants.
var dateLayouts = []string{
	"3:04 pm on 2 January, 2006",
	"3:04 pm on 2 Jan, 2006",
	"3:04 pm on January 2, 2006",
	"3:04pm on 2 January, 2006",
	"2 January, 2006",
	"2 January 2006",
	"January 2, 2006",
	"2006-01-02 15:04",
	"2006-01-02",
}

// parseSessionDate parses a session date leniently: case and extra spaces do not
// matter.
func parseSessionDate(s string) (time.Time, bool) {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.NewReplacer(" AM", " am", " PM", " pm", " Am", " am", " Pm", " pm").Replace(s)
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}
