// Package processor holds the memory steps an LLM can do — write decision,
// semantic facts, merge, separate, reconsolidate — each with an offline
// rule-based twin (SPEC C3, C5, C6, C8). Their values and records are those of
// pkg/records; the consolidator (pkg/consolidate) plans the merges and
// separations and carries them out, and applies reconsolidation.
//
// # Processors
//
// Each processor is an interface with two implementations: a rule-based one, the
// offline default (deterministic, lexical, no network), and an LLM one whose
// prompt is an embedded text/template (prompts/<name>.tmpl) and whose reply is
// validated against an embedded JSON Schema (prompts/<name>.schema.json) through
// llm.Client.CompleteJSON. When the reply is bad (llm.ErrBadReply, or valid JSON
// that cannot be used) the LLM processor logs a warning and returns what its
// rule-based twin returns: that is the documented safe default of every
// processor. Transient failures (llm.ErrUnavailable, a rejected request, an ended
// context) are returned, so the pipeline retries the message.
//
//   - WriteDecider (C3) decides whether an observation becomes an episode.
//   - SemanticWriter (C8) turns episodes into stable facts, never duplicating a
//     known fact or another new one (normalised comparison: case, punctuation and
//     spacing ignored, textnorm.Normalize). records.FactRecord derives the record
//     id from the same normalised fact, so even two concurrent writers upsert
//     one record.
//   - Merger writes the text replacing two near-duplicate episodes.
//   - Separator rewrites two similar but distinct episodes so that they read as
//     distinct.
//   - Reconsolidator (C5) rewrites an episode after it was used in a new context;
//     it returns text only, so time, chat and speaker stay the caller's.
//
// # Rule-based write decision
//
// The speaker (Episode.Who) is "user" for the user role, else the observation's
// Who, else its role. Time is always the observation's time; Context is "<kind>
// by <who> in chat <chat>", the kind (preference, plan, relationship, location,
// identity or affiliation, personal fact or event) picked by keywords. In order:
//
//  1. Empty text and system messages are not written.
//
//  2. An explicit request to remember ("Remember, ...", "Please don't forget
//     that ...", "Can you keep in mind: ...", or "..., please remember that.") is
//     always written when its body has a first-person word or at least three
//     content words; Thing is the body. "Remember when we ...?" is a question,
//     not a request.
//
//  3. Greetings, thanks, acknowledgements and fillers (every word from a closed
//     chit-chat vocabulary: "hi!", "thanks", "ok", "lol", "good morning", "I
//     agree") and single tokens are not written.
//
//  4. The text is cut into sentences (and at a comma that opens a question).
//     Questions are dropped ("What is the capital of France?", "How do I convert
//     my file?"), as are chit-chat sentences and fragments (fewer than three
//     content words; stop words and pronouns other than first person do not
//     count, so "I like hiking" is a statement and "I love it" is not).
//
//  5. From a human speaker, a remaining sentence is kept when it has a
//     first-person word (I, my, we, our, ...) and is not a request to the
//     assistant ("I want you to ...", "help me ...", "please ..."): facts, events,
//     plans and preferences such as "I moved to Berlin last year", "my sister's
//     name is Ana", "we went hiking on Saturday".
//
//  6. From an assistant or tool, a sentence is kept only when its subject is the
//     user ("You live in Berlin", "Your sales files have columns ...") and it is
//     not advice ("You can ...", "You should ..."); everything else an assistant
//     says is answer text, not memory.
//
//  7. Other languages and impersonal statements (multilingual.go), on the folded
//     text (NFKC, case folded): a Chinese, German, Japanese or Korean remember
//     request ("请记住：…", "记住，…", "…，别忘了", "Merk dir bitte: …", "Vergiss
//     nicht, dass …", "…覚えておいてね", "覚えておいて：…", "…기억해 줘", "잊지
//     마세요: …") is written like rule 2, the request's words left out; "我记住了"
//     and "覚えてる？" are no requests; a user message confirming a fix ("that worked", "可以了", "hat
//     geklappt"), without a negation, after an assistant reply that follows an
//     error report in its context, is written, so the episode holds error, fix
//     and confirmation; a human sentence that rule 5 did not keep is kept when
//     it is no question, greeting or request (an English imperative verb first,
//     "please", "帮我", "bitte", …) and is a habit or standing instruction
//     ("always", "by default", "总是", "immer"; this wins over the imperative),
//     in the German or Chinese first person, or an impersonal statement with an
//     anchor: a digit, an identifier or file name, a capitalised word after the
//     first, or a word of files, data, tools and dates ("The staging DB is
//     orders_v2", "季度报告的截止日期是三月二十八日"); a tool sentence describing a
//     file (a data file name, "Columns:", a row count, pandas' shape) is kept.
//     Sentences end also at 。！？； and not after a one- or two-digit German
//     ordinal ("am 1. Juli"). Sentences addressed to the assistant ("Your ...")
//     are not kept by this rule.
//
//  8. A user reply made only of agreement ("yes", "exactly", "that's right", "ja
//     genau", "对", "はい", "네 맞아요") to an assistant's statement or yes-no
//     question about the user (it says "you", "your", "Sie", "dein", "你", ...)
//     writes that statement as the user's (agreement.go): "So your fiscal year
//     starts in April, right?" → "My fiscal year starts in April."; a question
//     whose verb the rules cannot move, or another language, is kept as "User
//     confirmed: …". A yes to an offer ("Shall I ...", "Would you like me to
//     ...", "Soll ich ...") is consent, not a fact, and is not written.
//
// Before any rule, ingest replaces credentials by [REDACTED:<kind>] and drops
// planted instructions (pkg/redact), in the text and in its context.
//
// The episode is written when a sentence was kept; Thing is the kept sentences,
// cleaned (single spaces, capital letter unless the first word is code —
// "read_csv", "kubectl -n prod", a word in backticks keep their case — final
// period). Limits: the rules are
// lexical, English first with the Chinese and German cues of rule 7; an
// impersonal statement without an anchor ("the weather is nice") is not written; a first-person sentence about something
// fleeting ("I'm tired today") is; sarcasm, negation and coreference are not
// understood. The LLM decider has none of these limits but keeps rule 2 as a
// guarantee: an explicit remember request is written whatever the model says.
//
// # Rule-based semantic writer
//
// A sentence of an episode becomes a fact when it matches one pattern of a stable
// attribute: identity and affiliation ("I'm a/an/the X", "I work/study ...",
// "I'm from/based in/allergic to/married to ..."), location ("I live ...", "I
// moved to ...", "I grew up ..."), preferences ("I like/love/prefer/hate ...",
// "I don't like ..."), possessions ("I have two cats") and "my X is/are/has/have
// Y" (relationships, names, files), except "my X is <verb>ing ..." (an ongoing
// event). The fact is in the third person: "User is a student at Peking
// University.", "User's sister's name is Ana.", or with the speaker's name
// ("Caroline is from Sweden."); an assistant's "Your files have ..." becomes
// "User's files have ...". The source chat and first-seen time are those of the
// earliest episode stating the fact. Events, plans and "we" statements give no
// fact.
//
// # Rule-based merger, separator and reconsolidator
//
// The merger keeps the text with more content words and appends each sentence of
// the other that brings a content word not yet present, so no sentence is
// repeated and no information lost. The separator prefixes each text with its own
// time and chat, "On 2026-11-02 10:04 UTC in chat c1: ...", adding the memory id
// when both prefixes coincide; it replaces its own earlier prefix, so separating
// twice gives the same texts. The reconsolidator keeps the text as it is: a
// recalled memory's new context goes into its context metadata and updates
// list, never into its text.
package processor
