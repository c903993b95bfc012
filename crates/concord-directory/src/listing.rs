//! A page of the listing (`GET /things`): its TDs, total, `next` and canonical etag, in
//! either format (`array`, `collection`).

use serde_json::{json, Value};

use crate::error::DirectoryError;

/// The body's shape (`?format=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListFormat {
    /// A JSON array of TDs (the default, tdd-things-list-resp).
    #[default]
    Array,
    /// A `ThingCollection` object with `total`, `members`, `@id` and `next`
    /// (tdd-things-list-pagination-collection).
    Collection,
}

impl ListFormat {
    /// The format named by `?format=` (`array` or `collection`).
    ///
    /// # Errors
    /// [`DirectoryError::InvalidPaging`] naming any other value.
    pub fn parse(value: &str) -> Result<Self, DirectoryError> {
        match value {
            "array" => Ok(ListFormat::Array),
            "collection" => Ok(ListFormat::Collection),
            other => Err(DirectoryError::InvalidPaging {
                reason: format!("format must be `array` or `collection`, found `{other}`"),
            }),
        }
    }

    fn name(self) -> &'static str {
        match self {
            ListFormat::Array => "array",
            ListFormat::Collection => "collection",
        }
    }
}

/// What a listing asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListQuery {
    /// TDs to skip (zero-based).
    pub offset: u64,
    /// The most TDs wanted (cut to `max_page_size`); `None`: a page of `max_page_size`.
    pub limit: Option<u64>,
    /// The body's shape.
    pub format: ListFormat,
}

impl ListQuery {
    /// A query from `offset`, of at most `limit` TDs, in `format`.
    pub fn new(offset: u64, limit: Option<u64>, format: ListFormat) -> Self {
        Self {
            offset,
            limit,
            format,
        }
    }
}

/// One page of the listing.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Listing {
    /// The enriched TDs, in code-point order of id.
    pub things: Vec<Value>,
    /// Unexpired TDs in all.
    pub total: u64,
    /// The collection's state: it changes whenever its content does (the canonical
    /// link's `etag`, tdd-things-list-pagination-header-nextlink-base).
    pub etag: String,
    /// The offset this page started at.
    pub offset: u64,
    /// The page size used (the `limit` of the `next` link).
    pub limit: u64,
    /// The query of the next page, while more TDs remain
    /// (tdd-things-list-pagination-header-nextlink).
    pub next: Option<ListQuery>,
    /// The format asked.
    pub format: ListFormat,
}

impl ListQuery {
    /// The query string of this page relative to `/things` (`offset=…&limit=…`, and
    /// `format=collection` when asked), as a `next` link carries it
    /// (tdd-things-list-pagination-header-nextlink-attr).
    pub fn to_query_string(&self) -> String {
        let mut text = format!("offset={}", self.offset);
        if let Some(limit) = self.limit {
            text.push_str(&format!("&limit={limit}"));
        }
        if self.format != ListFormat::Array {
            text.push_str(&format!("&format={}", self.format.name()));
        }
        text
    }
}

impl Listing {
    /// The body: an array of TDs, or a `ThingCollection` whose `@id` and `next` are
    /// `base` (the listing's path, e.g. `/things`) with each page's query string.
    pub fn body(&self, base: &str) -> Value {
        match self.format {
            ListFormat::Array => Value::Array(self.things.clone()),
            ListFormat::Collection => {
                let this = ListQuery::new(self.offset, Some(self.limit), self.format);
                let mut body = json!({
                    "@context": crate::DISCOVERY_CONTEXT,
                    "@type": "ThingCollection",
                    "total": self.total,
                    "members": self.things,
                    "@id": format!("{base}?{}", this.to_query_string()),
                });
                if let (Some(next), Some(object)) = (self.next, body.as_object_mut()) {
                    object.insert(
                        "next".to_owned(),
                        Value::String(format!("{base}?{}", next.to_query_string())),
                    );
                }
                body
            }
        }
    }
}
