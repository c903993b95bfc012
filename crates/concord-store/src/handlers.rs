//! Handler modules: the JavaScript source that speaks a protocol, one module per role.

use concord_proto::Role;
use rusqlite::Row;

use crate::column::{self, ColumnError};

/// The handler modules stored with a protocol: JavaScript source per role. A role's module
/// is absent until it has been generated (or if this node only ever plays the other role).
///
/// ```
/// use concord_store::Handlers;
/// use concord_proto::Role;
///
/// let handlers = Handlers::default().with(Role::Provider, "function decodeRequest(m) { return m; }");
/// assert!(handlers.get(Role::Provider).is_some());
/// assert_eq!(handlers.get(Role::Requester), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Handlers {
    /// The requester's module (`encodeRequest`, `decodeResponse`).
    pub requester: Option<String>,
    /// The provider's module (`decodeRequest`, `encodeResponse`).
    pub provider: Option<String>,
}

impl Handlers {
    /// The module for `role`, if stored.
    pub fn get(&self, role: Role) -> Option<&str> {
        match role {
            Role::Requester => self.requester.as_deref(),
            Role::Provider => self.provider.as_deref(),
        }
    }

    /// Sets the module for `role`.
    pub fn set(&mut self, role: Role, source: impl Into<String>) {
        let slot = match role {
            Role::Requester => &mut self.requester,
            Role::Provider => &mut self.provider,
        };
        *slot = Some(source.into());
    }

    /// These handlers with the module for `role` set.
    pub fn with(mut self, role: Role, source: impl Into<String>) -> Self {
        self.set(role, source);
        self
    }

    /// The modules of a row that selects the handler columns.
    pub(crate) fn read(row: &Row<'_>) -> Result<Self, ColumnError> {
        Ok(Self {
            requester: column::opt_text(row, handler_column(Role::Requester))?,
            provider: column::opt_text(row, handler_column(Role::Provider))?,
        })
    }
}

/// The roles whose module a listed row holds, from its `has_requester` and `has_provider`
/// columns (`requester_handler IS NOT NULL AS has_requester`, ...).
pub(crate) fn stored_roles(row: &Row<'_>) -> Result<Vec<Role>, ColumnError> {
    let mut roles = Vec::new();
    for (role, column) in [
        (Role::Requester, "has_requester"),
        (Role::Provider, "has_provider"),
    ] {
        if column::int(row, column)? != 0 {
            roles.push(role);
        }
    }
    Ok(roles)
}

/// The column holding `role`'s module (same name in every table that stores handlers).
pub(crate) fn handler_column(role: Role) -> &'static str {
    match role {
        Role::Requester => "requester_handler",
        Role::Provider => "provider_handler",
    }
}
