//! Generated protocols, sides and handler arguments: varied envelopes (message id in any
//! naming style, `type` and `action` fixed or free, status codes nested, top-level or absent,
//! error conventions with and without HTTP codes), data fields in several naming styles and
//! with hostile names (`__proto__`, integer-like keys, quotes, non-ASCII), single values, and
//! arguments that are valid, damaged or of the wrong shape altogether.

use concord_handlers::Local;
use concord_negotiate::naming::{convert, NamingStyle};
use concord_negotiate::{
    ActionSpec, Encoding, ErrorConvention, Need, ProtocolDocument, ProtocolSpec,
};
use concord_sandbox::{Function, Role};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Field names, hostile ones included: names on `Object.prototype`, integer-like keys
/// (which JavaScript orders first), a leading zero, separators, quotes, non-ASCII.
pub const NAMES: [&str; 20] = [
    "productId",
    "product_id",
    "ProductId",
    "price",
    "tags",
    "__proto__",
    "constructor",
    "toString",
    "a.b",
    "x",
    "0",
    "7",
    "10",
    "2147483647",
    "4294967294",
    "01",
    "naïve-Name",
    "İd",
    "quote\"d\n",
    "",
];

pub fn name() -> impl Strategy<Value = String> {
    prop::sample::select(NAMES.to_vec()).prop_map(str::to_owned)
}

/// A data field's schema: scalars (with defaults and constants), nested objects, arrays.
pub fn schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({"type": "string"})),
        Just(json!({"type": "number", "default": 1.5})),
        Just(json!({"type": "integer"})),
        Just(json!({"type": "boolean", "default": false})),
        Just(json!({"type": "string", "const": "fixed"})),
        Just(json!({"type": ["string", "null"]})),
        Just(json!({"default": {"7": 1, "b": [1.0, 2]}})),
        Just(json!({})),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            object_schema(inner.clone(), 0..4),
            inner.prop_map(|items| json!({"type": "array", "items": items})),
        ]
    })
}

fn object_schema(
    inner: impl Strategy<Value = Value>,
    size: std::ops::Range<usize>,
) -> impl Strategy<Value = Value> {
    prop::collection::vec((name(), inner, any::<bool>()), size).prop_map(|fields| {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for (name, schema, is_required) in fields {
            if is_required && !properties.contains_key(&name) {
                required.push(Value::String(name.clone()));
            }
            properties.insert(name, schema);
        }
        json!({"type": "object", "properties": properties, "required": required})
    })
}

/// How a generated protocol lays out its envelope.
#[derive(Debug, Clone)]
pub struct Shape {
    id: &'static str,
    request_type: u8,
    action: u8,
    status: u8,
    convention: u8,
    single_input: bool,
    id_first: bool,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        prop::sample::select(vec!["messageId", "message_id", "MessageID", "msgId"]),
        0u8..3,
        0u8..3,
        0u8..5,
        0u8..6,
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.8),
    )
        .prop_map(
            |(id, request_type, action, status, convention, single_input, id_first)| Shape {
                id,
                request_type,
                action,
                status,
                convention,
                single_input,
                id_first,
            },
        )
}

/// A protocol document written from generated schemas.
pub fn document() -> impl Strategy<Value = ProtocolDocument> {
    (
        shape(),
        object_schema(schema(), 0..4),
        object_schema(schema(), 0..3),
        schema(),
    )
        .prop_map(|(shape, request_data, response_data, single)| {
            write_document(&shape, &request_data, &response_data, &single)
        })
}

