package eval

import (
	"context"
	"fmt"
	"math"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/client"
	"github.com/agentmem/agentmem/pkg/session"
)

// CompressionStats is what long-term compression (SPEC B4) does to the
// MEMORY.md files a run built: a dry run of the compress endpoint per user,
// which compresses with the configured compressor (the offline rules unless a
// model is configured) and applies the loss guard, writing nothing.
type CompressionStats struct {
	// Files is how many users had a MEMORY.md.
	Files int `json:"files"`
	// BeforeChars and AfterChars add up the files' lengths before and after; a
	// file the guard rejects counts unchanged.
	BeforeChars int `json:"before_chars"`
	AfterChars  int `json:"after_chars"`
	// Ratio is AfterChars / BeforeChars (1: nothing removed).
	Ratio float64 `json:"compress_ratio"`
	// Rejections is how many compressions the loss guard refused; Reasons says why.
	Rejections  int      `json:"compress_rejections"`
	Reasons     []string `json:"rejection_reasons,omitempty"`
	ProcessedBy string   `json:"processed_by,omitempty"`
}

// measureCompression adds user's MEMORY.md to s.
func measureCompression(ctx context.Context, cl *client.Client, user string, s *CompressionStats) error {
	r, err := cl.Compress(ctx, events.CompressRequest{UserID: user, DryRun: true})
	if err != nil {
		return fmt.Errorf("eval: compress %s: %w", user, err)
	}
	if r.BeforeChars == 0 {
		return nil // no MEMORY.md
	}
	s.Files++
	s.BeforeChars += r.BeforeChars
	s.AfterChars += r.AfterChars
	s.ProcessedBy = r.ProcessedBy
	if r.Rejected != "" {
		s.Rejections++
		s.Reasons = append(s.Reasons, user+": "+r.Rejected)
	}
	s.Ratio = math.Round(float64(s.AfterChars)/float64(s.BeforeChars)*1000) / 1000
	return nil
}

// SummaryStats is what the session summaries (SPEC B2) of a run's sessions
// weigh: over the sessions whose context pack has a session_summary, the
// summary's tokens against those of the messages it stands for, and the
// pack's session part (the summary and the messages kept verbatim) against the
// whole session. Tokens are session.EstimateTokens'.
type SummaryStats struct {
	Sessions      int `json:"sessions"`
	SummaryTokens int `json:"summary_tokens"`
	// CoveredTokens are the tokens of the messages the summaries stand for.
	CoveredTokens int `json:"covered_tokens"`
	// SessionTokens are the tokens of the whole sessions, PackTokens those of
	// the summaries and the messages the packs keep verbatim.
	SessionTokens int `json:"session_tokens"`
	PackTokens    int `json:"pack_tokens"`
	// SummarySharePercent is SummaryTokens / CoveredTokens, PackSharePercent
	// PackTokens / SessionTokens, in percent.
	SummarySharePercent float64 `json:"summary_share_percent"`
	PackSharePercent    float64 `json:"pack_share_percent"`
}

// measureSummaries adds the sessions of c (replayed for user as "session-N")
// that have a summary to s, from their context packs.
func measureSummaries(ctx context.Context, cl *client.Client, user string, c Conversation, s *SummaryStats) error {
	for _, sess := range c.Sessions {
		pack, err := cl.Context(ctx, events.ContextRequest{UserID: user, SessionID: sessionName("", sess), Lightweight: true, MaxTokens: 1 << 20, RecordHits: events.NoHits()})
		if err != nil {
			return fmt.Errorf("eval: context of %s %s: %w", c.SampleID, sessionName("", sess), err)
		}
		src := pack.SessionSummarySource
		if pack.SessionSummary == "" || src == nil {
			continue
		}
		s.Sessions++
		s.SummaryTokens += session.EstimateTokens(pack.SessionSummary)
		s.PackTokens += session.EstimateTokens(pack.SessionSummary)
		for _, e := range pack.RecentEvents {
			s.PackTokens += session.EstimateTokens(e.Obs.Text)
		}
		said := 0
		for _, t := range sess.Turns {
			if t.Text == "" {
				continue // not replayed
			}
			n := session.EstimateTokens(t.Text)
			s.SessionTokens += n
			if said < src.Messages {
				s.CoveredTokens += n
			}
			said++
		}
	}
	if s.CoveredTokens > 0 {
		s.SummarySharePercent = math.Round(float64(s.SummaryTokens)/float64(s.CoveredTokens)*1000) / 10
	}
	if s.SessionTokens > 0 {
		s.PackSharePercent = math.Round(float64(s.PackTokens)/float64(s.SessionTokens)*1000) / 10
	}
	return nil
}

// sessionName is the session id a replay gives a LoCoMo session: "session-N"
// after prefix.
func sessionName(prefix string, s Session) string {
	return fmt.Sprintf("%ssession-%d", prefix, s.Number)
}
