//! The conformance suite every [`DirectoryStore`] backend must pass (feature
//! `conformance`). It panics, naming the broken rule, when a backend breaks one.
//!
//! ```
//! concord_directory::conformance::directory_store(&concord_directory::MemoryDirectoryStore::new());
//! ```
// Panicking, naming the broken rule, is how a conformance suite fails.
#![allow(clippy::panic)]

use serde_json::json;

use crate::capability::{CapabilityKey, CapabilityKind};
use crate::event::EventKind;
use crate::store::{
    Admission, DirectoryStore, Entry, Expect, Holder, Outcome, Removal, StoreFailure, Write,
};

fn ok<T>(what: &str, result: Result<T, StoreFailure>) -> T {
    result.unwrap_or_else(|error| panic!("{what}: the backend failed: {error}"))
}

fn entry(id: &str, owner: Option<&str>, client: Option<&str>, expires: Option<i64>) -> Entry {
    let td = json!({"id": id, "title": format!("thing {id}")});
    Entry {
        id: id.to_owned(),
        size: u64::try_from(td.to_string().len()).unwrap_or(u64::MAX),
        td,
        anonymous: false,
        created: 1_000,
        modified: 1_000,
        expires,
        ttl_ms: None,
        owner: owner.map(str::to_owned),
        client: client.map(str::to_owned),
        revision: 0,
    }
}

fn done(what: &str, outcome: Outcome) -> u64 {
    match outcome {
        Outcome::Done(event) => event,
        other => panic!("{what}: a write whose expectation holds must be done, found {other:?}"),
    }
}

