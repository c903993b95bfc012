//! The change events of a directory (`thing_created`, `thing_updated`, `thing_deleted`).

use serde_json::{Map, Value};

use crate::store::UnixMillis;

/// What happened to a TD.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// Registered (created by `POST` or `PUT`).
    Created,
    /// Replaced by `PUT` or changed by `PATCH`.
    Updated,
    /// Deleted, or purged when it expired.
    Deleted,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [EventKind; 3] = [EventKind::Created, EventKind::Updated, EventKind::Deleted];

    /// The SSE event type: `thing_created`, `thing_updated` or `thing_deleted`.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Created => "thing_created",
            EventKind::Updated => "thing_updated",
            EventKind::Deleted => "thing_deleted",
        }
    }

    /// The kind named `name` (as [`name`](Self::name) writes it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One change, as the store recorded it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ThingEvent {
    /// Its id, assigned by the store: strictly increasing.
    pub id: u64,
    /// What happened.
    pub kind: EventKind,
    /// The TD's id.
    pub thing: String,
    /// For `thing_created` the TD (enriched); for `thing_updated` an RFC 7396 merge patch:
    /// after a `PUT` the one from the old TD to the new ([`merge_diff`](crate::merge_diff):
    /// removed members are `null`; a `null` value inside the new TD cannot be said by a
    /// merge patch and reads as a removal), after a `PATCH` the client's patch as sent;
    /// `None` for `thing_deleted`.
    pub diff: Option<Value>,
    /// When.
    pub at: UnixMillis,
}

impl ThingEvent {
    /// An event.
    pub fn new(
        id: u64,
        kind: EventKind,
        thing: String,
        diff: Option<Value>,
        at: UnixMillis,
    ) -> Self {
        Self {
            id,
            kind,
            thing,
            diff,
            at,
        }
    }

    /// The event's SSE `data` object: `{"id": …}` (tdd-notification-data-td-id) or, with
    /// `diff`, the TD created or the patch with the TD's `id` in it
    /// (tdd-notification-data-create-full, tdd-notification-data-update-id); a
    /// `thing_deleted` event never carries more than its id
    /// (tdd-notification-data-delete-diff).
    pub fn data(&self, diff: bool) -> Value {
        let mut data = match (&self.diff, diff, self.kind) {
            (Some(Value::Object(object)), true, EventKind::Created | EventKind::Updated) => {
                object.clone()
            }
            _ => Map::new(),
        };
        data.insert("id".to_owned(), Value::String(self.thing.clone()));
        Value::Object(data)
    }
}
