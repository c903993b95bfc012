//! Security schemes: every TD 1.1 scheme, `combo`, and prefixed extension schemes.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::{MultiLanguage, OneOrMany};

/// A security scheme from `securityDefinitions`, told apart by its `scheme` term.
///
/// ```
/// use concord_describe::SecurityScheme;
///
/// let scheme: SecurityScheme = serde_json::from_str(r#"{"scheme": "combo", "allOf": ["a", "b"]}"#)?;
/// assert_eq!(scheme.scheme(), "combo");
/// assert_eq!(scheme.references(), ["a", "b"]);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SecurityScheme {
    /// `nosec`: no authentication.
    NoSec(NoSecurityScheme),
    /// `auto`: negotiated by the protocol.
    Auto(AutoSecurityScheme),
    /// `combo`: a combination of other named schemes.
    Combo(ComboSecurityScheme),
    /// `basic`: user name and password.
    Basic(BasicSecurityScheme),
    /// `digest`: digest access authentication.
    Digest(DigestSecurityScheme),
    /// `apikey`: an API key.
    ApiKey(ApiKeySecurityScheme),
    /// `bearer`: a bearer token.
    Bearer(BearerSecurityScheme),
    /// `psk`: a pre-shared key.
    Psk(PskSecurityScheme),
    /// `oauth2`: OAuth 2.0.
    OAuth2(OAuth2SecurityScheme),
    /// A scheme from a context extension, named with a prefix (`ace:ACESecurityScheme`).
    Additional(AdditionalSecurityScheme),
}

/// Terms every security scheme may carry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SchemeCommon {
    /// Semantic annotations (`@type`).
    #[serde(rename = "@type", default, skip_serializing_if = "Option::is_none")]
    pub types: Option<OneOrMany<String>>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Descriptions by language tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptions: Option<MultiLanguage>,
    /// URI of a proxy server this scheme authenticates with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
}

/// Where a credential goes (`in`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CredentialLocation {
    /// An HTTP header.
    Header,
    /// A query parameter.
    Query,
    /// The request body.
    Body,
    /// A cookie.
    Cookie,
    /// A URI template variable (`apikey` only).
    Uri,
    /// Decided by the protocol.
    Auto,
}

macro_rules! scheme_struct {
    ($(#[$meta:meta])* $name:ident { $($(#[$field_meta:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        #[non_exhaustive]
        pub struct $name {
            /// Terms every scheme may carry.
            #[serde(flatten)]
            pub common: SchemeCommon,
            $(
                $(#[$field_meta])*
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $field: Option<$ty>,
            )*
            /// Every other term, kept as written.
            #[serde(flatten)]
            pub extensions: Map<String, Value>,
        }
    };
}

scheme_struct!(
    /// `nosec`.
    NoSecurityScheme {}
);
scheme_struct!(
    /// `auto`. Must not carry `name`.
    AutoSecurityScheme {}
);
scheme_struct!(
    /// `basic`.
    BasicSecurityScheme {
        /// Where the credentials go (TD default `header`).
        r#in: CredentialLocation,
        /// Name of the header, parameter or cookie.
        name: String,
    }
);
scheme_struct!(
    /// `digest`.
    DigestSecurityScheme {
        /// Quality of protection.
        qop: DigestQop,
        /// Where the credentials go.
        r#in: CredentialLocation,
        /// Name of the header, parameter or cookie.
        name: String,
    }
);
scheme_struct!(
    /// `apikey`.
    ApiKeySecurityScheme {
        /// Where the key goes.
        r#in: CredentialLocation,
        /// Name of the header, parameter, cookie or URI variable.
        name: String,
    }
);
scheme_struct!(
    /// `bearer`.
    BearerSecurityScheme {
        /// URI of the authorization server.
        authorization: String,
        /// Signing algorithm (`ES256`, ...).
        alg: String,
        /// Token format (`jwt`, ...).
        format: String,
        /// Where the token goes.
        r#in: CredentialLocation,
        /// Name of the header, parameter or cookie.
        name: String,
    }
);
scheme_struct!(
    /// `psk`.
    PskSecurityScheme {
        /// Identity hint.
        identity: String,
    }
);
scheme_struct!(
    /// `oauth2`.
    OAuth2SecurityScheme {
        /// URI of the authorization endpoint.
        authorization: String,
        /// URI of the token endpoint.
        token: String,
        /// URI of the refresh endpoint.
        refresh: String,
        /// Scopes.
        scopes: OneOrMany<String>,
        /// Flow (`code`, `client`, `device`, ...).
        flow: String,
    }
);

/// Digest quality of protection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DigestQop {
    /// `auth`.
    #[serde(rename = "auth")]
    Auth,
    /// `auth-int`.
    #[serde(rename = "auth-int")]
    AuthInt,
}

/// `combo`: other schemes, all of which (`allOf`) or one of which (`oneOf`) apply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ComboSecurityScheme {
    /// Terms every scheme may carry.
    #[serde(flatten)]
    pub common: SchemeCommon,
    /// The combined schemes.
    #[serde(flatten)]
    pub combination: Combination,
    /// Every other term, kept as written.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}

/// How a `combo` combines the named schemes (at least two).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Combination {
    /// Exactly one of them applies.
    #[serde(rename = "oneOf")]
    OneOf(Vec<String>),
    /// All of them apply.
    #[serde(rename = "allOf")]
    AllOf(Vec<String>),
}

