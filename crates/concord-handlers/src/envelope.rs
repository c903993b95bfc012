//! A protocol's envelope: one definition, in `concord_negotiate::envelope`, shared by the
//! judge, the templates, the test-case runner and the node.

pub(crate) use concord_negotiate::envelope::{segments, Envelope};
