//! The node's limits and timeouts.

use std::time::Duration;

use concord_negotiate::complexity::SchemaLimits;
use concord_proto::{HelloLimits, PreparationLimits, SessionConfig};

/// Limits and timeouts of a node. Every field has a safe default ([`Limits::default`]).
///
/// | limit | default | what happens when it is hit |
/// |---|---|---|
/// | `max_frame_size` | 2 MiB | the WebSocket is closed with code 1009 and a reason naming the limit (a handler takes at most 1 MiB of input anyway) |
/// | `max_meta_message_size` | 256 KiB | a larger meta message is not decoded: `rejected` if a negotiation is in progress, then the session closes naming size and limit |
/// | `max_candidate_size` | 64 KiB | a larger candidate protocol is answered `rejected` naming size and limit; the negotiation ends |
/// | `max_test_cases_size` | 64 KiB | larger test cases are answered `rejected`; the session goes on |
/// | `schema` | see [`SchemaLimits`] | a candidate protocol whose schemas are deeper, larger or more branched than these (depth 32, 5,000 nodes, 1,024 enum values, 256 members, 64 branches, patterns ≤ 1 KiB) is `rejected` naming the JSON pointer and the limit, before anything compiles it or an LLM sees it |
/// | `hello` | see [`HelloLimits`] | a hello over a limit (64 KiB, `messageId` ≤ 128 bytes, lists, strings, unknown fields) closes the WebSocket with 1002 and a reason naming the field and the limit |
/// | `max_sessions` | 256 | further WebSocket upgrades are answered HTTP 503 until a session ends |
/// | `max_calls_in_flight` | 256 per session | the provider stops reading the peer's frames until one finishes (back-pressure) |
/// | `max_backend_calls` | 4 per CPU (at least 8) | action calls running at once over the whole node (every mode, every backend: a closure, a command, a POST); a call waits for a slot within `backend_call_wait`, then is answered 503 (a problem with status 503 in an interface session, a stream reset with code 503) |
/// | `max_backend_calls_per_address` | a quarter of `max_backend_calls` (at least 2) | of those, running at once for one client address (an IPv4 address or an IPv6 /64; authenticated callers count against their address too); a call still waiting after `backend_call_wait` while its address holds its share is answered 429 |
/// | `max_backend_waiting` | 1,024 | action calls waiting for a slot over the whole node; one more takes the place of the newest waiter of the address with the most waiting (that one is answered 503), else it is answered 503 at once |
/// | `max_backend_waiting_per_address` | 64 | of those, waiting for one client address; one more is answered 429 at once |
/// | `max_long_backend_calls` | half of `max_backend_calls` | of those, long-lived calls (progress and stream actions, which run as long as they like) running at once: the rest of the slots stay for request-reply and notify calls; a long-lived call beyond it waits within `backend_call_wait`, then is answered 503 (a value above `max_backend_calls` counts as half of it) |
/// | `max_long_backend_calls_per_address` | 1 | of those, long-lived calls running at once for one client address; one more waits within `backend_call_wait`, then is answered 429 |
/// | `backend_call_wait` | 10 s | how long a call waits for a slot before it is refused (429 or 503) |
/// | `hello_timeout` | 10 s | no hello within it: the WebSocket is closed with a reason |
/// | `description_max_age` | 60 s | our description is served with `Cache-Control: max-age` of this (and an `ETag`): a requester may connect with it unasked for this long (zero: `no-cache`, revalidated on every connect, a `304` when unchanged); a consensus protocol we add is seen within it by requesters holding the description (at once by those holding the protocol too: they ask again), one we remove is told in the hello, as always |
/// | `resume_cache_ttl` | 10 s | a protocol the store vouched for when a peer resumed it (0-RTT) is resumed again from memory for this long after, with no trip to the store before the hello's answer; so a protocol the store forgot meanwhile (pruned, `concord protocols forget`, evicted by another replica) is still resumed for at most this long (zero: every 0-RTT hello asks the store; at most 256 protocols are kept) |
/// | `idle_timeout` | 60 s | a ready session with no frame either way and no call in flight is closed |
/// | `idle_shed_after` | 1 s | when every session slot is taken, a newcomer whose hello is valid takes the slot of a session whose peer has sent nothing for this long, with no call of its running (ready: a subscription, an observation or a stream does not count as a call; or waiting for its first proposal): one of the client address holding the most sessions (the newcomer's counted with it), the one silent longest, never one of an address holding fewer than the newcomer's; that session is closed with 1013 and a reason |
/// | `max_pending_hellos` | 64 | WebSockets upgraded and still waiting for their hello, apart from `max_sessions`: one more closes the oldest waiting of the address holding the most with code 1008 and a reason (see `max_pending_hellos_per_address`) |
/// | `max_sessions_per_address` | 64 | sessions (waiting for their hello or established) from one client address: the next upgrade is answered HTTP 429 with `Retry-After` |
/// | `max_pending_hellos_per_address` | 16 | WebSockets waiting for their hello from one client address (a value above `max_pending_hellos` counts as it), while other addresses' wait too: one more is answered HTTP 429 with `Retry-After` before any upgrade (when the whole budget is full, a newcomer sheds the oldest waiting of the address holding the most) |
/// | `pending_hello_shed_after` | 1 s | at most half of `hello_timeout` (a longer value counts as that): a WebSocket waiting for its hello is not shed for a newcomer from another address before it has waited this long (a caller in its upgrade and Noise handshake is not cut off), unless its address holds at least two more waiting than the newcomer's (then its oldest goes at once); with nothing to shed, the newcomer is answered HTTP 503 |
/// | `max_holding_sessions` | 128 | at most `max_sessions` (a larger value counts as it): sessions holding a subscription, an observation or a stream at once: the next `subscribeevent`, `subscribeallevents`, `observeproperty` or stream `invokeaction` sheds a holding session whose peer was silent at least `idle_shed_after` (one of the address holding the most such sessions, the newcomer's counted with it; the one silent longest), else is answered with a 503 problem; the session goes on |
/// | `max_holding_sessions_per_address` | 8 | such sessions from one client address (a value above `max_holding_sessions` counts as it): the next such request is answered with a 429 problem; the session goes on |
/// | `ping_interval` | 30 s | an established session whose peer sent nothing (not even a pong) for this long is sent a WebSocket ping |
/// | `pong_timeout` | 10 s | a peer that sends nothing within this after a ping is closed with 1008 and a reason |
/// | `stream_idle_timeout` | 60 s | a stream with no byte either way (data, credit or end) for this long is reset with code 408 (idle); a stream action over HTTP with no chunk in and none taken by the client for this long, once it runs, has its answer cut short (no orderly end of its chunked body) |
/// | `directory_searches`, `directory_searches_per_address` | 2, 1 | JSONPath searches a served directory runs at once, over all callers and for one client address: one more is answered 503 (node) or 429 (address) with `Retry-After` |
/// | `max_connections` | 1024 | TCP connections at once, in any state: one more is answered HTTP 503 with `Retry-After` and closed |
/// | `max_connections_per_address` | 256 | TCP connections at once from one client address: one more is answered HTTP 429 with `Retry-After` and closed |
/// | `connection_rate_per_address` | 64 per s, bursts of `connection_burst_per_address` (256) | new TCP connections from one client address: one over it is answered HTTP 429 with `Retry-After` and closed |
/// | `request_rate_per_address` | 256 per s, bursts of `request_burst_per_address` (1,024) | HTTP requests from one client address on every route (description, DID document, WebSocket upgrades, any other), over all its connections, kept-alive ones included: one over it is answered HTTP 429 with `Retry-After` and its connection closed |
/// | `http_header_timeout` | 10 s | a connection that sends no complete request head within it (from its start, or from its previous response) is closed |
/// | `first_proposal_timeout` | 30 s | a requester that said hello and proposes nothing within it is answered `rejected` and the session closes (not after 0-RTT or consensus); long enough for a requester whose LLM drafts the candidate after the hellos, as the reference SDK's does (a silent session is shed sooner when the node is full: `idle_shed_after`) |
/// | `negotiation_deadline` | 180 s | the whole way from the hellos to a ready session (negotiation, code generation, test cases): past it, `rejected` and closed |
/// | `negotiation_timeout` | 60 s | the peer's silence during a negotiation step closes the session (`rejected: timed out`); also bounds each of our own negotiator steps |
/// | `code_generation_timeout` | 60 s | bounds our code generation and test run; the peer's `generated` is awaited as long |
/// | `call_timeout` | 30 s | [`Connection::call`](crate::Connection::call) gives up with [`CallError::Timeout`](crate::CallError::Timeout) |
/// | `max_negotiation_rounds` | 10 | the negotiation ends `rejected` (round cap) |
/// | `max_code_generations` | 4 | generations of our code per session (the first and one per error report of the peer we accept): one more accepted report ends the session with `codeGeneration: error` naming the limit |
/// | `max_fix_rounds` | 3 | requester: error reports for the provider's code failing the agreed test cases; a failure after them closes the session naming the failures ([`ConnectError::Verification`](crate::ConnectError::Verification)) |
/// | `verification_timeout` | 60 s | requester: the provider's answers to a run of the agreed test cases are awaited this long, then the session closes naming how many are missing |
/// | `transcript_max_age` | 7 days | finished transcripts started earlier are deleted by the next prune |
/// | `transcript_max_count` | 10,000 | the next prune deletes the oldest finished transcripts beyond it |
/// | `transcript_prune_interval` | 1 min | prunes (after a session ends, in a blocking task) run at most this often |
/// | `transcript_text_max_bytes` | 4 KiB | a longer hello or frame text is recorded as its prefix, its size and its SHA-256 |
/// | `transcript_max_frames` | 512 | further frames of a session are counted in its transcript, not recorded |
/// | `protocol_max_count` | 10,000 | the prune after a session deletes the least recently used negotiated protocols beyond it (never consensus ones) |
/// | `protocol_max_per_peer` | 32 | negotiated protocols one peer holds (its proved DID, else its address: an IPv4 address or an IPv6 /64; a DID's protocols count against its address too, so minted DIDs share one address's share): saving or resuming one more takes the peer off those it used least recently, and a protocol no other peer holds is deleted, so that one peer filling the store does not make `protocol_max_count` evict everyone else's |
/// | `max_concurrent_negotiation_work` | CPUs (at least 2) | further negotiation work (judging, drafting, diagnosing, code generation with its test run) waits for a turn, within the step's own deadline |
/// | `interaction` | see [`concord_interact::Limits`] | interface sessions: a message over 1 MiB or nested deeper than 32, a long id or name, the 1,025th open request, a full subscriber queue (1,024 messages, or 4 MiB of event data: `subscriber_queue_bytes`; the replay buffer keeps at most 256 events and 4 MiB per event, `replay_bytes`), a caller's 17th unfinished long-running action (counted per client address, an IPv4 address or IPv6 /64, and per proved DID, over all its sessions: 429), a caller holding one when only the last 64 places are free (`reserved_actions`: 503) or the node's 257th (503): each answered with an RFC 9457 problem, the session goes on; a dropped caller's long-running action is cancelled 30 s later (`action_lease`) |
/// | `http_sse_queue`, `http_sse_queue_bytes` | 256 messages, 256 KiB | per Server-Sent Events subscriber of the WoT HTTP binding: one more overflows its queue, which is freed at once, and its answer ends with a `: overflow` comment (it resumes with `Last-Event-ID`) |
/// | `http_sse_keep_alive` | 15 s | a Server-Sent Events answer silent this long writes a `: keep-alive` comment |
/// | `http_long_poll_timeout` | 60 s | a long-poll `GET` with no event or change within it is answered 204 |
/// | `event_overflow` | drop oldest | a subscriber whose queue is full loses its oldest notifications and is told so with a gap (`Disconnect`: it is dropped with a problem); nobody else waits |
/// | `streams` | see [`concord_interact::stream::StreamLimits`] | 64 streams per session, 64 KiB chunks, 1 MiB receive buffer and send queue per stream; a chunk past the credit resets its stream with a 429 problem |
/// | `streams.max_reader_queue` | 1 MiB | bytes of one stream waiting in its reader's queue (a `StreamReceiver`, a stream action's input); they count against the stream's credit and `streams.max_session_buffer` until read, so a reader that does not read holds at most its credit |
/// | `streams.max_send_room` | 1 MiB | bytes one stream's `StreamSender` may have queued beyond `streams.max_send_queue` while the peer grants no credit; past it `send` waits |
/// | `streams.max_session_buffer` | 16 MiB | granted-but-unread bytes over every stream of a session (h2's connection window; at least `streams.max_receive_buffer`): a stream whose initial credit does not fit is refused (a 503 reset, a 429 problem), a reader's refill waits until reads on the session's other streams make room |
///
/// ```
/// use std::time::Duration;
/// use concord_node::Limits;
///
/// let limits = Limits {
///     call_timeout: Duration::from_secs(5),
///     ..Limits::default()
/// };
/// assert_eq!(limits.max_frame_size, 2 * 1024 * 1024);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest WebSocket message (hello or frame, header included) read or sent.
    pub max_frame_size: usize,
    /// Largest meta-protocol message (a frame of PT 0, header included) read or sent.
    pub max_meta_message_size: usize,
    /// Largest candidate protocol text taken or proposed, in bytes.
    pub max_candidate_size: usize,
    /// Largest test-case text taken or proposed, in bytes.
    pub max_test_cases_size: usize,
    /// Bounds on a peer's hello: its size, `messageId`, lists, strings and unknown fields.
    pub hello: HelloLimits,
    /// Bounds on the JSON Schemas of a protocol document, checked before any is compiled
    /// (the negotiator's, the code generator's and a stored protocol's alike).
    pub schema: SchemaLimits,
    /// Most sessions the provider serves at once.
    pub max_sessions: usize,
    /// Most application calls one provider session runs at once.
    pub max_calls_in_flight: usize,
    /// Most action calls running at once over the whole node, every mode (request-reply,
    /// notify, progress, stream) and every backend (a closure, a command, a POST) alike:
    /// a call waits for a slot (`backend_call_wait`), the slot going to the waiting call
    /// whose address holds the fewest running, then whose address has had the least slot
    /// time (start-time fair queueing).
    pub max_backend_calls: usize,
    /// Most action calls running at once for one client address (an IPv4 address or an
    /// IPv6 /64 prefix; an authenticated caller counts against its address too).
    pub max_backend_calls_per_address: usize,
    /// Most action calls waiting for a slot over the whole node: one more takes the place
    /// of the newest waiter of the address with the most waiting (refused, 503), when that
    /// address has at least two more waiting than the newcomer's, else it is refused (503).
    pub max_backend_waiting: usize,
    /// Most action calls waiting for a slot for one client address: one more is refused at
    /// once (429). A caller's burst (`concord call --concurrency`) waits here instead of
    /// being refused.
    pub max_backend_waiting_per_address: usize,
    /// Of `max_backend_calls`, most long-lived calls (progress and stream actions, which run
    /// as long as they like) running at once, so that callers holding never-ending ones
    /// leave the rest of the slots to request-reply and notify calls: one more waits for a
    /// slot (`backend_call_wait`), then is refused (503). A value above `max_backend_calls`
    /// (a total lowered alone) counts as half of it ([`Limits::long_backend_share_of`]).
    pub max_long_backend_calls: usize,
    /// Of `max_long_backend_calls`, most running at once for one client address: one more
    /// waits for a slot (`backend_call_wait`), then is refused (429).
    pub max_long_backend_calls_per_address: usize,
    /// How long an action call waits for a slot (`max_backend_calls`,
    /// `max_backend_calls_per_address`) before it is refused: 429 when its address holds
    /// its share, 503 when the node is full.
    pub backend_call_wait: Duration,
    /// How long each side waits for the other's hello.
    pub hello_timeout: Duration,
    /// How long a requester may use our description without asking again: the
    /// `Cache-Control: max-age` it is served with, beside its `ETag` (zero: `no-cache`,
    /// every connect revalidates it and gets a `304` while it is unchanged). A consensus
    /// protocol added to our registry reaches requesters holding the description within
    /// it (at once those holding the protocol too: they ask again); one removed is told in
    /// the hello.
    pub description_max_age: Duration,
    /// How long a protocol the store vouched for when a peer resumed it is resumed again
    /// from memory (a 0-RTT hello answered without a trip to the store); a protocol the
    /// store forgot is resumed for at most this long after. Zero: the store is asked for
    /// every 0-RTT hello.
    pub resume_cache_ttl: Duration,
    /// How long a ready session may sit with no frame either way and no call in flight.
    pub idle_timeout: Duration,
    /// When every session slot is taken, how long a session's peer must have sent nothing,
    /// with no call of the session running (ready, or a provider waiting for the first
    /// proposal; a subscription, an observation or a stream is not a call), before a
    /// newcomer with a valid hello may take its slot (it is closed with 1013, try again
    /// later). It is one of the client address holding the most sessions (the newcomer's
    /// counted with it), the one whose peer was silent longest, never one of an address
    /// holding fewer than the newcomer's: a silent subscriber from an address holding few
    /// is not shed for the newcomers of addresses holding more.
    pub idle_shed_after: Duration,
    /// Most WebSockets upgraded and still waiting for their hello, a budget apart from
    /// `max_sessions` (a session counts there once its hello is answered). When it is full,
    /// a new one closes the oldest waiting of the address holding the most (code 1008,
    /// with a reason): see `max_pending_hellos_per_address`.
    pub max_pending_hellos: usize,
    /// Most sessions from one client address at once, waiting for their hello or
    /// established. A client address is an IPv4 address or an IPv6 /64 prefix.
    pub max_sessions_per_address: usize,
    /// Most WebSockets waiting for their hello from one client address, within
    /// `max_pending_hellos`: one more is refused (HTTP 429) before any upgrade. When the
    /// whole budget is full, a newcomer sheds the oldest waiting of the address holding the
    /// most (its own, if that is the one). At most `max_pending_hellos`.
    pub max_pending_hellos_per_address: usize,
    /// How long a WebSocket waits for its hello before a newcomer from another address may
    /// shed it (when the budget is full and nothing older is there, the newcomer gets
    /// HTTP 503): a caller in its upgrade and Noise handshake is not cut off. An address
    /// holding at least two more waiting than the newcomer's has more than its part and
    /// loses this protection: its oldest is shed whatever its age. Less than
    /// `hello_timeout`.
    pub pending_hello_shed_after: Duration,
    /// Most sessions holding a subscription, an observation or a stream at once. Such a
    /// session may be shed for a newcomer when the node is full, like an idle one (a
    /// subscriber resumes from its last event id). When this budget is full, a new holder
    /// sheds a holding session of the address holding the most of them (the newcomer's
    /// counted with it), the one whose peer was silent longest. At most `max_sessions`.
    pub max_holding_sessions: usize,
    /// Most sessions holding a subscription, an observation or a stream from one client
    /// address at once; at most `max_holding_sessions`.
    pub max_holding_sessions_per_address: usize,
    /// How long an established session's peer may send nothing (not even a pong) before
    /// it is sent a WebSocket ping.
    pub ping_interval: Duration,
    /// How long a pinged peer has to send something (a pong will do) before its session
    /// is closed (1008, with a reason).
    pub pong_timeout: Duration,
    /// How long a stream may carry no byte either way (data, credit, end) before it is
    /// reset with code 408; a stream action over HTTP, once it runs, has its answer cut
    /// short.
    pub stream_idle_timeout: Duration,
    /// Most TCP connections the provider holds at once, in any state (HTTP, waiting for a
    /// hello, established).
    pub max_connections: usize,
    /// Most TCP connections from one client address at once.
    pub max_connections_per_address: usize,
    /// New TCP connections one client address may open per second, on average.
    pub connection_rate_per_address: u32,
    /// New TCP connections one client address may open at once above the rate (the
    /// bucket's size).
    pub connection_burst_per_address: u32,
    /// HTTP requests one client address may make per second, on average, on every route
    /// and over all its connections (kept-alive ones included).
    pub request_rate_per_address: u32,
    /// HTTP requests one client address may make at once above the rate (the bucket's
    /// size).
    pub request_burst_per_address: u32,
    /// How long a connection may take to send a complete HTTP request head, counted from
    /// its start and, between requests on a kept-alive connection, from the previous
    /// response: a silent or dribbling connection is closed after it.
    pub http_header_timeout: Duration,
    /// How long a provider waits, after the hellos, for the requester's first
    /// `protocolNegotiation` (not after 0-RTT or consensus).
    pub first_proposal_timeout: Duration,
    /// How long the whole way from the hellos to a ready session may take: negotiation
    /// rounds, code generation and test cases together.
    pub negotiation_deadline: Duration,
    /// How long we wait for the peer's next negotiation message, and how long one of our own
    /// negotiator steps (judging, drafting test cases, diagnosing) may take.
    pub negotiation_timeout: Duration,
    /// How long our code generation (with its test run) may take, and how long we wait for
    /// the peer's `codeGeneration`.
    pub code_generation_timeout: Duration,
    /// How long [`Connection::call`](crate::Connection::call) waits for a response.
    pub call_timeout: Duration,
    /// Most `negotiating` messages a protocol or test-case negotiation may carry.
    pub max_negotiation_rounds: u32,
    /// Most generations of our code in one session: the first, and one per error report
    /// of the peer we accept; one more accepted report gives up (`codeGeneration: error`).
    pub max_code_generations: u32,
    /// Requester: most error reports sent for the provider's code failing the agreed test
    /// cases (each answered by a regeneration); a failure after them ends the session.
    pub max_fix_rounds: u32,
    /// Requester: how long the provider has to answer every request of a run of the
    /// agreed test cases over the verification protocol.
    pub verification_timeout: Duration,
    /// How long a finished transcript is kept (counted from the session's start).
    pub transcript_max_age: Duration,
    /// Most finished transcripts kept: the newest ones. Sessions in progress are not
    /// counted and never pruned.
    pub transcript_max_count: u64,
    /// Shortest time between two prunes of the transcripts. A prune runs once a session
    /// has ended (its transcript written): at once when the last one ran longer ago,
    /// else when this interval has passed; each deletes what `transcript_max_age` and
    /// `transcript_max_count` do not keep, then checkpoints the write-ahead log
    /// (passively: it never waits for other connections).
    pub transcript_prune_interval: Duration,
    /// Most bytes of a hello's or frame's text a transcript keeps; a longer text keeps
    /// its prefix, its whole size and its SHA-256.
    pub transcript_text_max_bytes: usize,
    /// Most frames a transcript keeps; the session's further frames are only counted.
    pub transcript_max_frames: u64,
    /// Most negotiated protocols the store keeps: each transcript prune also deletes the
    /// least recently used beyond it. Consensus protocols are not counted nor deleted.
    pub protocol_max_count: u64,
    /// Most negotiated protocols one peer holds (its proved DID, else its client address:
    /// an IPv4 address or an IPv6 /64): each save or resume for it takes it off the
    /// protocols it used least recently beyond this, deleting those no other peer holds.
    /// A caller who proved a DID is counted under its client address too (DIDs cost
    /// nothing to mint): one address holds at most this many whatever DIDs it signs with.
    pub protocol_max_per_peer: u64,
    /// Most pieces of negotiation work (judging, drafting, diagnosing, code generation
    /// and its test run, compiling the protocol's schemas) the node runs at once, over
    /// all sessions; the rest wait for a turn, and the wait counts against the step's own
    /// deadline (`negotiation_timeout`, `code_generation_timeout`).
    pub max_concurrent_negotiation_work: usize,
    /// The interaction layer's bounds in interface sessions (message size and depth,
    /// correlation ids, open requests, events, replay buffer, subscriber queues, actions,
    /// the action lease): see [`concord_interact::Limits`].
    pub interaction: concord_interact::Limits,
    /// What happens to a subscriber whose queue is full (`interaction.subscriber_queue`):
    /// its oldest notifications give way to a gap, or it is dropped.
    pub event_overflow: concord_interact::Overflow,
    /// Streams per session, chunk size, receive buffer and send queue per stream: see
    /// [`concord_interact::stream::StreamLimits`] (each stream's initial credit is the one
    /// its action declares).
    pub streams: concord_interact::stream::StreamLimits,
    /// What a directory the node registers with may make it read or wait for
    /// ([`NodeBuilder::register_with`](crate::NodeBuilder::register_with)): an answer's bytes
    /// (8 MiB), a listing's pages (100), a request's time (10 s); see
    /// [`DirectoryClientLimits`](crate::DirectoryClientLimits).
    pub directory_client: crate::DirectoryClientLimits,
    // A served directory's JSONPath searches.
    /// JSONPath searches a served directory runs at once over all callers (2): each walks
    /// every TD on a blocking thread, so a few callers could otherwise fill tokio's
    /// blocking pool and stall every directory operation. One more is refused at once
    /// with 503 and `Retry-After`.
    pub directory_searches: usize,
    /// JSONPath searches one client address (an IPv4 address or an IPv6 /64) runs at once
    /// on a served directory (1). One more is refused at once with 429 and `Retry-After`.
    pub directory_searches_per_address: usize,
    // The WoT HTTP binding's request bodies.
    /// The largest request body the WoT HTTP binding reads (1 MiB), counted as it arrives
    /// (a chunked body too): one byte more is refused with 413 before the body is read
    /// whole.
    pub http_max_body: usize,
    /// How long the WoT HTTP binding waits for a whole request body (10 s) once its
    /// headers are in: a body still arriving then (a client sending a byte a second) is
    /// refused with 408 and its connection closed.
    pub http_body_timeout: Duration,
    // The WoT HTTP binding's event streams (Server-Sent Events) and long polls.
    /// Messages queued for one Server-Sent Events subscriber of the WoT HTTP binding (an
    /// `observeproperty` or `subscribeevent` answer; 256): a subscriber that does not read
    /// while more come overflows it, and its answer ends with a `: overflow` comment (its
    /// queue freed at once; it reconnects with `Last-Event-ID` and resumes from the
    /// replay buffer, or is told the gap).
    pub http_sse_queue: usize,
    /// Bytes (ids and data) queued for one Server-Sent Events subscriber (256 KiB): past
    /// it the queue overflows as past `http_sse_queue`.
    pub http_sse_queue_bytes: usize,
    /// How long a Server-Sent Events answer may write nothing before it writes a
    /// `: keep-alive` comment (15 s).
    pub http_sse_keep_alive: Duration,
    /// How long a long-poll `GET` (an `observeproperty` or `subscribeevent` form without a
    /// subprotocol) waits for the next event or change (60 s) before it is answered 204
    /// with no content.
    pub http_long_poll_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame_size: 2 * 1024 * 1024,
            max_meta_message_size: 256 * 1024,
            max_candidate_size: 64 * 1024,
            max_test_cases_size: 64 * 1024,
            hello: HelloLimits::default(),
            schema: SchemaLimits::default(),
            max_sessions: 256,
            max_calls_in_flight: 256,
            max_backend_calls: default_backend_calls(),
            max_backend_calls_per_address: Limits::backend_share_of(default_backend_calls()),
            backend_call_wait: Duration::from_secs(10),
            max_backend_waiting: 1024,
            max_backend_waiting_per_address: 64,
            max_long_backend_calls: Limits::long_backend_share_of(default_backend_calls()),
            max_long_backend_calls_per_address: 1,
            hello_timeout: Duration::from_secs(10),
            description_max_age: Duration::from_secs(60),
            resume_cache_ttl: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            idle_shed_after: Duration::from_secs(1),
            max_pending_hellos: 64,
            max_sessions_per_address: 64,
            max_pending_hellos_per_address: 16,
            pending_hello_shed_after: Duration::from_secs(1),
            max_holding_sessions: 128,
            max_holding_sessions_per_address: 8,
            ping_interval: Duration::from_secs(30),
            pong_timeout: Duration::from_secs(10),
            stream_idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_connections_per_address: 256,
            connection_rate_per_address: 64,
            connection_burst_per_address: 256,
            request_rate_per_address: 256,
            request_burst_per_address: 1024,
            http_header_timeout: Duration::from_secs(10),
            first_proposal_timeout: Duration::from_secs(30),
            negotiation_deadline: Duration::from_secs(180),
            negotiation_timeout: Duration::from_secs(60),
            code_generation_timeout: Duration::from_secs(60),
            call_timeout: Duration::from_secs(30),
            max_negotiation_rounds: 10,
            max_code_generations: 4,
            max_fix_rounds: 3,
            verification_timeout: Duration::from_secs(60),
            transcript_max_age: Duration::from_secs(7 * 24 * 3600),
            transcript_max_count: 10_000,
            transcript_prune_interval: Duration::from_secs(60),
            transcript_text_max_bytes: 4096,
            transcript_max_frames: 512,
            protocol_max_count: 10_000,
            protocol_max_per_peer: 32,
            max_concurrent_negotiation_work: std::thread::available_parallelism()
                .map_or(2, usize::from)
                .max(2),
            interaction: concord_interact::Limits::default(),
            event_overflow: concord_interact::Overflow::DropOldest,
            streams: concord_interact::stream::StreamLimits::default(),
            directory_client: crate::DirectoryClientLimits::default(),
            // A served directory's JSONPath searches.
            directory_searches: 2,
            directory_searches_per_address: 1,
            // The WoT HTTP binding's request bodies.
            http_max_body: 1024 * 1024,
            http_body_timeout: Duration::from_secs(10),
            // The WoT HTTP binding's event streams and long polls.
            http_sse_queue: 256,
            http_sse_queue_bytes: 256 * 1024,
            http_sse_keep_alive: Duration::from_secs(15),
            http_long_poll_timeout: Duration::from_secs(60),
        }
    }
}

