//! The HTTP forms (WoT Binding Templates, HTTP binding): on a form whose `href` is
//! `http://` or `https://` (absolute, or relative to such a `base`), `htv:methodName` is a
//! real HTTP method, agrees with every operation the form names (a `readproperty` is a
//! `GET`, an `invokeaction` a `POST`, ...), and `subprotocol` is one the HTTP binding
//! knows (`sse`, `longpoll`, `websub`) on an observation or a subscription only.

use serde_json::{Map, Value};

use super::Checker;
use crate::model::Operation;
use crate::pointer::Path;
use crate::problem::ProblemKind;

/// The HTTP methods (RFC 9110, and `PATCH` of RFC 5789).
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// The subprotocols of the HTTP binding.
const SUBPROTOCOLS: [&str; 3] = ["sse", "longpoll", "websub"];

/// The methods that may carry `operation` over HTTP: its binding's default first.
fn methods_of(operation: Operation) -> &'static [&'static str] {
    use Operation::*;
    match operation {
        ReadProperty
        | ReadAllProperties
        | ReadMultipleProperties
        | QueryAction
        | QueryAllActions => &["GET"],
        WriteProperty | WriteAllProperties | WriteMultipleProperties => &["PUT", "PATCH", "POST"],
        InvokeAction => &["POST", "PUT"],
        CancelAction => &["DELETE"],
        ObserveProperty | ObserveAllProperties | SubscribeEvent | SubscribeAllEvents => &["GET"],
        // Closing a stream, or a request to end a subscription.
        UnobserveProperty | UnobserveAllProperties | UnsubscribeEvent | UnsubscribeAllEvents => {
            &["GET", "DELETE"]
        }
    }
}

/// Whether `operation` observes or subscribes (or undoes it): where a subprotocol fits.
fn pushes(operation: Operation) -> bool {
    use Operation::*;
    matches!(
        operation,
        ObserveProperty
            | ObserveAllProperties
            | UnobserveProperty
            | UnobserveAllProperties
            | SubscribeEvent
            | SubscribeAllEvents
            | UnsubscribeEvent
            | UnsubscribeAllEvents
    )
}

impl<'v> Checker<'v> {
    /// The HTTP binding's rules for `terms`, a form naming `operations`.
    pub(super) fn http_form(
        &mut self,
        terms: &'v Map<String, Value>,
        at: &Path<'_>,
        operations: Option<&[Operation]>,
    ) {
        if !self.is_http_href(terms) {
            return;
        }
        let method = match terms.get("htv:methodName") {
            None => None,
            Some(Value::String(method)) if METHODS.contains(&method.as_str()) => {
                Some(method.as_str())
            }
            Some(Value::String(method)) => {
                let hint = if METHODS.contains(&method.to_uppercase().as_str()) {
                    " (methods are uppercase)"
                } else {
                    ""
                };
                self.report(
                    ProblemKind::InvalidValue,
                    &at.key("htv:methodName"),
                    format!(
                        "`{method}` is not an HTTP method{hint}; expected one of {}",
                        METHODS.join(", ")
                    ),
                );
                None
            }
            Some(other) => {
                self.wrong_type(&at.key("htv:methodName"), "an HTTP method (string)", other);
                None
            }
        };
        let operations = operations.unwrap_or_default();
        if let Some(method) = method {
            for operation in operations {
                let allowed = methods_of(*operation);
                if !allowed.is_empty() && !allowed.contains(&method) && method != "HEAD" {
                    self.report(
                        ProblemKind::Conflict,
                        &at.key("htv:methodName"),
                        format!(
                            "`{}` over HTTP is {}, not `{method}`",
                            operation.name(),
                            allowed.join(" or ")
                        ),
                    );
                }
            }
        }
        if let Some(Value::String(subprotocol)) = terms.get("subprotocol") {
            if !SUBPROTOCOLS.contains(&subprotocol.as_str()) {
                self.report(
                    ProblemKind::InvalidValue,
                    &at.key("subprotocol"),
                    format!(
                        "`{subprotocol}` is not a subprotocol of the HTTP binding; expected one of {}",
                        SUBPROTOCOLS.join(", ")
                    ),
                );
            } else if let Some(operation) = operations.iter().find(|op| !pushes(**op)) {
                self.report(
                    ProblemKind::Conflict,
                    &at.key("subprotocol"),
                    format!(
                        "the subprotocol `{subprotocol}` is for observing and subscribing, not `{}`",
                        operation.name()
                    ),
                );
            }
        }
    }

    /// Whether the form's `href` is HTTP: `http(s)://`, or relative to an HTTP `base`.
    fn is_http_href(&self, terms: &Map<String, Value>) -> bool {
        let Some(Value::String(href)) = terms.get("href") else {
            return false;
        };
        let scheme = href
            .split_once(':')
            .map(|(scheme, _)| scheme)
            .filter(|scheme| {
                scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            });
        match scheme {
            Some(scheme) => {
                scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")
            }
            None => self
                .base
                .as_ref()
                .is_some_and(|base| matches!(base.scheme(), "http" | "https")),
        }
    }
}
