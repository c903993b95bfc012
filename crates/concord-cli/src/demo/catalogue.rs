//! The demo's provider action: the seeds' product-info action, answered in process from the
//! small catalogue in `concord-fixtures` (which the tests and benchmarks use too).

pub use concord_fixtures::catalogue::{action, answer, input, ACTION};
