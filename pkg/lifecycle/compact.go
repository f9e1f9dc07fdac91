package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/clock"
	"github.com/agentmem/agentmem/pkg/docstore"
	"github.com/agentmem/agentmem/pkg/llm"
	"github.com/agentmem/agentmem/pkg/markdown"
	"github.com/agentmem/agentmem/pkg/obs"
	"github.com/agentmem/agentmem/pkg/policy"
)

// Defaults of CompactorConfig.
const (
	DefaultMinInterval     = 24 * time.Hour
	DefaultCompactAttempts = 5
)

// CompactorConfig configures a Compactor.
type CompactorConfig struct {
	// Policy is the configured policy; a namespace's overrides are overlaid on it
	// for long_term_compress_char_threshold.
	Policy policy.Policy
	// MinInterval is the least time between two automatic compressions of a
	// namespace (.last_longterm_compress); default 24h.
	MinInterval time.Duration
	// Guard bounds what a compression may lose.
	Guard GuardConfig
	// Attempts bounds the compressions of one run when MEMORY.md keeps being
	// rewritten (not appended to) meanwhile; default 5.
	Attempts int
	// Now is the clock of the 24 h rule and the stamp; default time.Now.
	Now func() time.Time
}

func (c *CompactorConfig) setDefaults() {
	if c.MinInterval == 0 {
		c.MinInterval = DefaultMinInterval
	}
	if c.Attempts == 0 {
		c.Attempts = DefaultCompactAttempts
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports what is wrong with the configuration.
func (c CompactorConfig) Validate() error {
	switch {
	case c.MinInterval < 0:
		return fmt.Errorf("%w: MinInterval %s is negative", ErrInvalidConfig, c.MinInterval)
	case c.Attempts < 1:
		return fmt.Errorf("%w: Attempts %d must be positive", ErrInvalidConfig, c.Attempts)
	case c.Guard.MaxLossPercent < 0 || c.Guard.MaxLossPercent > 100:
		return fmt.Errorf("%w: Guard.MaxLossPercent %d must be between 0 and 100", ErrInvalidConfig, c.Guard.MaxLossPercent)
	}
	return c.Policy.Validate()
}

// Compactor runs long-term compression (SPEC B4) on a docstore: backup,
// compress, loss guard, compare-and-set replace, stamp.
type Compactor struct {
	cfg     CompactorConfig
	docs    *docstore.Store
	model   Compressor // nil: rules only
	rules   Compressor
	metrics *Metrics
	logger  *zap.Logger
}

// NewCompactor returns a Compactor over docs. model may be nil (offline); when
// it is unavailable or answers unusably, the rule compressor stands in.
func NewCompactor(cfg CompactorConfig, docs *docstore.Store, model Compressor, metrics *Metrics, logger *zap.Logger) (*Compactor, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if docs == nil {
		return nil, fmt.Errorf("%w: nil docstore", ErrInvalidConfig)
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Compactor{cfg: cfg, docs: docs, model: model, rules: RuleCompressor{}, metrics: metrics, logger: logger.Named("compress")}, nil
}

// Maybe compresses MEMORY.md when it is over the namespace's
// long_term_compress_char_threshold (0: off) and the last compression is more
// than MinInterval ago; it runs after Markdown writes. An attempt the guard
// rejects is stamped too, so that a file the model cannot compress safely costs
// one model call a day, not one per write.
func (c *Compactor) Maybe(ctx context.Context, ns docstore.Namespace) (events.CompressReply, error) {
	return c.run(ctx, ns, false, false)
}

// CompressNow compresses MEMORY.md now, whatever its size and the last
// compression (the compress endpoint and `agentmem compress`); the guard still
// applies. A dry run writes nothing and returns the diff.
func (c *Compactor) CompressNow(ctx context.Context, ns docstore.Namespace, dryRun bool) (events.CompressReply, error) {
	return c.run(ctx, ns, true, dryRun)
}

func (c *Compactor) run(ctx context.Context, ns docstore.Namespace, force, dryRun bool) (events.CompressReply, error) {
	log := c.logger.With(obs.Tenant(ns.Tenant), obs.User(ns.User))
	reply := events.CompressReply{DryRun: dryRun}
	for range c.cfg.Attempts {
		data, err := c.docs.ReadFile(ctx, ns, docstore.MemoryFile)
		if errors.Is(err, docstore.ErrNotFound) {
			reply.Skipped = "there is no MEMORY.md"
			return reply, nil
		}
		if err != nil {
			return reply, err
		}
		cur := string(data)
		reply.BeforeChars, reply.AfterChars = len(cur), len(cur)
		if !force {
			if why, err := c.due(ctx, ns, len(cur)); err != nil || why != "" {
				reply.Skipped = why
				return reply, err
			}
		}
		_, perrs := markdown.ParseEntries(cur)
		c.docs.LogParseErrors(ns, docstore.MemoryFile, perrs)
		out, by, err := c.compress(ctx, cur, log)
		if err != nil {
			c.metrics.compression("failed")
			return reply, err
		}
		reply.ProcessedBy, reply.AfterChars = by, len(out)
		if err := c.cfg.Guard.Check(cur, out); err != nil {
			reply.Rejected, reply.AfterChars = err.Error(), len(cur)
			log.Warn("compressed MEMORY.md rejected; the original stays", zap.String("processed_by", by), zap.Error(err))
			c.metrics.compression("rejected")
			if !force {
				return reply, c.stamp(ctx, ns)
			}
			return reply, nil
		}
		if out == cur {
			reply.Skipped = "nothing to compress"
			if dryRun {
				return reply, nil // a dry run changes nothing, the stamp included
			}
			c.metrics.compression("skipped")
			return reply, c.stamp(ctx, ns)
		}
		if dryRun {
			reply.Diff = Diff(cur, out)
			return reply, nil
		}
		backup, done, err := c.replace(ctx, ns, cur, out)
		if err != nil {
			c.metrics.compression("failed")
			return reply, err
		}
		if !done {
			continue // rewritten meanwhile, not just appended to: compress again
		}
		reply.Compressed, reply.Backup, reply.AfterChars = true, backup.name, backup.chars
		c.metrics.compression("compressed")
		log.Info("compressed MEMORY.md", zap.Int("before_chars", reply.BeforeChars), zap.Int("after_chars", reply.AfterChars),
			zap.String("processed_by", by), zap.String("backup", backup.name))
		return reply, c.stamp(ctx, ns)
	}
	c.metrics.compression("failed")
	return reply, fmt.Errorf("%w: MEMORY.md was rewritten during %d compressions", docstore.ErrConflict, c.cfg.Attempts)
}

type replaced struct {
	name  string
	chars int
}

// replace swaps cur for out with a compare-and-set after a backup. When entries
// were appended meanwhile (the file is cur plus more), the appended text is
// added to out and the swap tried again: a concurrent append is never lost and
// needs no second compression. done is false when the file was rewritten some
// other way.
func (c *Compactor) replace(ctx context.Context, ns docstore.Namespace, cur, out string) (replaced, bool, error) {
	for {
		backup, err := c.docs.ReplaceIf(ctx, ns, docstore.MemoryFile, []byte(cur), []byte(out))
		if err == nil {
			return replaced{backup, len(out)}, true, nil
		}
		if !errors.Is(err, docstore.ErrChanged) {
			return replaced{}, false, err
		}
		data, err := c.docs.ReadFile(ctx, ns, docstore.MemoryFile)
		if err != nil {
			if errors.Is(err, docstore.ErrNotFound) {
				return replaced{}, false, nil
			}
			return replaced{}, false, err
		}
		now := string(data)
		if !strings.HasPrefix(now, cur) {
			return replaced{}, false, nil
		}
		if added := strings.TrimLeft(now[len(cur):], "\n"); added != "" {
			out = markdown.AppendBlock(out, added)
		}
		cur = now
	}
}

// due says why an automatic compression is not due ("" when it is).
func (c *Compactor) due(ctx context.Context, ns docstore.Namespace, chars int) (string, error) {
	p := c.cfg.Policy
	data, ok, err := c.docs.PolicyOverrides(ctx, ns)
	if err != nil {
		return "", err
	}
	if ok {
		if overlaid, err := p.Overlay(data); err == nil {
			p = overlaid
		}
	}
	if p.LongTermCompressCharThreshold <= 0 {
		return "long_term_compress_char_threshold is 0 (off)", nil
	}
	if chars <= p.LongTermCompressCharThreshold {
		return fmt.Sprintf("%d chars, not over long_term_compress_char_threshold %d", chars, p.LongTermCompressCharThreshold), nil
	}
	last, ok, err := c.docs.LastLongTermCompress(ctx, ns)
	if err != nil {
		c.logger.Warn("unreadable compression stamp; compressing", obs.Tenant(ns.Tenant), obs.User(ns.User), zap.Error(err))
		return "", nil
	}
	if ok && clock.Now(ctx, c.cfg.Now).Sub(last) < c.cfg.MinInterval {
		return fmt.Sprintf("last compressed at %s, less than %s ago", last.Format(time.RFC3339), c.cfg.MinInterval), nil
	}
	return "", nil
}

// compress asks the model, or the rules when there is none or it fails.
func (c *Compactor) compress(ctx context.Context, doc string, log *zap.Logger) (string, string, error) {
	if c.model != nil {
		out, err := c.model.Compress(ctx, doc)
		if err == nil {
			return out, ByLLM, nil
		}
		if ctx.Err() != nil || !(errors.Is(err, llm.ErrUnavailable) || errors.Is(err, llm.ErrBadReply)) {
			return "", "", err
		}
		fallenBack(c.model, StepCompress, log, err)
		out, err = c.rules.Compress(ctx, doc)
		return out, ByRulesFallback, err
	}
	out, err := c.rules.Compress(ctx, doc)
	return out, ByRules, err
}

func (c *Compactor) stamp(ctx context.Context, ns docstore.Namespace) error {
	return c.docs.SetLastLongTermCompress(ctx, ns, clock.Now(ctx, c.cfg.Now))
}
