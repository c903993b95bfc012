//! Negotiation transcripts: who, which role, when, how it ended, and every frame in order.

use std::fmt;
use std::num::ParseIntError;
use std::str::FromStr;
use std::time::SystemTime;

use concord_proto::{Frame, ProtocolHash, ProtocolType, Role};
use rusqlite::{params, OptionalExtension, Row, TransactionBehavior};

use crate::column::{self, ColumnError};
use crate::error::StoreError;
use crate::store::Store;
use crate::time::to_millis;

const TABLE: &str = "transcripts";
const FRAMES_TABLE: &str = "transcript_frames";

/// The id of a negotiation transcript (never reused, even after pruning).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TranscriptId(i64);

impl TranscriptId {
    /// The id as a number.
    pub fn get(self) -> i64 {
        self.0
    }
}

impl From<i64> for TranscriptId {
    fn from(id: i64) -> Self {
        Self(id)
    }
}

impl fmt::Display for TranscriptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for TranscriptId {
    type Err = ParseIntError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.parse().map(Self)
    }
}

/// Which way a frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// We sent it.
    Sent,
    /// The peer sent it.
    Received,
}

impl Direction {
    /// `sent` or `received`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::Received => "received",
        }
    }
}

/// What a frame carried: the hello (a JSON text frame) or a protocol type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// `sourceHello` / `destinationHello`.
    Hello,
    /// A meta-protocol message (PT 0).
    Meta,
    /// An application message (PT 1).
    Application,
    /// A natural-language message (PT 2).
    NaturalLanguage,
    /// A verification-protocol message (PT 3).
    Verification,
}

impl FrameKind {
    /// `hello`, or the protocol type's name (`meta`, `application`, `natural-language`,
    /// `verification`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Hello => "hello",
            Self::Meta => ProtocolType::Meta.name(),
            Self::Application => ProtocolType::Application.name(),
            Self::NaturalLanguage => ProtocolType::NaturalLanguage.name(),
            Self::Verification => ProtocolType::Verification.name(),
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [
            Self::Hello,
            Self::Meta,
            Self::Application,
            Self::NaturalLanguage,
            Self::Verification,
        ]
        .into_iter()
        .find(|kind| kind.name() == name)
    }
}

impl From<ProtocolType> for FrameKind {
    fn from(protocol_type: ProtocolType) -> Self {
        match protocol_type {
            ProtocolType::Meta => Self::Meta,
            ProtocolType::Application => Self::Application,
            ProtocolType::NaturalLanguage => Self::NaturalLanguage,
            ProtocolType::Verification => Self::Verification,
        }
    }
}

/// What is kept of a frame's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameContent {
    /// The text of a hello, meta or natural-language frame.
    Text(String),
    /// Only the length of an application or verification frame's data.
    Binary {
        /// Length of the protocol data in bytes (header byte excluded).
        len: u64,
    },
}

/// One frame of a transcript.
///
/// ```
/// use std::time::SystemTime;
/// use concord_proto::{Frame, ProtocolType};
/// use concord_store::{Direction, FrameContent, FrameKind, FrameRecord};
///
/// let bytes = Frame::encode(ProtocolType::Application, br#"{"productId":"P1"}"#);
/// let frame = Frame::decode(&bytes, 1 << 20)?;
/// let record = FrameRecord::from_frame(Direction::Sent, &frame, SystemTime::now());
/// assert_eq!(record.kind, FrameKind::Application);
/// assert_eq!(record.content, FrameContent::Binary { len: 18 });
/// # Ok::<(), concord_proto::FrameError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FrameRecord {
    /// Which way it went.
    pub direction: Direction,
    /// What it carried.
    pub kind: FrameKind,
    /// Its text, or its data length.
    pub content: FrameContent,
    /// When it was sent or received (stored to the millisecond).
    pub at: SystemTime,
}

impl FrameRecord {
    /// A hello frame with its JSON text.
    pub fn hello(direction: Direction, json: impl Into<String>, at: SystemTime) -> Self {
        Self {
            direction,
            kind: FrameKind::Hello,
            content: FrameContent::Text(json.into()),
            at,
        }
    }