/// Checks the [`DirectoryStore`] contract on an empty store: writes with their
/// expectations, conflicts that write nothing, revisions that are event ids, strictly
/// increasing event ids, event retention, code-point order and paging of unexpired
/// entries, counts by holder, expiry, removal, and capability keys.
///
/// # Panics
/// When the backend breaks a rule, with a message naming it.
pub fn directory_store(store: &dyn DirectoryStore) {
    let action = |name: &str| CapabilityKey::new(CapabilityKind::Action, name);
    let retention = 4;
    // Code-point order: "Z" (U+005A) < "a" (U+0061) < "é" (U+00E9) < "😀" (U+1F600).
    let ids = ["urn:a", "urn:Z", "urn:😀", "urn:é"];
    let mut last = 0;
    for (n, id) in ids.iter().enumerate() {
        let owner = (n % 2 == 0).then_some("did:wba:conformance.example:alice");
        let expires = (n == 3).then_some(5_000);
        let e = entry(id, owner, Some("127.0.0.2"), expires);
        let keys = if n < 2 {
            vec![action("lamp"), action(&format!("only{n}"))]
        } else {
            vec![action("lamp")]
        };
        let event = done(
            "create",
            ok(
                "create",
                store.write(&Write::new(
                    &e,
                    &keys,
                    Expect::Absent,
                    EventKind::Created,
                    Some(&e.td),
                    retention,
                )),
            ),
        );
        assert!(
            event > last,
            "event ids must strictly increase ({event} after {last})"
        );
        last = event;
        let held = ok("read", store.entry(id))
            .unwrap_or_else(|| panic!("`{id}` written must be read back"));
        assert_eq!(
            held.revision, event,
            "an entry's revision is the id of its last write's event"
        );
        assert_eq!(
            (&held.td, held.owner.as_deref(), held.expires),
            (&e.td, owner, expires),
            "an entry reads back as written"
        );
    }
    let again = entry("urn:a", None, None, None);
    assert_eq!(
        ok(
            "create again",
            store.write(&Write::new(
                &again,
                &[],
                Expect::Absent,
                EventKind::Created,
                None,
                retention
            ))
        ),
        Outcome::Conflict,
        "creating an id held must conflict"
    );
    assert_eq!(
        ok(
            "stale",
            store.write(&Write::new(
                &again,
                &[],
                Expect::Revision(last + 100),
                EventKind::Updated,
                None,
                retention
            ))
        ),
        Outcome::Conflict,
        "a write at a stale revision must conflict"
    );
    assert_eq!(
        ok("read", store.entry("urn:a")).map(|e| e.title()),
        Some(Some("thing urn:a".to_owned())),
        "a conflict writes nothing"
    );

    let page = ok("page", store.page(0, 10, 1_000));
    let listed: Vec<&str> = page.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        listed,
        ["urn:Z", "urn:a", "urn:é", "urn:😀"],
        "pages are in code-point order of id"
    );
    assert_eq!(
        (page.total, page.revision),
        (4, last),
        "a page carries the total and the latest event id"
    );
    let later = ok("page", store.page(1, 2, 6_000));
    let listed: Vec<&str> = later.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        listed,
        ["urn:a", "urn:😀"],
        "offset and limit page unexpired entries"
    );
    assert_eq!(later.total, 3, "the total counts unexpired entries");
    let scanned = |after: Option<&str>, limit: u64, now: i64| -> Vec<String> {
        ok("scan", store.scan(after, limit, now))
            .into_iter()
            .map(|e| e.id)
            .collect()
    };
    assert_eq!(
        scanned(None, 10, 1_000),
        ["urn:Z", "urn:a", "urn:é", "urn:😀"],
        "a scan walks unexpired entries in code-point order of id"
    );
    assert_eq!(
        scanned(Some("urn:Z"), 2, 6_000),
        ["urn:a", "urn:😀"],
        "a scan goes on after the id given, within its limit, without expired entries"
    );
    assert_eq!(
        scanned(Some("urn:b"), 10, 1_000),
        ["urn:é", "urn:😀"],
        "a scan may go on after an id no longer held"
    );

    assert_eq!(
        ok(
            "count",
            store.count(Some(Holder::Owner("did:wba:conformance.example:alice")))
        ),
        (4, 2),
        "counts by owner"
    );
    assert_eq!(
        ok("count", store.count(Some(Holder::Client("127.0.0.2")))),
        (4, 4),
        "counts by client, entries with an owner or without"
    );
    let fresh = entry(
        "urn:over-quota",
        Some("did:wba:conformance.example:new"),
        Some("127.0.0.2"),
        None,
    );
    let over = Write::new(
        &fresh,
        &[],
        Expect::Absent,
        EventKind::Created,
        None,
        retention,
    )
    .admitting(
        Admission::new(
            u64::MAX,
            Some(Holder::Owner("did:wba:conformance.example:new")),
            4,
        )
        .also(Some(Holder::Client("127.0.0.2"))),
    );
    assert_eq!(
        ok("write over the second holder's quota", store.write(&over)),
        Outcome::OverQuota,
        "a write counts against both holders of its admission"
    );
    assert_eq!(
        ok("entry", store.entry("urn:over-quota")),
        None,
        "a refused write writes nothing"
    );
    assert_eq!(
        ok("expired", store.expired(6_000, 10)),
        vec![("urn:é".to_owned(), last)],
        "expired entries with their revisions"
    );
    assert!(
        ok("expired", store.expired(4_999, 10)).is_empty(),
        "nothing expires early"
    );

    let both = ok(
        "find",
        store.find(&[action("lamp"), action("only0")], 1_000, 10),
    );
    assert_eq!(
        both,
        ["urn:a"],
        "find answers the entries holding every key"
    );
    let all = ok("find", store.find(&[action("lamp")], 6_000, 10));
    assert_eq!(
        all,
        ["urn:Z", "urn:a", "urn:😀"],
        "find answers unexpired entries in code-point order"
    );
    assert_eq!(
        ok("find", store.find(&[action("lamp")], 1_000, 2)).len(),
        2,
        "find answers at most `limit`"
    );

    let update = entry("urn:Z", None, None, None);
    let revision = ok("read", store.entry("urn:Z")).map_or(0, |e| e.revision);
    let event = done(
        "update",
        ok(
            "update",
            store.write(&Write::new(
                &update,
                &[action("other")],
                Expect::Revision(revision),
                EventKind::Updated,
                None,
                retention,
            )),
        ),
    );
    assert!(event > last, "event ids must strictly increase");
    last = event;
    assert!(
        ok("find", store.find(&[action("only1")], 1_000, 10)).is_empty(),
        "a write replaces the entry's keys"
    );
    assert_eq!(
        ok("find", store.find(&[action("other")], 1_000, 10)),
        ["urn:Z"],
        "a write indexes its keys"
    );

    assert_eq!(
        ok(
            "remove stale",
            store.remove(&Removal::new("urn:Z", revision, 7_000, retention))
        ),
        Outcome::Conflict,
        "a removal at a stale revision must conflict"
    );
    let event = done(
        "remove",
        ok(
            "remove",
            store.remove(&Removal::new("urn:Z", last, 7_000, retention)),
        ),
    );
    assert!(event > last, "event ids must strictly increase");
    last = event;
    assert!(
        ok("read", store.entry("urn:Z")).is_none(),
        "a removed entry is gone"
    );
    assert!(
        ok("find", store.find(&[action("other")], 1_000, 10)).is_empty(),
        "a removal drops the entry's keys"
    );

    let held = ok("events", store.events_after(0, 100));
    assert_eq!(held.latest, last, "the latest event id");
    assert_eq!(
        held.events.len(),
        retention,
        "at most `event_retention` events are kept"
    );
    assert_eq!(
        held.oldest,
        held.events.first().map(|e| e.id),
        "`oldest` is the oldest event kept"
    );
    let kinds: Vec<(EventKind, &str)> = held
        .events
        .iter()
        .map(|e| (e.kind, e.thing.as_str()))
        .collect();
    assert_eq!(
        kinds[2..],
        [(EventKind::Updated, "urn:Z"), (EventKind::Deleted, "urn:Z")],
        "events record each write's kind and thing"
    );
    assert!(
        held.events.windows(2).all(|pair| pair[0].id < pair[1].id),
        "events come oldest first"
    );
    let tail = ok("events", store.events_after(last - 1, 100));
    assert_eq!(
        tail.events.iter().map(|e| e.id).collect::<Vec<_>>(),
        [last],
        "events after an id"
    );
    assert_eq!(
        ok("events", store.events_after(0, 1)).events.len(),
        1,
        "at most `max` events"
    );
    let mut asked: Vec<String> = ok("page", store.page(0, 100, 0))
        .entries
        .into_iter()
        .map(|entry| entry.id)
        .rev()
        .collect();
    asked.insert(1, "urn:never-registered".to_owned());
    let read: Vec<String> = ok("entries", store.entries(&asked))
        .into_iter()
        .map(|entry| entry.id)
        .collect();
    asked.remove(1);
    assert_eq!(read, asked, "entries: those held, in the order asked");
    admission_is_atomic(store, retention);
}

