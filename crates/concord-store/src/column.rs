//! Reading columns back from disk without trusting them: every mismatch is a typed error.

use std::time::SystemTime;

use rusqlite::types::ValueRef;
use rusqlite::Row;

use crate::time::from_millis;

/// A stored value that cannot be read back as expected.
#[derive(Debug)]
pub(crate) struct ColumnError {
    pub column: &'static str,
    pub detail: String,
}

impl ColumnError {
    pub(crate) fn new(column: &'static str, detail: impl Into<String>) -> Self {
        Self {
            column,
            detail: detail.into(),
        }
    }
}

fn value<'r>(row: &'r Row<'_>, column: &'static str) -> Result<ValueRef<'r>, ColumnError> {
    row.get_ref(column)
        .map_err(|error| ColumnError::new(column, error.to_string()))
}

fn type_name(value: ValueRef<'_>) -> &'static str {
    match value {
        ValueRef::Null => "NULL",
        ValueRef::Integer(_) => "an integer",
        ValueRef::Real(_) => "a real",
        ValueRef::Text(_) => "text",
        ValueRef::Blob(_) => "a blob",
    }
}

/// The raw bytes of a TEXT column (possibly not UTF-8), or `None` for NULL.
pub(crate) fn opt_raw_text(
    row: &Row<'_>,
    column: &'static str,
) -> Result<Option<Vec<u8>>, ColumnError> {
    match value(row, column)? {
        ValueRef::Null => Ok(None),
        ValueRef::Text(bytes) => Ok(Some(bytes.to_vec())),
        other => Err(ColumnError::new(
            column,
            format!("expected text, found {}", type_name(other)),
        )),
    }
}

/// A TEXT column that may be NULL, as UTF-8.
pub(crate) fn opt_text(row: &Row<'_>, column: &'static str) -> Result<Option<String>, ColumnError> {
    opt_raw_text(row, column)?
        .map(|bytes| {
            String::from_utf8(bytes).map_err(|error| {
                ColumnError::new(
                    column,
                    format!("not UTF-8 (byte {})", error.utf8_error().valid_up_to()),
                )
            })
        })
        .transpose()
}

/// A TEXT column that must not be NULL, as UTF-8.
pub(crate) fn text(row: &Row<'_>, column: &'static str) -> Result<String, ColumnError> {
    opt_text(row, column)?.ok_or_else(|| ColumnError::new(column, "expected text, found NULL"))
}

/// An INTEGER column that may be NULL.
pub(crate) fn opt_int(row: &Row<'_>, column: &'static str) -> Result<Option<i64>, ColumnError> {
    match value(row, column)? {
        ValueRef::Null => Ok(None),
        ValueRef::Integer(number) => Ok(Some(number)),
        other => Err(ColumnError::new(
            column,
            format!("expected an integer, found {}", type_name(other)),
        )),
    }
}

/// An INTEGER column that must not be NULL.
pub(crate) fn int(row: &Row<'_>, column: &'static str) -> Result<i64, ColumnError> {
    opt_int(row, column)?.ok_or_else(|| ColumnError::new(column, "expected an integer, found NULL"))
}

/// A non-negative INTEGER column, as `u64`.
pub(crate) fn count(row: &Row<'_>, column: &'static str) -> Result<u64, ColumnError> {
    count_value(column, int(row, column)?)
}

/// A count read from `column` (by a query of its own), as `u64`: a negative one is corrupt.
pub(crate) fn count_value(column: &'static str, number: i64) -> Result<u64, ColumnError> {
    u64::try_from(number).map_err(|_| ColumnError::new(column, format!("negative count {number}")))
}

/// A millisecond timestamp column that may be NULL.
pub(crate) fn opt_time(
    row: &Row<'_>,
    column: &'static str,
) -> Result<Option<SystemTime>, ColumnError> {
    opt_int(row, column)?
        .map(|millis| {
            from_millis(millis).ok_or_else(|| {
                ColumnError::new(column, format!("timestamp {millis} ms is out of range"))
            })
        })
        .transpose()
}

/// A millisecond timestamp column that must not be NULL.
pub(crate) fn time(row: &Row<'_>, column: &'static str) -> Result<SystemTime, ColumnError> {
    opt_time(row, column)?
        .ok_or_else(|| ColumnError::new(column, "expected a timestamp, found NULL"))
}

/// A TEXT column holding a protocol hash (64 lowercase hex digits).
pub(crate) fn hash(
    row: &Row<'_>,
    column: &'static str,
) -> Result<concord_proto::ProtocolHash, ColumnError> {
    let text = text(row, column)?;
    text.parse()
        .map_err(|error| ColumnError::new(column, format!("{text:?}: {error}")))
}
