// Package transfer moves a tenant's memory in and out of a deployment and erases
// a user from it: the export, import and forget endpoints of the retriever
// (Service, on the stores' interfaces, so any backend works: the embedded
// vector store or Qdrant, the filesystem or the JetStream DocStore), the
// portable archive (Writer, Read) and the client side that pages over the
// endpoints (Export, Import), used by `agentmem export` and `agentmem import`.
//
// An archive holds a namespace's derived memory: Markdown files (MEMORY.md,
// topic files, daily notes, backups, policy overrides and snapshots), vector
// memories and memory items with their vectors and payloads, and session state
// (states, running summaries, reflection claims, turns). It does not hold the
// event stream: the history stays with the deployment that recorded it.
//
// Every page of an export or import fits one NATS message: export pages are
// cut to Config.PageBytes (a file larger than that comes in chunks), import
// requests to the importer's budget. Import replaces by name, id or key, so
// importing an archive twice gives the same memory; when the deployment's
// embedder differs from the archive's (model or dimensions), the retriever
// embeds every record's text again.
package transfer