    /// A decoded frame: meta and natural-language frames keep their text (their length
    /// if it is not UTF-8), application and verification frames their length.
    pub fn from_frame(direction: Direction, frame: &Frame<'_>, at: SystemTime) -> Self {
        let binary = || FrameContent::Binary {
            len: u64::try_from(frame.data.len()).unwrap_or(u64::MAX),
        };
        let content = match frame.protocol_type {
            ProtocolType::Meta | ProtocolType::NaturalLanguage => std::str::from_utf8(frame.data)
                .map_or_else(|_| binary(), |text| FrameContent::Text(text.to_owned())),
            ProtocolType::Application | ProtocolType::Verification => binary(),
        };
        Self {
            direction,
            kind: frame.protocol_type.into(),
            content,
            at,
        }
    }

    fn read(row: &Row<'_>) -> Result<Self, ColumnError> {
        let direction = match column::text(row, "direction")?.as_str() {
            "sent" => Direction::Sent,
            "received" => Direction::Received,
            other => {
                return Err(ColumnError::new(
                    "direction",
                    format!("unknown direction {other:?}"),
                ))
            }
        };
        let kind_name = column::text(row, "kind")?;
        let kind = FrameKind::parse(&kind_name)
            .ok_or_else(|| ColumnError::new("kind", format!("unknown frame kind {kind_name:?}")))?;
        let content = match (
            column::opt_text(row, "text")?,
            column::opt_int(row, "byte_len")?,
        ) {
            (Some(text), None) => FrameContent::Text(text),
            (None, Some(len)) => FrameContent::Binary {
                len: u64::try_from(len)
                    .map_err(|_| ColumnError::new("byte_len", format!("negative length {len}")))?,
            },
            _ => {
                return Err(ColumnError::new(
                    "text",
                    "a frame needs exactly one of text and byte_len",
                ))
            }
        };
        Ok(Self {
            direction,
            kind,
            content,
            at: column::time(row, "at_ms")?,
        })
    }
}

/// How a negotiation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Both sides agreed on the protocol with this hash.
    Agreed(ProtocolHash),
    /// A side rejected the negotiation, for this reason.
    Rejected(String),
    /// The session failed (timeout, protocol violation, disconnect, code error…).
    Failed(String),
    /// The process that recorded it ended (`kill -9`, a crash, power loss) before the
    /// session did: closed by [`Store::claim_recording`] when a node
    /// started next.
    ///
    /// Stored as a `failed` outcome with the detail [`Outcome::INTERRUPTED_DETAIL`], so
    /// that builds which do not know this variant read it as [`Outcome::Failed`].
    Interrupted,
}

impl Outcome {
    /// The detail an [`Outcome::Interrupted`] is stored with (its outcome column says
    /// `failed`).
    pub const INTERRUPTED_DETAIL: &'static str =
        "interrupted: the process recording it ended before the session did";

    /// `agreed`, `rejected`, `failed` or `interrupted`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Agreed(_) => "agreed",
            Self::Rejected(_) => "rejected",
            Self::Failed(_) => "failed",
            Self::Interrupted => "interrupted",
        }
    }

    /// The hash agreed, the reason for a rejection or failure, or
    /// [`Outcome::INTERRUPTED_DETAIL`].
    pub fn detail(&self) -> String {
        self.parts().1
    }

    pub(crate) fn parts(&self) -> (&'static str, String) {
        match self {
            Self::Agreed(hash) => ("agreed", hash.to_string()),
            Self::Rejected(reason) => ("rejected", reason.clone()),
            Self::Failed(error) => ("failed", error.clone()),
            Self::Interrupted => ("failed", Self::INTERRUPTED_DETAIL.to_owned()),
        }
    }

    fn read(row: &Row<'_>) -> Result<Option<Self>, ColumnError> {
        let Some(name) = column::opt_text(row, "outcome")? else {
            return Ok(None);
        };
        let detail = column::text(row, "detail")?;
        match name.as_str() {
            "agreed" => detail
                .parse()
                .map(|hash| Some(Self::Agreed(hash)))
                .map_err(|error| ColumnError::new("detail", format!("{detail:?}: {error}"))),
            "rejected" => Ok(Some(Self::Rejected(detail))),
            "failed" if detail == Self::INTERRUPTED_DETAIL => Ok(Some(Self::Interrupted)),
            "failed" => Ok(Some(Self::Failed(detail))),
            other => Err(ColumnError::new(
                "outcome",
                format!("unknown outcome {other:?}"),
            )),
        }
    }
}