/// The default of `Limits::max_backend_calls`: 4 per CPU, at least 8.
fn default_backend_calls() -> usize {
    std::thread::available_parallelism()
        .map_or(2, usize::from)
        .saturating_mul(4)
        .max(8)
}

impl Limits {
    /// The default share of one client address in `total` backend calls
    /// (`max_backend_calls_per_address` for `max_backend_calls = total`): a quarter, at
    /// least 2, at most `total`.
    ///
    /// ```
    /// assert_eq!(concord_node::Limits::backend_share_of(32), 8);
    /// assert_eq!(concord_node::Limits::backend_share_of(1), 1);
    /// ```
    pub fn backend_share_of(total: usize) -> usize {
        (total / 4).max(2).min(total)
    }

    /// The default cap of long-lived calls in `total` backend calls
    /// (`max_long_backend_calls` for `max_backend_calls = total`): half, at least 1.
    ///
    /// ```
    /// assert_eq!(concord_node::Limits::long_backend_share_of(8), 4);
    /// assert_eq!(concord_node::Limits::long_backend_share_of(1), 1);
    /// ```
    pub fn long_backend_share_of(total: usize) -> usize {
        (total / 2).max(1).min(total)
    }

    /// The cap of long-lived calls in force: `max_long_backend_calls`, or half of
    /// `max_backend_calls` when it is above that.
    pub(crate) fn long_backend_calls(&self) -> usize {
        if self.max_long_backend_calls <= self.max_backend_calls {
            self.max_long_backend_calls
        } else {
            Limits::long_backend_share_of(self.max_backend_calls)
        }
    }

