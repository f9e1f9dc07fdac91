// Package chaos holds agentmem's crash-recovery suite. It has no code of its own
// outside its tests: they build the real binaries (agentmem, ingest, extractor,
// consolidator, retriever) into a temporary directory, run them as separate
// processes (with the standalone nats-server binary where a scenario needs one),
// kill them with SIGKILL or SIGTERM at random points while a publisher in the test
// process sends observations and session ends, restart them on the same data, and
// then account for every event whose publish JetStream acknowledged: each acked
// observation must be stored exactly once as an episodic memory or dead-lettered
// with a reason, never both, never lost, never duplicated; each acked session end
// must be extracted once (its entries in Markdown once each) or dead-lettered.
//
// Scenarios, one chosen per round from a seeded generator:
//
//   - up: `agentmem up` alone (embedded NATS on a loopback port); up is killed and
//     restarted on the same --data-dir.
//   - workers: a standalone nats-server and the four worker binaries, each with a
//     data directory of its own (the embedded vector store and the filesystem
//     Markdown store belong to one process); a random worker is killed and
//     restarted. Ingest's vector store is the one counted, the extractor's
//     Markdown the one checked.
//   - nats: the same processes, but nats-server itself is killed and restarted on
//     its store directory.
//   - cluster (TestChaosCluster, not in TestChaos's rotation): three nats-server
//     processes in one JetStream cluster, `agentmem up --nats-url` with all three
//     URLs (ingest, the extractor and the retriever run only there, so the
//     memories are in one vector store and the Markdown in one directory) beside
//     the consolidator binary, all at nats.stream.replicas=3. Nodes are
//     SIGKILLed, one of them the event stream's leader when its kill comes; with
//     each down, a context request must find the observation acked last before
//     the node restarts. Every stream and bucket must be at R3.
//
// The publisher sends each observation with Nats-Msg-Id = its event id and retries
// a publish that failed or timed out with the same id (JetStream keeps one within
// the duplicate window) until it is acked; only acked events are accounted for.
// Observations are explicit remember requests with a unique token, which the
// offline write decider always keeps, so each must yield exactly one memory.
//
// TestUpgradeFromPreviousRelease (upgrade_test.go) builds the previous release's
// agentmem from git history, stops it mid-stream and lets this build go on on the
// same data directory, with the same account (docs/operations.md, "Upgrades").
//
// TestChaos is the bounded version (5 rounds, a few thousand messages) that runs
// with `go test ./...`, as does TestChaosCluster (one round of 300); TestChaosLong
// (build tag chaos_long) runs more rounds and
// messages. Both print their seed; AGENTMEM_TEST_CHAOS_SEED replays one. See
// docs/operations.md, "Guarantees".
//
// nats-server must be on PATH or in $(go env GOPATH)/bin (`go install
// github.com/nats-io/nats-server/v2@v2.15.2`): without it the tests skip, or fail
// when CI=true.
package chaos
