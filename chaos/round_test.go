package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmem/agentmem/events"
	"github.com/agentmem/agentmem/pkg/bus"
	"github.com/agentmem/agentmem/pkg/extract"
	"github.com/agentmem/agentmem/pkg/kvcas"
	"github.com/agentmem/agentmem/pkg/records"
	"github.com/agentmem/agentmem/pkg/vectorstore"
	"github.com/agentmem/agentmem/pkg/vectorstore/embedded"
)

const (
	scenarioUp      = "up"
	scenarioWorkers = "workers"
	scenarioNATS    = "nats"
	scenarioCluster = "cluster"

	tenant = "chaos"

	// leaderTarget is the kill target resolved when the kill comes: the node
	// leading the event stream then.
	leaderTarget = "leader"
)

// scenarios are the rounds TestChaos rotates through; TestChaosCluster runs
// the cluster scenario (AGENTMEM_TEST_CHAOS_SCENARIO may name any).
var scenarios = []string{scenarioUp, scenarioWorkers, scenarioNATS}

// params sizes a run.
type params struct {
	rounds     int
	messages   int // observations per round
	kills      [2]int
	publishers int
	// scenario, when set, is every round's instead of the rotation's.
	scenario string
}

// killAction is one planned kill: when the at-th observation of the round is
// acked, signal target with sig.
type killAction struct {
	at     int
	target string
	sig    syscall.Signal
}

func (a killAction) String() string {
	return fmt.Sprintf("%s of %s at observation %d", sigName(a.sig), a.target, a.at)
}

func sigName(s syscall.Signal) string {
	if s == syscall.SIGKILL {
		return "SIGKILL"
	}
	return "SIGTERM"
}

// session is one planned session: its observations' tokens, then its end.
type session struct {
	user, id string
	tokens   []string
	// filled in as publishes are acked
	obsIDs []string
	endID  string
}

// plan is one round's workload and kills, drawn from the seeded generator.
type plan struct {
	scenario string
	sessions []*session
	kills    []killAction
	total    int
}

