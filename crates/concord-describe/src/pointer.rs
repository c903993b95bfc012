//! JSON pointers (RFC 6901): escaping, splitting, and paths that become pointers only when
//! a problem needs one.

use std::fmt::Write;

/// Escapes one reference token: `~` becomes `~0`, `/` becomes `~1`.
pub(crate) fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Splits a pointer into unescaped reference tokens (`""` has none).
pub(crate) fn segments(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|token| token.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// Where the validator is in the document: a linked list up to the root, cheap to extend,
/// turned into a pointer string only when a problem is reported.
#[derive(Clone, Copy)]
pub(crate) struct Path<'p> {
    parent: Option<&'p Path<'p>>,
    segment: Segment<'p>,
}

#[derive(Clone, Copy)]
enum Segment<'p> {
    Root,
    Key(&'p str),
    Index(usize),
}

impl<'p> Path<'p> {
    /// The document root.
    pub(crate) const ROOT: Path<'static> = Path {
        parent: None,
        segment: Segment::Root,
    };

    /// The member `key` of the object here.
    pub(crate) fn key(&'p self, key: &'p str) -> Path<'p> {
        Path {
            parent: Some(self),
            segment: Segment::Key(key),
        }
    }

    /// The element `index` of the array here.
    pub(crate) fn index(&'p self, index: usize) -> Path<'p> {
        Path {
            parent: Some(self),
            segment: Segment::Index(index),
        }
    }

    /// The RFC 6901 pointer.
    pub(crate) fn pointer(&self) -> String {
        let mut segments = Vec::new();
        let mut node = Some(self);
        while let Some(path) = node {
            segments.push(path.segment);
            node = path.parent;
        }
        let mut pointer = String::new();
        for segment in segments.iter().rev() {
            match segment {
                Segment::Root => {}
                Segment::Key(key) => {
                    pointer.push('/');
                    pointer.push_str(&escape(key));
                }
                Segment::Index(index) => {
                    let _ = write!(pointer, "/{index}");
                }
            }
        }
        pointer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_splits_per_rfc_6901() {
        let root = Path::ROOT;
        let defs = root.key("securityDefinitions");
        let odd = defs.key("a/b~c");
        let item = odd.index(3);
        assert_eq!(item.pointer(), "/securityDefinitions/a~1b~0c/3");
        assert_eq!(
            segments(&item.pointer()),
            ["securityDefinitions", "a/b~c", "3"]
        );
        assert_eq!(Path::ROOT.pointer(), "");
        assert!(segments("").is_empty());
    }
}
