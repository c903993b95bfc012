//! Whether one side's data fits a protocol's messages: the rule the judge applies before
//! it accepts a candidate as written, and the rule the handler templates apply before
//! they map data (so what the judge accepts, a template can serve).
//!
//! Fields match by name, else by the same name in another naming style (`product_id`
//! fits `productId`); a required target field needs a source field, a `const` or a
//! `default`; types may widen (an integer stands for a number) but never change.

use serde_json::{json, Map, Value};

use crate::action::ActionSpec;
use crate::envelope::Envelope;
use crate::json_schema::{
    compatible, fallback, has_properties, is_object_schema, items, properties, required, types,
};
use crate::naming::key;

/// Checks that values of schema `source` can be mapped onto schema `target`; the error
/// names the first field that cannot, `at` saying where the source sits (`the request`).
///
/// ```
/// use concord_negotiate::fit::check_fit;
/// use serde_json::json;
///
/// let wire = json!({"properties": {"product_id": {"type": "string"}}});
/// let ours = json!({"properties": {"productId": {"type": "string"}}, "required": ["productId"]});
/// assert!(check_fit(&wire, &ours, "the request").is_ok());
/// let error = check_fit(&json!({"properties": {}}), &ours, "the request").unwrap_err();
/// assert!(error.contains("`productId`"));
/// ```
pub fn check_fit(source: &Value, target: &Value, at: &str) -> Result<(), String> {
    if has_properties(target) && has_properties(source) {
        let offered = properties(source);
        let needed = required(target);
        for (name, schema) in properties(target) {
            let found = offered
                .iter()
                .find(|(field, _)| *field == name)
                .or_else(|| offered.iter().find(|(field, _)| key(field) == key(name)));
            match found {
                Some((field, source_schema)) => {
                    if !compatible(source_schema, schema) {
                        return Err(format!(
                            "`{field}` in {at} has type {} but `{name}` needs {}",
                            type_list(source_schema),
                            type_list(schema)
                        ));
                    }
                    check_fit(source_schema, schema, &format!("{at}.{field}"))?;
                }
                None if needed.contains(&name) && fallback(schema).is_none() => {
                    return Err(format!(
                        "`{name}` is required but {at} has no field of that name in any naming style"
                    ));
                }
                None => {}
            }
        }
        return Ok(());
    }
    match (items(source), items(target)) {
        (Some(source), Some(target)) => check_fit(source, target, &format!("{at}[]")),
        _ => Ok(()),
    }
}

/// The JSON types a schema allows, for messages (`any` when it does not say).
pub fn type_list(schema: &Value) -> String {
    let kinds = types(schema);
    if kinds.is_empty() {
        "any".into()
    } else {
        kinds.join(" or ")
    }
}

/// Whether a schema describes one non-object value (a string, a number, an array…),
/// carried in a message's single data field.
pub fn is_single_value(schema: Option<&Value>) -> bool {
    schema.is_some_and(|schema| !is_object_schema(schema) && !types(schema).is_empty())
}

/// An object schema of a message schema's data fields (its envelope removed).
pub fn data_schema(schema: &Value, is_envelope: &dyn Fn(&str) -> bool) -> Value {
    let mut fields = Map::new();
    let mut required_fields = Vec::new();
    let needed = required(schema);
    for (name, property) in properties(schema) {
        if !is_envelope(name) {
            fields.insert(name.to_owned(), property.clone());
            if needed.contains(&name) {
                required_fields.push(Value::String(name.to_owned()));
            }
        }
    }
    json!({"type": "object", "properties": fields, "required": required_fields})
}

/// How a protocol's requests carry an action's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestData {
    /// As the request's own data fields (flat).
    Fields,
    /// As the value of this one field: a single value (`"input": 3`), or an object inside
    /// it (`"params": {"city": …}`).
    Single(String),
}

/// Where `input` (our side's schema of the action input; `None`: as the protocol has it)
/// sits in the protocol's requests.
///
/// - a single value (a string, a number, an array): in the request's one data field;
/// - an object whose fields the request does not list itself, when the request has one
///   data field that is an object (`params`, `data`, `arguments`…): inside that field;
/// - else: as the request's data fields.
pub fn request_data(envelope: &Envelope, input: Option<&Value>) -> RequestData {
    let fields = envelope.request_fields.clone().unwrap_or_default();
    let [single] = fields.as_slice() else {
        return RequestData::Fields;
    };
    if is_single_value(input) {
        return RequestData::Single(single.clone());
    }
    let named_like_an_input = input.is_some_and(|input| {
        properties(input)
            .iter()
            .any(|(name, _)| key(name) == key(single))
    });
    match &envelope.request_object_field {
        Some(field) if !named_like_an_input => RequestData::Single(field.clone()),
        _ => RequestData::Fields,
    }
}

