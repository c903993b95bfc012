//! `links`: targets, relations, icons, and the Thing Model a Thing was made from.

use serde_json::{Map, Value};

use super::{formats, Checker};
use crate::pointer::Path;
use crate::problem::ProblemKind;
use crate::vocab::THING_MODEL_MEDIA_TYPE;

impl<'v> Checker<'v> {
    pub(super) fn links(&mut self, thing: &'v Map<String, Value>, at: &Path<'_>) {
        let Some(links) = self.array(thing, "links", at) else {
            return;
        };
        let at = at.key("links");
        let mut type_links = 0;
        for (i, link) in links.iter().enumerate() {
            let at = at.index(i);
            let Value::Object(terms) = link else {
                self.wrong_type(&at, "a link (object)", link);
                continue;
            };
            let href = self.required_string(terms, "href", &at);
            if let Some(href) = href {
                self.href(href, &at.key("href"));
            }
            let media_type = self.string(terms, "type", &at);
            let rel = self.string(terms, "rel", &at);
            self.uri_reference_term(terms, "anchor", &at);
            for tag in self.strings(terms, "hreflang", &at) {
                if !formats::is_language_tag(tag) {
                    self.report(
                        ProblemKind::InvalidValue,
                        &at.key("hreflang"),
                        format!("`{tag}` is not a BCP 47 language tag"),
                    );
                }
            }
            if let Some(sizes) = self.string(terms, "sizes", &at) {
                if rel != Some("icon") {
                    self.report(
                        ProblemKind::Conflict,
                        &at.key("sizes"),
                        "`sizes` belongs only on links with `rel: \"icon\"`",
                    );
                } else if !is_icon_sizes(sizes) {
                    self.report(
                        ProblemKind::InvalidValue,
                        &at.key("sizes"),
                        format!(
                            "`sizes` must be WIDTHxHEIGHT values such as 64x64, found `{sizes}`"
                        ),
                    );
                }
            }
            match rel {
                Some("tm:extends") => self.report(
                    ProblemKind::ThingModel,
                    &at.key("rel"),
                    "`tm:extends` links belong in Thing Models, not Thing Descriptions",
                ),
                Some("type") => {
                    type_links += 1;
                    if type_links > 1 {
                        self.report(
                            ProblemKind::MultipleTypeLinks,
                            &at.key("rel"),
                            "a Thing Description has at most one link with `rel: \"type\"` (the Thing Model it was made from)",
                        );
                    }
                    if media_type == Some(THING_MODEL_MEDIA_TYPE) {
                        self.report(
                            ProblemKind::ThingModelNotChecked,
                            &at,
                            format!(
                                "the Thing Model at {} was not fetched (validation is offline), so conformance to it is not checked",
                                href.unwrap_or("?")
                            ),
                        );
                    }
                }
                _ => {}
            }
        }
    }
}

/// Whitespace-separated `WIDTHxHEIGHT` values.
fn is_icon_sizes(sizes: &str) -> bool {
    let size = |s: &str| {
        s.split_once('x').is_some_and(|(w, h)| {
            w.bytes().all(|b| b.is_ascii_digit())
                && !h.is_empty()
                && h.bytes().all(|b| b.is_ascii_digit())
        })
    };
    let mut values = sizes.split_ascii_whitespace().peekable();
    values.peek().is_some() && values.all(size)
}