/// A scheme defined by a context extension; `scheme` has a prefix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AdditionalSecurityScheme {
    /// The prefixed scheme name.
    pub scheme: String,
    /// Terms every scheme may carry.
    #[serde(flatten)]
    pub common: SchemeCommon,
    /// Every other term, kept as written.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}

impl SecurityScheme {
    /// The `scheme` term.
    pub fn scheme(&self) -> &str {
        match self {
            SecurityScheme::NoSec(_) => "nosec",
            SecurityScheme::Auto(_) => "auto",
            SecurityScheme::Combo(_) => "combo",
            SecurityScheme::Basic(_) => "basic",
            SecurityScheme::Digest(_) => "digest",
            SecurityScheme::ApiKey(_) => "apikey",
            SecurityScheme::Bearer(_) => "bearer",
            SecurityScheme::Psk(_) => "psk",
            SecurityScheme::OAuth2(_) => "oauth2",
            SecurityScheme::Additional(scheme) => &scheme.scheme,
        }
    }

    /// The names of the schemes a `combo` combines; empty for other schemes.
    pub fn references(&self) -> &[String] {
        match self {
            SecurityScheme::Combo(combo) => match &combo.combination {
                Combination::OneOf(names) | Combination::AllOf(names) => names,
            },
            _ => &[],
        }
    }

    /// `nosec`.
    pub fn nosec() -> Self {
        SecurityScheme::NoSec(NoSecurityScheme::default())
    }

    /// A scheme of a context extension: `scheme` is prefixed (`concord:didwba`).
    pub fn extension(scheme: impl Into<String>, description: impl Into<String>) -> Self {
        SecurityScheme::Additional(AdditionalSecurityScheme {
            scheme: scheme.into(),
            common: SchemeCommon {
                description: Some(description.into()),
                ..SchemeCommon::default()
            },
            extensions: Map::new(),
        })
    }

    /// `combo` with `oneOf` the schemes `names`: any one of them will do.
    pub fn one_of(names: impl IntoIterator<Item = String>) -> Self {
        SecurityScheme::Combo(ComboSecurityScheme {
            common: SchemeCommon::default(),
            combination: Combination::OneOf(names.into_iter().collect()),
            extensions: Map::new(),
        })
    }

    /// `bearer` with a token in the `Authorization` header.
    pub fn bearer() -> Self {
        SecurityScheme::Bearer(BearerSecurityScheme {
            r#in: Some(CredentialLocation::Header),
            ..BearerSecurityScheme::default()
        })
    }
}

