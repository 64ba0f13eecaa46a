//! The apiserver's field errors (`k8s.io/apimachinery/pkg/util/validation/field`) and the
//! name rules MutatingAdmissionPolicy validation applies, worded as the apiserver words
//! them, so that `graft lint` says what `kubectl apply` would.
//!
//! An error is a field path and a body: `Required value`, `Invalid value: "x": detail`,
//! `Unsupported value: "x": supported values: "a", "b"`, ... A bad value is written as
//! Go writes it there: a plain string quoted (`%q`), anything else as JSON.

use std::fmt;

/// One field error: where, and what the apiserver says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, `spec.mutations[0].patchType`.
    pub field: String,
    /// The body: `Required value`, `Invalid value: "x": ...`.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// A bad value as the apiserver renders it.
pub enum Bad<'a> {
    /// A plain Go string: `%q`.
    Str(&'a str),
    /// Anything else (named string types, lists, numbers): JSON.
    Json(serde_json::Value),
}

impl fmt::Display for Bad<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bad::Str(text) => write!(f, "{}", go_quote(text)),
            Bad::Json(value) => write!(f, "{value}"),
        }
    }
}

/// A value of a named Go string type (`FailurePolicyType`, `OperationType`, ...), which
/// the apiserver writes as JSON.
pub fn named(text: &str) -> Bad<'static> {
    Bad::Json(serde_json::Value::String(text.to_string()))
}

/// A list of strings, written as JSON.
pub fn list(items: &[String]) -> Bad<'static> {
    Bad::Json(serde_json::Value::from(items.to_vec()))
}

/// Go's `%q` of a string (`strconv.Quote`).
pub fn go_quote(text: &str) -> String {
    crate::k8s::go_text::quote(text)
}

/// The errors of one document, in the order the apiserver appends them.
#[derive(Debug, Default)]
pub struct FieldErrors(pub Vec<FieldError>);

impl FieldErrors {
    fn push(&mut self, field: impl Into<String>, message: String) {
        self.0.push(FieldError {
            field: field.into(),
            message,
        });
    }

    /// `Required value`, with a detail when given.
    pub fn required(&mut self, field: impl Into<String>, detail: &str) {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        self.push(field, message);
    }

    /// `Invalid value: BAD: detail`.
    pub fn invalid(&mut self, field: impl Into<String>, bad: Bad<'_>, detail: &str) {
        let message = if detail.is_empty() {
            format!("Invalid value: {bad}")
        } else {
            format!("Invalid value: {bad}: {detail}")
        };
        self.push(field, message);
    }

    /// `Unsupported value: BAD: supported values: "a", "b"` (each Go-quoted, in the order
    /// given: the apiserver sorts some lists and not others).
    pub fn not_supported(&mut self, field: impl Into<String>, bad: Bad<'_>, supported: &[&str]) {
        let values: Vec<String> = supported.iter().map(|value| go_quote(value)).collect();
        self.push(
            field,
            format!(
                "Unsupported value: {bad}: supported values: {}",
                values.join(", ")
            ),
        );
    }

    /// `Internal error: detail`.
    pub fn internal(&mut self, field: impl Into<String>, detail: &str) {
        self.push(field, format!("Internal error: {detail}"));
    }

    /// `Forbidden: detail`.
    pub fn forbidden(&mut self, field: impl Into<String>, detail: &str) {
        self.push(field, format!("Forbidden: {detail}"));
    }

    /// `Duplicate value: BAD`.
    pub fn duplicate(&mut self, field: impl Into<String>, bad: Bad<'_>) {
        self.push(field, format!("Duplicate value: {bad}"));
    }

    /// `Too many: N: must have at most MAX items`.
    pub fn too_many(&mut self, field: impl Into<String>, actual: usize, max: usize) {
        self.push(
            field,
            format!("Too many: {actual}: must have at most {max} items"),
        );
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

// The name rules live with the other Kubernetes formats, where CEL's format library
// (`expr`) reads them too.
pub use crate::k8s::names::{dns1035_label, dns1123_subdomain, label_value, qualified_name};

/// `ValidatePathSegmentName`'s messages: a name that can be a URL path segment.
pub fn path_segment(text: &str) -> Vec<String> {
    let mut errors = Vec::new();
    match text {
        "." => errors.push("may not be '.'".to_string()),
        ".." => errors.push("may not be '..'".to_string()),
        _ => {}
    }
    for forbidden in ["/", "%"] {
        if text.contains(forbidden) {
            errors.push(format!("may not contain '{forbidden}'"));
        }
    }
    errors
}

/// Whether `text` is a CEL identifier the apiserver accepts as a variable name.
pub fn is_cel_identifier(text: &str) -> bool {
    const RESERVED: [&str; 20] = [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
    ];
    let mut chars = text.chars();
    let starts = chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic());
    starts
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !RESERVED.contains(&text)
        && text != "while"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_as_the_apiservers() {
        let mut errors = FieldErrors::default();
        errors.not_supported("spec.failurePolicy", named("other"), &["Fail", "Ignore"]);
        errors.invalid(
            "spec.matchConstraints.resourceRules[0].resources",
            list(&["*/*".to_string(), "a".to_string()]),
            "if '*/*' is present, must not specify other resources",
        );
        errors.required("spec.mutations", "mutations must contain at least one item");
        errors.too_many("spec.matchConditions", 65, 64);
        let rendered: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
        assert_eq!(
            rendered,
            [
                "spec.failurePolicy: Unsupported value: \"other\": supported values: \"Fail\", \"Ignore\"",
                "spec.matchConstraints.resourceRules[0].resources: Invalid value: [\"*/*\",\"a\"]: if '*/*' is present, must not specify other resources",
                "spec.mutations: Required value: mutations must contain at least one item",
                "spec.matchConditions: Too many: 65: must have at most 64 items",
            ]
        );
    }

    #[test]
    fn names_are_checked_with_the_apiservers_words() {
        assert!(dns1123_subdomain("example.com").is_empty());
        assert_eq!(
            dns1123_subdomain("Example"),
            [
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
        assert_eq!(
            dns1035_label("1abc"),
            [
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert!(qualified_name("example.com/my-name").is_empty());
        assert_eq!(qualified_name("/x"), ["prefix part must be non-empty"]);
        assert_eq!(qualified_name("a/b/c").len(), 1);
        assert!(label_value("").is_empty());
        assert_eq!(label_value("-x").len(), 1);
        assert_eq!(
            path_segment("a/b%"),
            ["may not contain '/'", "may not contain '%'"]
        );
        assert!(is_cel_identifier("_x1") && !is_cel_identifier("1x") && !is_cel_identifier("in"));
        assert_eq!(go_quote("a\"b\n"), "\"a\\\"b\\n\"");
    }
}
