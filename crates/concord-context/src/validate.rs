//! Checking merged data against the schemas its messages carry.

use std::fmt;

use crate::context::{fold, Context, Group, MergeError};
use crate::identity::{Identity, View};

/// A place where merged data does not satisfy its identity's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The identity whose merged value was checked.
    pub identity: Identity,
    /// JSON pointer to the offending part of the value (`""` for the whole value).
    pub instance_pointer: String,
    /// JSON pointer to the schema keyword that failed.
    pub schema_pointer: String,
    /// What is wrong, as the validator words it.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.instance_pointer.is_empty() {
            "/"
        } else {
            &self.instance_pointer
        };
        write!(
            f,
            "{} at {at}: {} (schema {})",
            self.identity, self.message, self.schema_pointer
        )
    }
}

/// Why a context could not be validated at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidateError {
    /// The messages of an identity cannot be merged.
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// A message carries a schema that is not a valid JSON Schema (or whose
    /// `$ref` cannot be resolved offline).
    #[error("message at /{message} ({identity}): invalid schema: {detail}")]
    InvalidSchema {
        /// Position of the message carrying the schema.
        message: usize,
        /// Its identity.
        identity: Identity,
        /// What is wrong with the schema.
        detail: String,
    },
}

impl Context {
    /// Checks each merged value that has a schema against it (JSON Schema, the
    /// draft named by `$schema`, 2020-12 when none), and returns every
    /// violation, in order of identity then of position in the value.
    ///
    /// In an instance view each kind's effective value (global messages merged
    /// with the instance's) is checked. In [`View::Global`] the global
    /// identities are checked, and for every instance, the effective value of
    /// each kind it has messages of — what that instance actually sees.
    ///
    /// ```
    /// use concord_context::{Context, View};
    ///
    /// let context = Context::from_json(br#"[
    ///   {"type": "data", "kind": "user", "data": {"age": 30},
    ///    "schema": {"properties": {"age": {"type": "number"}}}},
    ///   {"type": "data", "kind": "user", "data": {"age": "thirty"}}
    /// ]"#)?;
    /// let violations = context.validate(&View::Global)?;
    /// assert_eq!(violations[0].instance_pointer, "/age");
    /// assert_eq!(violations[0].to_string(),
    ///     r#"¶user at /age: "thirty" is not of type "number" (schema /properties/age/type)"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn validate(&self, view: &View) -> Result<Vec<Violation>, ValidateError> {
        let mut violations = Vec::new();
        match view {
            View::Instance(_) => {
                for group in self.groups(view) {
                    check(&group, &mut violations)?;
                }
            }
            View::Global => {
                for group in self.groups(view) {
                    match group.instance {
                        None => check(&group, &mut violations)?,
                        Some(instance) => {
                            let instance_view = View::Instance(instance.clone());
                            if let Some(effective) = self.group(&instance_view, group.kind) {
                                check(&effective, &mut violations)?;
                            }
                        }
                    }
                }
            }
        }
        Ok(violations)
    }
}

fn check(group: &Group<'_>, violations: &mut Vec<Violation>) -> Result<(), ValidateError> {
    let folded = fold(group)?;
    let Some((message, schema)) = folded.schema else {
        return Ok(());
    };
    let validator =
        jsonschema::validator_for(schema).map_err(|error| ValidateError::InvalidSchema {
            message,
            identity: group.identity(),
            detail: error.to_string(),
        })?;
    for error in validator.iter_errors(&folded.value) {
        violations.push(Violation {
            identity: group.identity(),
            instance_pointer: error.instance_path().as_str().to_owned(),
            schema_pointer: error.schema_path().as_str().to_owned(),
            message: error.to_string(),
        });
    }
    Ok(())
}
