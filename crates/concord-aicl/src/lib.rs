//! AICL (LightAICL v1.0): the typed text encoding and instruction set of the AICL whitepaper,
//! as a serde data format shaped like `serde_json`.
//!
//! ```text
//! [d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:fl_session_12],[s:msg_type]:[s:result],
//!    [s:data]:[t:float32:2,3:<base85>]]
//! ```
//!
//! - Values: [`Value`] (`[s:]` string, `[i:]` i64, `[f:]` f64, `[b:]` bool, `[l:]` list,
//!   `[d:]` dictionary as an ordered [`Map`], `[t:dtype:shape:base85]` [`Tensor`]).
//! - Text: [`from_str`] / [`from_slice`] (strict; [`from_str_with`] for [`ParseOptions`]:
//!   lenient mode, size and depth limits), [`to_string`] / [`to_string_pretty`].
//! - serde: any `Serialize`/`Deserialize` type, [`to_value`] / [`from_value`]; bytes travel as
//!   `uint8` tensors, [`Tensor`] fields as tensors.
//! - JSON: [`json::to_json`] / [`json::from_json`].
//! - Messages: [`Message`] with the header, the instruction set ([`MsgType`]), error replies,
//!   version negotiation, stream chunks and the canonical form signatures cover.
//! - Errors: [`Error`] with a [`Position`] (line, column, byte offset) and the whitepaper's
//!   [`ErrorCode`] to answer with.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use concord_aicl::Tensor;
//!
//! #[derive(Serialize, Deserialize, PartialEq, Debug)]
//! struct Update { layer: String, step: u32, weights: Tensor }
//!
//! let update = Update {
//!     layer: "dense_1".into(),
//!     step: 12,
//!     weights: Tensor::from_vec(vec![2, 2], vec![0.5f32, -1.0, 2.0, 0.0])?,
//! };
//! let text = concord_aicl::to_string(&update)?;
//! assert!(text.starts_with("[d:[s:layer]:[s:dense_1],[s:step]:[i:12],[s:weights]:[t:float32:2,2:"));
//! assert_eq!(concord_aicl::from_str::<Update>(&text)?, update);
//! # Ok::<(), concord_aicl::Error>(())
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

mod base85;
mod de;
mod error;
pub mod json;
mod message;
mod ser;
mod special;
mod tensor;
mod value;

pub use de::{
    from_slice, from_slice_with, from_str, from_str_with, Deserializer, Mode, ParseOptions,
};
pub use error::{Error, ErrorCode, ErrorKind, Position, Result, TextPosition};
pub use message::{select_version, ErrorInfo, Message, MsgType, StreamChunk, PROTOCOL};
pub use ser::{to_string, to_string_pretty, to_vec, to_vec_pretty, Compound, Serializer};
pub use tensor::{DType, Element, Tensor};
pub use value::{from_value, to_value, IntoIter, Iter, Map, Value};

/// The half-precision element types of `float16` and `bfloat16` tensors.
pub use half::{bf16, f16};
