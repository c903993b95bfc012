//! A Thing Description Directory's state in the store's SQLite file: [`Store`] implements
//! [`DirectoryStore`] (`concord-directory`) over its own tables (`directory_things`, the
//! capability index `directory_keys`, `directory_events`). Each write is one `IMMEDIATE`
//! transaction (entry, keys, event, retention), committed to the WAL before it returns.

use concord_directory::{
    CapabilityKey, DirectoryStore, Entry, EventKind, EventsAfter, Expect, Holder, Outcome, Page,
    Removal, StoreFailure, ThingEvent, UnixMillis, Write,
};
use rusqlite::{params, OptionalExtension, Row, Transaction, TransactionBehavior};
use serde_json::Value;

use crate::store::Store;

/// An [`Entry`] by id, its columns in [`entry_of`]'s order.
const ENTRY_BY_ID: &str = "SELECT id, td, anonymous, created_ms, modified_ms, expires_ms, \
     ttl_ms, owner, client, size, revision FROM directory_things WHERE id = ?1";

/// A row that cannot be read back.
struct BadRow {
    id: String,
    reason: String,
}

fn entry_of(row: &Row<'_>) -> rusqlite::Result<Result<Entry, BadRow>> {
    let id: String = row.get(0)?;
    let text: String = row.get(1)?;
    let td = match serde_json::from_str::<Value>(&text) {
        Ok(td) => td,
        Err(error) => {
            return Ok(Err(BadRow {
                id,
                reason: format!("its TD is not JSON: {error}"),
            }))
        }
    };
    let counts = (
        row.get::<_, i64>(9)?,
        row.get::<_, i64>(10)?,
        row.get::<_, Option<i64>>(6)?,
    );
    let (Ok(size), Ok(revision), Ok(ttl_ms)) = (
        u64::try_from(counts.0),
        u64::try_from(counts.1),
        counts.2.map(u64::try_from).transpose(),
    ) else {
        return Ok(Err(BadRow {
            id,
            reason: "a negative size, revision or ttl".to_owned(),
        }));
    };
    let mut entry = Entry::sized(id, td, size);
    entry.anonymous = row.get::<_, i64>(2)? != 0;
    entry.created = row.get(3)?;
    entry.modified = row.get(4)?;
    entry.expires = row.get(5)?;
    entry.ttl_ms = ttl_ms;
    entry.owner = row.get(7)?;
    entry.client = row.get(8)?;
    entry.revision = revision;
    Ok(Ok(entry))
}

