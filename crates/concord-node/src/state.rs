//! The node's shared state behind traits: where protocols by hash and the consensus
//! registry are kept (the node's SQLite store unless [`NodeBuilder`](crate::NodeBuilder)
//! was given other backends). The node's logic reaches them only through these traits;
//! the nonce log and its durable store live beside the identity (`identity/mod.rs`).

use std::sync::Arc;

use concord_proto::Role;
use concord_store::{ConsensusRegistry, ProtocolBook, RoleView};

/// The backends a node keeps protocols and consensus entries in.
#[derive(Debug, Clone)]
pub(crate) struct Backends {
    /// Negotiated protocols by hash.
    pub(crate) protocols: Arc<dyn ProtocolBook>,
    /// The consensus registry.
    pub(crate) consensus: Arc<dyn ConsensusRegistry>,
}

impl Backends {
    /// Both, as the handshake sees them for a session playing `role`.
    pub(crate) fn for_role(&self, role: Role) -> RoleView<'_> {
        RoleView::new(&*self.protocols, &*self.consensus, role)
    }
}
