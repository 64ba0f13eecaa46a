//! JSONPath locations: compiled once, resolved per request against a root value: the
//! object, or for a path under `foreach` the element it is relative to.
//!
//! Selection uses jsonpath-rust (RFC 9535). Mutations need concrete locations, so a
//! path made only of names and indices ("singular", the common case) is walked
//! directly, and any other path is resolved through the Normalized Paths (RFC 9535
//! section 2.7) jsonpath-rust reports for its matches. Those are decoded by their own
//! small grammar ([`decode_normalized`]), not by the JSONPath parser: nothing is parsed
//! per request. A query or a location that cannot be evaluated is an error the caller
//! turns into a policy failure, never an empty selection: an empty selection makes
//! `notExists` and `notIn` hold and a write silently not happen.

use crate::tree::Tree;
use jsonpath_rust::parser::model::{JpQuery, Segment, Selector};
use jsonpath_rust::parser::parse_json_path;
use jsonpath_rust::query::{QueryRef, js_path_process};

/// Longest path graft accepts, in characters and in segments: deeper paths are
/// almost certainly mistakes and would make evaluation cost unbounded.
pub const MAX_PATH_CHARS: usize = 1024;
pub const MAX_PATH_SEGMENTS: usize = 32;

/// One step of a concrete location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Key(String),
    /// Negative indices count from the end, as in RFC 9535.
    Index(i64),
}

/// A segment of a path, for the type of what it selects: one of some keys, or items
/// (indices, slices, wildcards and filters select items of a list, or values of a map).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeSegment<'p> {
    Names(Vec<&'p str>),
    Item,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("invalid JSONPath {path:?}: {reason}")]
    Invalid { path: String, reason: String },
    #[error(
        "JSONPath {0:?} is longer than {MAX_PATH_CHARS} characters or {MAX_PATH_SEGMENTS} segments"
    )]
    TooLong(String),
    #[error("JSONPath {path:?} cannot be evaluated on this object: {reason}")]
    Evaluation { path: String, reason: String },
}

/// A compiled JSONPath.
#[derive(Debug, Clone)]
pub struct JsonPath {
    source: String,
    query: JpQuery,
    singular: Option<Vec<Token>>,
    /// For a non-singular path ending in names or indices: the path up to its last
    /// wildcard, filter or other selector, and the names and indices after it, so a
    /// write creates what is missing of them under every match.
    parent: Option<(JpQuery, Vec<Token>)>,
}