fn wide(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn backend(operation: &'static str) -> impl Fn(rusqlite::Error) -> StoreFailure {
    move |cause| StoreFailure::Backend {
        operation,
        message: cause.to_string(),
    }
}

fn corrupt(bad: BadRow) -> StoreFailure {
    StoreFailure::Corrupt {
        id: bad.id,
        reason: bad.reason,
    }
}

/// The revision of `id` held, if any.
fn revision(tx: &Transaction<'_>, id: &str) -> rusqlite::Result<Option<i64>> {
    tx.prepare_cached("SELECT revision FROM directory_things WHERE id = ?1")?
        .query_row([id], |row| row.get(0))
        .optional()
}

fn expected(held: Option<i64>, expect: Expect) -> bool {
    match (held, expect) {
        (None, Expect::Absent) => true,
        (Some(held), Expect::Revision(revision)) => held == wide(revision),
        _ => false,
    }
}

/// Records an event and drops the oldest beyond `retention`; its id.
fn record(
    tx: &Transaction<'_>,
    kind: EventKind,
    thing: &str,
    diff: Option<&Value>,
    at: UnixMillis,
    retention: usize,
) -> rusqlite::Result<i64> {
    let diff = diff.map(Value::to_string);
    tx.prepare_cached(
        "INSERT INTO directory_events (kind, thing, diff, at_ms) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![kind.name(), thing, diff, at])?;
    let id = tx.last_insert_rowid();
    let keep = i64::try_from(retention).unwrap_or(i64::MAX);
    tx.prepare_cached("DELETE FROM directory_events WHERE id <= ?1")?
        .execute([id.saturating_sub(keep)])?;
    Ok(id)
}

impl DirectoryStore for Store {
    fn entry(&self, id: &str) -> Result<Option<Entry>, StoreFailure> {
        read_entry(&self.connection(), id)
            .map_err(backend("read a TD"))?
            .transpose()
            .map_err(corrupt)
    }

    fn entries(&self, ids: &[String]) -> Result<Vec<Entry>, StoreFailure> {
        read_entries(&self.connection(), ids).map_err(backend("read TDs"))?
    }

    fn write(&self, write: &Write<'_>) -> Result<Outcome, StoreFailure> {
        let fail = backend("write a TD");
        let mut connection = self.connection();
        let tx = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&fail)?;
        let entry = write.entry;
        if !expected(revision(&tx, &entry.id).map_err(&fail)?, write.expect) {
            return Ok(Outcome::Conflict);
        }
        if let Some(admission) = write.admission {
            // Counted inside this IMMEDIATE transaction: no other writer of the file can
            // change the counts between them and the write.
            let (total, mut held) = counts(&tx, admission.holder).map_err(&fail)?;
            if let Some(also) = admission.also {
                held = held.max(counts(&tx, Some(also)).map_err(&fail)?.1);
            }
            if let Some(refusal) = admission.refusal(total, held) {
                return Ok(refusal);
            }
        }
        let event = record(
            &tx,
            write.kind,
            &entry.id,
            write.diff,
            entry.modified,
            write.event_retention,
        )
        .map_err(&fail)?;
        tx.prepare_cached(
            "INSERT INTO directory_things (id, td, anonymous, created_ms, modified_ms,
                 expires_ms, ttl_ms, owner, client, size, revision)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT (id) DO UPDATE SET td = excluded.td, anonymous = excluded.anonymous,
                 created_ms = excluded.created_ms, modified_ms = excluded.modified_ms,
                 expires_ms = excluded.expires_ms, ttl_ms = excluded.ttl_ms,
                 owner = excluded.owner, client = excluded.client, size = excluded.size,
                 revision = excluded.revision",
        )
        .and_then(|mut statement| {
            statement.execute(params![
                entry.id,
                entry.td.to_string(),
                i64::from(entry.anonymous),
                entry.created,
                entry.modified,
                entry.expires,
                entry.ttl_ms.map(wide),
                entry.owner,
                entry.client,
                wide(entry.size),
                event,
            ])
        })
        .map_err(&fail)?;
        tx.prepare_cached("DELETE FROM directory_keys WHERE id = ?1")
            .and_then(|mut statement| statement.execute([&entry.id]))
            .map_err(&fail)?;
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO directory_keys (kind, value, id) VALUES (?1, ?2, ?3)",
                )
                .map_err(&fail)?;
            for key in write.keys {
                insert
                    .execute(params![key.kind.name(), key.value, entry.id])
                    .map_err(&fail)?;
            }
        }
        tx.commit().map_err(&fail)?;
        Ok(Outcome::Done(u64::try_from(event).unwrap_or(0)))
    }

    fn remove(&self, removal: &Removal<'_>) -> Result<Outcome, StoreFailure> {
        let fail = backend("remove a TD");
        let mut connection = self.connection();
        let tx = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&fail)?;
        let held = revision(&tx, removal.id).map_err(&fail)?;
        if !expected(held, Expect::Revision(removal.expect)) {
            return Ok(Outcome::Conflict);
        }
        tx.prepare_cached("DELETE FROM directory_keys WHERE id = ?1")
            .and_then(|mut statement| statement.execute([removal.id]))
            .map_err(&fail)?;
        tx.prepare_cached("DELETE FROM directory_things WHERE id = ?1")
            .and_then(|mut statement| statement.execute([removal.id]))
            .map_err(&fail)?;
        let event = record(
            &tx,
            EventKind::Deleted,
            removal.id,
            None,
            removal.at,
            removal.event_retention,
        )
        .map_err(&fail)?;
        tx.commit().map_err(&fail)?;
        Ok(Outcome::Done(u64::try_from(event).unwrap_or(0)))
    }

    fn page(&self, offset: u64, limit: u64, now: UnixMillis) -> Result<Page, StoreFailure> {
        let fail = backend("list TDs");
        let connection = self.connection();
        // The page's ids from the covering index (skipping `offset` of them reads no
        // row), then each row by its primary key.
        let ids = connection
            .prepare_cached(
                "SELECT id FROM directory_things INDEXED BY directory_things_live
                 WHERE expires_ms IS NULL OR expires_ms > ?1 ORDER BY id LIMIT ?2 OFFSET ?3",
            )
            .and_then(|mut statement| {
                statement
                    .query_map(params![now, wide(limit), wide(offset)], |row| row.get(0))?
                    .collect::<Result<Vec<String>, _>>()
            })
            .map_err(&fail)?;
        let entries = read_entries(&connection, &ids).map_err(&fail)??;
        let total: i64 = connection
            .prepare_cached(
                "SELECT count(*) FROM directory_things INDEXED BY directory_things_live
                 WHERE expires_ms IS NULL OR expires_ms > ?1",
            )
            .and_then(|mut statement| statement.query_row([now], |row| row.get(0)))
            .map_err(&fail)?;
        let latest = latest_event(&connection).map_err(&fail)?;
        Ok(Page::new(
            entries,
            u64::try_from(total).unwrap_or(0),
            latest,
        ))
    }

    fn scan(
        &self,
        after: Option<&str>,
        limit: u64,
        now: UnixMillis,
    ) -> Result<Vec<Entry>, StoreFailure> {
        let fail = backend("scan TDs");
        let connection = self.connection();
        // The ids from the covering index, from after `after` (the empty string is before
        // every id: ids are never empty), then each row by its primary key, in one read
        // transaction: another process removing one of those rows in between would make
        // the page short, and a short page ends a scan.
        let read = connection.unchecked_transaction().map_err(&fail)?;
        let ids = read
            .prepare_cached(
                "SELECT id FROM directory_things INDEXED BY directory_things_live
                 WHERE id > ?2 AND (expires_ms IS NULL OR expires_ms > ?1) ORDER BY id LIMIT ?3",
            )
            .and_then(|mut statement| {
                statement
                    .query_map(params![now, after.unwrap_or(""), wide(limit)], |row| {
                        row.get(0)
                    })?
                    .collect::<Result<Vec<String>, _>>()
            })
            .map_err(&fail)?;
        let entries = read_entries(&read, &ids).map_err(&fail)?;
        read.finish().map_err(&fail)?;
        entries
    }

    fn count(&self, holder: Option<Holder<'_>>) -> Result<(u64, u64), StoreFailure> {
        counts(&self.connection(), holder).map_err(backend("count TDs"))
    }

    fn expired(&self, now: UnixMillis, max: usize) -> Result<Vec<(String, u64)>, StoreFailure> {
        let fail = backend("read expired TDs");
        let connection = self.connection();
        let mut statement = connection
            .prepare_cached(
                "SELECT id, revision FROM directory_things
                 WHERE expires_ms IS NOT NULL AND expires_ms <= ?1
                 ORDER BY expires_ms, id LIMIT ?2",
            )
            .map_err(&fail)?;
        let rows = statement
            .query_map(
                params![now, i64::try_from(max).unwrap_or(i64::MAX)],
                |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?)),
            )
            .map_err(&fail)?;
        rows.map(|row| row.map(|(id, revision)| (id, u64::try_from(revision).unwrap_or(0))))
            .collect::<Result<Vec<_>, _>>()
            .map_err(&fail)
    }

    fn events_after(&self, after: u64, max: usize) -> Result<EventsAfter, StoreFailure> {
        let fail = backend("read directory events");
        let connection = self.connection();
        let mut statement = connection
            .prepare_cached(
                "SELECT id, kind, thing, diff, at_ms FROM directory_events
                 WHERE id > ?1 ORDER BY id LIMIT ?2",
            )
            .map_err(&fail)?;
        let rows = statement
            .query_map(
                params![wide(after), i64::try_from(max).unwrap_or(i64::MAX)],
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, Option<String>>(3)?,
                        row.get::<_, i64>(4)?,
                    ))
                },
            )
            .map_err(&fail)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(&fail)?;
        let mut events = Vec::with_capacity(rows.len());
        for (id, kind, thing, diff, at) in rows {
            let bad = |reason: String| StoreFailure::Corrupt {
                id: format!("event {id}"),
                reason,
            };
            let kind =
                EventKind::from_name(&kind).ok_or_else(|| bad(format!("unknown kind `{kind}`")))?;
            let diff = diff
                .map(|text| serde_json::from_str::<Value>(&text))
                .transpose()
                .map_err(|error| bad(format!("its diff is not JSON: {error}")))?;
            events.push(ThingEvent::new(
                u64::try_from(id).unwrap_or(0),
                kind,
                thing,
                diff,
                at,
            ));
        }
        let oldest: Option<i64> = connection
            .prepare_cached("SELECT min(id) FROM directory_events")
            .and_then(|mut statement| statement.query_row([], |row| row.get(0)))
            .map_err(&fail)?;
        let latest = latest_event(&connection).map_err(&fail)?;
        Ok(EventsAfter::new(
            events,
            oldest.and_then(|oldest| u64::try_from(oldest).ok()),
            latest,
        ))
    }

    fn find(
        &self,
        keys: &[CapabilityKey],
        now: UnixMillis,
        limit: u64,
    ) -> Result<Vec<String>, StoreFailure> {
        let fail = backend("search capabilities");
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        // One indexed lookup per key, joined on the id: `k0` drives, the others probe.
        let mut sql = String::from("SELECT k0.id FROM directory_keys k0");
        for n in 1..keys.len() {
            sql.push_str(&format!(
                " JOIN directory_keys k{n} ON k{n}.kind = ?{} AND k{n}.value = ?{} AND k{n}.id = k0.id",
                2 * n + 1,
                2 * n + 2
            ));
        }
        let last = 2 * keys.len();
        sql.push_str(&format!(
            " JOIN directory_things t ON t.id = k0.id
              WHERE k0.kind = ?1 AND k0.value = ?2
                AND (t.expires_ms IS NULL OR t.expires_ms > ?{})
              ORDER BY k0.id LIMIT ?{}",
            last + 1,
            last + 2
        ));
        let mut values: Vec<rusqlite::types::Value> = Vec::with_capacity(last + 2);
        for key in keys {
            values.push(key.kind.name().to_owned().into());
            values.push(key.value.clone().into());
        }
        values.push(now.into());
        values.push(wide(limit).into());
        let connection = self.connection();
        let mut statement = connection.prepare_cached(&sql).map_err(&fail)?;
        let ids = statement
            .query_map(rusqlite::params_from_iter(values), |row| row.get(0))
            .map_err(&fail)?
            .collect::<Result<Vec<String>, _>>()
            .map_err(&fail);
        ids
    }
}