/// A transcript without its frames, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TranscriptSummary {
    /// Its id.
    pub id: TranscriptId,
    /// The peer (description URL or agent id).
    pub peer: String,
    /// The role we played.
    pub role: Role,
    /// When the negotiation started.
    pub started: SystemTime,
    /// When it finished; `None` while running (or if the node died during it).
    pub finished: Option<SystemTime>,
    /// How it ended; `None` until finished.
    pub outcome: Option<Outcome>,
    /// How many frames were recorded.
    pub frame_count: u64,
    /// The size of the recorded frames: the UTF-8 bytes of text frames plus the data
    /// length of application and verification frames.
    pub bytes: u64,
}

/// The columns a [`TranscriptSummary`] is read from, `bytes` computed from its frames.
const SUMMARY_COLUMNS: &str =
    "t.*, (SELECT coalesce(sum(coalesce(length(CAST(f.text AS BLOB)), f.byte_len)), 0)
            FROM transcript_frames f WHERE f.transcript_id = t.id) AS bytes";

impl TranscriptSummary {
    fn read(row: &Row<'_>) -> Result<Self, ColumnError> {
        let role = match column::text(row, "role")?.as_str() {
            "requester" => Role::Requester,
            "provider" => Role::Provider,
            other => return Err(ColumnError::new("role", format!("unknown role {other:?}"))),
        };
        Ok(Self {
            id: TranscriptId(column::int(row, "id")?),
            peer: column::text(row, "peer")?,
            role,
            started: column::time(row, "started_ms")?,
            finished: column::opt_time(row, "finished_ms")?,
            outcome: Outcome::read(row)?,
            frame_count: column::count(row, "frame_count")?,
            bytes: column::count(row, "bytes")?,
        })
    }
}

/// A whole transcript: the summary and every frame in order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transcript {
    /// Who, which role, when, how it ended.
    pub summary: TranscriptSummary,
    /// The frames in the order they were appended.
    pub frames: Vec<FrameRecord>,
}

impl Store {
    /// Starts the transcript of a negotiation with `peer` in which we play `role`.
    pub fn begin_transcript(
        &self,
        peer: &str,
        role: Role,
        started: SystemTime,
    ) -> Result<TranscriptId, StoreError> {
        let connection = self.connection();
        connection
            .prepare_cached("INSERT INTO transcripts (peer, role, started_ms) VALUES (?1, ?2, ?3)")
            .and_then(|mut statement| {
                statement.execute(params![peer, role.name(), to_millis(started)])
            })
            .map_err(self.sqlite("begin transcript"))?;
        Ok(TranscriptId(connection.last_insert_rowid()))
    }

