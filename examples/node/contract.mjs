// contract.mjs: agentmem from a client that shares none of its code.
//
// It speaks only the public contract (events/README.md) with the official NATS
// JavaScript client: it publishes one session of tenant "acme", user "u-node"
// through JetStream (each event with Nats-Msg-Id = its id), ends the session, then
// asks memrpc.acme.context from a *new* session until the returned pack's prompt
// holds what was said (so it came from memory, not from the session's own history).
//
// Contract for whoever runs it:
//   in:   env NATS_URL (default nats://127.0.0.1:4222)
//   out:  exit code 0 on success, 1 on failure (the reason on stderr);
//         on success the last stdout line is "OK <n> chars of context".
import { randomBytes } from "node:crypto";
import { connect, ErrorCode } from "nats";

const NATS_URL = process.env.NATS_URL || "nats://127.0.0.1:4222";
const TENANT = "acme";
const USER = "u-node";
const AGENT = "node-example";
const SESSION = `node-${Date.now()}`; // <id>: 1-128 of A-Z a-z 0-9 _ -
const NEXT_SESSION = `${SESSION}-next`;
const EXPECT = "qty"; // what the pack's prompt must contain
const DEADLINE_MS = 30_000;
const POLL_MS = 500;

const enc = new TextEncoder();
const dec = new TextDecoder();

// A ULID: 48-bit millisecond time then 80 random bits, in Crockford base32. Any
// <id> is accepted; a ULID also sorts by time.
const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
function ulid(now = Date.now()) {
  let time = "";
  for (let t = now, i = 0; i < 10; i++, t = Math.floor(t / 32)) {
    time = CROCKFORD[t % 32] + time;
  }
  let random = "";
  for (const b of randomBytes(16)) {
    random += CROCKFORD[b % 32]; // 256 is a multiple of 32: no bias
  }
  return time + random;
}

function envelope(type, body) {
  return {
    id: ulid(),
    type,
    schema_version: 1,
    ts: new Date().toISOString(),
    tenant: TENANT,
    user_id: USER,
    agent_id: AGENT,
    session_id: SESSION,
    ...body,
  };
}

function say(role, text, meta) {
  return envelope("observation", { observation: { role, text, ...(meta && { meta }) } });
}

class Failure extends Error {}

// The retriever answers a failed request with micro error headers, not a body.
function serviceError(msg) {
  const code = msg.headers?.get("Nats-Service-Error-Code");
  return code ? { code, message: msg.headers.get("Nats-Service-Error") } : null;
}

// publish sends one event through JetStream and waits for the stream's ack.
async function publish(js, subject, event) {
  try {
    const ack = await js.publish(subject, enc.encode(JSON.stringify(event)), { msgID: event.id });
    console.log(`published ${event.id} on ${subject} (stream ${ack.stream}, seq ${ack.seq})`);
  } catch (err) {
    if (err.code === ErrorCode.NoResponders) {
      throw new Failure(`no JetStream stream captures ${subject}: is agentmem running?`);
    }
    throw new Failure(`publish ${event.id} on ${subject}: ${err.message}`);
  }
}

async function publishSession(js) {
  const session = [
    say("user", "Remember: my sales files have columns date, product, qty.", { dia_id: "N1:1" }),
    say("assistant", "Got it: your sales files have the columns date, product and qty.", { dia_id: "N1:2" }),
    say("user", "I prefer bar charts with the quantity on the y axis.", { dia_id: "N1:3" }),
  ];
  for (const e of session) {
    await publish(js, `mem.${TENANT}.obs.${USER}.${SESSION}`, e);
  }
  const ended = envelope("session_ended", { session_ended: { reason: "node example finished" } });
  await publish(js, `mem.${TENANT}.ended.${USER}.${SESSION}`, ended);
}

// Polls the context endpoint until the prompt mentions EXPECT. No responders and
// timeouts are retried (the retriever may still be starting); a service error is
// final, since asking again will not change the answer.
async function awaitContext(nc) {
  const subject = `memrpc.${TENANT}.context`;
  const request = {
    user_id: USER,
    agent_id: AGENT,
    session_id: NEXT_SESSION,
    query: "which columns do my sales files have?",
  };
  const deadline = Date.now() + DEADLINE_MS;
  let last = "no answer yet";
  while (Date.now() < deadline) {
    try {
      const msg = await nc.request(subject, enc.encode(JSON.stringify(request)), { timeout: 5_000 });
      const failed = serviceError(msg);
      if (failed) {
        throw new Failure(`${subject} answered ${failed.code}: ${failed.message}`);
      }
      const pack = JSON.parse(dec.decode(msg.data));
      if (typeof pack.prompt === "string" && pack.prompt.includes(EXPECT)) {
        return pack;
      }
      last = `the prompt does not mention "${EXPECT}" yet (counts ${JSON.stringify(pack.counts)})`;
    } catch (err) {
      if (err instanceof Failure) throw err;
      if (err.code === ErrorCode.NoResponders) {
        last = `nothing answers ${subject}: is the retriever running?`;
      } else if (err.code === ErrorCode.Timeout) {
        last = `${subject} did not answer within 5 s`;
      } else {
        throw err;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  throw new Failure(`no context mentioning "${EXPECT}" within ${DEADLINE_MS / 1000} s: ${last}`);
}

async function main() {
  let nc;
  try {
    nc = await connect({ servers: NATS_URL, name: "agentmem-node-contract" });
  } catch (err) {
    throw new Failure(`cannot connect to ${NATS_URL}: ${err.message}`);
  }
  try {
    await publishSession(nc.jetstream());
    const pack = await awaitContext(nc);
    console.log(`counts: ${JSON.stringify(pack.counts)}`);
    console.log("prompt:");
    console.log(pack.prompt);
    console.log(`OK ${pack.prompt.length} chars of context`);
  } finally {
    await nc.close();
  }
}

// exitCode rather than exit(), so buffered output is flushed before the process ends.
main().then(
  () => {
    process.exitCode = 0;
  },
  (err) => {
    console.error(`FAIL ${err instanceof Failure ? err.message : err.stack || err}`);
    process.exitCode = 1;
  },
);
