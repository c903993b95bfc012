//! The store as the sans-IO handshake sees it: [`ProtocolStore`] for one role.

use std::cell::RefCell;

use concord_proto::handshake::ProtocolStore;
use concord_proto::{ProtocolHash, Role};

use crate::backends::{ConsensusRegistry, ProtocolBook};
use crate::error::StoreError;
use crate::store::Store;

/// The protocols and the consensus registry seen by a session playing `role`: implements
/// [`ProtocolStore`] for `concord_proto::handshake::answer_source_hello`, over this
/// [`Store`] ([`Store::for_role`]) or any other backends ([`RoleView::new`]).
///
/// The trait answers `bool`, so an error (a corrupt row, a SQLite failure) answers
/// `false` — the protocol is never used — and is kept here: read it with
/// [`take_errors`](Self::take_errors) after the handshake decision to report it.
///
/// ```
/// use concord_proto::handshake::ProtocolStore;
/// use concord_proto::{ProtocolHash, Role};
/// use concord_store::{NewProtocol, Store};
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::open(dir.path())?;
/// let hash = store.save_protocol(
///     &NewProtocol::negotiated("# Requirement\n", "peer").with_handler(Role::Provider, "/* js */"),
/// )?;
/// let provider = store.for_role(Role::Provider);
/// assert!(provider.holds_protocol(&hash));
/// assert!(!provider.holds_protocol(&ProtocolHash::of_text("something else")));
/// assert!(provider.take_errors().is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RoleView<'a> {
    protocols: &'a dyn ProtocolBook,
    consensus: &'a dyn ConsensusRegistry,
    role: Role,
    errors: RefCell<Vec<StoreError>>,
}

impl Store {
    /// This store as a [`ProtocolStore`] for a session playing `role`.
    pub fn for_role(&self, role: Role) -> RoleView<'_> {
        RoleView::new(self, self, role)
    }
}

impl<'a> RoleView<'a> {
    /// The `protocols` and `consensus` backends seen by a session playing `role`.
    pub fn new(
        protocols: &'a dyn ProtocolBook,
        consensus: &'a dyn ConsensusRegistry,
        role: Role,
    ) -> Self {
        RoleView {
            protocols,
            consensus,
            role,
            errors: RefCell::new(Vec::new()),
        }
    }

    /// The role this view answers for.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The errors met while answering (each answered `false`), oldest first; clears them.
    pub fn take_errors(&self) -> Vec<StoreError> {
        self.errors.take()
    }

    fn answer(&self, result: Result<bool, StoreError>) -> bool {
        result.unwrap_or_else(|error| {
            self.errors.borrow_mut().push(error);
            false
        })
    }
}

impl ProtocolStore for RoleView<'_> {
    fn holds_protocol(&self, hash: &ProtocolHash) -> bool {
        self.answer(self.protocols.can_resume(hash, self.role))
    }

    fn supports_consensus(&self, uri: &str) -> bool {
        self.answer(self.consensus.can_use_consensus(uri, self.role))
    }
}