    /// Appends a frame to an unfinished transcript, in one transaction with the
    /// transcript's frame count; returns the frame's position (0-based).
    pub fn append_frame(&self, id: TranscriptId, frame: &FrameRecord) -> Result<u64, StoreError> {
        let sql = self.sqlite("append frame");
        let mut connection = self.connection();
        let tx = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&sql)?;
        let state: Option<(bool, i64)> = tx
            .prepare_cached(
                "SELECT finished_ms IS NOT NULL, frame_count FROM transcripts WHERE id = ?1",
            )
            .and_then(|mut statement| {
                statement
                    .query_row([id.0], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()
            })
            .map_err(&sql)?;
        let seq = match state {
            None => return Err(StoreError::UnknownTranscript { id }),
            Some((true, _)) => return Err(StoreError::TranscriptFinished { id }),
            Some((false, seq)) => seq,
        };
        let (text, byte_len) = match &frame.content {
            FrameContent::Text(text) => (Some(text.as_str()), None),
            FrameContent::Binary { len } => (None, Some(i64::try_from(*len).unwrap_or(i64::MAX))),
        };
        tx.prepare_cached(
            "INSERT INTO transcript_frames
                 (transcript_id, seq, direction, kind, text, byte_len, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .and_then(|mut statement| {
            statement.execute(params![
                id.0,
                seq,
                frame.direction.name(),
                frame.kind.name(),
                text,
                byte_len,
                to_millis(frame.at),
            ])
        })
        .map_err(&sql)?;
        tx.prepare_cached("UPDATE transcripts SET frame_count = frame_count + 1 WHERE id = ?1")
            .and_then(|mut statement| statement.execute([id.0]))
            .map_err(&sql)?;
        tx.commit().map_err(&sql)?;
        column::count_value("frame_count", seq).map_err(self.corrupt_row(TABLE, &id))
    }

    /// Records how the negotiation ended. A transcript is finished once.
    pub fn finish_transcript(
        &self,
        id: TranscriptId,
        outcome: &Outcome,
        finished: SystemTime,
    ) -> Result<(), StoreError> {
        let sql = self.sqlite("finish transcript");
        let (name, detail) = outcome.parts();
        let mut connection = self.connection();
        let tx = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&sql)?;
        let updated = tx
            .prepare_cached(
                "UPDATE transcripts SET finished_ms = ?1, outcome = ?2, detail = ?3
                 WHERE id = ?4 AND finished_ms IS NULL",
            )
            .and_then(|mut statement| {
                statement.execute(params![to_millis(finished), name, detail, id.0])
            })
            .map_err(&sql)?;
        if updated == 0 {
            let exists = tx
                .query_row(
                    "SELECT 1 FROM transcripts WHERE id = ?1",
                    [id.0],
                    |_| Ok(()),
                )
                .optional()
                .map_err(&sql)?
                .is_some();
            return Err(if exists {
                StoreError::TranscriptFinished { id }
            } else {
                StoreError::UnknownTranscript { id }
            });
        }
        tx.commit().map_err(&sql)
    }

    /// The newest `limit` transcripts (by start time), without their frames.
    pub fn list_transcripts(&self, limit: usize) -> Result<Vec<TranscriptSummary>, StoreError> {
        let sql = self.sqlite("list transcripts");
        let connection = self.connection();
        let mut statement = connection
            .prepare_cached(&format!(
                "SELECT {SUMMARY_COLUMNS} FROM transcripts t
                 ORDER BY t.started_ms DESC, t.id DESC LIMIT ?1"
            ))
            .map_err(&sql)?;
        let mut rows = statement
            .query([i64::try_from(limit).unwrap_or(i64::MAX)])
            .map_err(&sql)?;
        let mut summaries = Vec::new();
        while let Some(row) = rows.next().map_err(&sql)? {
            let id = column::int(row, "id").map_err(self.corrupt_row(TABLE, &"(unreadable id)"))?;
            summaries.push(TranscriptSummary::read(row).map_err(self.corrupt_row(TABLE, &id))?);
        }
        Ok(summaries)
    }

    /// The transcript `id` with all its frames, in order.
    pub fn transcript(&self, id: TranscriptId) -> Result<Option<Transcript>, StoreError> {
        let sql = self.sqlite("read transcript");
        let mut connection = self.connection();
        // One read transaction: the summary and the frames are one snapshot.
        let tx = connection.transaction().map_err(&sql)?;
        let summary = {
            let mut statement = tx
                .prepare_cached(&format!(
                    "SELECT {SUMMARY_COLUMNS} FROM transcripts t WHERE t.id = ?1"
                ))
                .map_err(&sql)?;
            let mut rows = statement.query([id.0]).map_err(&sql)?;
            let Some(row) = rows.next().map_err(&sql)? else {
                return Ok(None);
            };
            TranscriptSummary::read(row).map_err(self.corrupt_row(TABLE, &id))?
        };
        let mut frames = Vec::new();
        {
            let mut statement = tx
                .prepare_cached(
                    "SELECT * FROM transcript_frames WHERE transcript_id = ?1 ORDER BY seq",
                )
                .map_err(&sql)?;
            let mut rows = statement.query([id.0]).map_err(&sql)?;
            while let Some(row) = rows.next().map_err(&sql)? {
                let key = format!("{id}/{}", frames.len());
                frames.push(FrameRecord::read(row).map_err(self.corrupt_row(FRAMES_TABLE, &key))?);
            }
        }
        tx.finish().map_err(&sql)?;
        Ok(Some(Transcript { summary, frames }))
    }

    /// Deletes every transcript (and its frames) started before `before`, finished or not;
    /// returns how many. [`Store::prune_transcripts_by`] keeps those still being recorded.
    pub fn prune_transcripts(&self, before: SystemTime) -> Result<u64, StoreError> {
        let connection = self.connection();
        let deleted = connection
            .prepare_cached("DELETE FROM transcripts WHERE started_ms < ?1")
            .and_then(|mut statement| statement.execute([to_millis(before)]))
            .map_err(self.sqlite("prune transcripts"))?;
        Ok(u64::try_from(deleted).unwrap_or(u64::MAX))
    }
}