    /// `base` (the spec's numbering, or the reference implementation's) with these limits.
    pub(crate) fn session_config(&self, base: SessionConfig) -> SessionConfig {
        let mut config = base;
        config.max_frame_size = self.max_frame_size;
        config.max_meta_message_size = self.max_meta_message_size;
        config.max_candidate_size = self.max_candidate_size;
        config.max_test_cases_size = self.max_test_cases_size;
        config.first_proposal_timeout = self.first_proposal_timeout;
        config.negotiation_deadline = self.negotiation_deadline;
        config.max_negotiation_rounds = self.max_negotiation_rounds;
        config.negotiation_timeout = self.negotiation_timeout;
        config.code_generation_timeout = self.code_generation_timeout;
        config
    }

    /// The preparation policy's bounds (`concord_proto::Preparation`) in these limits.
    pub(crate) fn preparation_limits(&self) -> PreparationLimits {
        PreparationLimits {
            max_generations: self.max_code_generations,
            max_fix_rounds: self.max_fix_rounds,
            code_generation_timeout: self.code_generation_timeout,
            verification_timeout: self.verification_timeout,
        }
    }

    /// Checks that no limit is zero; the error names the first one that is.
    ///
    /// ```
    /// let mut limits = concord_node::Limits::default();
    /// assert_eq!(limits.validate(), Ok(()));
    /// limits.max_sessions = 0;
    /// assert_eq!(limits.validate().unwrap_err().name, "max_sessions");
    /// ```
    pub fn validate(&self) -> Result<(), InvalidLimit> {
        let zero = [
            ("max_frame_size", self.max_frame_size == 0),
            ("max_meta_message_size", self.max_meta_message_size == 0),
            ("max_candidate_size", self.max_candidate_size == 0),
            ("max_test_cases_size", self.max_test_cases_size == 0),
            (
                "first_proposal_timeout",
                self.first_proposal_timeout.is_zero(),
            ),
            ("negotiation_deadline", self.negotiation_deadline.is_zero()),
            ("max_sessions", self.max_sessions == 0),
            ("max_calls_in_flight", self.max_calls_in_flight == 0),
            ("max_backend_calls", self.max_backend_calls == 0),
            (
                "max_backend_calls_per_address",
                self.max_backend_calls_per_address == 0,
            ),
            ("backend_call_wait", self.backend_call_wait.is_zero()),
            ("max_backend_waiting", self.max_backend_waiting == 0),
            (
                "max_backend_waiting_per_address",
                self.max_backend_waiting_per_address == 0,
            ),
            ("max_long_backend_calls", self.max_long_backend_calls == 0),
            (
                "max_long_backend_calls_per_address",
                self.max_long_backend_calls_per_address == 0,
            ),
            ("hello_timeout", self.hello_timeout.is_zero()),
            ("idle_timeout", self.idle_timeout.is_zero()),
            ("idle_shed_after", self.idle_shed_after.is_zero()),
            ("max_pending_hellos", self.max_pending_hellos == 0),
            (
                "max_sessions_per_address",
                self.max_sessions_per_address == 0,
            ),
            (
                "max_pending_hellos_per_address",
                self.max_pending_hellos_per_address == 0,
            ),
            (
                "pending_hello_shed_after",
                self.pending_hello_shed_after.is_zero(),
            ),
            ("max_holding_sessions", self.max_holding_sessions == 0),
            (
                "max_holding_sessions_per_address",
                self.max_holding_sessions_per_address == 0,
            ),
            ("ping_interval", self.ping_interval.is_zero()),
            ("pong_timeout", self.pong_timeout.is_zero()),
            ("stream_idle_timeout", self.stream_idle_timeout.is_zero()),
            ("max_connections", self.max_connections == 0),
            (
                "max_connections_per_address",
                self.max_connections_per_address == 0,
            ),
            (
                "connection_rate_per_address",
                self.connection_rate_per_address == 0,
            ),
            (
                "connection_burst_per_address",
                self.connection_burst_per_address == 0,
            ),
            (
                "request_rate_per_address",
                self.request_rate_per_address == 0,
            ),
            (
                "request_burst_per_address",
                self.request_burst_per_address == 0,
            ),
            ("http_header_timeout", self.http_header_timeout.is_zero()),
            // The WoT HTTP binding's request bodies.
            ("http_max_body", self.http_max_body == 0),
            ("http_body_timeout", self.http_body_timeout.is_zero()),
            // The WoT HTTP binding's event streams and long polls.
            ("http_sse_queue", self.http_sse_queue == 0),
            ("http_sse_queue_bytes", self.http_sse_queue_bytes == 0),
            ("http_sse_keep_alive", self.http_sse_keep_alive.is_zero()),
            (
                "http_long_poll_timeout",
                self.http_long_poll_timeout.is_zero(),
            ),
            ("negotiation_timeout", self.negotiation_timeout.is_zero()),
            (
                "code_generation_timeout",
                self.code_generation_timeout.is_zero(),
            ),
            ("call_timeout", self.call_timeout.is_zero()),
            ("max_negotiation_rounds", self.max_negotiation_rounds == 0),
            // `max_fix_rounds` may be 0: the first failure of the peer's code ends it.
            ("max_code_generations", self.max_code_generations == 0),
            ("verification_timeout", self.verification_timeout.is_zero()),
            ("transcript_max_age", self.transcript_max_age.is_zero()),
            ("transcript_max_count", self.transcript_max_count == 0),
            (
                "transcript_prune_interval",
                self.transcript_prune_interval.is_zero(),
            ),
            (
                "transcript_text_max_bytes",
                self.transcript_text_max_bytes == 0,
            ),
            ("transcript_max_frames", self.transcript_max_frames == 0),
            ("protocol_max_count", self.protocol_max_count == 0),
            ("protocol_max_per_peer", self.protocol_max_per_peer == 0),
            (
                "max_concurrent_negotiation_work",
                self.max_concurrent_negotiation_work == 0,
            ),
            // `interaction.replay_events`, `interaction.replay_bytes` and
            // `interaction.finished_actions` may be 0 (no replay; finished actions forgotten
            // at once).
            (
                "interaction.max_message_size",
                self.interaction.max_message_size == 0,
            ),
            ("interaction.max_depth", self.interaction.max_depth == 0),
            (
                "interaction.max_correlation_id",
                self.interaction.max_correlation_id == 0,
            ),
            (
                "interaction.max_action_id",
                self.interaction.max_action_id == 0,
            ),
            ("interaction.max_name", self.interaction.max_name == 0),
            (
                "interaction.max_problem_text",
                self.interaction.max_problem_text == 0,
            ),
            (
                "interaction.max_open_correlations",
                self.interaction.max_open_correlations == 0,
            ),
            ("interaction.max_events", self.interaction.max_events == 0),
            (
                "interaction.replay_max_age",
                self.interaction
                    .replay_max_age
                    .is_some_and(|age| age.is_zero()),
            ),
            (
                "interaction.subscriber_queue",
                self.interaction.subscriber_queue == 0,
            ),
            (
                "interaction.subscriber_queue_bytes",
                self.interaction.subscriber_queue_bytes == 0,
            ),
            (
                "interaction.max_subscribers",
                self.interaction.max_subscribers == 0,
            ),
            ("interaction.max_actions", self.interaction.max_actions == 0),
            (
                "interaction.max_actions_per_caller",
                self.interaction.max_actions_per_caller == 0,
            ),
            (
                "interaction.action_lease",
                self.interaction.action_lease.is_zero(),
            ),
            (
                "interaction.max_pending_requests",
                self.interaction.max_pending_requests == 0,
            ),
            ("streams.max_streams", self.streams.max_streams == 0),
            ("streams.max_chunk_size", self.streams.max_chunk_size == 0),
            ("streams.initial_credit", self.streams.initial_credit == 0),
            (
                "streams.max_receive_buffer",
                self.streams.max_receive_buffer == 0,
            ),
            ("streams.max_send_queue", self.streams.max_send_queue == 0),
            (
                "streams.max_session_buffer",
                self.streams.max_session_buffer == 0,
            ),
            (
                "streams.max_reader_queue",
                self.streams.max_reader_queue == 0,
            ),
            ("streams.max_send_room", self.streams.max_send_room == 0),
            (
                "directory_client.max_response_bytes",
                self.directory_client.max_response_bytes == 0,
            ),
            (
                "directory_client.max_pages",
                self.directory_client.max_pages == 0,
            ),
            (
                "directory_client.max_listing_bytes",
                self.directory_client.max_listing_bytes == 0,
            ),
            (
                "directory_client.max_listing_items",
                self.directory_client.max_listing_items == 0,
            ),
            (
                "directory_client.timeout",
                self.directory_client.timeout.is_zero(),
            ),
            // A served directory's JSONPath searches.
            ("directory_searches", self.directory_searches == 0),
            (
                "directory_searches_per_address",
                self.directory_searches_per_address == 0,
            ),
        ];
        if let Some(&(name, _)) = zero.iter().find(|(_, zero)| *zero) {
            return Err(InvalidLimit::zero(name));
        }
        self.validate_backend_calls()?;
        self.validate_interaction()
    }