/// Racing writers: of `RACERS` new registrations with room for one, exactly one is done
/// and the others refused, by holder and in all; then the winners go again.
fn admission_is_atomic(store: &dyn DirectoryStore, retention: usize) {
    const RACERS: usize = 8;
    let client = "127.0.0.9";
    let race = |prefix: &str, admission: Admission<'_>| -> Vec<(String, Outcome)> {
        let start = std::sync::Barrier::new(RACERS);
        std::thread::scope(|scope| {
            let runners: Vec<_> = (0..RACERS)
                .map(|n| {
                    let start = &start;
                    scope.spawn(move || {
                        let id = format!("urn:race:{prefix}:{n}");
                        let e = entry(&id, None, Some(client), None);
                        let write = Write::new(
                            &e,
                            &[],
                            Expect::Absent,
                            EventKind::Created,
                            None,
                            retention,
                        )
                        .admitting(admission);
                        start.wait();
                        (id, ok("racing write", store.write(&write)))
                    })
                })
                .collect();
            runners
                .into_iter()
                .map(|runner| runner.join().unwrap_or_else(|_| panic!("a racer panicked")))
                .collect()
        })
    };
    let winners = |outcomes: &[(String, Outcome)], refusal: Outcome, what: &str| {
        let done: Vec<(String, u64)> = outcomes
            .iter()
            .filter_map(|(id, outcome)| match outcome {
                Outcome::Done(revision) => Some((id.clone(), *revision)),
                _ => None,
            })
            .collect();
        assert_eq!(
            done.len(),
            1,
            "{what}: exactly one racer with room for one is done"
        );
        assert!(
            outcomes
                .iter()
                .all(|(_, outcome)| matches!(outcome, Outcome::Done(_)) || *outcome == refusal),
            "{what}: the others are refused with {refusal:?}: {outcomes:?}"
        );
        for (id, outcome) in outcomes {
            if !matches!(outcome, Outcome::Done(_)) {
                assert_eq!(
                    ok("entry", store.entry(id)),
                    None,
                    "{what}: a refused write writes nothing"
                );
            }
        }
        done
    };
    let holder = Some(Holder::Client(client));
    let by_holder = race("quota", Admission::new(u64::MAX, holder, 1));
    let mut done = winners(&by_holder, Outcome::OverQuota, "per-holder bound");
    let (total, _) = ok("count", store.count(None));
    let in_all = race("full", Admission::new(total + 1, None, 0));
    done.extend(winners(&in_all, Outcome::Full, "bound in all"));
    for (id, revision) in done {
        let removal = Removal::new(&id, revision, 9_000, retention);
        assert!(matches!(
            ok("remove", store.remove(&removal)),
            Outcome::Done(_)
        ));
    }
}

impl Entry {
    fn title(&self) -> Option<String> {
        self.td
            .get("title")
            .and_then(|title| title.as_str())
            .map(str::to_owned)
    }
}