// makePlan draws round's plan. Scenarios come in seeded shuffles of all three,
// so every run of three rounds or more covers each, and a nats round (the slowest:
// work in flight waits up to kvcas.RequestTimeout after a restart) comes at most
// ceil(rounds/3) times.
func makePlan(rng *rand.Rand, round int, order []string, p params) plan {
	if round%len(scenarios) == 0 {
		copy(order, scenarios)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	pl := plan{scenario: order[round%len(order)]}
	if p.scenario != "" {
		pl.scenario = p.scenario
	}
	if only := os.Getenv("AGENTMEM_TEST_CHAOS_SCENARIO"); only != "" {
		pl.scenario = only // the draw above still happens, so the rest of the plan is the seed's
	}
	for n, s := 0, 0; n < p.messages; s++ {
		size := min(5+rng.IntN(26), p.messages-n)
		ss := &session{user: fmt.Sprintf("r%du%d", round, s), id: fmt.Sprintf("r%ds%d", round, s)}
		for range size {
			ss.tokens = append(ss.tokens, fmt.Sprintf("ck%dx%05d", round, n))
			n++
		}
		pl.sessions = append(pl.sessions, ss)
	}
	pl.total = p.messages
	var targets []string
	switch pl.scenario {
	case scenarioUp:
		targets = []string{"up"}
	case scenarioWorkers:
		targets = []string{"ingest", "ingest", "extractor", "extractor", "consolidator", "retriever"}
	case scenarioNATS:
		targets = []string{"nats-server"}
	case scenarioCluster:
		targets = []string{leaderTarget, "nats-1", "nats-2", "nats-3"}
	}
	k := p.kills[0] + rng.IntN(p.kills[1]-p.kills[0]+1)
	for i := range k {
		sig := syscall.SIGKILL
		if rng.IntN(2) == 0 && pl.scenario != scenarioCluster {
			sig = syscall.SIGTERM
		}
		// From the first tenth of the observations to the last one acked (a kill
		// there hits the processing still going on).
		at := p.messages/10 + rng.IntN(p.messages-p.messages/10) + 1
		target := targets[rng.IntN(len(targets))]
		if pl.scenario == scenarioCluster && i == 0 {
			target = leaderTarget // every cluster round loses its stream leader once
		}
		pl.kills = append(pl.kills, killAction{at: at, target: target, sig: sig})
	}
	sort.Slice(pl.kills, func(i, j int) bool { return pl.kills[i].at < pl.kills[j].at })
	return pl
}

// tally is what a round (or a run) counted.
type tally struct {
	rounds, observations, ends int
	kills                      map[string]int // "SIGKILL up" → n
	acked, stored, deadLetters int
	lost, duplicated, both     int
	// bothMaxDeliveries: stored, and dead-lettered for max deliveries by a later
	// delivery (the acks of the stored delivery never reached the server). Allowed
	// only under AGENTMEM_TEST_CHAOS_MAX_DELIVER, which provokes it.
	bothMaxDeliveries         int
	unexpected                int // stored memories of no acked observation
	endsAcked, extracted      int
	endsDead, endsMissing     int
	markdownDup, markdownMiss int
	publishRetries            int
	seconds                   float64
}

func (t *tally) add(o tally) {
	t.rounds += o.rounds
	t.observations += o.observations
	t.ends += o.ends
	if t.kills == nil {
		t.kills = map[string]int{}
	}
	for k, v := range o.kills {
		t.kills[k] += v
	}
	t.acked += o.acked
	t.stored += o.stored
	t.deadLetters += o.deadLetters
	t.lost += o.lost
	t.duplicated += o.duplicated
	t.both += o.both
	t.bothMaxDeliveries += o.bothMaxDeliveries
	t.unexpected += o.unexpected
	t.endsAcked += o.endsAcked
	t.extracted += o.extracted
	t.endsDead += o.endsDead
	t.endsMissing += o.endsMissing
	t.markdownDup += o.markdownDup
	t.markdownMiss += o.markdownMiss
	t.publishRetries += o.publishRetries
	t.seconds += o.seconds
}

func (t tally) String() string {
	var kills []string
	for k, v := range t.kills {
		kills = append(kills, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(kills)
	return fmt.Sprintf("rounds %d, messages %d (observations %d, session ends %d), kills [%s]; "+
		"observations acked %d: stored once %d, dead-lettered %d, lost %d, duplicated %d, stored and dead-lettered %d (+%d for max deliveries), unexpected %d; "+
		"session ends acked %d: extracted %d, dead-lettered %d, missing %d; Markdown entries missing %d, duplicated %d; publish retries %d; %.1f s",
		t.rounds, t.observations+t.ends, t.observations, t.ends, strings.Join(kills, ", "),
		t.acked, t.stored, t.deadLetters, t.lost, t.duplicated, t.both, t.bothMaxDeliveries, t.unexpected,
		t.endsAcked, t.extracted, t.endsDead, t.endsMissing, t.markdownMiss, t.markdownDup, t.publishRetries, t.seconds)
}

func (t tally) ok() bool {
	maxDeliverKnob := os.Getenv("AGENTMEM_TEST_CHAOS_MAX_DELIVER") != ""
	return t.lost == 0 && t.duplicated == 0 && t.both == 0 && t.unexpected == 0 &&
		(t.bothMaxDeliveries == 0 || maxDeliverKnob) &&
		t.endsMissing == 0 && t.markdownDup == 0 && t.markdownMiss == 0
}

// seed is AGENTMEM_TEST_CHAOS_SEED, or a fresh one.
func seed(t *testing.T) uint64 {
	if s := os.Getenv("AGENTMEM_TEST_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("AGENTMEM_TEST_CHAOS_SEED=%q: %v", s, err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

// run runs p.rounds rounds and checks the account of each.
func run(t *testing.T, p params) tally {
	if testing.Short() {
		t.Skip("chaos suite: skipped with -short")
	}
	if sc := os.Getenv("AGENTMEM_TEST_CHAOS_SCENARIO"); sc != "" && sc != scenarioCluster && !slices.Contains(scenarios, sc) {
		t.Fatalf("AGENTMEM_TEST_CHAOS_SCENARIO=%q: want one of %v or %s", sc, scenarios, scenarioCluster)
	}
	natsServer := findNATSServer(t)
	s := seed(t)
	t.Logf("chaos seed %d (replay: AGENTMEM_TEST_CHAOS_SEED=%d)", s, s)
	fmt.Printf("chaos: seed %d (replay with AGENTMEM_TEST_CHAOS_SEED=%d)\n", s, s)
	bins := buildBinaries(t)
	rng := rand.New(rand.NewPCG(s, 0x6368616f73))
	var total tally
	order := make([]string, len(scenarios))
	for r := range p.rounds {
		pl := makePlan(rng, r, order, p)
		var got tally
		ok := t.Run(fmt.Sprintf("round%d-%s", r, pl.scenario), func(t *testing.T) {
			got = runRound(t, bins, natsServer, r, pl, p)
			t.Logf("round %d (%s): %s", r, pl.scenario, got)
			if !got.ok() {
				t.Errorf("round %d (%s, seed %d): accounting failed: %s", r, pl.scenario, s, got)
			}
		})
		total.add(got)
		if !ok {
			break
		}
	}
	t.Logf("chaos total (seed %d): %s", s, total)
	fmt.Printf("chaos: total (seed %d): %s\n", s, total)
	return total
}

func runRound(t *testing.T, bins, natsServer string, round int, pl plan, p params) tally {
	start := time.Now()
	res := tally{rounds: 1, kills: map[string]int{}}
	dir := t.TempDir()
	if keep := os.Getenv("AGENTMEM_TEST_CHAOS_KEEP"); keep != "" { // keep logs and data for a look afterwards
		dir = filepath.Join(keep, fmt.Sprintf("round%d-%s", round, pl.scenario))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := newCluster(t, pl.scenario, bins, natsServer, dir)
	defer func() {
		if t.Failed() {
			for _, pr := range c.procs {
				t.Logf("---- %s (%s), last lines:\n%s", pr.name, pr.logPath, logTail(pr.logPath, 40))
			}
		}
	}()
	var plans []string
	for _, k := range pl.kills {
		plans = append(plans, k.String())
	}
	t.Logf("round %d: scenario %s, %d observations in %d sessions, kills: %s", round, pl.scenario, pl.total, len(pl.sessions), strings.Join(plans, "; "))
	if err := c.startAll(); err != nil {
		t.Fatal(err)
	}

	nc, err := nats.Connect(c.natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.RetryOnFailedConnect(true), nats.Timeout(time.Second),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // resets while servers are killed are expected
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	raw, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The keyring readExtractions binds is created or updated as the processes
	// do it: at their replica count.
	js := bus.WithReplicas(raw, c.replicas)
	// lastAcked is the user and token of the newest acked observation.
	var lastAcked atomic.Pointer[[2]string]
	var whileDown func(killAction) error
	if pl.scenario == scenarioCluster {
		whileDown = func(a killAction) error { return readWhileDown(nc, lastAcked.Load(), a, t.Logf) }
	}

	// The chaos goroutine carries out the kills in order as the publishers reach
	// them, and restarts any process that dies unasked in between.
	triggers := make(chan killAction, len(pl.kills))
	chaosErr := make(chan error, 1)
	go func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case a, ok := <-triggers:
				if !ok {
					chaosErr <- nil
					return
				}
				began := time.Now()
				if a.target == leaderTarget {
					leader, err := streamLeader(js)
					if err != nil {
						chaosErr <- fmt.Errorf("%s: %w", a, err)
						return
					}
					t.Logf("round %d: %s leads stream %s", round, leader, bus.DefaultStream)
					a.target = leader
				}
				if err := c.kill(a, whileDown); err != nil {
					chaosErr <- fmt.Errorf("%s: %w", a, err)
					return
				}
				t.Logf("round %d: %s; all ready again after %.1f s", round, a, time.Since(began).Seconds())
				res.kills[sigName(a.sig)+" "+a.target]++
			case <-tick.C:
				for _, pr := range c.procs {
					if !pr.running() {
						c.note("%s exited unexpectedly (%v); restarted", pr.name, pr.exitErr)
						if err := pr.start(); err != nil {
							chaosErr <- err
							return
						}
					}
				}
			}
		}
	}()

	// Publishers: each takes whole sessions (observations in order, then the end).
	killAt := map[int]killAction{}
	for _, k := range pl.kills {
		for killAt[k.at].target != "" { // two kills at one point: push the later one on
			k.at++
		}
		killAt[k.at] = k
	}
	var acked, retries atomic.Int64
	work := make(chan *session)
	pubErr := make(chan error, p.publishers)
	var wg sync.WaitGroup
	for range p.publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ss := range work {
				for _, tok := range ss.tokens {
					env := events.New(events.TypeObservation, tenant, ss.user, "chaos-agent", ss.id)
					env.Observation = &events.Observation{Kind: events.KindMessage, Role: events.RoleUser,
						Text: fmt.Sprintf("Remember: my item %s is stored in box %s.", tok, tok[len(tok)-3:])}
					n, err := publish(js, env)
					retries.Add(int64(n))
					if err != nil {
						pubErr <- err
						return
					}
					ss.obsIDs = append(ss.obsIDs, env.ID)
					lastAcked.Store(&[2]string{ss.user, tok})
					if k, ok := killAt[int(acked.Add(1))]; ok {
						triggers <- k
					}
				}
				env := events.New(events.TypeSessionEnded, tenant, ss.user, "chaos-agent", ss.id)
				n, err := publish(js, env)
				retries.Add(int64(n))
				if err != nil {
					pubErr <- err
					return
				}
				ss.endID = env.ID
			}
		}()
	}
	func() {
		defer close(work)
		for _, ss := range pl.sessions {
			select {
			case work <- ss:
			case err := <-pubErr:
				t.Fatalf("publish: %v", err)
			}
		}
	}()
	wg.Wait()
	close(pubErr)
	if err := <-pubErr; err != nil {
		t.Fatalf("publish: %v", err)
	}
	// Kill points past the last ack (pushed on) still run.
	for at, k := range killAt {
		if at > int(acked.Load()) {
			triggers <- k
		}
	}
	close(triggers)
	if err := <-chaosErr; err != nil {
		t.Fatal(err)
	}
	if err := c.ensureAll(); err != nil {
		t.Fatal(err)
	}
	res.publishRetries = int(retries.Load())

	// Drain: every worker's durable consumer has nothing pending or unacked.
	drainStart := time.Now()
	if err := drained(js, 120*time.Second, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Logf("round %d: published in %.1f s, drained in %.1f s", round, drainStart.Sub(start).Seconds(), time.Since(drainStart).Seconds())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dead, err := bus.ListDeadLetters(ctx, js, bus.DefaultDLQStream, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	extractions, err := readExtractions(ctx, js, pl.sessions)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkReplicas(ctx, js, c.replicas); err != nil {
		t.Error(err)
	}
	nc.Close()
	c.stopAll()

	stored, err := countEpisodes(pl.sessions, c.vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	markdown, err := countMarkdown(c.memoryDir)
	if err != nil {
		t.Fatal(err)
	}
	account(t, &res, pl.sessions, dead, stored, extractions, markdown)
	for _, n := range c.notes {
		t.Logf("round %d note: %s", round, n)
	}
	res.seconds = time.Since(start).Seconds()
	return res
}

// publish publishes env with Nats-Msg-Id = its id until JetStream acks it,
// retrying failed and timed-out attempts with the same id; it returns the
// number of retries.
func publish(js jetstream.JetStream, env events.Envelope) (int, error) {
	subject, data, err := env.Encode()
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(publishDeadline)
	for retries := 0; ; retries++ {
		msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
		msg.Header.Set(events.HeaderMsgID, env.ID)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.PublishMsg(ctx, msg)
		cancel()
		if err == nil {
			return retries, nil
		}
		if time.Now().After(deadline) {
			return retries, fmt.Errorf("event %s not acked within %s: %w", env.ID, publishDeadline, err)
		}
		time.Sleep(50 * time.Millisecond) // retry pacing while the server is down, not synchronisation
	}
}

const publishDeadline = 2 * time.Minute

// drained polls the workers' durable consumers until none has a message pending
// or awaiting its ack.
func drained(js jetstream.JetStream, timeout time.Duration, logf func(string, ...any)) error {
	start := time.Now()
	deadline := start.Add(timeout)
	var last string
	for polls := 0; time.Now().Before(deadline); polls++ {
		if polls > 0 && polls%25 == 0 {
			logf("draining for %.0f s: %s", time.Since(start).Seconds(), last)
		}
		last = ""
		for _, w := range []string{bus.WorkerIngest, bus.WorkerExtractor, bus.WorkerConsolidator} {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			cons, err := js.Consumer(ctx, bus.DefaultStream, "agentmem-"+w)
			var info *jetstream.ConsumerInfo
			if err == nil {
				info, err = cons.Info(ctx)
			}
			cancel()
			switch {
			case err != nil:
				last += fmt.Sprintf("%s: %v; ", w, err)
			case info.NumPending > 0 || info.NumAckPending > 0:
				last += fmt.Sprintf("%s: %d pending, %d unacked; ", w, info.NumPending, info.NumAckPending)
			}
		}
		if last == "" {
			return nil
		}
		time.Sleep(200 * time.Millisecond) // poll interval
	}
	return fmt.Errorf("consumers not drained within %s: %s", timeout, last)
}

// readExtractions returns the extraction status of each session (key
// tenant.user.session of the extractor's state bucket), "" for none.
func readExtractions(ctx context.Context, js jetstream.JetStream, sessions []*session) (map[string]string, error) {
	kv, err := js.KeyValue(ctx, extract.DefaultStateBucket)
	if err != nil {
		return nil, err
	}
	// The extraction states are sealed with each user's key (forget erases it).
	ring, err := kvcas.NewKeyring(ctx, js, kvcas.KeyringConfig{})
	if err != nil {
		return nil, err
	}
	kv = kvcas.Sealed(kv, ring, kvcas.OwnerAt(0))
	out := map[string]string{}
	for _, ss := range sessions {
		e, err := kv.Get(ctx, tenant+"."+ss.user+"."+ss.id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var st struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			return nil, err
		}
		out[ss.id] = st.Status
	}
	return out, nil
}

var tokenRE = regexp.MustCompile(`ck\d+x\d{5}`)

// countEpisodes opens the embedded vector store (every process has stopped) and
// counts the episodic memories of each token, by the statement they keep.
func countEpisodes(sessions []*session, path string) (map[string]int, error) {
	st, err := embedded.New(embedded.Config{Path: path, Dimensions: 384}, nil)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ctx := context.Background()
	out := map[string]int{}
	for _, ss := range sessions {
		f := vectorstore.Filter{Tenant: tenant, UserID: ss.user, MemoryTypes: []vectorstore.MemoryType{vectorstore.Episodic}}
		for offset, pages := "", 0; pages < 10_000; pages++ {
			recs, next, err := st.Scroll(ctx, f, offset, 500)
			if err != nil {
				return nil, err
			}
			for _, r := range recs {
				thing, _ := r.Metadata[records.MetaThing].(string)
				for _, tok := range tokenRE.FindAllString(thing, -1) {
					out[tok]++
				}
			}
			if next == "" {
				break
			}
			offset = next
		}
	}
	return out, nil
}

// countMarkdown counts each token's occurrences in the Markdown files (backups
// aside, which are copies by design).
func countMarkdown(dir string) (map[string]int, error) {
	out := map[string]int{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == dir {
			return filepath.SkipDir
		}
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "backups" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".md") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, tok := range tokenRE.FindAllString(string(data), -1) {
			out[tok]++
		}
		return nil
	})
	return out, err
}

// account checks the round: each acked observation stored exactly once XOR
// dead-lettered with a reason; each acked session end extracted XOR
// dead-lettered, and then each of its tokens in Markdown exactly once.
func account(t *testing.T, res *tally, sessions []*session, dead []bus.DeadLetter, stored map[string]int, extractions map[string]string, markdown map[string]int) {
	deadByID := map[string]bus.DeadLetter{}
	for _, dl := range dead {
		env, err := events.Decode(dl.Data)
		if err != nil {
			t.Errorf("dead letter %d (%s): undecodable data: %v", dl.Seq, dl.Worker, err)
			continue
		}
		if dl.Reason == "" {
			t.Errorf("dead letter %d (%s, event %s) has no reason", dl.Seq, dl.Worker, env.ID)
		}
		deadByID[env.ID] = dl
		t.Logf("dead letter %d: worker %s, event %s (%s), %d deliveries, class %s: %s", dl.Seq, dl.Worker, env.ID, env.Type, dl.Deliveries, dl.Class, dl.Reason)
	}
	acked := map[string]bool{}
	const maxReports = 20
	reports := 0
	report := func(format string, args ...any) {
		if reports < maxReports {
			t.Errorf(format, args...)
		}
		reports++
	}
	for _, ss := range sessions {
		res.observations += len(ss.tokens)
		res.ends++
		for i, tok := range ss.tokens[:len(ss.obsIDs)] {
			acked[tok] = true
			res.acked++
			id := ss.obsIDs[i]
			_, isDead := deadByID[id]
			n := stored[tok]
			switch {
			case n == 1 && !isDead:
				res.stored++
			case n == 0 && isDead:
				res.deadLetters++
			case n == 0:
				res.lost++
				report("LOST: observation %s (token %s, session %s) acked, neither stored nor dead-lettered", id, tok, ss.id)
			case isDead && n == 1 && deadByID[id].Class == bus.ClassMaxDeliveries:
				res.bothMaxDeliveries++
				t.Logf("observation %s (token %s) stored once AND dead-lettered later (%s)", id, tok, deadByID[id].Reason)
			case isDead:
				res.both++
				report("observation %s (token %s) stored %d× AND dead-lettered (%s)", id, tok, n, deadByID[id].Reason)
			default:
				res.duplicated++
				report("DUPLICATE: observation %s (token %s) stored %d times", id, tok, n)
			}
		}
		if ss.endID == "" {
			continue
		}
		res.endsAcked++
		_, endDead := deadByID[ss.endID]
		status := extractions[ss.id]
		switch {
		case status == "applied" && !endDead:
			res.extracted++
		case status != "applied" && endDead:
			res.endsDead++
			continue
		case status == "applied" && deadByID[ss.endID].Class == bus.ClassMaxDeliveries:
			res.extracted++
			res.bothMaxDeliveries++
			t.Logf("session end %s (%s) extracted AND dead-lettered later (%s)", ss.endID, ss.id, deadByID[ss.endID].Reason)
		case status == "applied":
			res.extracted++
			report("session end %s (%s) extracted AND dead-lettered (%s)", ss.endID, ss.id, deadByID[ss.endID].Reason)
		default:
			res.endsMissing++
			report("session end %s (%s) acked, extraction status %q, not dead-lettered", ss.endID, ss.id, status)
			continue
		}
		for _, tok := range ss.tokens {
			switch n := markdown[tok]; {
			case n == 0:
				res.markdownMiss++
				report("Markdown: token %s of extracted session %s missing", tok, ss.id)
			case n > 1:
				res.markdownDup++
				report("Markdown: token %s of session %s written %d times", tok, ss.id, n)
			}
		}
	}
	for tok, n := range stored {
		if !acked[tok] {
			res.unexpected += n
			report("stored memory of token %s, which no acked observation carries", tok)
		}
	}
	if reports > maxReports {
		t.Errorf("... and %d more", reports-maxReports)
	}
}
