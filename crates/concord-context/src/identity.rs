//! Names that identify data: kinds, instances, the identity they form, and views.

use std::fmt;
use std::str::FromStr;

/// Longest kind or instance name accepted, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// Why a string is not a valid kind, instance or peer label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// The name is the empty string.
    #[error("{what} is empty")]
    Empty {
        /// What was being named (`kind`, `instance`, `peer label`).
        what: &'static str,
    },
    /// The name has more characters than allowed.
    #[error("{what} `{name}` is longer than {max} characters")]
    TooLong {
        /// What was being named.
        what: &'static str,
        /// The rejected name.
        name: String,
        /// The limit, in characters.
        max: usize,
    },
    /// The name contains a character outside its alphabet.
    #[error("{what} `{name}` has {ch:?} at character {at}; allowed: {allowed}")]
    BadChar {
        /// What was being named.
        what: &'static str,
        /// The rejected name.
        name: String,
        /// The offending character.
        ch: char,
        /// Its position, counted in characters from 0.
        at: usize,
        /// The alphabet, in words.
        allowed: &'static str,
    },
}

/// Checks `name` against a length limit and an alphabet.
pub(crate) fn check_name(
    what: &'static str,
    name: &str,
    max: usize,
    allowed: &'static str,
    is_allowed: impl Fn(char) -> bool,
) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty { what });
    }
    if let Some((at, ch)) = name.chars().enumerate().find(|&(_, ch)| !is_allowed(ch)) {
        return Err(NameError::BadChar {
            what,
            name: name.to_owned(),
            ch,
            at,
            allowed,
        });
    }
    if name.chars().count() > max {
        return Err(NameError::TooLong {
            what,
            name: name.to_owned(),
            max,
        });
    }
    Ok(())
}

const NAME_ALPHABET: &str = "letters, digits, `_` and `-`";

fn is_name_char(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_' || ch == '-'
}

/// The role of a data message (`kind`): `data` (the default), `input`, `state`, `user`…
///
/// A kind is 1 to 64 letters, digits, `_` or `-` (Unicode letters and digits
/// included). That keeps it safe to print in a heading (`## Data: ¶user`) and
/// to write in a variable reference (`†user.name`).
///
/// ```
/// use concord_context::Kind;
///
/// let kind: Kind = "state".parse()?;
/// assert_eq!(kind.as_str(), "state");
/// assert!("user.name".parse::<Kind>().is_err());
/// # Ok::<(), concord_context::NameError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Kind(String);

impl Kind {
    /// The kind of a data message that names none.
    pub const DEFAULT: &'static str = "data";
    /// The kind of input messages, rendered with the input layout.
    pub const INPUT: &'static str = "input";
    /// The kind of state messages.
    pub const STATE: &'static str = "state";

    /// Validates a kind name.
    pub fn new(name: &str) -> Result<Self, NameError> {
        check_name("kind", name, MAX_NAME_CHARS, NAME_ALPHABET, is_name_char)?;
        Ok(Self(name.to_owned()))
    }

    /// The default kind, `data`.
    pub fn data() -> Self {
        Self(Self::DEFAULT.to_owned())
    }

    /// The kind `input`.
    pub fn input() -> Self {
        Self(Self::INPUT.to_owned())
    }

    /// The kind `state`.
    pub fn state() -> Self {
        Self(Self::STATE.to_owned())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is `input`, whose block has the input layout.
    pub fn is_input(&self) -> bool {
        self.0 == Self::INPUT
    }
}

impl FromStr for Kind {
    type Err = NameError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::new(name)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The `_instance` of a data message: which execution thread of a batch it belongs to.
///
/// Same alphabet and limit as [`Kind`]; `①`, `employee_A` and UUIDs are all valid.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceId(String);

impl InstanceId {
    /// Validates an instance identifier.
    pub fn new(id: &str) -> Result<Self, NameError> {
        check_name("instance", id, MAX_NAME_CHARS, NAME_ALPHABET, is_name_char)?;
        Ok(Self(id.to_owned()))
    }

    /// The identifier.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for InstanceId {
    type Err = NameError;

    fn from_str(id: &str) -> Result<Self, Self::Err> {
        Self::new(id)
    }
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What makes data messages merge: the same kind and the same instance.
///
/// `instance: None` is the global identity of a kind, visible to every instance.
/// Displayed as the block label the LLM sees: `¶user`, `¶state (_instance: ①)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    /// The kind.
    pub kind: Kind,
    /// The instance, or `None` for global data.
    pub instance: Option<InstanceId>,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "¶{}", self.kind)?;
        if let Some(instance) = &self.instance {
            write!(f, " (_instance: {instance})")?;
        }
        Ok(())
    }
}

/// Whose eyes a context is rendered, read and validated through.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum View {
    /// The whole batch: one block per identity, global and instanced ones
    /// labelled with their instance. Variables read global data.
    Global,
    /// One instance: per kind, its global messages and then this instance's
    /// messages, merged in that order, so instanced data overrides global data.
    Instance(InstanceId),
}

impl View {
    /// The instance this view is for, if any.
    pub fn instance(&self) -> Option<&InstanceId> {
        match self {
            Self::Global => None,
            Self::Instance(id) => Some(id),
        }
    }
}