/// The entry `id`, if held (`Err` inside: its row cannot be read back).
fn read_entry(
    connection: &rusqlite::Connection,
    id: &str,
) -> rusqlite::Result<Option<Result<Entry, BadRow>>> {
    connection
        .prepare_cached(ENTRY_BY_ID)?
        .query_row([id], entry_of)
        .optional()
}

/// The entries of `ids` held, in their order, by the cached statement of one entry.
fn read_entries(
    connection: &rusqlite::Connection,
    ids: &[String],
) -> rusqlite::Result<Result<Vec<Entry>, StoreFailure>> {
    let mut statement = connection.prepare_cached(ENTRY_BY_ID)?;
    let mut entries = Vec::with_capacity(ids.len());
    for id in ids {
        match statement.query_row([id], entry_of).optional()? {
            Some(Ok(entry)) => entries.push(entry),
            Some(Err(bad)) => return Ok(Err(corrupt(bad))),
            None => {}
        }
    }
    Ok(Ok(entries))
}

/// How many entries are held in all (expired ones not yet removed included), and by
/// `holder`.
fn counts(
    connection: &rusqlite::Connection,
    holder: Option<Holder<'_>>,
) -> rusqlite::Result<(u64, u64)> {
    let total: i64 = connection
        .prepare_cached("SELECT count(*) FROM directory_things")?
        .query_row([], |row| row.get(0))?;
    let held: i64 = match holder {
        None => 0,
        Some(Holder::Owner(did)) => connection
            .prepare_cached("SELECT count(*) FROM directory_things WHERE owner = ?1")?
            .query_row([did], |row| row.get(0))?,
        Some(Holder::Client(client)) => connection
            .prepare_cached(
                "SELECT count(*) FROM directory_things WHERE client = ?1 AND client IS NOT NULL",
            )?
            .query_row([client], |row| row.get(0))?,
        Some(_) => 0,
    };
    Ok((
        u64::try_from(total).unwrap_or(0),
        u64::try_from(held).unwrap_or(0),
    ))
}

/// The id of the latest directory event ever recorded (0 before any).
fn latest_event(connection: &rusqlite::Connection) -> rusqlite::Result<u64> {
    let latest: Option<i64> = connection
        .prepare_cached("SELECT seq FROM sqlite_sequence WHERE name = 'directory_events'")?
        .query_row([], |row| row.get(0))
        .optional()?;
    Ok(latest.and_then(|id| u64::try_from(id).ok()).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use crate::Store;

    #[test]
    fn the_sqlite_store_passes_the_directory_conformance_suite() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        concord_directory::conformance::directory_store(&store);
    }

    #[test]
    fn directory_entries_and_events_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            concord_directory::conformance::directory_store(&store);
        }
        let store = Store::open(dir.path()).unwrap();
        use concord_directory::DirectoryStore;
        let page = store.page(0, 10, 1_000).unwrap();
        assert_eq!(page.total, 3);
        let events = store.events_after(0, 100).unwrap();
        assert_eq!(events.latest, page.revision);
        assert_eq!(events.events.len(), 4);
    }
}