/// The schema of the data a request carries, as [`request_data`] places it.
pub fn request_data_schema(envelope: &Envelope, request: &Value, placement: &RequestData) -> Value {
    match placement {
        RequestData::Fields => data_schema(request, &|name| envelope.is_request_envelope(name)),
        RequestData::Single(field) => field_schema(request, field),
    }
}

/// The schema of the data a response carries: its one data field's schema, or an object
/// of its data fields.
pub fn payload_schema(envelope: &Envelope, response: &Value) -> Value {
    match envelope.payload_fields.as_deref() {
        Some([single]) => field_schema(response, single),
        _ => data_schema(response, &|name| envelope.is_response_envelope(name)),
    }
}

fn field_schema(schema: &Value, field: &str) -> Value {
    properties(schema)
        .into_iter()
        .find(|(name, _)| *name == field)
        .map(|(_, sub)| sub.clone())
        .unwrap_or(Value::Null)
}

/// The action of ours a protocol's requests call: the one its action field's constant
/// names, else the one its discriminator's constant names (`getWeather`,
/// `GetWeatherRequest`, `get_weather_request`), each exactly or in another naming style,
/// else the one whose input fields the request carries most of, else our only action when
/// the request names none.
///
/// # Errors
/// What was wrong, naming the action the protocol asked for or the fields it carries.
pub fn find_action<'a>(
    actions: &'a [ActionSpec],
    envelope: &Envelope,
) -> Result<&'a ActionSpec, String> {
    let by_name = |name: &str| {
        actions
            .iter()
            .find(|action| action.name == name)
            .or_else(|| actions.iter().find(|action| key(&action.name) == key(name)))
    };
    if let Some(name) = envelope.action_value.as_ref().and_then(Value::as_str) {
        return by_name(name).ok_or_else(|| format!("we have no action `{name}`"));
    }
    if let Some(tag) = envelope.request_tag() {
        let stem = tag_stem(tag);
        let found = by_name(tag).or_else(|| {
            actions.iter().find(|action| {
                let action_key = key(&action.name);
                action_key == stem || action_key.strip_prefix("get") == Some(stem.as_str())
            })
        });
        if let Some(action) = found {
            return Ok(action);
        }
    }
    let fields: Vec<String> = envelope
        .request_fields
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|name| key(name))
        .collect();
    // Reversed, so that of equal overlaps the first action wins.
    actions
        .iter()
        .rev()
        .map(|action| {
            let overlap = properties(&action.input)
                .iter()
                .filter(|(name, _)| fields.contains(&key(name)))
                .count();
            (overlap, action)
        })
        .filter(|(overlap, _)| *overlap > 0)
        .max_by_key(|(overlap, _)| *overlap)
        .map(|(_, action)| action)
        .or_else(|| match actions {
            [only] if envelope.request_tag().is_none() => Some(only),
            _ => None,
        })
        .ok_or_else(|| match envelope.request_tag() {
            Some(tag) => format!("we have no action `{tag}`"),
            None => "no action of ours takes any of the candidate's request fields".to_owned(),
        })
}

/// A message-type tag without its `Request`/`Req` suffix, as a style-independent key.
fn tag_stem(tag: &str) -> String {
    let tag_key = key(tag);
    ["request", "req", "message", "msg"]
        .iter()
        .find_map(|suffix| tag_key.strip_suffix(suffix).filter(|stem| !stem.is_empty()))
        .unwrap_or(&tag_key)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(name: &str) -> ActionSpec {
        ActionSpec {
            name: name.into(),
            description: String::new(),
            input: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
            output: json!({"type": "object"}),
        }
    }

    #[test]
    fn tags_name_actions_in_any_style() {
        assert_eq!(tag_stem("GetWeatherRequest"), "getweather");
        assert_eq!(tag_stem("weather_req"), "weather");
        let actions = [action("getWeather"), action("convertCurrency")];
        let envelope = |tag: &str| Envelope {
            request_type: Some(("messageType".into(), Some(json!(tag)))),
            ..Envelope::seeds()
        };
        for tag in [
            "getWeather",
            "get_weather",
            "GetWeatherRequest",
            "weatherRequest",
        ] {
            assert_eq!(
                find_action(&actions, &envelope(tag)).unwrap().name,
                "getWeather",
                "{tag}"
            );
        }
    }
}