impl Serialize for SecurityScheme {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tagged<'a, T> {
            scheme: &'a str,
            #[serde(flatten)]
            inner: &'a T,
        }
        let scheme = self.scheme();
        match self {
            SecurityScheme::NoSec(inner) => Tagged { scheme, inner }.serialize(serializer),
            SecurityScheme::Auto(inner) => Tagged { scheme, inner }.serialize(serializer),
            SecurityScheme::Combo(inner) => Tagged { scheme, inner }.serialize(serializer),
            SecurityScheme::Basic(inner) => Tagged { scheme, inner }.serialize(serializer),
            SecurityScheme::Digest(inner) => Tagged { scheme, inner }.serialize(serializer),
            SecurityScheme::ApiKey(inner) => Tagged { scheme, inner }.serialize(serializer),
            SecurityScheme::Bearer(inner) => Tagged { scheme, inner }.serialize(serializer),
            SecurityScheme::Psk(inner) => Tagged { scheme, inner }.serialize(serializer),
            SecurityScheme::OAuth2(inner) => Tagged { scheme, inner }.serialize(serializer),
            SecurityScheme::Additional(inner) => inner.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for SecurityScheme {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut terms = Map::<String, Value>::deserialize(deserializer)?;
        let scheme = match terms.get("scheme") {
            Some(Value::String(scheme)) => scheme.clone(),
            Some(_) => return Err(D::Error::custom("`scheme` must be a string")),
            None => return Err(D::Error::missing_field("scheme")),
        };
        if !is_known_scheme(&scheme) {
            return serde_json::from_value(Value::Object(terms))
                .map(SecurityScheme::Additional)
                .map_err(D::Error::custom);
        }
        terms.remove("scheme");
        let rest = Value::Object(terms);
        let parsed = match scheme.as_str() {
            "nosec" => serde_json::from_value(rest).map(SecurityScheme::NoSec),
            "auto" => serde_json::from_value(rest).map(SecurityScheme::Auto),
            "combo" => serde_json::from_value(rest).map(SecurityScheme::Combo),
            "basic" => serde_json::from_value(rest).map(SecurityScheme::Basic),
            "digest" => serde_json::from_value(rest).map(SecurityScheme::Digest),
            "apikey" => serde_json::from_value(rest).map(SecurityScheme::ApiKey),
            "bearer" => serde_json::from_value(rest).map(SecurityScheme::Bearer),
            "psk" => serde_json::from_value(rest).map(SecurityScheme::Psk),
            _ => serde_json::from_value(rest).map(SecurityScheme::OAuth2),
        };
        parsed.map_err(D::Error::custom)
    }
}

/// The TD 1.1 scheme names.
pub(crate) const KNOWN_SCHEMES: [&str; 9] = [
    "nosec", "auto", "combo", "basic", "digest", "apikey", "bearer", "psk", "oauth2",
];

pub(crate) fn is_known_scheme(scheme: &str) -> bool {
    KNOWN_SCHEMES.contains(&scheme)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_scheme_round_trips() {
        for json in [
            json!({"scheme": "nosec", "description": "open"}),
            json!({"scheme": "auto", "proxy": "https://proxy.example.com"}),
            json!({"scheme": "combo", "oneOf": ["a", "b"]}),
            json!({"scheme": "basic", "in": "header", "name": "Authorization"}),
            json!({"scheme": "digest", "qop": "auth-int", "in": "query"}),
            json!({"scheme": "apikey", "in": "uri", "name": "key"}),
            json!({"scheme": "bearer", "format": "jwt", "alg": "ES256", "authorization": "https://a.example.com/"}),
            json!({"scheme": "psk", "identity": "id"}),
            json!({"scheme": "oauth2", "flow": "code", "scopes": ["a"], "token": "https://t.example.com/"}),
            json!({"scheme": "ace:ACESecurityScheme", "ace:as": "coaps://as.example.com/token"}),
        ] {
            let scheme: SecurityScheme = serde_json::from_value(json.clone()).unwrap();
            assert_eq!(scheme.scheme(), json["scheme"]);
            assert_eq!(serde_json::to_value(&scheme).unwrap(), json);
        }
    }
}
