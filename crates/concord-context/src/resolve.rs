//! Resolving variable expressions against a context, alone or inside JSON values.

use std::collections::HashMap;
use std::fmt;

use serde_json::{Map, Value};

use crate::context::{fold, Context, MergeError};
use crate::expression::{Expression, ExpressionError, Reference};
use crate::identity::{Kind, View};
use crate::merge::{lookup, Lookup};
use crate::message::HIDDEN_KEYS;

/// The outcome of resolving: a value, or what it is still waiting for.
///
/// An unresolved reference is never a silent `null`: it is [`Resolution::Pending`],
/// naming each missing reference and why it is missing.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub enum Resolution {
    /// Every expression resolved; this is the value.
    Ready(Value),
    /// Some expression could not be resolved yet.
    Pending(Pending),
}

impl Resolution {
    /// The value, or the [`Pending`] error.
    pub fn into_result(self) -> Result<Value, Pending> {
        match self {
            Self::Ready(value) => Ok(value),
            Self::Pending(pending) => Err(pending),
        }
    }
}

/// Expressions that could not be resolved: the data they need is not in the
/// context (yet). A call with pending arguments waits.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct Pending {
    /// Each unresolved expression, in document order.
    pub unresolved: Vec<Unresolved>,
}

impl fmt::Display for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unresolved ")?;
        for (i, unresolved) in self.unresolved.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{unresolved}")?;
        }
        Ok(())
    }
}

/// One expression that could not be resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Unresolved {
    /// JSON pointer to the string holding the expression (`""` for an expression resolved alone).
    pub pointer: String,
    /// The expression.
    pub expression: Expression,
    /// The references that are missing: for `||`, those of every alternative;
    /// for `&&`, those that stopped it.
    pub missing: Vec<Missing>,
}

impl fmt::Display for Unresolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", self.expression)?;
        if !self.pointer.is_empty() {
            write!(f, " at {}", self.pointer)?;
        }
        f.write_str(": ")?;
        for (i, missing) in self.missing.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{missing}")?;
        }
        Ok(())
    }
}

/// A reference with no value in the context.
#[derive(Debug, Clone, PartialEq)]
pub struct Missing {
    /// The reference.
    pub reference: Reference,
    /// Why it has no value.
    pub reason: MissingReason,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is missing ({})", self.reference, self.reason)
    }
}

/// Why a reference has no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MissingReason {
    /// No data message of the kind is visible in the view.
    #[error("no `{kind}` data in this view")]
    NoData {
        /// The kind.
        kind: Kind,
    },
    /// An object along the path lacks the key.
    #[error("{at} has no key `{key}`")]
    NoKey {
        /// The path up to the object.
        at: String,
        /// The key.
        key: String,
    },
    /// An array along the path lacks the element.
    #[error("{at} is an array of {len}, which has no element `{segment}`")]
    NoElement {
        /// The path up to the array.
        at: String,
        /// Its length.
        len: usize,
        /// The segment that is not an index below `len`.
        segment: String,
    },
    /// A scalar or `null` where the path needs an object or an array.
    #[error("{at} is {found}, which has no member `{segment}`")]
    NotAContainer {
        /// The path up to the value.
        at: String,
        /// Its JSON type.
        found: &'static str,
        /// The segment that could not be followed.
        segment: String,
    },
}

/// Why a JSON value could not be substituted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SubstituteError {
    /// A string starting with `†` is not a valid expression.
    #[error("{pointer}: {cause}")]
    Expression {
        /// JSON pointer to the string.
        pointer: String,
        /// The parse error.
        cause: Box<ExpressionError>,
    },
    /// The context itself cannot be merged.
    #[error(transparent)]
    Merge(#[from] MergeError),
}

/// Merged values of the kinds read so far, for one view.
struct Reader<'c> {
    context: &'c Context,
    view: &'c View,
    merged: HashMap<Kind, Option<Value>>,
}

impl<'c> Reader<'c> {
    fn new(context: &'c Context, view: &'c View) -> Self {
        Self {
            context,
            view,
            merged: HashMap::new(),
        }
    }

    fn read(&mut self, reference: &Reference) -> Result<Result<&Value, Missing>, MergeError> {
        let kind = reference.kind();
        if !self.merged.contains_key(kind) {
            let value = match self.context.group(self.view, kind) {
                Some(group) => Some(fold(&group)?.value),
                None => None,
            };
            self.merged.insert(kind.clone(), value);
        }
        let missing = |reason| Missing {
            reference: reference.clone(),
            reason,
        };
        let Some(Some(root)) = self.merged.get(kind) else {
            return Ok(Err(missing(MissingReason::NoData { kind: kind.clone() })));
        };
        let path = reference.path();
        let segment = |depth: usize| path.get(depth).cloned().unwrap_or_default();
        Ok(lookup(root, path).map_err(|stop| {
            missing(match stop {
                Lookup::NoKey { depth } => MissingReason::NoKey {
                    at: reference.prefix_text(depth),
                    key: segment(depth),
                },
                Lookup::NoElement { depth, len } => MissingReason::NoElement {
                    at: reference.prefix_text(depth),
                    len,
                    segment: segment(depth),
                },
                Lookup::NotAContainer { depth, found } => MissingReason::NotAContainer {
                    at: reference.prefix_text(depth),
                    found,
                    segment: segment(depth),
                },
            })
        }))
    }