    /// The node-wide budget of holding sessions in force: `max_holding_sessions`, at most
    /// `max_sessions` (a larger value counts as `max_sessions`, so lowering `max_sessions`
    /// alone never makes a configuration invalid).
    pub fn holding_sessions_in_force(&self) -> usize {
        self.max_holding_sessions.min(self.max_sessions)
    }

    /// One address's share of the holding sessions in force: at most the budget in force.
    pub fn holding_sessions_per_address_in_force(&self) -> usize {
        self.max_holding_sessions_per_address
            .min(self.holding_sessions_in_force())
    }

    /// One address's share of the WebSockets waiting for their hello in force: at most
    /// `max_pending_hellos`.
    pub fn pending_hellos_per_address_in_force(&self) -> usize {
        self.max_pending_hellos_per_address
            .min(self.max_pending_hellos)
    }

    /// The floor before a waiting WebSocket may be shed in force: at most half of
    /// `hello_timeout` (a floor as long as the timeout would never apply).
    pub fn pending_hello_shed_after_in_force(&self) -> Duration {
        self.pending_hello_shed_after.min(self.hello_timeout / 2)
    }

    /// An address's share of the backend calls (and of the long-lived ones) is at most the
    /// whole.
    fn validate_backend_calls(&self) -> Result<(), InvalidLimit> {
        InvalidLimit::at_most(
            "max_backend_calls_per_address",
            self.max_backend_calls_per_address,
            "max_backend_calls",
            self.max_backend_calls,
        )?;
        InvalidLimit::at_most(
            "max_long_backend_calls_per_address",
            self.max_long_backend_calls_per_address,
            "max_long_backend_calls",
            self.max_long_backend_calls,
        )
    }

