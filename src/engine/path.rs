//! JSONPath locations: compiled once, resolved against a document per request.
//!
//! Selection uses jsonpath-rust (RFC 9535). Mutations need concrete locations, so a
//! path made only of names and indices ("singular", the common case) is walked
//! directly, and any other path is resolved through the normalized paths
//! jsonpath-rust reports for its matches.

use jsonpath_rust::parser::model::{JpQuery, Segment, Selector};
use jsonpath_rust::parser::parse_json_path;
use jsonpath_rust::query::js_path_process;
use serde_json::Value;

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

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("invalid JSONPath {path:?}: {reason}")]
    Invalid { path: String, reason: String },
    #[error(
        "JSONPath {0:?} is longer than {MAX_PATH_CHARS} characters or {MAX_PATH_SEGMENTS} segments"
    )]
    TooLong(String),
}

/// A compiled JSONPath.
#[derive(Debug, Clone)]
pub struct JsonPath {
    source: String,
    query: JpQuery,
    singular: Option<Vec<Token>>,
    /// For a non-singular path ending in a name or index: the path without that last
    /// segment, and the segment, so writes can create the last key under every match.
    parent: Option<(JpQuery, Token)>,
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
        let parent = match (singular.is_some(), query.segments.split_last()) {
            (false, Some((last, rest))) => {
                last_token(last).map(|token| (JpQuery::new(rest.to_vec()), token))
            }
            _ => None,
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

    /// How many segments the path has (`$` has none).
    pub fn segment_count(&self) -> usize {
        self.query.segments.len()
    }

    /// True when the path selects the document itself (`$`).
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
    pub fn select<'a>(&self, document: &'a Value) -> Vec<&'a Value> {
        if let Some(tokens) = &self.singular {
            return get(document, tokens).into_iter().collect();
        }
        js_path_process(&self.query, document)
            .map(|found| found.into_iter().map(|r| r.val).collect())
            .unwrap_or_default()
    }

    /// The concrete locations of the values the path selects, with non-negative indices.
    pub fn locations(&self, document: &Value) -> Vec<Vec<Token>> {
        if let Some(tokens) = &self.singular {
            return resolve(document, tokens).into_iter().collect();
        }
        let Ok(found) = js_path_process(&self.query, document) else {
            return Vec::new();
        };
        found
            .into_iter()
            .filter_map(|r| parse_json_path(&r.path).ok())
            .filter_map(|normalized| singular_tokens(&normalized))
            .collect()
    }

    /// Where a write goes: a singular path even where it does not exist yet; a path
    /// ending in a name or index under every match of the rest (the last key may be
    /// missing); any other path at every location it selects.
    pub fn write_locations(&self, document: &Value) -> Vec<Vec<Token>> {
        if let Some(tokens) = &self.singular {
            return vec![tokens.clone()];
        }
        let Some((parent, last)) = &self.parent else {
            return self.locations(document);
        };
        let Ok(found) = js_path_process(parent, document) else {
            return Vec::new();
        };
        found
            .into_iter()
            .filter(|r| r.val.is_object() || r.val.is_array())
            .filter_map(|r| parse_json_path(&r.path).ok())
            .filter_map(|normalized| singular_tokens(&normalized))
            .map(|mut tokens| {
                tokens.push(last.clone());
                tokens
            })
            .collect()
    }
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
pub fn get<'a>(document: &'a Value, tokens: &[Token]) -> Option<&'a Value> {
    tokens
        .iter()
        .try_fold(document, |value, token| match token {
            Token::Key(key) => super::lookup::child(value, key),
            Token::Index(index) => {
                let items = value.as_array()?;
                items.get(array_index(*index, items.len())?)
            }
        })
}

/// The value at `tokens`, mutably, if present.
pub fn get_mut<'a>(document: &'a mut Value, tokens: &[Token]) -> Option<&'a mut Value> {
    tokens
        .iter()
        .try_fold(document, |value, token| match token {
            Token::Key(key) => value.as_object_mut()?.get_mut(key),
            Token::Index(index) => {
                let items = value.as_array_mut()?;
                let at = array_index(*index, items.len())?;
                items.get_mut(at)
            }
        })
}

/// The same location with negative indices made absolute, when it exists.
fn resolve(document: &Value, tokens: &[Token]) -> Option<Vec<Token>> {
    let mut value = document;
    let mut resolved = Vec::with_capacity(tokens.len());
    for token in tokens {
        match token {
            Token::Key(key) => {
                value = super::lookup::child(value, key)?;
                resolved.push(token.clone());
            }
            Token::Index(index) => {
                let items = value.as_array()?;
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
        let doc = json!({"metadata": {"annotations": {"k8s.v1.cni.cncf.io/networks": "a"}}});
        assert_eq!(p.select(&doc), vec![&json!("a")]);
    }

    #[test]
    fn filters_resolve_to_every_match() {
        let p = path("$.spec.containers[?@.name == 'app' || @.name == 'b'].image");
        assert!(p.singular().is_none());
        let doc = json!({"spec": {"containers": [
            {"name": "app", "image": "x"}, {"name": "c", "image": "y"}, {"name": "b", "image": "z"}
        ]}});
        let locations = p.locations(&doc);
        assert_eq!(locations.len(), 2);
        assert_eq!(display(&locations[1]), "$.spec.containers[2].image");
    }

    #[test]
    fn negative_indices_count_from_the_end() {
        let doc = json!({"a": [1, 2, 3]});
        assert_eq!(path("$.a[-1]").select(&doc), vec![&json!(3)]);
        assert_eq!(
            path("$.a[-1]").locations(&doc),
            vec![vec![Token::Key("a".into()), Token::Index(2)]]
        );
        assert!(path("$.a[-4]").select(&doc).is_empty());
    }

    #[test]
    fn keys_with_quotes_survive_normalized_paths() {
        let doc = json!({"a": {"it's/x~y": {"v": 1}}});
        let p = path("$.a[*].v");
        let locations = p.locations(&doc);
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
