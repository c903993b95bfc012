//! Events across three `concord serve` replicas sharing one JetStream stream: events are
//! posted in on A and C while a plain SSE client (an HTTP/1.0 socket, no library) streams
//! from B; B is killed with `kill -9`; the client reconnects to A with `Last-Event-ID` and
//! resumes with no gap and no duplicate; nats-server is stopped (posts answer 503 with
//! `Retry-After` naming the event log, and saying so when one may still be published; the
//! subscription on A stays open) and started again (posts work again and
//! reach the same subscription, with no restart of any replica); nats-server frozen: a post
//! answered "may or may not be published" with its key, posted again with
//! `Idempotency-Key` on another replica, is heard once.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use concord_nats::testing::NatsServer;

use super::{free_port, replica_text};
use crate::support::*;

pub(super) const TOKEN: &str = "ingest-token-for-tests";

/// What the SSE client read: events `(id, n)` (n: the number the poster gave it) and gaps.
#[derive(Debug, PartialEq)]
pub(super) enum Heard {
    Event(u64, u64),
    Gap(String),
}

/// A plain SSE subscription over HTTP/1.0 (the answer ends with the connection).
pub(super) struct Sse {
    lines: BufReader<TcpStream>,
}

impl Sse {
    /// `GET /events/feedback/subscription` on `at`, with `Last-Event-ID: last` when given:
    /// the answer's status line and, when 200, the stream.
    pub(super) fn open(at: SocketAddr, last: Option<u64>) -> Result<Self, String> {
        let mut socket = TcpStream::connect(at).map_err(|error| error.to_string())?;
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let resume = last.map_or(String::new(), |id| format!("Last-Event-ID: {id}\r\n"));
        write!(
            socket,
            "GET /events/feedback/subscription HTTP/1.0\r\nHost: {at}\r\nAccept: text/event-stream\r\n{resume}\r\n"
        )
        .map_err(|error| error.to_string())?;
        let mut lines = BufReader::new(socket);
        let mut status = String::new();
        lines
            .read_line(&mut status)
            .map_err(|error| error.to_string())?;
        if !status.contains(" 200 ") {
            let mut rest = String::new();
            let _ = lines.read_to_string(&mut rest);
            return Err(format!("{status}{rest}"));
        }
        // The headers end with an empty line.
        loop {
            let mut line = String::new();
            lines
                .read_line(&mut line)
                .map_err(|error| error.to_string())?;
            if line.trim().is_empty() {
                return Ok(Self { lines });
            }
        }
    }

    /// The next event or gap; `None` when the answer ended (or nothing came for 10 s).
    pub(super) fn next(&mut self) -> Option<Heard> {
        let mut id: Option<u64> = None;
        let mut data: Option<String> = None;
        loop {
            let mut line = String::new();
            match self.lines.read_line(&mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if let (Some(id), Some(data)) = (id.take(), data.take()) {
                    let data: serde_json::Value = serde_json::from_str(data.as_str()).unwrap();
                    let n = data["comment"].as_str().unwrap().parse().unwrap();
                    return Some(Heard::Event(id, n));
                }
                continue;
            }
            if let Some(gap) = line.strip_prefix(": gap ") {
                return Some(Heard::Gap(gap.to_owned()));
            }
            if let Some(value) = line.strip_prefix("id:") {
                id = Some(value.trim().parse::<u64>().unwrap());
            } else if let Some(value) = line.strip_prefix("data:") {
                data = Some(value.trim().to_owned());
            }
        }
    }
}

/// `POST /events/feedback` on `at` with the number `n`: the status and body.
pub(super) fn post(at: SocketAddr, n: u64) -> (u16, String) {
    post_keyed(at, n, None)
}

/// [`post`], with `Idempotency-Key: "key"` when given.
fn post_keyed(at: SocketAddr, n: u64, key: Option<&str>) -> (u16, String) {
    let body = format!(r#"{{"rating": {}, "comment": "{n}"}}"#, 1 + n % 5);
    let key = key.map_or(String::new(), |key| {
        format!("Idempotency-Key: \"{key}\"\r\n")
    });
    let attempt = || -> std::io::Result<(u16, String)> {
        let mut socket = TcpStream::connect(at)?;
        socket.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            socket,
            "POST /events/feedback HTTP/1.0\r\nHost: {at}\r\nAuthorization: Bearer {TOKEN}\r\n\
             {key}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )?;
        let mut answer = String::new();
        socket.read_to_string(&mut answer)?;
        let status = answer
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        Ok((status, answer))
    };
    attempt().unwrap_or_else(|error| (0, error.to_string()))
}

/// Posts numbered events in turn to each of `to` until `stop`: the numbers answered 202,
/// and the answers refused.
fn poster(
    to: Vec<SocketAddr>,
    stop: Arc<AtomicBool>,
    published: Arc<Mutex<Vec<u64>>>,
    refused: Arc<Mutex<Vec<(u64, String)>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut n = 0;
        while !stop.load(Ordering::SeqCst) {
            let at = to[n as usize % to.len()];
            match post(at, n) {
                (202, _) => published.lock().unwrap().push(n),
                (_, answer) => refused.lock().unwrap().push((n, answer)),
            }
            n += 1;
            std::thread::sleep(Duration::from_millis(15));
        }
    })
}