    /// The ranges of `interaction` and `streams` beyond zero (checked by
    /// [`Limits::validate`] first).
    fn validate_interaction(&self) -> Result<(), InvalidLimit> {
        let (interaction, streams) = (&self.interaction, &self.streams);
        // The description publishes the lease in whole seconds, at most a day.
        let lease = interaction.action_lease;
        if lease.subsec_nanos() != 0 || lease.as_secs() > concord_describe::MAX_ACTION_LEASE_SECS {
            return Err(InvalidLimit {
                name: "interaction.action_lease",
                reason: format!(
                    "must be a whole number of seconds up to a day, not {}: the description \
                     publishes it (`concord:actionLease`)",
                    human(lease)
                ),
            });
        }
        // A reserve of the whole table would refuse every caller its second action.
        if interaction.reserved_actions >= interaction.max_actions {
            return Err(InvalidLimit {
                name: "interaction.reserved_actions",
                reason: format!(
                    "must be less than interaction.max_actions ({}), not {}",
                    interaction.max_actions, interaction.reserved_actions
                ),
            });
        }
        // A stream opened by its first chunk would silently get less.
        InvalidLimit::at_most(
            "streams.initial_credit",
            streams.initial_credit,
            "streams.max_receive_buffer",
            streams.max_receive_buffer,
        )?;
        // One stream must be able to hold its whole receive buffer within the session's.
        InvalidLimit::at_most(
            "streams.max_receive_buffer",
            streams.max_receive_buffer,
            "streams.max_session_buffer",
            streams.max_session_buffer,
        )
    }
}

