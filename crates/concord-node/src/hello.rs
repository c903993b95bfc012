//! The WebSocket binding's first frame each way: the hello, as a JSON text frame.

use std::time::Duration;

use concord_proto::{Hello, HelloError, HelloKind, HelloLimits};

use crate::config::human;
use crate::transport::{close_code, Incoming, Transport, TransportError};

/// Why no usable hello arrived.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum HelloFailure {
    #[error("no {} within {}", .0, human(*.1))]
    Timeout(&'static str, Duration),
    #[error("the peer closed the connection before its hello")]
    PeerClosed { code: Option<u16>, reason: String },
    #[error("the hello exceeds the limit of {limit} bytes")]
    TooLarge { limit: usize },
    #[error("{0}")]
    Transport(String),
    #[error("expected the {0} as a JSON text frame first, got a binary frame")]
    Binary(&'static str),
    #[error("invalid {0}: {1}")]
    Invalid(&'static str, HelloError),
    #[error("expected a {expected}, got a {received}")]
    WrongKind {
        expected: &'static str,
        received: &'static str,
    },
}

impl HelloFailure {
    /// The close code and reason to send the peer, if the connection is still up.
    pub(crate) fn close_frame(&self) -> Option<(u16, String)> {
        let code = match self {
            Self::PeerClosed { .. } | Self::Transport(_) => return None,
            Self::Timeout(..) => close_code::POLICY,
            Self::TooLarge { .. } | Self::Invalid(_, HelloError::TooLarge { .. }) => {
                close_code::TOO_BIG
            }
            Self::Binary(_) | Self::Invalid(..) | Self::WrongKind { .. } => {
                close_code::PROTOCOL_ERROR
            }
        };
        Some((code, self.to_string()))
    }
}

/// Reads the peer's hello of `kind`, waiting at most `limit`, within `bounds`.
pub(crate) async fn read(
    transport: &mut impl Transport,
    kind: HelloKind,
    limit: Duration,
    bounds: &HelloLimits,
) -> Result<(Hello, String), HelloFailure> {
    let name = kind.name();
    let message = match tokio::time::timeout(limit, crate::transport::recv_data(transport)).await {
        Err(_) => return Err(HelloFailure::Timeout(name, limit)),
        Ok(None) => {
            return Err(HelloFailure::PeerClosed {
                code: None,
                reason: String::new(),
            })
        }
        Ok(Some(Err(TransportError::TooLarge { limit }))) => {
            return Err(HelloFailure::TooLarge { limit })
        }
        Ok(Some(Err(TransportError::Other(error)))) => return Err(HelloFailure::Transport(error)),
        Ok(Some(Ok(message))) => message,
    };
    let text = match message {
        Incoming::Text(text) => text,
        // `recv_data` passes over pongs: what is not text is binary.
        Incoming::Binary(_) | Incoming::Pong => return Err(HelloFailure::Binary(name)),
        Incoming::Close(frame) => {
            let (code, reason) = frame.map_or((None, String::new()), |(c, r)| (Some(c), r));
            return Err(HelloFailure::PeerClosed { code, reason });
        }
    };
    let hello = Hello::decode_with_limits(&text, bounds)
        .map_err(|error| HelloFailure::Invalid(name, error))?;
    if hello.kind != kind {
        return Err(HelloFailure::WrongKind {
            expected: name,
            received: hello.kind.name(),
        });
    }
    Ok((hello, text))
}

/// A random 16-character alphanumeric id (hello message ids, call message-id prefixes).
pub(crate) fn random_id() -> String {
    std::iter::repeat_with(fastrand::alphanumeric)
        .take(16)
        .collect()
}
