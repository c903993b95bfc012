//! Sans-IO core of the ANP meta-protocol.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![warn(missing_docs)]

mod hash;

pub use hash::{ProtocolHash, ProtocolHashError};
