package events

import "testing"

// benchObservation is an observation as agentmem bench publishes it.
const benchObservation = `{"id":"01JD3QZ7X4K9M2N8P5R6S7T8V9","type":"observation","schema_version":1,"ts":"2026-11-22T10:00:00.123456789Z",` +
	`"tenant":"bench-ingest","user_id":"u0042","agent_id":"bench-agent","session_id":"s-00042",` +
	`"observation":{"role":"user","text":"I have been leading the sales forecast project for 12 months.","meta":{"dia_id":"D43:7"}}}`

// BenchmarkDecode is the per-message envelope decode of every stream worker.
func BenchmarkDecode(b *testing.B) {
	data := []byte(benchObservation)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
