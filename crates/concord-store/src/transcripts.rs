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
    /// The text of a hello, meta or natural-language frame (its start only, when
    /// [`FrameRecord::cut`] says it was cut).
    Text(String),
    /// Only the length of an application or verification frame's data.
    Binary {
        /// Length of the protocol data in bytes (header byte excluded).
        len: u64,
    },
}

/// What the whole of a text kept cut was: the text was longer than the store keeps
/// ([`TranscriptBounds::text_prefix_bytes`]), and the frame's [`FrameContent::Text`] holds
/// its first bytes (cut at a character boundary).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TextCut {
    /// The whole text's length in bytes.
    pub len: u64,
    /// SHA-256 of the whole text's UTF-8 bytes, 64 lowercase hex digits.
    pub sha256: String,
}

/// `text` itself if it has at most `limit` bytes; else its first `limit` bytes (fewer at
/// a character boundary) and what the whole was. Copies at most `limit` bytes.
fn cut_text(text: &str, limit: usize) -> (String, Option<TextCut>) {
    if text.len() <= limit {
        return (text.to_owned(), None);
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = TextCut {
        len: u64::try_from(text.len()).unwrap_or(u64::MAX),
        sha256: ProtocolHash::of_text(text).to_string(),
    };
    (text[..end].to_owned(), Some(cut))
}

/// How much of a negotiation a transcript keeps ([`Store::set_transcript_bounds`]): a
/// hostile peer's frames cost at most `max_frames × text_prefix_bytes` bytes of text per
/// transcript.
///
/// ```
/// use concord_store::TranscriptBounds;
///
/// let bounds = TranscriptBounds::default();
/// assert_eq!((bounds.text_prefix_bytes, bounds.max_frames), (4096, 512));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TranscriptBounds {
    /// The most bytes of a frame's or hello's text kept (default 4 KiB); a longer text
    /// keeps its prefix, its length and its SHA-256 ([`FrameRecord::cut`]).
    pub text_prefix_bytes: usize,
    /// The most frames kept per transcript (default 512); the frames beyond are counted
    /// ([`TranscriptSummary::frames_not_recorded`]), not stored.
    pub max_frames: u64,
}

impl TranscriptBounds {
    /// Bounds of `text_prefix_bytes` bytes per text and `max_frames` frames per transcript.
    pub fn new(text_prefix_bytes: usize, max_frames: u64) -> Self {
        Self {
            text_prefix_bytes,
            max_frames,
        }
    }
}