fn write_document(
    shape: &Shape,
    request_data: &Value,
    response_data: &Value,
    single: &Value,
) -> ProtocolDocument {
    let mut request = Map::new();
    let mut required = vec![json!(shape.id)];
    let mut envelope = Map::new();
    envelope.insert(shape.id.to_owned(), json!({"type": "string"}));
    match shape.request_type {
        0 => {
            envelope.insert("type".into(), json!({"type": "string", "const": "REQUEST"}));
            required.push(json!("type"));
        }
        1 => {
            envelope.insert("type".into(), json!({"type": "string"}));
        }
        _ => {}
    }
    match shape.action {
        0 => {
            envelope.insert(
                "action".into(),
                json!({"type": "string", "const": "lookUp"}),
            );
            required.push(json!("action"));
        }
        1 => {
            envelope.insert("action".into(), json!({"type": "string"}));
        }
        _ => {}
    }
    let mut data = Map::new();
    if shape.single_input {
        data.insert("input".into(), single.clone());
        required.push(json!("input"));
    } else {
        for (name, schema) in request_data["properties"].as_object().into_iter().flatten() {
            if !envelope.contains_key(name) {
                data.insert(name.clone(), schema.clone());
            }
        }
        for name in request_data["required"].as_array().into_iter().flatten() {
            if data.contains_key(name.as_str().unwrap_or_default()) {
                required.push(name.clone());
            }
        }
    }
    let (first, second) = if shape.id_first {
        (envelope, data)
    } else {
        (data, envelope)
    };
    request.extend(first);
    request.extend(second);

    let mut response = Map::new();
    let mut response_required = vec![json!(shape.id)];
    response.insert(shape.id.to_owned(), json!({"type": "string"}));
    if shape.request_type == 0 {
        response.insert(
            "type".into(),
            json!({"type": "string", "const": "RESPONSE"}),
        );
        response_required.push(json!("type"));
    }
    let mut convention = ErrorConvention {
        http_status_codes: shape.convention.is_multiple_of(2),
        ..ErrorConvention::default()
    };
    match shape.status {
        0 => {
            response.insert(
                "status".into(),
                json!({"type": "object", "properties": {"code": {"type": "integer"}, "message": {"type": "string"}}, "required": ["code"]}),
            );
            response_required.push(json!("status"));
            convention.code_pointer = Some("/status/code".into());
            if shape.convention < 4 {
                convention.message_pointer = Some("/status/message".into());
            }
        }
        1 => {
            let code = if shape.convention.is_multiple_of(2) {
                json!({"type": "integer"})
            } else {
                json!({"type": "integer", "default": 0})
            };
            response.insert("code".into(), code);
            response.insert("message".into(), json!({"type": "string"}));
            response_required.push(json!("code"));
            convention.code_pointer = Some("/code".into());
            convention.message_pointer = Some("/message".into());
        }
        2 => {
            // The pointers name a place the schema does not list.
            convention.code_pointer = Some("/outcome/code".into());
        }
        4 => {
            // A status word per outcome (two for a success), no numeric code.
            response.insert(
                "status".into(),
                json!({"type": "string", "enum": ["success", "ok", "not_found", "client_error", "error"]}),
            );
            response.insert("message".into(), json!({"type": "string"}));
            response_required.push(json!("status"));
        }
        _ => {}
    }
    for (name, schema) in response_data["properties"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if !response.contains_key(name) {
            response.insert(name.clone(), schema.clone());
        }
    }
    for name in response_data["required"].as_array().into_iter().flatten() {
        if response.contains_key(name.as_str().unwrap_or_default())
            && !response_required.contains(name)
        {
            response_required.push(name.clone());
        }
    }
    let text = ProtocolDocument::write(&ProtocolSpec {
        requirement: "Look a thing up.".into(),
        flow: "One request, one response.".into(),
        request_schema: json!({"type": "object", "properties": request, "required": required}),
        response_schema: json!({"type": "object", "properties": response, "required": response_required}),
        error_convention: convention,
        timeout: Duration::from_secs(15),
        encoding: Encoding::Json,
    });
    ProtocolDocument::parse(&text).unwrap_or_else(|error| panic!("{error}\n{text}"))
}

