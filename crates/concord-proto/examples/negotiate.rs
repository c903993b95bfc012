//! Two in-memory agents negotiate the seeds' product-info protocol end to end, with a
//! scripted policy standing in for the negotiator, and print every frame that crosses.
//!
//! Run: `cargo run -p concord-proto --example negotiate`

use std::time::{Duration, Instant};

use concord_proto::handshake::{self, KnownProtocols, LocalOffer};
use concord_proto::{
    Capabilities, Decision, Event, Frame, Hello, MetaMessage, ProtocolType, Role, Session,
    SessionConfig, DEFAULT_MAX_FRAME_SIZE,
};

const FIRST_DRAFT: &str = include_str!("product-info.md");

const NOT_FOUND_RULE: &str = "\n# Not found\nAn unknown product is answered with status.code 404 \
and productInfo null.\n";

const TEST_CASES: &str = r#"# Test case 1
- Request: {"messageId":"msg001","type":"REQUEST","action":"getProductInfo","productId":"P12345"}
- Response: {"messageId":"msg001","type":"RESPONSE","status":{"code":200,"message":"OK"},"productInfo":{"productId":"P12345","productName":"Laptop","productDescription":"A fast laptop.","price":1299.99,"currency":"USD"}}
- Expected: product found, status 200.

# Test case 2
- Request: {"messageId":"msg002","type":"REQUEST","action":"getProductInfo","productId":"P99999"}
- Response: {"messageId":"msg002","type":"RESPONSE","status":{"code":404,"message":"Product not found"},"productInfo":null}
- Expected: product missing, status 404, productInfo null.
"#;

fn main() {
    let start = Instant::now();
    let mut now = start;

    // Hello exchange: both sides support every optional capability.
    let offer = LocalOffer::new(Capabilities::all());
    let source = handshake::source_hello(&offer, "req0000000000001", None, &[]);
    print_hello("requester → provider", &source);
    let (destination, provider_agreement) = match handshake::answer_source_hello(
        &offer,
        &source,
        &KnownProtocols::default(),
        "pro0000000000001",
    ) {
        Ok(answer) => answer,
        Err(error) => return eprintln!("handshake failed: {error}"),
    };
    print_hello("provider → requester", &destination);
    let requester_agreement =
        match handshake::accept_destination_hello(&offer, &source, &destination) {
            Ok(agreement) => agreement,
            Err(error) => return eprintln!("handshake failed: {error}"),
        };

    let mut requester = Session::new(
        Role::Requester,
        &requester_agreement,
        SessionConfig::default(),
        now,
    );
    let mut provider = Session::new(
        Role::Provider,
        &provider_agreement,
        SessionConfig::default(),
        now,
    );

    if let Err(error) = requester.propose(now, FIRST_DRAFT.to_owned()) {
        return eprintln!("cannot propose: {error}");
    }
    let mut exchanged = false;
    loop {
        now += Duration::from_millis(3); // simulated one-way latency
        let mut progressed = deliver("requester → provider", &mut requester, &mut provider, now);
        progressed |= deliver("provider → requester", &mut provider, &mut requester, now);
        progressed |= act(Role::Requester, &mut requester, now, &mut exchanged);
        progressed |= act(Role::Provider, &mut provider, now, &mut exchanged);
        if !progressed {
            break;
        }
    }
    if let Some(concord_proto::EstablishedProtocol::Negotiated { hash, .. }) = requester.protocol()
    {
        println!("\nagreed protocol hash (0-RTT key): {hash}");
    }
    println!("simulated time: {} ms", (now - start).as_millis());
}

/// Moves every queued frame from `from` to `to`, printing each.
fn deliver(direction: &str, from: &mut Session, to: &mut Session, now: Instant) -> bool {
    let mut moved = false;
    while let Some(frame) = from.poll_transmit() {
        print_frame(direction, &frame);
        to.handle_frame(now, frame.clone());
        moved = true;
    }
    moved
}

