package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/client"
)

// selection is the flags that select a tenant's events: --user, --session, --since,
// --until (shared by events, replay).
type selection struct {
	tenant, user, session string
	since, until          string
}

func (s *selection) register(f *pflag.FlagSet) {
	f.StringVar(&s.tenant, "tenant", "", "tenant id (required)")
	f.StringVar(&s.user, "user", "", "only this user's events")
	f.StringVar(&s.session, "session", "", "only this session's events (needs --user)")
	f.StringVar(&s.since, "since", "", "only events stored at or after this time (RFC 3339, or a duration ago such as 2h)")
	f.StringVar(&s.until, "until", "", "only events stored before this time (RFC 3339, or a duration ago)")
}

// query is the selection as an events query.
func (s *selection) query(now time.Time) (events.EventsQuery, error) {
	q := events.EventsQuery{UserID: s.user, SessionID: s.session}
	var err error
	if q.Since, err = parseTime("since", s.since, now); err != nil {
		return q, err
	}
	if q.Until, err = parseTime("until", s.until, now); err != nil {
		return q, err
	}
	return q, q.Validate()
}

// parseTime reads an RFC 3339 time, a date (YYYY-MM-DD, UTC) or a duration before
// now; "" is the zero time.
func parseTime(flag, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t.UTC(), nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want an RFC 3339 time, a date YYYY-MM-DD or a duration ago such as 2h", flag, v)
}

// newEventsCmd is `agentmem events list|count|get` (SPEC D2): the event history.
func newEventsCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "Read a tenant's event history from the stream (list, count, get)"}
	cmd.AddCommand(eventsListCmd(g), eventsCountCmd(g), eventsGetCmd(g))
	return cmd
}

func eventsListCmd(g *globalFlags) *cobra.Command {
	var (
		sel           selection
		limit, offset int
		asJSON        bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List events in stream order",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := sel.query(time.Now())
			if err != nil {
				return err
			}
			q.Limit, q.Offset = limit, offset
			return withClient(g, ids{tenant: sel.tenant}, func(ctx context.Context, cl *client.Client) error {
				rep, err := cl.Events(ctx, q)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if asJSON {
					return printJSON(out, rep)
				}
				for _, e := range rep.Events {
					if _, err := fmt.Fprintln(out, eventLine(e)); err != nil {
						return err
					}
				}
				if len(rep.Events) == 0 {
					_, err = fmt.Fprintf(out, "no events of tenant %s match\n", sel.tenant)
				}
				if rep.Truncated {
					_, err = fmt.Fprintf(cmd.ErrOrStderr(), "(cut to fit one message: ask again with --offset %d)\n", offset+len(rep.Events))
				}
				return err
			})
		},
	}
	f := cmd.Flags()
	sel.register(f)
	f.IntVar(&limit, "limit", 100, fmt.Sprintf("at most this many events (at most %d; 0: the retriever's limit)", events.MaxLimit))
	f.IntVar(&offset, "offset", 0, "skip this many events first")
	f.BoolVar(&asJSON, "json", false, "print the reply as JSON")
	_ = cmd.MarkFlagRequired("tenant")
	return cmd
}

// eventLine is one event on one line: stream sequence, stored time, type, ids and
// what it says.
func eventLine(e events.StoredEvent) string {
	env := e.Event
	var what string
	switch {
	case env.Observation != nil:
		o := env.Observation
		what = string(o.EffectiveKind()) + " " + string(o.Role)
		if o.Text != "" {
			what += ": " + clip(o.Text, 80)
		}
	case env.MemoryWritten != nil:
		what = fmt.Sprintf("%d entries, %d memories", len(env.MemoryWritten.Entries), len(env.MemoryWritten.MemoryIDs))
	case env.MemoryHit != nil:
		what = fmt.Sprintf("%d memories", len(env.MemoryHit.MemoryIDs))
	case env.Write != nil:
		what = env.Write.Op + " " + clip(string(env.Write.Request), 80)
	}
	return fmt.Sprintf("%d\t%s\t%s\t%s\t%s/%s\t%s", e.Seq, e.StoredTS.Format(time.RFC3339), env.ID, env.Type, env.UserID, env.SessionID, what)
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func eventsCountCmd(g *globalFlags) *cobra.Command {
	var (
		sel    selection
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "count",
		Short: "Count events",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := sel.query(time.Now())
			if err != nil {
				return err
			}
			return withClient(g, ids{tenant: sel.tenant}, func(ctx context.Context, cl *client.Client) error {
				rep, err := cl.CountEvents(ctx, q)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), rep)
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), rep.Count)
				return err
			})
		},
	}
	sel.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the reply as JSON")
	_ = cmd.MarkFlagRequired("tenant")
	return cmd
}

func eventsGetCmd(g *globalFlags) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Print one event (JSON) by its id",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(g, ids{tenant: tenant}, func(ctx context.Context, cl *client.Client) error {
				rep, err := cl.Event(ctx, args[0])
				if err != nil {
					return err
				}
				return printJSON(cmd.OutOrStdout(), rep)
			})
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "tenant id (required)")
	_ = cmd.MarkFlagRequired("tenant")
	return cmd
}
