//! The directory in the node's own description (`/.well-known/wot`,
//! tdd-self-description): the WoT Discovery context, `@type` `ThingDirectory`, and the
//! affordances of the specification's directory Thing Model (`directory.tm.json`) this
//! directory serves, with their HTTP forms: the `things` property; the actions
//! `createThing`, `createAnonymousThing`, `retrieveThing`, `updateThing`,
//! `partiallyUpdateThing`, `deleteThing`, `searchJSONPath` and Concord's
//! `searchCapability`; the events `thingCreated`, `thingUpdated`, `thingDeleted` (SSE).

use concord_describe::{ActionBuilder, EventBuilder, Form, OneOrMany, Operation, PropertyBuilder};
use concord_directory::DISCOVERY_CONTEXT;
use serde_json::{json, Value};

use crate::binding::{Described, Site};

/// The security scheme of a form anyone may use (the node defines it whenever any
/// affordance is open, as the directory's reads are).
const OPEN: &str = "nosec_sc";

/// What the directory adds to the node's description; each form names its security:
/// `nosec_sc` on reads, and on writes too unless `signed_writes` (the directory requires
/// signatures), then `didwba_sc`.
pub(super) fn directory(site: &Site, signed_writes: bool) -> Described {
    let mut described = Described::default();
    described.contexts.push(DISCOVERY_CONTEXT.to_owned());
    described.types.push("ThingDirectory".to_owned());
    described
        .properties
        .push(("things".to_owned(), things(site)));
    described.actions = actions(site, signed_writes);
    described.events = events(site);
    described
}

/// `form` requiring `scheme`.
fn secured(mut form: Form, scheme: &str) -> Form {
    form.security = Some(OneOrMany::One(scheme.to_owned()));
    form
}

/// An HTTP form on `path` with `method`, performing `op` (none: the affordance's default,
/// as the directory Thing Model's action forms say nothing of `op`: `retrieveThing` is an
/// `invokeaction` by `GET`, which the binding's default method for it, `POST`, is not).
fn form(site: &Site, path: &str, method: &str, op: Option<Operation>) -> Form {
    let mut form = Form::new(site.http_url(path));
    form.op = op.map(OneOrMany::One);
    form.extensions
        .insert("htv:methodName".to_owned(), Value::from(method));
    form
}

/// The `id` URI variable of `/things/{id}`.
fn id_variable() -> Value {
    json!({"id": {"title": "Thing Description ID", "type": "string", "format": "iri-reference"}})
}

fn td_schema(description: &str) -> Value {
    json!({"description": description, "type": "object"})
}

fn things(site: &Site) -> PropertyBuilder {
    let mut listing = form(
        site,
        "things{?offset,limit,format}",
        "GET",
        Some(Operation::ReadProperty),
    );
    listing.content_type = Some("application/ld+json".to_owned());
    let listing = secured(listing, OPEN);
    let schema = json!({
        "description": "Retrieve all Thing Descriptions",
        "oneOf": [
            {"description": "Plain list of Thing Descriptions", "type": "array", "items": {"type": "object"}},
            {
                "description": "Verbose payload with pagination information, see format Uri variable",
                "type": "object",
                "properties": {
                    "@type": {"const": "ThingCollection"},
                    "@id": {"type": "string"},
                    "members": {"type": "array", "items": {"type": "object"}},
                    "total": {"type": "number"},
                    "next": {"type": "string"}
                }
            }
        ]
    });
    PropertyBuilder::with_forms([listing], schema)
        .read_only()
        .uri_variables(json!({
            "offset": {"title": "Number of TDs to skip before the page", "type": "number", "default": 0},
            "limit": {"title": "Number of TDs in a page", "type": "number"},
            "format": {"title": "Payload format", "type": "string", "enum": ["array", "collection"], "default": "array"}
        }))
}