    /// The value of `expression`, or the references it misses.
    fn resolve(
        &mut self,
        expression: &Expression,
    ) -> Result<Result<Value, Vec<Missing>>, MergeError> {
        let mut missing: Vec<Missing> = Vec::new();
        for conjunction in expression.alternatives() {
            let mut last = None;
            let mut complete = true;
            for reference in conjunction {
                match self.read(reference)? {
                    Ok(value) => last = Some(value.clone()),
                    Err(absent) => {
                        complete = false;
                        if !missing.contains(&absent) {
                            missing.push(absent);
                        }
                    }
                }
            }
            if let (true, Some(value)) = (complete, last) {
                return Ok(Ok(value));
            }
        }
        Ok(Err(missing))
    }

    fn substitute(
        &mut self,
        value: &Value,
        pointer: &mut String,
        pending: &mut Vec<Unresolved>,
    ) -> Result<Value, SubstituteError> {
        Ok(match value {
            Value::String(text) if Expression::is_expression_text(text) => {
                let expression =
                    Expression::parse(text).map_err(|cause| SubstituteError::Expression {
                        pointer: pointer.clone(),
                        cause: Box::new(cause),
                    })?;
                match self.resolve(&expression)? {
                    Ok(resolved) => resolved,
                    Err(missing) => {
                        pending.push(Unresolved {
                            pointer: pointer.clone(),
                            expression,
                            missing,
                        });
                        Value::Null
                    }
                }
            }
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    let len = pointer.len();
                    pointer.push_str(&format!("/{index}"));
                    out.push(self.substitute(item, pointer, pending)?);
                    pointer.truncate(len);
                }
                Value::Array(out)
            }
            Value::Object(map) => {
                let mut out = Map::new();
                for (key, member) in map {
                    if HIDDEN_KEYS.contains(&key.as_str()) {
                        out.insert(key.clone(), member.clone());
                        continue;
                    }
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                    out.insert(key.clone(), self.substitute(member, pointer, pending)?);
                    pointer.truncate(len);
                }
                Value::Object(out)
            }
            other => other.clone(),
        })
    }
}

impl Context {
    /// Resolves an expression in `view`.
    ///
    /// A reference reads the merged value of its kind (in an instance view,
    /// global messages overridden by the instance's), so the newest write that
    /// covers a path wins — chapter 008's newest-to-oldest rule — while
    /// objects patched by several messages read as their merge, exactly as the
    /// LLM sees them. `null` is a value; only an absent key or element is missing.
    ///
    /// ```
    /// use concord_context::{Context, Resolution, View};
    /// use serde_json::json;
    ///
    /// let context = Context::from_json(br#"[
    ///   {"type": "input", "userName": "Jane"},
    ///   {"type": "state", "draft": null}
    /// ]"#)?;
    /// let name = context.resolve(&View::Global, &"†input.topic || †input.userName".parse()?)?;
    /// assert_eq!(name, Resolution::Ready(json!("Jane")));
    /// let Resolution::Pending(pending) = context.resolve(&View::Global, &"†state.draft && †state.review".parse()?)? else {
    ///     panic!("resolved");
    /// };
    /// assert_eq!(pending.to_string(), "unresolved `†state.draft && †state.review`: †state.review is missing (†state has no key `review`)");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolve(&self, view: &View, expression: &Expression) -> Result<Resolution, MergeError> {
        Ok(match Reader::new(self, view).resolve(expression)? {
            Ok(value) => Resolution::Ready(value),
            Err(missing) => Resolution::Pending(Pending {
                unresolved: vec![Unresolved {
                    pointer: String::new(),
                    expression: expression.clone(),
                    missing,
                }],
            }),
        })
    }

    /// Replaces every string that starts with `†` inside `value` (a tool call's
    /// arguments, say) by the value of its expression.
    ///
    /// Only whole strings are expressions; other strings, object keys and
    /// resolved values are left as they are (no recursive expansion), and so
    /// are members named in [`HIDDEN_KEYS`]: `_outputPath` is where a call
    /// writes, not a value it reads, and `_call` records a call as made. If any
    /// expression is unresolved the result is [`Resolution::Pending`], listing
    /// all of them with JSON pointers.
    ///
    /// ```
    /// use concord_context::{Context, Resolution, View};
    /// use serde_json::json;
    ///
    /// let context = Context::from_json(br#"[{"type": "input", "input": {"userName": "Jane"}}]"#)?;
    /// let call = json!({"_tool": "greetUser", "userName": "†input.userName"});
    /// assert_eq!(
    ///     context.substitute(&View::Global, &call)?,
    ///     Resolution::Ready(json!({"_tool": "greetUser", "userName": "Jane"}))
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn substitute(&self, view: &View, value: &Value) -> Result<Resolution, SubstituteError> {
        let mut reader = Reader::new(self, view);
        let mut pending = Vec::new();
        let substituted = reader.substitute(value, &mut String::new(), &mut pending)?;
        Ok(if pending.is_empty() {
            Resolution::Ready(substituted)
        } else {
            Resolution::Pending(Pending {
                unresolved: pending,
            })
        })
    }
}
