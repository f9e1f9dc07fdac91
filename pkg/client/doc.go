// Package client is the Go SDK for agents that use agentmem.
//
// An agent publishes what happens in a session as events (Say, Observe, ToolCall,
// ToolResult, StartTurn, FinishTurn, EndSession) and asks the retriever what it
// should know (Context, Search, ReadTopic, the mem0-style Add/Get/Update/Delete/
// Reset/History/Consolidate, the memory items SaveItem…SearchItems, and the session
// endpoints). The wire contract is the one in package events; any other NATS client
// can speak it too.
//
// Events go through JetStream: every publish waits for the stream's acknowledgement
// and carries Nats-Msg-Id = the event id, so re-publishing an envelope (Publish)
// after a lost acknowledgement stores it once. An observation's credentials are
// replaced by markers before it is published (pkg/redact), so the stream never
// holds them; Config.KeepSecrets publishes it as given. Requests go to memrpc.<tenant>.<endpoint>;
// a failed request is an *Error holding the retriever's code ("400", "404", "500",
// "503") and message, and a request nobody answers fails with ErrNoRetriever.
//
// Against a server with authentication (`agentmem up --auth`, or a deployment's
// operator-mode NATS), connect with Connect and the tenant's credentials file from
// `agentmem creds add`: it sets the inbox prefix the credential is limited to.
//
// Tools and HandleToolCall expose the Markdown memory to a model through OpenAI
// function calling: memory_search, memory_append and memory_read_topic.
// memory_search returns one list, best first, each hit with the id the mem0-style
// calls take.
package client
