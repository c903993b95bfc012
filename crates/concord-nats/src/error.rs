//! What went wrong talking to NATS: every error names the operation, the bucket or key,
//! and the cause, in one line.

use std::time::Duration;

use concord_store::StoreError;

/// The name this crate's errors give as [`StoreError::Backend`]'s `backend`.
pub const BACKEND: &str = "nats-jetstream";

/// Everything that can go wrong connecting to NATS or using a bucket.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NatsError {
    /// No server of the list could be reached or the connection was refused
    /// (authentication, TLS).
    #[error("cannot connect to NATS at {servers}: {cause}")]
    Connect {
        /// The servers tried, comma-separated.
        servers: String,
        /// Why.
        cause: String,
    },
    /// A credentials, nkey or certificate file could not be read.
    #[error("cannot read the NATS {what} file {path}: {cause}")]
    File {
        /// Which file (`"credentials"`, …).
        what: &'static str,
        /// Its path.
        path: std::path::PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// A bucket could not be found, created or checked.
    #[error("NATS key-value bucket {bucket:?}: {cause}")]
    Bucket {
        /// The bucket.
        bucket: String,
        /// Why.
        cause: String,
    },
    /// The nonce bucket keeps entries for less time than one nonce must be kept: replays
    /// would pass once NATS forgot them.
    #[error("NATS key-value bucket {bucket:?} keeps entries {max_age:?}, less than the {window:?} a nonce must be kept")]
    WindowTooShort {
        /// The bucket.
        bucket: String,
        /// The bucket's `max_age`.
        max_age: Duration,
        /// What was asked.
        window: Duration,
    },
    /// No answer within the operation's timeout (NATS unreachable, or too slow).
    #[error("NATS did not answer {operation} within {after:?}")]
    Timeout {
        /// What was asked.
        operation: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// NATS answered with an error, or the connection failed during the operation.
    #[error("NATS could not {operation} (key {key:?}): {cause}")]
    Request {
        /// What was asked.
        operation: &'static str,
        /// The key.
        key: String,
        /// NATS's error.
        cause: String,
    },
    /// Another replica changed the entry between our read and our write (the
    /// compare-and-swap on its revision failed): this write was not made.
    #[error("{what} {key:?} was changed by another replica at the same time: this change was not made (read it again)")]
    Conflict {
        /// What the entry is (`"consensus protocol"`, …).
        what: &'static str,
        /// Its name (a URI, a hash).
        key: String,
    },
    /// An entry read back is not what this crate writes (not JSON of the expected shape,
    /// or a document that does not reproduce its hash): it is never used.
    #[error("NATS key-value bucket {bucket:?}, key {key:?}: {detail}")]
    Corrupt {
        /// The bucket.
        bucket: String,
        /// The key.
        key: String,
        /// What is wrong.
        detail: String,
    },
    /// A record asks to be kept longer than the bucket keeps anything.
    #[error("a nonce kept {asked}s does not fit the bucket's window of {window:?}")]
    BeyondWindow {
        /// The seconds asked (expires − recorded).
        asked: i64,
        /// The bucket's `max_age`.
        window: Duration,
    },
    /// The event stream could not be found, created or brought to its configuration.
    #[error("NATS JetStream stream {stream:?}: {cause}")]
    Stream {
        /// The stream.
        stream: String,
        /// Why.
        cause: String,
    },
    /// A bucket or stream could not be created with the configured replication factor
    /// (more replicas than the NATS cluster has servers, or a server not in a cluster).
    #[error("NATS bucket or stream {name:?} cannot be created with {replicas} replicas: {cause}")]
    Replicas {
        /// The bucket or stream.
        name: String,
        /// The replicas asked.
        replicas: usize,
        /// What the server answered.
        cause: String,
    },
    /// NATS refused to create or change a bucket or stream for a reason trying again
    /// cannot cure (JetStream's error codes for subjects another stream
    /// holds, a name in use with another configuration, a configuration it finds invalid or
    /// beyond the account's limits, JetStream not enabled for the account).
    #[error("NATS refuses the bucket or stream {name:?} as configured: {reason} ({cause})")]
    Refused {
        /// The bucket or stream.
        name: String,
        /// What JetStream's error code means.
        reason: &'static str,
        /// What the server answered.
        cause: String,
    },
    /// The NATS user may not do what opening a bucket or stream needs: the server answered
    /// a permissions violation (say, for publishing to `$JS.API.STREAM.CREATE.<name>`) and
    /// the request then went unanswered. The credentials' permissions are to change, not
    /// the network: trying again cannot cure it.
    #[error(
        "NATS refuses the bucket or stream {name:?}: the user lacks a permission ({violation})"
    )]
    Permission {
        /// The bucket or stream.
        name: String,
        /// What the server said.
        violation: String,
    },
    /// The runtime the backend runs its requests on is gone (the node shut down).
    #[error("the tokio runtime NATS requests run on is shut down ({operation})")]
    RuntimeGone {
        /// What was asked.
        operation: &'static str,
    },
}

impl NatsError {
    /// Whether the error is the configuration's, not an outage: trying again cannot cure it
    /// (a file that cannot be read, a nonce bucket that forgets too soon, more replicas
    /// than the NATS cluster has servers, a bucket or stream NATS refuses as configured, a
    /// user without the permissions it needs).
    pub fn is_configuration(&self) -> bool {
        matches!(
            self,
            Self::File { .. }
                | Self::WindowTooShort { .. }
                | Self::Replicas { .. }
                | Self::Refused { .. }
                | Self::Permission { .. }
        )
    }

    /// Whether NATS answered that no server took the request ("no responders"): it was not
    /// applied, and may be made again at once.
    pub fn is_no_responders(&self) -> bool {
        match self {
            Self::Request { cause, .. }
            | Self::Bucket { cause, .. }
            | Self::Stream { cause, .. } => cause.contains("no responders"),
            _ => false,
        }
    }

    /// This error as the store traits' typed error, naming `operation`.
    pub fn into_store(self, operation: &'static str) -> StoreError {
        StoreError::Backend {
            backend: BACKEND,
            operation,
            cause: Box::new(self),
        }
    }

    pub(crate) fn request(
        operation: &'static str,
        key: impl Into<String>,
        cause: impl std::fmt::Display,
    ) -> Self {
        Self::Request {
            operation,
            key: key.into(),
            cause: cause.to_string(),
        }
    }
}
