//! The W3C WoT Discovery Thing Description Directory's assertions, each test named after
//! the assertion id it checks (`<span class="rfc2119-assertion" id="…">` in the
//! Recommendation), run over both stores: in memory and SQLite (`concord-store`).

mod support;

mod crud;
mod events;
mod limits;
mod listing;
mod search;
mod validation;
