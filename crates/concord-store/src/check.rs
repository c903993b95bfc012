//! A whole-store health check: SQLite's own checks, the 0-RTT rule on every stored
//! document, and the shape of every transcript.

use std::fmt;

use concord_proto::ProtocolHash;

use crate::column;
use crate::error::StoreError;
use crate::integrity::{integrity_of, Corruption, Integrity};
use crate::store::Store;
use crate::transcripts::TranscriptId;

/// One thing [`Store::check`] found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// A line of `PRAGMA integrity_check` or `PRAGMA foreign_key_check`.
    Sqlite(String),
    /// A stored protocol whose document does not reproduce its hash.
    Protocol {
        /// The hash it is stored under.
        hash: ProtocolHash,
        /// What is wrong.
        corruption: Corruption,
    },
    /// A consensus protocol whose document does not reproduce its stored hash.
    Consensus {
        /// Its URI.
        uri: String,
        /// What is wrong.
        corruption: Corruption,
    },
    /// A transcript whose frames are not exactly positions `0..frame_count`.
    Transcript {
        /// The transcript.
        id: TranscriptId,
        /// What is wrong.
        detail: String,
    },
    /// A row whose key column cannot be read.
    Row {
        /// The table.
        table: &'static str,
        /// What is wrong.
        detail: String,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(line) => write!(f, "sqlite: {line}"),
            Self::Protocol { hash, corruption } => write!(f, "protocol {hash}: {corruption}"),
            Self::Consensus { uri, corruption } => {
                write!(f, "consensus protocol {uri:?}: {corruption}")
            }
            Self::Transcript { id, detail } => write!(f, "transcript {id}: {detail}"),
            Self::Row { table, detail } => write!(f, "table {table}: {detail}"),
        }
    }
}

impl Store {
    /// Checks the whole store and lists every problem found (empty: healthy):
    /// `PRAGMA integrity_check` and `foreign_key_check`, every protocol and consensus
    /// document re-hashed, every protocol peer entry readable, and every transcript's
    /// frames exactly at positions `0..frame_count`.
    /// Reads everything: meant for `concord` maintenance commands and tests, not hot paths.
    pub fn check(&self) -> Result<Vec<Problem>, StoreError> {
        let sql = self.sqlite("check store");
        let mut connection = self.connection();
        let tx = connection.transaction().map_err(&sql)?;
        let mut problems = Vec::new();

        let mut statement = tx.prepare("PRAGMA integrity_check").map_err(&sql)?;
        let lines = statement
            .query_map([], |row| row.get::<_, String>(0))
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(&sql)?;
        drop(statement);
        if lines != ["ok"] {
            problems.extend(lines.into_iter().map(Problem::Sqlite));
        }
        let mut statement = tx.prepare("PRAGMA foreign_key_check").map_err(&sql)?;
        let orphans = statement
            .query_map([], |row| {
                Ok(format!(
                    "row {} of {} refers to a missing row of {}",
                    row.get::<_, Option<i64>>(1)?.unwrap_or_default(),
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(2)?,
                ))
            })
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(&sql)?;
        drop(statement);
        problems.extend(orphans.into_iter().map(Problem::Sqlite));

        for (table, key) in [("protocols", "hash"), ("consensus_protocols", "uri")] {
            let mut statement = tx
                .prepare(&format!("SELECT {key}, hash, document FROM {table}"))
                .map_err(&sql)?;
            let mut rows = statement.query([]).map_err(&sql)?;
            while let Some(row) = rows.next().map_err(&sql)? {
                let read = || -> Result<_, column::ColumnError> {
                    Ok((
                        column::text(row, key)?,
                        column::hash(row, "hash")?,
                        column::opt_raw_text(row, "document")?.unwrap_or_default(),
                    ))
                };
                let (key, hash, raw) = match read() {
                    Ok(values) => values,
                    Err(error) => {
                        problems.push(Problem::Row {
                            table,
                            detail: format!("column {}: {}", error.column, error.detail),
                        });
                        continue;
                    }
                };
                let integrity = integrity_of(&hash, &raw);
                if table == "protocols" {
                    self.note_integrity(&hash, &integrity);
                }
                if let Integrity::Corrupt(corruption) = integrity {
                    problems.push(if table == "protocols" {
                        Problem::Protocol { hash, corruption }
                    } else {
                        Problem::Consensus {
                            uri: key,
                            corruption,
                        }
                    });
                }
            }
        }

        // Peer entries that reads skip (orphans are `foreign_key_check`'s).
        let mut statement = tx
            .prepare("SELECT hash, peer FROM protocol_peers")
            .map_err(&sql)?;
        let mut rows = statement.query([]).map_err(&sql)?;
        while let Some(row) = rows.next().map_err(&sql)? {
            if let Err(error) = column::hash(row, "hash").and_then(|_| column::text(row, "peer")) {
                problems.push(Problem::Row {
                    table: "protocol_peers",
                    detail: format!("column {}: {}", error.column, error.detail),
                });
            }
        }
        drop(rows);
        drop(statement);

        // Positions are unique (primary key) and non-negative (CHECK), so a transcript is
        // whole when it has `frame_count` frames and the last is at `frame_count - 1`.
        let mut statement = tx
            .prepare(
                "SELECT t.id, t.frame_count, count(f.seq) AS frames,
                     coalesce(max(f.seq), -1) AS last_seq
                 FROM transcripts t LEFT JOIN transcript_frames f ON f.transcript_id = t.id
                 GROUP BY t.id
                 HAVING t.frame_count <> count(f.seq) OR last_seq <> count(f.seq) - 1",
            )
            .map_err(&sql)?;
        let mut rows = statement.query([]).map_err(&sql)?;
        while let Some(row) = rows.next().map_err(&sql)? {
            let read = || {
                Ok::<_, column::ColumnError>((
                    column::int(row, "id")?,
                    column::int(row, "frame_count")?,
                    column::int(row, "frames")?,
                    column::int(row, "last_seq")?,
                ))
            };
            problems.push(match read() {
                Ok((id, count, frames, last)) => Problem::Transcript {
                    id: TranscriptId::from(id),
                    detail: format!(
                        "frame_count says {count}, {frames} frames stored, the last at position {last}"
                    ),
                },
                Err(error) => Problem::Row {
                    table: "transcripts",
                    detail: format!("column {}: {}", error.column, error.detail),
                },
            });
        }
        drop(rows);
        drop(statement);
        tx.finish().map_err(&sql)?;
        Ok(problems)
    }
}
