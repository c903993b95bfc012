//! The parts of a JSON Schema the handler rules read: one set of rules, shared with the
//! negotiators (`concord_negotiate::json_schema`).

pub(crate) use concord_negotiate::json_schema::{
    fallback, has_properties, is_required, items, properties,
};
