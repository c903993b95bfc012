//! Two nodes (or a node and a raw WebSocket peer) on loopback, stores in temp dirs.

mod backends;
mod bad_input;
mod bad_provider;
mod budget;
mod consensus;
mod described;
mod description;
mod fix_error;
mod foreign;
mod hostile;
mod identity;
mod interact;
mod interact_wire;
mod limits;
mod llm;
mod negotiation;
mod redirect;
mod rejection;
mod retention;
mod schema_rules;
mod slots;
mod store_bounds;
mod stream_end;
mod support;
mod tls;
mod zero_rtt;