fn wait_until(what: &str, within: Duration, check: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn an_sse_subscriber_of_a_killed_replica_resumes_on_another_with_no_gap_through_a_nats_restart() {
    let mut nats = NatsServer::start();
    let cluster = format!(
        "event_ingest_token = {TOKEN:?}\n\n[[events]]\nname = \"feedback\"\n\
         data = {{ type = \"object\", properties = {{ rating = {{ type = \"integer\" }}, comment = {{ type = \"string\" }} }} }}\n\n\
         [security]\nkeys_file = \"secret/identity/keys.json\"\n\n\
         [cluster]\nnats = [{:?}]\ntimeout = \"1s\"\n\n[cluster.events]\nstream = \"shop_events\"\n",
        nats.url()
    );
    let dir = tempfile::tempdir().unwrap();
    // One agent: one key file, named by every replica's configuration.
    make_keys(&dir.path().join("secret"));
    let mut replicas = Vec::new();
    for name in ["a", "b", "c"] {
        let port = free_port();
        // `event_ingest_token` belongs to [node]: put it after `data_dir`.
        let text = replica_text(
            &cluster.replace(&format!("event_ingest_token = {TOKEN:?}\n"), ""),
            port,
            &format!("data-{name}"),
            &format!("event_ingest_token = {TOKEN:?}\n"),
        );
        let config = dir.path().join(format!("{name}.toml"));
        std::fs::write(&config, text).unwrap();
        replicas.push(Served::start(&[OsStr::new("--config"), config.as_os_str()]));
    }
    let (a, b, c) = (
        replicas[0].listening,
        replicas[1].listening,
        replicas[2].listening,
    );

    // The subscriber streams from B while events are posted in on A and C.
    let mut sse = Sse::open(b, None).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let published = Arc::new(Mutex::new(Vec::new()));
    let refused = Arc::new(Mutex::new(Vec::new()));
    let posting = poster(
        vec![a, c],
        Arc::clone(&stop),
        Arc::clone(&published),
        Arc::clone(&refused),
    );
    let mut heard: Vec<(u64, u64)> = Vec::new();
    while heard.len() < 15 {
        match sse.next() {
            Some(Heard::Event(id, n)) => heard.push((id, n)),
            other => panic!("from B: {other:?}"),
        }
    }

    // kill -9 B while it streams; the client reconnects to A with its last id.
    replicas.remove(1).kill9();
    // What B sent before it died (the socket may still hold some).
    while let Some(read) = sse.next() {
        match read {
            Heard::Event(id, n) => heard.push((id, n)),
            gap => panic!("from B: {gap:?}"),
        }
    }
    let last = heard.last().unwrap().0;
    let mut sse = Sse::open(a, Some(last)).unwrap_or_else(|answer| panic!("resume on A: {answer}"));
    let read = |sse: &mut Sse, heard: &mut Vec<(u64, u64)>, until: usize| {
        while heard.len() < until {
            match sse.next() {
                Some(Heard::Event(id, n)) => heard.push((id, n)),
                other => panic!("from A: {other:?} after {:?}", heard.last()),
            }
        }
    };
    read(&mut sse, &mut heard, 30);

    // NATS stops: posts are refused with 503 naming the event log (never silently lost).
    nats.stop();
    wait_until("two posts refused", Duration::from_secs(10), || {
        refused.lock().unwrap().len() >= 2
    });
    let published_before = published.lock().unwrap().len();
    {
        let refused = refused.lock().unwrap();
        assert!(
            refused.iter().all(|(_, answer)| answer.contains(" 503 ")
                && answer.to_ascii_lowercase().contains("retry-after: 1")
                && answer.contains("event log")),
            "{refused:?}"
        );
    }
    // NATS returns: posts work again with no restart, and reach the same subscription.
    nats.resume();
    wait_until("posts accepted again", Duration::from_secs(30), || {
        published.lock().unwrap().len() >= published_before + 15
    });
    stop.store(true, Ordering::SeqCst);
    posting.join().unwrap();
    let published = published.lock().unwrap().clone();
    while !published
        .iter()
        .all(|n| heard.iter().any(|(_, heard)| heard == n))
    {
        match sse.next() {
            Some(Heard::Event(id, n)) => heard.push((id, n)),
            other => panic!("from A: {other:?} after {:?}", heard.last()),
        }
    }

    // Every event accepted, once, in increasing ids, with no gap across B's death and the
    // NATS restart.
    let ids: Vec<u64> = heard.iter().map(|(id, _)| *id).collect();
    assert!(
        ids.windows(2).all(|pair| pair[0] < pair[1]),
        "ids must increase: {ids:?}"
    );
    // Every accepted event once; a refused one never, unless its answer said it may have
    // been published (handed to the client just as NATS died): then at most once.
    let mut numbers: Vec<u64> = heard.iter().map(|(_, n)| *n).collect();
    numbers.sort_unstable();
    let before = numbers.len();
    numbers.dedup();
    assert_eq!(numbers.len(), before, "no event twice: {numbers:?}");
    let uncertain: Vec<u64> = refused
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, answer)| answer.contains("may or may not be published"))
        .map(|(n, _)| *n)
        .collect();
    let accepted: Vec<u64> = numbers
        .iter()
        .copied()
        .filter(|n| !uncertain.contains(n))
        .collect();
    assert_eq!(
        accepted, published,
        "every accepted event, and no refused one"
    );
    assert!(published.len() >= 45);

    // NATS hangs (frozen: the connection stays, nothing answers): a post is taken and not
    // confirmed, answered 503 with the key to post it again under. Posted again with it
    // once NATS goes on, it is one event, though the first one was stored after all.
    nats.freeze();
    let (status, answer) = post(a, 1000);
    nats.thaw();
    assert_eq!(status, 503, "{answer}");
    assert!(answer.contains("may or may not be published"), "{answer}");
    let problem: serde_json::Value =
        serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap_or_default())
            .unwrap_or_else(|error| panic!("{error}: {answer}"));
    let key = problem["attempt"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let id_of = |answer: &str| -> u64 {
        let body: serde_json::Value =
            serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap_or_default()).unwrap();
        body["id"].as_u64().unwrap()
    };
    let again = loop {
        match post_keyed(c, 1000, Some(key)) {
            (202, answer) => break id_of(&answer),
            (_, answer) => {
                assert!(Instant::now() < deadline, "NATS thawed, still: {answer}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    let (status, answer) = post_keyed(a, 1000, Some(key));
    assert_eq!((status, id_of(&answer)), (202, again), "{answer}");
    let (status, answer) = post(c, 1001);
    assert_eq!(status, 202, "{answer}");
    let after = id_of(&answer);
    let mut tail = Vec::new();
    while tail.last().map(|(id, _)| *id) != Some(after) {
        match sse.next() {
            Some(Heard::Event(id, n)) => tail.push((id, n)),
            other => panic!("from A: {other:?} after {tail:?}"),
        }
    }
    assert_eq!(tail, [(again, 1000), (after, 1001)]);
    eprintln!(
        "heard {} events (ids {}..={}), {} posts refused while NATS was away",
        heard.len(),
        ids[0],
        ids[ids.len() - 1],
        refused.lock().unwrap().len()
    );
    let _ = replicas;
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn an_event_larger_than_nats_takes_is_refused_413_and_the_limit_is_told_at_start() {
    let nats = NatsServer::start_with_max_payload(Some(4096));
    let dir = tempfile::tempdir().unwrap();
    make_keys(&dir.path().join("secret"));
    let port = free_port();
    let text = replica_text(
        &format!(
            "\n[[events]]\nname = \"feedback\"\n\
             data = {{ type = \"object\", properties = {{ rating = {{ type = \"integer\" }}, comment = {{ type = \"string\" }} }} }}\n\n\
             [security]\nkeys_file = \"secret/identity/keys.json\"\n\n\
             [cluster]\nnats = [{:?}]\ntimeout = \"1s\"\n",
            nats.url()
        ),
        port,
        "data",
        &format!("event_ingest_token = {TOKEN:?}\n"),
    );
    let config = dir.path().join("agent.toml");
    std::fs::write(&config, text).unwrap();
    let replica = Served::start(&[OsStr::new("--config"), config.as_os_str()]);
    // Told at start: the interaction limit (1 MiB) lets messages NATS refuses through.
    assert!(
        replica.logged("`limits.interaction.max_message_size`"),
        "{}",
        replica.stderr()
    );
    // A large event: 413, not a 503 to retry; a small one passes.
    let large = format!(r#"{{"rating": 4, "comment": "{}"}}"#, "x".repeat(8 * 1024));
    let send = |body: &str| -> (u16, String) {
        let mut socket = TcpStream::connect(replica.listening).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            socket,
            "POST /events/feedback HTTP/1.0\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            replica.listening,
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        socket.read_to_string(&mut answer).unwrap();
        let status = answer
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        (status, answer)
    };
    let (status, answer) = send(&large);
    assert_eq!(status, 413, "{answer}");
    assert!(answer.contains("max_payload"), "{answer}");
    let (status, answer) = send(r#"{"rating": 4, "comment": "small"}"#);
    assert_eq!(status, 202, "{answer}");
}