fn actions(site: &Site, signed_writes: bool) -> Vec<(String, ActionBuilder)> {
    let write_scheme = if signed_writes {
        crate::describe::DIDWBA_SCHEME
    } else {
        OPEN
    };
    // A read is open to anyone; a write needs what `write_scheme` says.
    let form = |site: &Site, path: &str, method: &str, op: Option<Operation>| {
        let scheme = if method == "GET" { OPEN } else { write_scheme };
        secured(form(site, path, method, op), scheme)
    };
    let invoke = None;
    let with_type = |mut form: Form, media: &str| {
        form.content_type = Some(media.to_owned());
        form
    };
    let thing = "things/{id}";
    let mut actions = vec![
        (
            "createThing",
            ActionBuilder::with_forms([responds(
                with_type(form(site, thing, "PUT", invoke), "application/td+json"),
                201,
                None,
                &[INVALID],
            )])
            .description("Create a Thing Description")
            .input(td_schema("The schema is implied by the content type"))
            .uri_variables(id_variable()),
        ),
        (
            "createAnonymousThing",
            ActionBuilder::with_forms([anonymous_created(with_type(
                form(site, "things", "POST", invoke),
                "application/td+json",
            ))])
            .description("Create an anonymous Thing Description")
            .input(td_schema("The schema is implied by the content type")),
        ),
        (
            "retrieveThing",
            ActionBuilder::with_forms([responds(
                form(site, thing, "GET", invoke),
                200,
                Some("application/td+json"),
                &[NOT_FOUND],
            )])
            .description("Retrieve a Thing Description")
                .output(td_schema("The schema is implied by the content type"))
                .safe(true)
                .idempotent(true)
                .uri_variables(id_variable()),
        ),
        (
            "updateThing",
            ActionBuilder::with_forms([responds(
                with_type(form(site, thing, "PUT", invoke), "application/td+json"),
                204,
                None,
                &[INVALID, NOT_FOUND],
            )])
            .description("Update a Thing Description")
            .input(td_schema("The schema is implied by the content type"))
            .uri_variables(id_variable()),
        ),
        (
            "partiallyUpdateThing",
            ActionBuilder::with_forms([responds(
                with_type(
                    form(site, thing, "PATCH", invoke),
                    "application/merge-patch+json",
                ),
                204,
                None,
                &[INVALID, NOT_FOUND],
            )])
            .description("Partially update a Thing Description")
            .input(td_schema("The schema is implied by the content type"))
            .uri_variables(id_variable()),
        ),
        (
            "deleteThing",
            ActionBuilder::with_forms([responds(
                form(site, thing, "DELETE", invoke),
                204,
                None,
                &[NOT_FOUND],
            )])
            .description("Delete a Thing Description")
                .uri_variables(id_variable()),
        ),
        (
            "searchJSONPath",
            ActionBuilder::with_forms([form(
                site,
                "search/jsonpath?query={query}",
                "GET",
                invoke,
            )])
            .description("JSONPath syntactic search (RFC 9535)")
            .output(json!({"description": "The schema depends on the given query", "type": "array"}))
            .safe(true)
            .idempotent(true)
            .uri_variables(json!({"query": {"title": "A valid JSONPath expression", "type": "string"}})),
        ),
    ];
    let terms = [
        "action",
        "property",
        "event",
        "input",
        "output",
        "field",
        "lmos",
        "consensus",
        "consensus-hash",
        "did",
        "type",
    ];
    let variables: serde_json::Map<String, Value> = terms
        .iter()
        .map(|term| ((*term).to_owned(), json!({"type": "string"})))
        .collect();
    actions.push((
        "searchCapability",
        ActionBuilder::with_forms([form(
            site,
            &format!("search/capability{{?{}}}", terms.join(",")),
            "GET",
            invoke,
        )])
        .description(
            "Who can do this: the TDs holding every term given (an action, property or event \
             name, a field of an action's input or output, an lmos: term, a consensus \
             protocol's URI or hash, a DID, a @type)",
        )
        .output(json!({"type": "object"}))
        .safe(true)
        .idempotent(true)
        .uri_variables(Value::Object(variables)),
    ));
    actions
        .into_iter()
        .map(|(name, action)| (name.to_owned(), action))
        .collect()
}