impl JsonPath {
    pub fn compile(source: &str) -> Result<JsonPath, PathError> {
        if source.len() > MAX_PATH_CHARS {
            return Err(PathError::TooLong(source.to_string()));
        }
        let query = parse_json_path(source).map_err(|error| PathError::Invalid {
            path: source.to_string(),
            reason: error.to_string(),
        })?;
        if query.segments.len() > MAX_PATH_SEGMENTS {
            return Err(PathError::TooLong(source.to_string()));
        }
        let singular = singular_tokens(&query);
        let parent = if singular.is_some() {
            None
        } else {
            let head = query
                .segments
                .iter()
                .rposition(|segment| last_token(segment).is_none())
                .map_or(0, |at| at + 1);
            let tail: Vec<Token> = query.segments[head..]
                .iter()
                .filter_map(last_token)
                .collect();
            (!tail.is_empty()).then(|| (JpQuery::new(query.segments[..head].to_vec()), tail))
        };
        Ok(JsonPath {
            source: source.to_string(),
            query,
            singular,
            parent,
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The tokens of a path made only of names and indices.
    pub fn singular(&self) -> Option<&[Token]> {
        self.singular.as_deref()
    }

    /// The object keys the path starts with, up to its first other segment: every
    /// value the path selects lies under them.
    pub fn leading_keys(&self) -> impl Iterator<Item = &str> {
        self.query
            .segments
            .iter()
            .map_while(|segment| match segment {
                Segment::Selector(Selector::Name(name)) => Some(name.as_str()),
                _ => None,
            })
    }

    /// The path's segments as far as the type of what they select goes, or `None` for a
    /// path with a descendant segment or a segment mixing names with other selectors.
    pub fn type_segments(&self) -> Option<Vec<TypeSegment<'_>>> {
        let selector = |selector: &'_ Selector| match selector {
            Selector::Name(_) => None,
            Selector::Wildcard | Selector::Index(_) | Selector::Slice(..) | Selector::Filter(_) => {
                Some(TypeSegment::Item)
            }
        };
        self.query
            .segments
            .iter()
            .map(|segment| match segment {
                Segment::Descendant(_) => None,
                Segment::Selector(Selector::Name(name)) => {
                    Some(TypeSegment::Names(vec![name.as_str()]))
                }
                Segment::Selector(other) => selector(other),
                Segment::Selectors(selectors) => {
                    let names: Vec<&str> = selectors
                        .iter()
                        .filter_map(|s| match s {
                            Selector::Name(name) => Some(name.as_str()),
                            _ => None,
                        })
                        .collect();
                    if names.len() == selectors.len() {
                        Some(TypeSegment::Names(names))
                    } else if names.is_empty() {
                        Some(TypeSegment::Item)
                    } else {
                        None
                    }
                }
            })
            .collect()
    }

    /// True when the path selects its root itself (`$`).
    pub fn is_root(&self) -> bool {
        self.query.segments.is_empty()
    }

    /// True when the path has a descendant (`..`) segment.
    pub fn has_descendant(&self) -> bool {
        self.query
            .segments
            .iter()
            .any(|segment| matches!(segment, Segment::Descendant(_)))
    }

    /// The values the path selects.
    pub fn select<'a, 't>(&self, root: &'a Tree<'t>) -> Result<Vec<&'a Tree<'t>>, PathError> {
        if let Some(tokens) = &self.singular {
            return Ok(get(root, tokens).into_iter().collect());
        }
        Ok(self
            .query(&self.query, root)?
            .into_iter()
            .map(|found| found.val)
            .collect())
    }

    /// The concrete locations of the values the path selects, with non-negative indices.
    pub fn locations(&self, root: &Tree<'_>) -> Result<Vec<Vec<Token>>, PathError> {
        if let Some(tokens) = &self.singular {
            return Ok(resolve(root, tokens).into_iter().collect());
        }
        self.query(&self.query, root)?
            .into_iter()
            .map(|found| self.decode(&found.path))
            .collect()
    }

    /// Where a write goes: a singular path even where it does not exist yet; a path
    /// ending in names or indices under every match of what comes before them (so
    /// `$.spec.containers[*].resources.limits.memory` reaches every container, with or
    /// without `resources`); any other path at every location it selects.
    pub fn write_locations(&self, root: &Tree<'_>) -> Result<Vec<Vec<Token>>, PathError> {
        if let Some(tokens) = &self.singular {
            return Ok(vec![tokens.clone()]);
        }
        let Some((parent, tail)) = &self.parent else {
            return self.locations(root);
        };
        self.query(parent, root)?
            .into_iter()
            .filter(|found| found.val.as_map().is_some() || found.val.as_list().is_some())
            .map(|found| {
                let mut tokens = self.decode(&found.path)?;
                tokens.extend(tail.iter().cloned());
                Ok(tokens)
            })
            .collect()
    }

    fn query<'a, 't>(
        &self,
        query: &JpQuery,
        root: &'a Tree<'t>,
    ) -> Result<Vec<QueryRef<'a, Tree<'t>>>, PathError> {
        js_path_process(query, root).map_err(|error| self.evaluation_error(error))
    }

    fn decode(&self, normalized: &str) -> Result<Vec<Token>, PathError> {
        decode_normalized(normalized).map_err(|reason| {
            self.evaluation_error(format!(
                "the location {normalized:?} it selected is not a normalized path: {reason}"
            ))
        })
    }

    fn evaluation_error(&self, reason: impl ToString) -> PathError {
        PathError::Evaluation {
            path: self.source.clone(),
            reason: reason.to_string(),
        }
    }
}

/// Decodes an RFC 9535 Normalized Path (`$['spec']['containers'][0]`, section 2.7) into
/// tokens. Strict: anything but `$` followed by bracketed names and non-negative indices
/// is refused with the reason.
pub fn decode_normalized(normalized: &str) -> Result<Vec<Token>, String> {
    let mut chars = normalized.chars().peekable();
    if chars.next() != Some('$') {
        return Err("it does not start with '$'".to_string());
    }
    let mut tokens = Vec::new();
    while let Some(open) = chars.next() {
        if open != '[' {
            return Err(format!("expected '[', found {open:?}"));
        }
        match chars.peek() {
            Some('\'') => {
                chars.next();
                let mut name = String::new();
                loop {
                    match chars.next() {
                        None => return Err("unterminated name".to_string()),
                        Some('\'') => break,
                        Some('\\') => name.push(unescape(&mut chars)?),
                        Some(c) => name.push(c),
                    }
                }
                tokens.push(Token::Key(name));
            }
            Some(c) if c.is_ascii_digit() => {
                let mut digits = String::new();
                while let Some(c) = chars.peek().copied().filter(char::is_ascii_digit) {
                    digits.push(c);
                    chars.next();
                }
                if digits.len() > 1 && digits.starts_with('0') {
                    return Err(format!("index {digits} has a leading zero"));
                }
                let index = digits
                    .parse::<i64>()
                    .map_err(|_| format!("index {digits} is out of range"))?;
                tokens.push(Token::Index(index));
            }
            other => return Err(format!("expected a name or an index, found {other:?}")),
        }
        if chars.next() != Some(']') {
            return Err("expected ']'".to_string());
        }
    }
    Ok(tokens)
}

/// The character after a backslash in a normal name selector.
fn unescape(chars: &mut impl Iterator<Item = char>) -> Result<char, String> {
    Ok(match chars.next() {
        Some('b') => '\u{0008}',
        Some('f') => '\u{000C}',
        Some('n') => '\n',
        Some('r') => '\r',
        Some('t') => '\t',
        Some('\'') => '\'',
        Some('\\') => '\\',
        Some('u') => {
            let hex: String = chars.take(4).collect();
            u32::from_str_radix(&hex, 16)
                .ok()
                .filter(|_| hex.len() == 4)
                .and_then(char::from_u32)
                .ok_or_else(|| format!("invalid escape \\u{hex}"))?
        }
        other => return Err(format!("invalid escape {other:?}")),
    })
}

fn last_token(segment: &Segment) -> Option<Token> {
    match segment {
        Segment::Selector(Selector::Name(name)) => Some(Token::Key(name.clone())),
        Segment::Selector(Selector::Index(index)) => Some(Token::Index(*index)),
        _ => None,
    }
}

fn singular_tokens(query: &JpQuery) -> Option<Vec<Token>> {
    query
        .segments
        .iter()
        .map(|segment| match segment {
            Segment::Selector(Selector::Name(name)) => Some(Token::Key(name.clone())),
            Segment::Selector(Selector::Index(index)) => Some(Token::Index(*index)),
            _ => None,
        })
        .collect()
}

/// The value at `tokens`, if present.
pub fn get<'a, 't>(root: &'a Tree<'t>, tokens: &[Token]) -> Option<&'a Tree<'t>> {
    tokens.iter().try_fold(root, child)
}

/// The value at `token` in `value`, if present.
pub fn child<'a, 't>(value: &'a Tree<'t>, token: &Token) -> Option<&'a Tree<'t>> {
    match token {
        Token::Key(key) => value.get(key),
        Token::Index(index) => {
            let items = value.as_list()?;
            items.get(array_index(*index, items.len())?)
        }
    }
}

/// The value at `tokens`, mutably, if present.
/// The maps and lists on the way are copied where they are shared with another tree,
/// so that a change below them leaves that tree as it was.
pub fn get_mut<'a, 't>(root: &'a mut Tree<'t>, tokens: &[Token]) -> Option<&'a mut Tree<'t>> {
    tokens.iter().try_fold(root, |value, token| match token {
        Token::Key(key) => value.map_mut()?.get_mut(key),
        Token::Index(index) => {
            let items = value.list_mut()?;
            let at = array_index(*index, items.len())?;
            items.get_mut(at)
        }
    })
}

/// The same location with negative indices made absolute, when it exists.
fn resolve(root: &Tree<'_>, tokens: &[Token]) -> Option<Vec<Token>> {
    let mut value = root;
    let mut resolved = Vec::with_capacity(tokens.len());
    for token in tokens {
        match token {
            Token::Key(key) => {
                value = value.get(key)?;
                resolved.push(token.clone());
            }
            Token::Index(index) => {
                let items = value.as_list()?;
                let at = array_index(*index, items.len())?;
                value = items.get(at)?;
                resolved.push(Token::Index(at as i64));
            }
        }
    }
    Some(resolved)
}

/// An RFC 9535 index made absolute; `None` when out of range.
pub fn array_index(index: i64, len: usize) -> Option<usize> {
    let at = if index < 0 {
        len.checked_sub(usize::try_from(index.unsigned_abs()).ok()?)?
    } else {
        usize::try_from(index).ok()?
    };
    (at < len).then_some(at)
}

/// Renders a location as a JSONPath, for messages.
pub fn display(tokens: &[Token]) -> String {
    let mut out = String::from("$");
    for token in tokens {
        match token {
            Token::Key(key) if is_plain_name(key) => {
                out.push('.');
                out.push_str(key);
            }
            Token::Key(key) => {
                out.push_str("['");
                out.push_str(&key.replace('\\', "\\\\").replace('\'', "\\'"));
                out.push_str("']");
            }
            Token::Index(index) => out.push_str(&format!("[{index}]")),
        }
    }
    out
}

fn is_plain_name(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tree(value: serde_json::Value) -> Tree<'static> {
        Tree::from(value)
    }

