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

const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
     alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric \
     characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must \
     start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric \
     characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// The apiserver's explanation of a failed pattern, with its examples.
fn regex_error(message: &str, format: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{message} (regex used for validation is '{format}')");
    }
    let examples: String = examples
        .iter()
        .enumerate()
        .map(|(i, example)| {
            let separator = if i > 0 { " or " } else { "" };
            format!("{separator}'{example}', ")
        })
        .collect();
    format!("{message} (e.g. {examples}regex used for validation is '{format}')")
}

fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

fn is_dns1123_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    let inner = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
    let edge = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    edge(bytes.first()) && edge(bytes.last()) && bytes.iter().all(inner)
}

/// `IsDNS1123Subdomain`'s messages for `text` (none when valid).
pub fn dns1123_subdomain(text: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if text.len() > 253 {
        errors.push(max_len_error(253));
    }
    if !text.split('.').all(is_dns1123_label) {
        errors.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errors
}

/// `IsDNS1035Label`'s messages for `text`.
pub fn dns1035_label(text: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if text.len() > 63 {
        errors.push(max_len_error(63));
    }
    let starts_alphabetic = text.as_bytes().first().is_some_and(u8::is_ascii_lowercase);
    if !(starts_alphabetic && is_dns1123_label(text)) {
        errors.push(regex_error(
            DNS1035_LABEL_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errors
}

fn is_label_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    let edge = |b: Option<&u8>| b.is_some_and(u8::is_ascii_alphanumeric);
    edge(bytes.first())
        && edge(bytes.last())
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `IsQualifiedName` (`IsLabelKey`)'s messages: an optional DNS subdomain prefix and `/`,
/// then a name.
pub fn qualified_name(text: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = text.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|message| format!("prefix part {message}")),
                );
            }
            *name
        }
        _ => {
            errors.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errors.push(format!("name part {}", max_len_error(63)));
    }
    if !is_label_name(name) {
        errors.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_MSG,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errors
}

/// `IsValidLabelValue`'s messages.
pub fn label_value(text: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if text.len() > 63 {
        errors.push(max_len_error(63));
    }
    if !(text.is_empty() || is_label_name(text)) {
        errors.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

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
