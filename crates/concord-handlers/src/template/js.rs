//! Writing JavaScript: lines, safe literals, mapping tables and the fixed helper functions.

use serde_json::Value;

use crate::mapping::Plan;

/// Accumulates the module's lines.
pub(super) struct Writer {
    out: String,
}

impl Writer {
    pub fn new() -> Self {
        Self { out: String::new() }
    }

    pub fn line(&mut self, line: &str) {
        self.out.push_str(line);
        self.out.push('\n');
    }

    pub fn blank(&mut self) {
        self.out.push('\n');
    }

    pub fn raw(&mut self, text: &str) {
        self.out.push_str(text);
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// A JavaScript expression for a JSON value.
///
/// JSON text is a JavaScript expression, except that a `"__proto__"` key in an object
/// literal sets the prototype instead of a property; values holding objects therefore go
/// through `JSON.parse`, which makes every key an ordinary property.
pub(super) fn literal(value: &Value) -> String {
    match value {
        _ if holds_object(value) => {
            let text = Value::String(value.to_string()).to_string();
            format!("JSON.parse({text})")
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(literal).collect();
            format!("[{}]", items.join(", "))
        }
        _ => value.to_string(),
    }
}

fn holds_object(value: &Value) -> bool {
    match value {
        Value::Object(_) => true,
        Value::Array(items) => items.iter().any(holds_object),
        _ => false,
    }
}

/// A mapping table: `null` (copy), `{ items: … }` or `{ fields: [ … ] }`, one field a line.
pub(super) fn plan_literal(plan: &Plan, indent: usize) -> String {
    match plan {
        Plan::Copy => "null".to_owned(),
        Plan::Items(items) => format!("{{ items: {} }}", plan_literal(items, indent)),
        Plan::Fields(fields) => {
            let pad = "  ".repeat(indent + 1);
            let mut out = String::from("{ fields: [\n");
            for field in fields {
                out.push_str(&pad);
                out.push_str("{ name: ");
                out.push_str(&literal(&Value::String(field.name.clone())));
                if field.required {
                    out.push_str(", required: true");
                }
                if let Some(fallback) = &field.fallback {
                    out.push_str(", fallback: ");
                    out.push_str(&literal(fallback));
                }
                if !field.plan.is_copy() {
                    out.push_str(", map: ");
                    out.push_str(&plan_literal(&field.plan, indent + 1));
                }
                out.push_str(" },\n");
            }
            out.push_str(&"  ".repeat(indent));
            out.push_str("] }");
            out
        }
    }
}

/// The helper functions every template module ends with. They implement the mapping rule
/// of `crate::mapping` (the test-case runner applies the same rule in Rust) and read and
/// write fields so that any name works, `__proto__` and `constructor` included.
pub(super) const HELPERS: &str = r#"// ---- Helpers (the same in every generated module) ----

// Maps a value onto a table: copies it (null), maps each item ({ items }), or builds an
// object of the table's fields ({ fields }), each found by name or naming-style key.
function mapValue(value, table, where) {
  if (table === null || value === null || typeof value !== "object") {
    return value;
  }
  if (table.items !== undefined) {
    return Array.isArray(value)
      ? value.map((item, index) => mapValue(item, table.items, where + "[" + index + "]"))
      : value;
  }
  if (Array.isArray(value)) {
    return value;
  }
  const out = {};
  for (const field of table.fields) {
    const source = findSource(value, field.name);
    if (source !== undefined) {
      put(out, field.name, mapValue(source, field.map ?? null, where + "." + field.name));
    } else if (field.required === true) {
      if (!Object.hasOwn(field, "fallback")) {
        throw new TypeError(where + " lacks " + JSON.stringify(field.name) + ", which is required");
      }
      put(out, field.name, field.fallback);
    }
  }
  return out;
}

// The field `name` of an object, else the first field whose naming-style key is the same.
function findSource(object, name) {
  if (Object.hasOwn(object, name)) {
    return object[name];
  }
  const wanted = fieldKey(name);
  for (const field of Object.keys(object)) {
    if (fieldKey(field) === wanted) {
      return object[field];
    }
  }
  return undefined;
}

// A name without separators, each character lower-cased: productId, product_id → "productid".
function fieldKey(name) {
  let key = "";
  for (const character of name) {
    if (character !== "_" && character !== "-" && character !== " " && character !== ".") {
      key += character.toLowerCase();
    }
  }
  return key;
}

// The message's fields outside the envelope.
function dataFields(message, envelope) {
  const data = {};
  for (const name of Object.keys(message)) {
    if (!envelope.includes(name)) {
      put(data, name, message[name]);
    }
  }
  return data;
}

// An object of the named fields the message has.
function pick(message, names) {
  const data = {};
  for (const name of names) {
    putPresent(data, name, own(message, name));
  }
  return data;
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

// An object's own field, or undefined (never an inherited one such as "constructor").
function own(object, name) {
  return isObject(object) && Object.hasOwn(object, name) ? object[name] : undefined;
}

// Sets a field as plain data, whatever its name.
function put(object, name, value) {
  Object.defineProperty(object, name, { value, writable: true, enumerable: true, configurable: true });
}

function putPresent(object, name, value) {
  if (value !== undefined) {
    put(object, name, value);
  }
}

function getAt(object, path) {
  let value = object;
  for (const name of path) {
    value = own(value, name);
  }
  return value;
}

function setAt(object, path, value) {
  let target = object;
  for (const name of path.slice(0, -1)) {
    let next = own(target, name);
    if (!isObject(next)) {
      next = {};
      put(target, name, next);
    }
    target = next;
  }
  put(target, path[path.length - 1], value);
}

function describe(value) {
  if (value === undefined) return "absent";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? value.slice(0, 40) + "…" : value);
  return typeof value === "object" ? "an object" : String(value);
}

function expectObject(value, what) {
  if (!isObject(value)) {
    throw new TypeError(what + " must be an object, not " + describe(value));
  }
  return value;
}

function expectString(value, what) {
  if (typeof value !== "string") {
    throw new TypeError(what + " must be a string, not " + describe(value));
  }
  return value;
}

function expectInteger(value, what) {
  if (!Number.isInteger(value)) {
    throw new TypeError(what + " must be an integer, not " + describe(value));
  }
  return value;
}

function expectConst(value, expected, what) {
  if (JSON.stringify(value) !== JSON.stringify(expected)) {
    throw new TypeError(what + " must be " + JSON.stringify(expected) + ", not " + describe(value));
  }
}
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn literals_never_build_object_literals() {
        assert_eq!(literal(&json!("a\"b")), r#""a\"b""#);
        assert_eq!(literal(&json!([1, "x"])), r#"[1, "x"]"#);
        assert_eq!(
            literal(&json!({"__proto__": 1})),
            r#"JSON.parse("{\"__proto__\":1}")"#
        );
        assert_eq!(literal(&json!("line\u{2028}")), "\"line\u{2028}\"");
    }
}