/// The scripted policy: what each side does with its events.
fn act(role: Role, session: &mut Session, now: Instant, exchanged: &mut bool) -> bool {
    let mut acted = false;
    while let Some(event) = session.poll_event() {
        acted = true;
        let outcome = match event {
            // The provider wants a not-found rule added; the requester accepts the counter.
            Event::CandidateReceived { candidate, .. } => match role {
                Role::Provider if !candidate.contains("# Not found") => session.decide(
                    now,
                    Decision::Counter {
                        candidate: format!("{candidate}{NOT_FOUND_RULE}"),
                        modification_summary: "Added the not-found convention (404, productInfo null).".into(),
                    },
                ),
                _ => session.decide(now, Decision::Accept),
            },
            // Code "generation" is instant here; the requester also proposes the test cases.
            Event::ProtocolAgreed { .. } => match role {
                Role::Requester => session.propose_test_cases(now, TEST_CASES.into()),
                Role::Provider => Ok(()),
            },
            Event::TestCasesReceived { .. } => session.decide_test_cases(now, Decision::Accept),
            Event::TestCasesAgreed { .. } => session.code_ready(now),
            Event::Ready { .. } if role == Role::Requester && !*exchanged => {
                *exchanged = true;
                session.send_application(br#"{"messageId":"m1","type":"REQUEST","action":"getProductInfo","productId":"P12345"}"#)
            }
            Event::Application(_) if role == Role::Provider => session.send_application(
                br#"{"messageId":"m1","type":"RESPONSE","status":{"code":200,"message":"OK"},"productInfo":{"productId":"P12345","productName":"Laptop","productDescription":"A fast laptop.","price":1299.99,"currency":"USD"}}"#,
            ),
            Event::Closed(reason) => {
                println!("  {} closed: {reason}", role.name());
                Ok(())
            }
            _ => Ok(()),
        };
        if let Err(error) = outcome {
            eprintln!("  {} could not act: {error}", role.name());
        }
    }
    acted
}

fn print_hello(direction: &str, hello: &Hello) {
    let capabilities: Vec<_> = hello
        .meta_protocol
        .supported_capabilities
        .iter()
        .map(|c| c.name())
        .collect();
    println!(
        "{direction}  hello        {:<28} version={} capabilities=[{}]",
        hello.kind.name(),
        hello.meta_protocol.version,
        capabilities.join(", ")
    );
}

fn print_frame(direction: &str, bytes: &[u8]) {
    let Ok(frame) = Frame::decode(bytes, DEFAULT_MAX_FRAME_SIZE) else {
        return println!("{direction}  (invalid frame)");
    };
    let pt = frame.protocol_type;
    if pt != ProtocolType::Meta {
        let text = String::from_utf8_lossy(frame.data);
        let shown: String = text.chars().take(72).collect();
        return println!(
            "{direction}  {:<12} {shown}{}",
            pt.name(),
            if text.len() > shown.len() { "…" } else { "" }
        );
    }
    let Ok(message) = MetaMessage::decode(frame.data) else {
        return println!("{direction}  meta         (undecodable)");
    };
    let detail = match &message {
        MetaMessage::ProtocolNegotiation(m) => format!(
            "seq={} status={}{}{}",
            m.sequence_id,
            m.status.as_str(),
            m.candidate_protocols
                .as_ref()
                .map(|c| format!(" candidate={}B", c.len()))
                .unwrap_or_default(),
            m.modification_summary
                .as_ref()
                .map(|s| format!(" summary={s:?}"))
                .unwrap_or_default(),
        ),
        MetaMessage::CodeGeneration(m) => format!("status={:?}", m.status).to_lowercase(),
        MetaMessage::TestCasesNegotiation(m) => format!(
            "status={}{}",
            m.status.as_str(),
            m.test_cases
                .as_ref()
                .map(|t| format!(" testCases={}B", t.len()))
                .unwrap_or_default()
        ),
        MetaMessage::FixErrorNegotiation(m) => format!("status={}", m.status.as_str()),
        MetaMessage::NaturalLanguageNegotiation(m) => format!("{:?} id={}", m.kind, m.message_id),
    };
    println!(
        "{direction}  meta         {:<28} {detail}",
        message.action()
    );
}