impl Default for TranscriptBounds {
    fn default() -> Self {
        Self::new(4096, 512)
    }
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
    /// Set when the text was longer than the store keeps: `content` holds its start, and
    /// this what the whole was.
    pub cut: Option<TextCut>,
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
            cut: None,
            at,
        }
    }

    /// A hello frame keeping at most `limit` bytes of its JSON text (cut at a character
    /// boundary, with [`cut`](Self::cut) saying what the whole was): what a recorder
    /// holds before the store writes it. Copies at most `limit` bytes.
    ///
    /// ```
    /// use std::time::SystemTime;
    /// use concord_store::{Direction, FrameContent, FrameRecord};
    ///
    /// let record = FrameRecord::hello_within(Direction::Received, "ééééé", 5, SystemTime::now());
    /// assert_eq!(record.content, FrameContent::Text("éé".into()));
    /// let cut = record.cut.ok_or("cut")?;
    /// assert_eq!((cut.len, cut.sha256.len()), (10, 64));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hello_within(direction: Direction, json: &str, limit: usize, at: SystemTime) -> Self {
        let (text, cut) = cut_text(json, limit);
        Self {
            direction,
            kind: FrameKind::Hello,
            content: FrameContent::Text(text),
            cut,
            at,
        }
    }

    /// [`from_frame`](Self::from_frame) keeping at most `limit` bytes of text.
    pub fn from_frame_within(
        direction: Direction,
        frame: &Frame<'_>,
        limit: usize,
        at: SystemTime,
    ) -> Self {
        Self::from_frame_with(direction, frame, at, |text| cut_text(text, limit))
    }

    /// A decoded frame: meta and natural-language frames keep their text (their length
    /// if it is not UTF-8), application and verification frames their length.
    pub fn from_frame(direction: Direction, frame: &Frame<'_>, at: SystemTime) -> Self {
        Self::from_frame_with(direction, frame, at, |text| (text.to_owned(), None))
    }

    fn from_frame_with(
        direction: Direction,
        frame: &Frame<'_>,
        at: SystemTime,
        text_content: impl FnOnce(&str) -> (String, Option<TextCut>),
    ) -> Self {
        let binary = || FrameContent::Binary {
            len: u64::try_from(frame.data.len()).unwrap_or(u64::MAX),
        };
        let (content, cut) = match frame.protocol_type {
            ProtocolType::Meta | ProtocolType::NaturalLanguage => {
                match std::str::from_utf8(frame.data) {
                    Ok(text) => {
                        let (text, cut) = text_content(text);
                        (FrameContent::Text(text), cut)
                    }
                    Err(_) => (binary(), None),
                }
            }
            ProtocolType::Application | ProtocolType::Verification => (binary(), None),
        };
        Self {
            direction,
            kind: frame.protocol_type.into(),
            content,
            cut,
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
        let (content, cut) = match (
            column::opt_text(row, "text")?,
            column::opt_int(row, "byte_len")?,
            column::opt_int(row, "full_len")?,
            column::opt_text(row, "sha256")?,
        ) {
            (Some(text), None, None, None) => (FrameContent::Text(text), None),
            (Some(prefix), None, Some(len), Some(sha256)) => {
                let len = u64::try_from(len)
                    .map_err(|_| ColumnError::new("full_len", format!("negative length {len}")))?;
                (FrameContent::Text(prefix), Some(TextCut { len, sha256 }))
            }
            (None, Some(len), None, None) => {
                let len = u64::try_from(len)
                    .map_err(|_| ColumnError::new("byte_len", format!("negative length {len}")))?;
                (FrameContent::Binary { len }, None)
            }
            _ => {
                return Err(ColumnError::new(
                    "text",
                    "a frame needs text, text with full_len and sha256, or byte_len",
                ))
            }
        };
        Ok(Self {
            direction,
            kind,
            content,
            cut,
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

/// The most bytes of a transcript's channel text kept
/// ([`Store::set_transcript_channel`]); a longer text keeps its start.
pub const MAX_CHANNEL_BYTES: usize = 512;

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
    /// How many more frames the session had that were not recorded: beyond
    /// [`TranscriptBounds::max_frames`], or dropped by a recorder that could not keep up.
    pub frames_not_recorded: u64,
    /// The size of the recorded frames as sent: the UTF-8 bytes of text frames (the whole
    /// text, also of the ones kept cut) plus the data length of application and
    /// verification frames.
    pub bytes: u64,
    /// How the session was protected, as the node recorded it
    /// ([`Store::set_transcript_channel`]): e.g.
    /// `Noise_XX_25519_ChaChaPoly_BLAKE2s; peer authenticated as did:wba:…` or
    /// `plain; peer anonymous`. `None` until set, and for transcripts recorded before
    /// schema version 4.
    pub channel: Option<String>,
}

/// The columns a [`TranscriptSummary`] is read from, `bytes` computed from its frames.
const SUMMARY_COLUMNS: &str =
    "t.*, (SELECT coalesce(sum(coalesce(f.full_len, length(CAST(f.text AS BLOB)), f.byte_len)), 0)
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
            frames_not_recorded: column::count(row, "frames_not_recorded")?,
            bytes: column::count(row, "bytes")?,
            channel: column::opt_text(row, "channel")?,
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

    /// Records how the session of transcript `id` is protected (the channel and who the
    /// peer was authenticated as), e.g.
    /// `Noise_XX_25519_ChaChaPoly_BLAKE2s; peer authenticated as did:wba:…` or
    /// `plain; peer anonymous`; called by the node once the session is established. Kept
    /// to its first [`MAX_CHANNEL_BYTES`] bytes (cut at a character boundary); a second
    /// call replaces the first. The transcript may be finished.
    ///
    /// ```
    /// use std::time::SystemTime;
    /// use concord_proto::Role;
    /// use concord_store::Store;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path())?;
    /// let id = store.begin_transcript("ws://127.0.0.1:9000", Role::Requester, SystemTime::now())?;
    /// store.set_transcript_channel(id, "plain; peer anonymous")?;
    /// let transcript = store.transcript(id)?.ok_or("missing")?;
    /// assert_eq!(transcript.summary.channel.as_deref(), Some("plain; peer anonymous"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_transcript_channel(
        &self,
        id: TranscriptId,
        channel: &str,
    ) -> Result<(), StoreError> {
        let (channel, _) = cut_text(channel, MAX_CHANNEL_BYTES);
        let updated = self
            .connection()
            .prepare_cached("UPDATE transcripts SET channel = ?1 WHERE id = ?2")
            .and_then(|mut statement| statement.execute(params![channel, id.0]))
            .map_err(self.sqlite("set transcript channel"))?;
        if updated == 0 {
            return Err(StoreError::UnknownTranscript { id });
        }
        Ok(())
    }

    /// Appends a frame to an unfinished transcript, in one transaction with the
    /// transcript's frame count; returns the frame's position (0-based).
    ///
    /// Within the store's [`TranscriptBounds`]: a text longer than
    /// `text_prefix_bytes` is kept cut ([`FrameRecord::cut`]), and a transcript that has
    /// `max_frames` frames only counts the next ones
    /// ([`TranscriptSummary::frames_not_recorded`]): then the answer is `None`.
    pub fn append_frame(
        &self,
        id: TranscriptId,
        frame: &FrameRecord,
    ) -> Result<Option<u64>, StoreError> {
        let bounds = self.transcript_bounds();
        // A text beyond the bound is cut here (copying only its prefix).
        let cut_here = match &frame.content {
            FrameContent::Text(text) if text.len() > bounds.text_prefix_bytes => {
                Some(cut_text(text, bounds.text_prefix_bytes))
            }
            _ => None,
        };
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
        if u64::try_from(seq).unwrap_or(u64::MAX) >= bounds.max_frames {
            add_not_recorded(&tx, id, 1).map_err(&sql)?;
            tx.commit().map_err(&sql)?;
            return Ok(None);
        }
        let to_i64 = |len: u64| i64::try_from(len).unwrap_or(i64::MAX);
        let (text, cut) = match (&frame.content, &cut_here) {
            (_, Some((prefix, cut))) => {
                (Some(prefix.as_str()), frame.cut.as_ref().or(cut.as_ref()))
            }
            (FrameContent::Text(text), None) => (Some(text.as_str()), frame.cut.as_ref()),
            (FrameContent::Binary { .. }, None) => (None, None),
        };
        let byte_len = match &frame.content {
            FrameContent::Binary { len } => Some(to_i64(*len)),
            FrameContent::Text(_) => None,
        };
        let (full_len, sha256) = match cut {
            Some(cut) => (Some(to_i64(cut.len)), Some(cut.sha256.as_str())),
            None => (None, None),
        };
        tx.prepare_cached(
            "INSERT INTO transcript_frames
                 (transcript_id, seq, direction, kind, text, byte_len, at_ms, full_len, sha256)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
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
                full_len,
                sha256,
            ])
        })
        .map_err(&sql)?;
        tx.prepare_cached("UPDATE transcripts SET frame_count = frame_count + 1 WHERE id = ?1")
            .and_then(|mut statement| statement.execute([id.0]))
            .map_err(&sql)?;
        tx.commit().map_err(&sql)?;
        column::count_value("frame_count", seq)
            .map(Some)
            .map_err(self.corrupt_row(TABLE, &id))
    }

    /// Records that `count` more frames of the transcript `id` were not recorded (a
    /// recorder dropped them); the transcript may be finished.
    pub fn count_unrecorded_frames(&self, id: TranscriptId, count: u64) -> Result<(), StoreError> {
        let connection = self.connection();
        let updated = add_not_recorded(&connection, id, count)
            .map_err(self.sqlite("count unrecorded frames"))?;
        if updated == 0 {
            return Err(StoreError::UnknownTranscript { id });
        }
        Ok(())
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
        // The reason may be a peer's words: kept within the same bound as a frame's text.
        let detail = cut_text(&detail, self.transcript_bounds().text_prefix_bytes).0;
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
}

/// Adds `count` to the frames of transcript `id` that were not recorded; returns how many
/// rows changed (0: no such transcript).
fn add_not_recorded(
    connection: &rusqlite::Connection,
    id: TranscriptId,
    count: u64,
) -> rusqlite::Result<usize> {
    connection
        .prepare_cached(
            "UPDATE transcripts SET frames_not_recorded = frames_not_recorded + ?1 WHERE id = ?2",
        )?
        .execute(params![i64::try_from(count).unwrap_or(i64::MAX), id.0])
}