    fn path(source: &str) -> JsonPath {
        JsonPath::compile(source).unwrap()
    }

    #[test]
    fn singular_paths_are_walked_directly() {
        let p = path("$.metadata.annotations['k8s.v1.cni.cncf.io/networks']");
        assert_eq!(
            p.singular().unwrap(),
            &[
                Token::Key("metadata".into()),
                Token::Key("annotations".into()),
                Token::Key("k8s.v1.cni.cncf.io/networks".into()),
            ]
        );
        let object =
            tree(json!({"metadata": {"annotations": {"k8s.v1.cni.cncf.io/networks": "a"}}}));
        assert_eq!(p.select(&object).unwrap(), vec![&tree(json!("a"))]);
    }

    #[test]
    fn filters_resolve_to_every_match() {
        let p = path("$.spec.containers[?@.name == 'app' || @.name == 'b'].image");
        assert!(p.singular().is_none());
        let object = tree(json!({"spec": {"containers": [
            {"name": "app", "image": "x"}, {"name": "c", "image": "y"}, {"name": "b", "image": "z"}
        ]}}));
        let locations = p.locations(&object).unwrap();
        assert_eq!(locations.len(), 2);
        assert_eq!(display(&locations[1]), "$.spec.containers[2].image");
    }

    #[test]
    fn negative_indices_count_from_the_end() {
        let root = tree(json!({"a": [1, 2, 3]}));
        assert_eq!(
            path("$.a[-1]").select(&root).unwrap(),
            vec![&tree(json!(3))]
        );
        assert_eq!(
            path("$.a[-1]").locations(&root).unwrap(),
            vec![vec![Token::Key("a".into()), Token::Index(2)]]
        );
        assert!(path("$.a[-4]").select(&root).unwrap().is_empty());
    }