/// A [`Limits`] field out of its range: most must be greater than zero.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} {reason}")]
#[non_exhaustive]
pub struct InvalidLimit {
    /// The field's name, as in [`Limits`] (`max_sessions`, `call_timeout`,
    /// `interaction.action_lease`, …).
    pub name: &'static str,
    /// What is wrong with it (`must be greater than zero`, …).
    pub reason: String,
}

impl InvalidLimit {
    fn zero(name: &'static str) -> Self {
        Self {
            name,
            reason: "must be greater than zero".to_owned(),
        }
    }

    /// `name` (`value`) must not exceed `bound_name` (`bound`).
    fn at_most<T: PartialOrd + std::fmt::Display>(
        name: &'static str,
        value: T,
        bound_name: &str,
        bound: T,
    ) -> Result<(), Self> {
        if value > bound {
            return Err(Self {
                name,
                reason: format!("must be at most {bound_name} ({bound}), not {value}"),
            });
        }
        Ok(())
    }
}

/// A duration for people: `300 ms`, `15 s`, `2.5 s`.
pub(crate) fn human(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1000 {
        format!("{millis} ms")
    } else if millis.is_multiple_of(1000) {
        format!("{} s", millis / 1000)
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human(Duration::from_millis(300)), "300 ms");
        assert_eq!(human(Duration::from_secs(15)), "15 s");
        assert_eq!(human(Duration::from_millis(2500)), "2.5 s");
    }

    #[test]
    fn zero_limits_are_refused_by_name() {
        assert_eq!(Limits::default().validate(), Ok(()));
        let limits = Limits {
            max_sessions: 0,
            ..Limits::default()
        };
        let error = limits.validate().unwrap_err();
        assert_eq!(error.name, "max_sessions");
        assert_eq!(error.to_string(), "max_sessions must be greater than zero");
        let limits = Limits {
            call_timeout: Duration::ZERO,
            ..Limits::default()
        };
        assert_eq!(limits.validate().unwrap_err().name, "call_timeout");
        let config = Limits::default().session_config(SessionConfig::default());
        assert_eq!(config.max_frame_size, 2 * 1024 * 1024);
        assert_eq!(config.max_candidate_size, 64 * 1024);
        assert_eq!(config.first_proposal_timeout, Duration::from_secs(30));
    }

    #[test]
    fn slot_budgets_follow_a_lowered_whole_and_the_hello_timeout() {
        // Lowering the whole alone keeps a configuration valid: the shares follow it.
        let limits = Limits {
            max_sessions: 64,
            max_pending_hellos: 8,
            hello_timeout: Duration::from_millis(300),
            ..Limits::default()
        };
        assert_eq!(limits.validate(), Ok(()));
        assert_eq!(limits.holding_sessions_in_force(), 64);
        assert_eq!(limits.holding_sessions_per_address_in_force(), 8);
        assert_eq!(limits.pending_hellos_per_address_in_force(), 8);
        assert_eq!(
            limits.pending_hello_shed_after_in_force(),
            Duration::from_millis(150)
        );
        let limits = Limits {
            max_holding_sessions: 4,
            ..Limits::default()
        };
        assert_eq!(limits.holding_sessions_per_address_in_force(), 4);
        // What is given within the whole is what is in force.
        let defaults = Limits::default();
        assert_eq!(defaults.holding_sessions_in_force(), 128);
        assert_eq!(defaults.holding_sessions_per_address_in_force(), 8);
        assert_eq!(defaults.pending_hellos_per_address_in_force(), 16);
        assert_eq!(
            defaults.pending_hello_shed_after_in_force(),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn interaction_limits_are_refused_by_name_and_reason() {
        let refused = |change: fn(&mut Limits)| {
            let mut limits = Limits::default();
            change(&mut limits);
            limits.validate().unwrap_err()
        };
        let zero = refused(|limits| limits.interaction.subscriber_queue = 0);
        assert_eq!(zero.name, "interaction.subscriber_queue");
        let lease = refused(|limits| limits.interaction.action_lease = Duration::from_millis(1500));
        assert_eq!(lease.name, "interaction.action_lease");
        assert!(lease.reason.contains("not 1.5 s"), "{lease}");
        let long = refused(|limits| limits.interaction.action_lease = Duration::from_secs(86_401));
        assert_eq!(long.name, "interaction.action_lease");
        let credit = refused(|limits| limits.streams.max_receive_buffer = 1024);
        assert_eq!(credit.name, "streams.initial_credit");
        let session = refused(|limits| limits.streams.max_session_buffer = 0);
        assert_eq!(session.name, "streams.max_session_buffer");
        let session = refused(|limits| limits.streams.max_session_buffer = 1024 * 1024 - 1);
        assert_eq!(session.name, "streams.max_receive_buffer");
        // Zero replay and no finished actions kept are choices, not mistakes.
        let mut limits = Limits::default();
        limits.interaction.replay_events = 0;
        limits.interaction.finished_actions = 0;
        limits.interaction.action_lease = Duration::from_secs(86_400);
        assert_eq!(limits.validate(), Ok(()));
    }
}