/// The form's expected `response` (`htv:statusCodeValue` `status`, with `content_type`
/// if it has a body, else the form's own: TD 1.1 requires one) and its `additionalResponses`: the directory Thing Model's problem
/// answers, each `(status, description)`.
fn responds(
    mut form: Form,
    status: u16,
    content_type: Option<&str>,
    problems: &[(u16, &str)],
) -> Form {
    // TD 1.1 makes a response's `contentType` mandatory (node-wot's schema refuses one
    // without): an answer with no body says the form's own.
    let media = content_type
        .map(str::to_owned)
        .or_else(|| form.content_type.clone())
        .unwrap_or_else(|| "application/json".to_owned());
    let response = json!({
        "description": "Success response",
        "htv:statusCodeValue": status,
        "contentType": media,
    });
    form.response = serde_json::from_value(response).ok();
    if !problems.is_empty() {
        let additional: Vec<Value> = problems
            .iter()
            .map(|(status, description)| {
                json!({
                    "description": description,
                    "contentType": "application/problem+json",
                    "htv:statusCodeValue": status
                })
            })
            .collect();
        form.additional_responses = serde_json::from_value(Value::Array(additional)).ok();
    }
    form
}

/// `createAnonymousThing`'s answer: 201 with the new TD's `Location`.
fn anonymous_created(form: Form) -> Form {
    let mut form = responds(form, 201, None, &[INVALID]);
    if let Some(response) = form.response.as_mut() {
        response.extensions.insert(
            "htv:headers".to_owned(),
            json!([{"htv:fieldName": "Location", "htv:fieldValue": ""}]),
        );
    }
    form
}

/// A 400 answer of the directory Thing Model.
const INVALID: (u16, &str) = (400, "Invalid serialization or TD");
/// A 404 answer of the directory Thing Model.
const NOT_FOUND: (u16, &str) = (404, "TD with the given id not found");

fn events(site: &Site) -> Vec<(String, EventBuilder)> {
    // As the directory Thing Model writes them: the form's `contentType` is the data's
    // (`application/json`), the answer's (`text/event-stream`) is in `response`, and a
    // client resumes with `Last-Event-ID`.
    let subscribe = |path: &str| {
        let mut form = secured(
            form(site, path, "GET", Some(Operation::SubscribeEvent)),
            OPEN,
        );
        form.subprotocol = Some("sse".to_owned());
        form.content_type = Some("application/json".to_owned());
        form.response = serde_json::from_value(json!({"contentType": "text/event-stream"})).ok();
        form.extensions.insert(
            "htv:headers".to_owned(),
            json!([{
                "description": "ID of the last event provided for notification recovery",
                "htv:fieldName": "Last-Event-ID",
                "htv:fieldValue": ""
            }]),
        );
        form
    };
    let diff = |description: &str| json!({"diff": {"description": description, "type": "boolean"}});
    vec![
        (
            "thingCreated".to_owned(),
            EventBuilder::with_forms([subscribe("events/thing_created{?diff}")])
                .description("Registration of Thing Descriptions inside the directory")
                .data(json!({"title": "Partial/Full TD", "type": "object"}))
                .uri_variables(diff("Receive the full created TD as event data")),
        ),
        (
            "thingUpdated".to_owned(),
            EventBuilder::with_forms([subscribe("events/thing_updated{?diff}")])
                .description("Updates to Thing Descriptions within the directory")
                .data(json!({"title": "Partial TD", "type": "object", "contentMediaType": "application/merge-patch+json"}))
                .uri_variables(diff("Include TD changes inside event data")),
        ),
        (
            "thingDeleted".to_owned(),
            EventBuilder::with_forms([subscribe("events/thing_deleted")])
                .description("Deletion of Thing Descriptions from the directory")
                .data(json!({"title": "Partial TD", "type": "object"})),
        ),
    ]
}