    #[test]
    fn keys_with_quotes_survive_normalized_paths() {
        let root = tree(json!({"a": {"it's/x~y": {"v": 1}}}));
        let p = path("$.a[*].v");
        let locations = p.locations(&root).unwrap();
        assert_eq!(
            locations,
            vec![vec![
                Token::Key("a".into()),
                Token::Key("it's/x~y".into()),
                Token::Key("v".into())
            ]]
        );
    }

    #[test]
    fn normalized_paths_decode_by_their_own_grammar() {
        assert_eq!(
            decode_normalized("$['spec']['containers'][10]['it\\'s\\\\']").unwrap(),
            vec![
                Token::Key("spec".into()),
                Token::Key("containers".into()),
                Token::Index(10),
                Token::Key("it's\\".into()),
            ]
        );
        assert_eq!(
            decode_normalized("$['\\u0001\\t\\b']").unwrap(),
            vec![Token::Key("\u{1}\t\u{8}".into())]
        );
        assert_eq!(decode_normalized("$").unwrap(), Vec::<Token>::new());
        for (bad, reason) in [
            ("", "does not start with '$'"),
            ("$.spec", "expected '['"),
            ("$['spec'", "expected ']'"),
            ("$['spec]", "unterminated name"),
            ("$[01]", "leading zero"),
            ("$[-1]", "expected a name or an index"),
            ("$[*]", "expected a name or an index"),
            ("$['\\x']", "invalid escape"),
            ("$['\\u12']", "invalid escape"),
            ("$[99999999999999999999]", "out of range"),
        ] {
            let error = decode_normalized(bad).unwrap_err();
            assert!(error.contains(reason), "{bad:?}: {error}");
        }
    }

