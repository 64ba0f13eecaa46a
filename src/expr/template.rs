//! Values whose strings may hold `{{ cel }}` templates.
//!
//! A string whose trimmed content is exactly one `{{ expr }}` keeps the
//! expression's type (a map, a list, an int...). Any other string containing
//! `{{` interpolates: literal text, with each expression rendered as text.
//! Map keys are never templated. Subtrees without an expression are kept as
//! trees, which a render shares instead of copying; a render is a tree, and so is what
//! each expression gives.

use super::convert::to_json_string;
use super::{Declarations, ExprError, Expression, Needs, Scope};
use crate::k8s::MAX_STRING_BYTES;
use crate::tree::{Map, Tree};

/// A template compiled from a policy value. Strings that are exactly one `{{ expr }}`
/// keep the expression's type; other strings containing `{{` interpolate.
#[derive(Debug)]
pub struct Template {
    root: Node,
    needs: Needs,
}

/// A template that failed to compile, with the path inside the value (`containers[0].image`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {error}")]
pub struct TemplateError {
    pub path: String,
    pub error: ExprError,
}

#[derive(Debug)]
enum Node {
    /// No expression anywhere below.
    Static(Tree<'static>),
    /// A whole-string `{{ expr }}`: the result keeps its type.
    Typed {
        path: String,
        expression: Expression,
    },
    /// Text with `{{ expr }}` parts, rendered as a string.
    Text {
        path: String,
        parts: Vec<Part>,
    },
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

#[derive(Debug)]
enum Part {
    Literal(String),
    Expression(Expression),
}

impl Template {
    pub fn compile(
        value: &Tree<'static>,
        declarations: &Declarations<'_>,
    ) -> Result<Template, TemplateError> {
        let mut needs = Needs::default();
        let root = compile_node(value, &mut String::new(), &mut needs, declarations)?;
        Ok(Template { root, needs })
    }

    /// True when the value holds no expression, so rendering is a plain clone.
    pub fn is_static(&self) -> bool {
        matches!(self.root, Node::Static(_))
    }

    pub fn needs(&self) -> Needs {
        self.needs
    }

    /// The expressions of the template with the path of the value each sits in
    /// (`""` for the value itself, `env[0].value` inside it).
    pub fn expressions(&self) -> Vec<(&str, &Expression)> {
        let mut found = Vec::new();
        let mut stack = vec![&self.root];
        while let Some(node) = stack.pop() {
            match node {
                Node::Static(_) => {}
                Node::Typed { path, expression } => found.push((path.as_str(), expression)),
                Node::Text { path, parts } => {
                    for part in parts {
                        if let Part::Expression(expression) = part {
                            found.push((path.as_str(), expression));
                        }
                    }
                }
                Node::Array(items) => stack.extend(items.iter().rev()),
                Node::Object(entries) => stack.extend(entries.iter().rev().map(|(_, node)| node)),
            }
        }
        found
    }

    pub fn render(&self, scope: &Scope<'_>) -> Result<Tree<'static>, ExprError> {
        render_node(&self.root, scope)
    }
}

fn compile_node(
    value: &Tree<'static>,
    path: &mut String,
    needs: &mut Needs,
    declarations: &Declarations<'_>,
) -> Result<Node, TemplateError> {
    match value.resolved() {
        Tree::String(text) if text.contains("{{") => {
            compile_string(text, path, needs, declarations)
        }
        Tree::List(items) => {
            let mut nodes = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                nodes.push(compile_node(item, path, needs, declarations)?);
                path.truncate(len);
            }
            if nodes.iter().all(|n| matches!(n, Node::Static(_))) {
                return Ok(Node::Static(value.clone()));
            }
            Ok(Node::Array(nodes))
        }
        Tree::Map(fields) => {
            let mut nodes = Vec::with_capacity(fields.len());
            for (key, item) in fields.iter() {
                let len = path.len();
                push_key(path, key);
                nodes.push((
                    key.to_string(),
                    compile_node(item, path, needs, declarations)?,
                ));
                path.truncate(len);
            }
            if nodes.iter().all(|(_, n)| matches!(n, Node::Static(_))) {
                return Ok(Node::Static(value.clone()));
            }
            Ok(Node::Object(nodes))
        }
        _ => Ok(Node::Static(value.clone())),
    }
}

fn compile_string(
    text: &str,
    path: &str,
    needs: &mut Needs,
    declarations: &Declarations<'_>,
) -> Result<Node, TemplateError> {
    let error = |error| TemplateError {
        path: path.to_string(),
        error,
    };
    let pieces = split(text).map_err(error)?;
    let mut compile = |source: &str| {
        let expression = Expression::compile(source, declarations).map_err(error)?;
        *needs = needs.union(expression.needs());
        Ok(expression)
    };
    // Whitespace around a lone expression is layout in the YAML, not text.
    if let Ok([Piece::Expression(source)]) = split(text.trim()).as_deref() {
        return Ok(Node::Typed {
            path: path.to_string(),
            expression: compile(source)?,
        });
    }
    let mut parts = Vec::with_capacity(pieces.len());
    for piece in pieces {
        parts.push(match piece {
            Piece::Literal(literal) => Part::Literal(literal.to_string()),
            Piece::Expression(source) => Part::Expression(compile(source)?),
        });
    }
    Ok(Node::Text {
        path: path.to_string(),
        parts,
    })
}

fn render_node(node: &Node, scope: &Scope<'_>) -> Result<Tree<'static>, ExprError> {
    match node {
        Node::Static(value) => Ok(value.clone()),
        Node::Typed { path, expression } => scope
            .evaluate(expression)
            .map_err(|e| in_context(e, path, expression)),
        Node::Text { path, parts } => {
            let mut out = String::new();
            for part in parts {
                match part {
                    Part::Literal(literal) => out.push_str(literal),
                    Part::Expression(expression) => scope
                        .evaluate(expression)
                        .and_then(|value| append_text(&mut out, &value))
                        .map_err(|e| in_context(e, path, expression))?,
                }
                if out.len() > MAX_STRING_BYTES {
                    return Err(ExprError::Evaluate(format!(
                        "{}: the rendered string is longer than {MAX_STRING_BYTES} bytes",
                        display_path(path)
                    )));
                }
            }
            Ok(Tree::from(out))
        }
        Node::Array(nodes) => nodes
            .iter()
            .map(|n| render_node(n, scope))
            .collect::<Result<Vec<_>, _>>()
            .map(Tree::from),
        Node::Object(nodes) => {
            let mut object = Map::with_capacity(nodes.len());
            for (key, node) in nodes {
                object.insert(key.clone(), render_node(node, scope)?);
            }
            Ok(Tree::from(object))
        }
    }
}

/// An interpolated value as text: strings raw, null empty, everything else
/// as compact JSON (keys sorted).
fn append_text(out: &mut String, value: &Tree<'_>) -> Result<(), ExprError> {
    match value {
        Tree::String(s) => out.push_str(s),
        Tree::Null => {}
        other => out.push_str(&to_json_string(other)?),
    }
    Ok(())
}

/// Says which template failed, since a policy value may hold many: where in the value,
/// why, then the expression (on one line). The reason comes before the expression,
/// since the engine cuts a warning at 120 characters and a template may be long. Result
/// type errors keep their variant so callers can still match on them.
fn in_context(error: ExprError, path: &str, expression: &Expression) -> ExprError {
    match error {
        ExprError::Evaluate(message) => {
            let source = expression.source().split_whitespace().collect::<Vec<_>>();
            let source = source.join(" ");
            ExprError::Evaluate(if path.is_empty() {
                format!("{message} (in {{{{ {source} }}}})")
            } else {
                format!("{path}: {message} (in {{{{ {source} }}}})")
            })
        }
        other => other,
    }
}

fn display_path(path: &str) -> &str {
    if path.is_empty() { "(value)" } else { path }
}

/// Appends `.key`, or `['key']` when the key would not read as one segment
/// (`metadata.annotations['k8s.v1.cni.cncf.io/networks']`).
fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    } else {
        path.push_str(&format!(
            "['{}']",
            key.replace('\\', "\\\\").replace('\'', "\\'")
        ));
    }
}

#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Literal(&'a str),
    Expression(&'a str),
}

/// Splits a string into literal text and `{{ expr }}` sources. The end of an
/// expression is the first `}}` outside its string literals and its own
/// braces, so `{{ {'a': {'b': 1}} }}` is one expression.
fn split(text: &str) -> Result<Vec<Piece<'_>>, ExprError> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        if start > 0 {
            pieces.push(Piece::Literal(&rest[..start]));
        }
        let body = &rest[start + 2..];
        let end = expression_end(body).ok_or_else(|| {
            ExprError::Compile(format!(
                "'{{{{' at byte {} has no matching '}}}}'",
                text.len() - rest.len() + start
            ))
        })?;
        pieces.push(Piece::Expression(&body[..end]));
        rest = &body[end + 2..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Literal(rest));
    }
    Ok(pieces)
}

/// The byte offset of the `}}` closing an expression that starts at `body[0]`.
fn expression_end(body: &str) -> Option<usize> {
    let bytes = body.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' | b'"' => i = string_end(bytes, i)?,
            b'{' => depth += 1,
            b'}' if depth > 0 => depth -= 1,
            b'}' if bytes.get(i + 1) == Some(&b'}') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the last byte of the CEL string literal opening at `start`:
/// single or triple quoted, raw (`r'...'`) or with backslash escapes.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let quote = bytes[start];
    let raw = start > 0 && matches!(bytes[start - 1], b'r' | b'R');
    let triple = bytes.get(start + 1) == Some(&quote) && bytes.get(start + 2) == Some(&quote);
    let closing: &[u8] = if triple { &[quote; 3] } else { &[quote] };
    let mut i = start + closing.len();
    while i < bytes.len() {
        if bytes[i] == b'\\' && !raw {
            i += 2;
            continue;
        }
        if bytes[i..].starts_with(closing) {
            return Some(i + closing.len() - 1);
        }
        i += 1;
    }
    None
}