/// Our side of `document`: as the protocol has it, or with our own schemas in another
/// naming style (fields renamed, so the template maps them).
pub fn local(document: &ProtocolDocument, role: Role, restyle: Option<NamingStyle>) -> Local {
    let plain = Local::from_protocol(document, role, "lookUp");
    let Some(style) = restyle else {
        return plain;
    };
    match plain {
        Local::Provider(action) => Local::Provider(ActionSpec {
            input: restyled(&action.input, style),
            output: restyled(&action.output, style),
            ..action
        }),
        Local::Requester(need) => {
            let provider = Local::from_protocol(document, Role::Provider, "lookUp");
            let Local::Provider(action) = provider else {
                return Local::Requester(need);
            };
            Local::Requester(Need {
                action: need.action,
                input: Some(restyled(&action.input, style)),
                output: Some(restyled(&action.output, style)),
            })
        }
    }
}

pub fn style() -> impl Strategy<Value = Option<NamingStyle>> {
    prop_oneof![
        Just(None),
        Just(Some(NamingStyle::SnakeCase)),
        Just(Some(NamingStyle::KebabCase)),
        Just(Some(NamingStyle::PascalCase)),
    ]
}

/// A schema with every property name written in `style`, recursively.
fn restyled(schema: &Value, style: NamingStyle) -> Value {
    match schema {
        Value::Object(object) => Value::Object(
            object
                .iter()
                .map(|(key, value)| {
                    let value = match key.as_str() {
                        "properties" => Value::Object(
                            value
                                .as_object()
                                .into_iter()
                                .flatten()
                                .map(|(name, sub)| (convert(name, style), restyled(sub, style)))
                                .collect(),
                        ),
                        "required" => Value::Array(
                            value
                                .as_array()
                                .into_iter()
                                .flatten()
                                .map(|name| {
                                    Value::String(convert(name.as_str().unwrap_or_default(), style))
                                })
                                .collect(),
                        ),
                        "items" => restyled(value, style),
                        _ => value.clone(),
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A small deterministic generator of values, driven by a seed from proptest.
pub struct Dice(u64);

impl Dice {
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// Any value: numbers JavaScript changes (1.0, 2^53 + 1, -0.0, 1e21), strings with
    /// surrogate pairs and escapes, arrays, objects with integer-like keys.
    pub fn any(&mut self, depth: u32) -> Value {
        match self.below(if depth == 0 { 6 } else { 8 }) {
            0 => Value::Null,
            1 => Value::Bool(self.chance(50)),
            2 => self.number(),
            3 | 4 => self.string(),
            5 => json!(self.pick(&NAMES)),
            6 => Value::Array((0..self.below(3)).map(|_| self.any(depth - 1)).collect()),
            _ => {
                let mut object = Map::new();
                for _ in 0..self.below(4) {
                    object.insert(self.pick(&NAMES).to_string(), self.any(depth - 1));
                }
                Value::Object(object)
            }
        }
    }

    fn number(&mut self) -> Value {
        let numbers = [
            json!(0),
            json!(7),
            json!(-3),
            json!(404),
            json!(200),
            json!(2_147_483_648u64),
            json!(9_007_199_254_740_993u64),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1.0),
            json!(-0.0),
            json!(2.5),
            json!(1299.99),
            json!(1e21),
            json!(1.5e-7),
            json!(123456789012345680000.0),
            json!(404.0),
            json!(0.1),
        ];
        self.pick(&numbers).clone()
    }

    fn string(&mut self) -> Value {
        let strings = [
            "",
            "P1",
            "REQUEST",
            "RESPONSE",
            "lookUp",
            "fixed",
            "a somewhat longer text that goes past forty characters",
            "emoji 😀 at the cut: 0123456789012345678901234567😀😀",
            "quote \" backslash \\ newline \n tab \t bell \u{7}",
            "\u{2028}",
        ];
        json!(self.pick(&strings))
    }

    /// A value for `schema` (mostly valid), sometimes any value at all.
    pub fn sample(&mut self, schema: &Value, depth: u32) -> Value {
        if self.chance(8) || depth == 0 {
            return self.any(1);
        }
        if let Some(fixed) = schema.get("const") {
            return fixed.clone();
        }
        let kind = match schema.get("type") {
            Some(Value::String(kind)) => kind.as_str(),
            Some(Value::Array(kinds)) => kinds
                .get(self.below(kinds.len() as u64) as usize)
                .and_then(Value::as_str)
                .unwrap_or("null"),
            _ => "any",
        };
        match kind {
            "string" => self.string(),
            "number" => self.number(),
            "integer" => json!(self.below(1000)),
            "boolean" => Value::Bool(self.chance(50)),
            "null" => Value::Null,
            "array" => {
                let items = schema.get("items").cloned().unwrap_or(json!({}));
                Value::Array(
                    (0..self.below(3))
                        .map(|_| self.sample(&items, depth - 1))
                        .collect(),
                )
            }
            "object" => self.object(schema, depth),
            _ => self.any(2),
        }
    }

    fn object(&mut self, schema: &Value, depth: u32) -> Value {
        let required: Vec<&str> = schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut object = Map::new();
        for (name, sub) in schema["properties"].as_object().into_iter().flatten() {
            if required.contains(&name.as_str()) || self.chance(70) {
                // Sometimes in another naming style, which the mapping also finds.
                let key = if self.chance(15) {
                    convert(name, NamingStyle::SnakeCase)
                } else {
                    name.clone()
                };
                object.insert(key, self.sample(sub, depth - 1));
            }
        }
        if self.chance(25) {
            object.insert(self.pick(&NAMES).to_string(), self.any(1));
        }
        if self.chance(10) && !object.is_empty() {
            let keys: Vec<String> = object.keys().cloned().collect();
            let key = self.pick(&keys).clone();
            object.shift_remove(&key);
        }
        Value::Object(object)
    }

    /// An argument for `function` of a handler for `document` (our side `local`).
    pub fn argument(
        &mut self,
        function: Function,
        document: &ProtocolDocument,
        local: &Local,
    ) -> Value {
        if self.chance(5) {
            return self.any(2);
        }
        let request = document.request_schema.clone().unwrap_or(json!({}));
        let response = document.response_schema.clone().unwrap_or(json!({}));
        let (input, output) = match local {
            Local::Provider(action) => (action.input.clone(), action.output.clone()),
            Local::Requester(need) => (
                need.input.clone().unwrap_or(json!({})),
                need.output.clone().unwrap_or(json!({})),
            ),
        };
        let id = Value::String(format!("m{}", self.below(100)));
        let mut argument = match function {
            Function::EncodeRequest => json!({"messageId": id, "input": self.sample(&input, 4)}),
            Function::DecodeRequest => self.message(&request, 4),
            Function::EncodeResponse if self.chance(30) => {
                json!({"messageId": id, "error": {"code": self.sample(&json!({"type": "integer"}), 1), "message": self.string()}})
            }
            Function::EncodeResponse => json!({"messageId": id, "result": self.sample(&output, 4)}),
            Function::DecodeResponse => {
                let mut message = self.message(&response, 4);
                if self.chance(30) {
                    for pointer in ["/status", "/code", "/outcome"] {
                        if let Some(slot) = message.pointer_mut(pointer) {
                            *slot = if pointer == "/code" {
                                json!(503)
                            } else {
                                json!({"code": 404, "message": self.string()})
                            };
                        }
                    }
                    if self.chance(30) {
                        message["outcome"] = json!({"code": self.number()});
                    }
                }
                message
            }
        };
        if self.chance(3) {
            // Nested past what the sandbox takes in.
            if let Some(object) = argument.as_object_mut() {
                let deep = (0..130).fold(Value::Null, |inner, _| json!([inner]));
                object.insert("deep".to_owned(), deep);
            }
        }
        if self.chance(15) {
            if let Some(object) = argument.as_object_mut().filter(|object| !object.is_empty()) {
                let keys: Vec<String> = object.keys().cloned().collect();
                let key = self.pick(&keys).clone();
                object.insert(key, self.any(1));
            }
        }
        argument
    }

    /// A message for a message schema: every property (mostly valid values).
    fn message(&mut self, schema: &Value, depth: u32) -> Value {
        let mut message = Map::new();
        for (name, sub) in schema["properties"].as_object().into_iter().flatten() {
            if self.chance(93) {
                message.insert(name.clone(), self.sample(sub, depth));
            }
        }
        Value::Object(message)
    }
}