    proptest::proptest! {
        /// Every location jsonpath-rust reports decodes to the key it was made from, so
        /// a write through a filter or wildcard lands where the query matched.
        #[test]
        fn the_crates_normalized_paths_decode_to_their_keys(key in "\\PC{0,8}|[\\x00-\\x7f]{0,8}") {
            let root = tree(json!({ key.clone(): {"v": 1} }));
            let locations = path("$[*].v").locations(&root).unwrap();
            proptest::prop_assert_eq!(
                locations,
                vec![vec![Token::Key(key), Token::Key("v".into())]]
            );
        }
    }

    #[test]
    fn writes_under_a_wildcard_reach_every_match_however_much_is_missing() {
        let object = tree(json!({"spec": {"containers": [
            {"name": "a"},
            {"name": "b", "resources": {}},
            {"name": "c", "resources": {"limits": {"cpu": "1"}}}
        ]}}));
        let p = path("$.spec.containers[*].resources.limits.memory");
        let displayed: Vec<String> = p
            .write_locations(&object)
            .unwrap()
            .iter()
            .map(|location| display(location))
            .collect();
        assert_eq!(
            displayed,
            [
                "$.spec.containers[0].resources.limits.memory",
                "$.spec.containers[1].resources.limits.memory",
                "$.spec.containers[2].resources.limits.memory",
            ]
        );
        let filtered = path("$.spec.containers[?@.name != 'b'].securityContext.runAsNonRoot");
        assert_eq!(filtered.write_locations(&object).unwrap().len(), 2);
        // A path that ends in a wildcard writes only where something is.
        assert!(
            path("$.spec.volumes[*]")
                .write_locations(&object)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn rejects_overlong_paths() {
        let long = format!("${}", ".a".repeat(MAX_PATH_SEGMENTS + 1));
        assert!(matches!(
            JsonPath::compile(&long),
            Err(PathError::TooLong(_))
        ));
        assert!(matches!(
            JsonPath::compile("$.a[?"),
            Err(PathError::Invalid { .. })
        ));
    }
}
