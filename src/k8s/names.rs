//! The names Kubernetes validates (`k8s.io/apimachinery/pkg/util/validation`,
//! `pkg/api/validation`), with its messages: what MutatingAdmissionPolicy validation
//! says of a name (`policy::admission_policy`) and what CEL's format library
//! (`format.dns1123Label().validate(s)`) answers.

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

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case \
     alphanumeric characters or '-', and must start and end with an alphanumeric character";

/// `IsDNS1123Label`'s messages for `text`.
pub fn dns1123_label(text: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if text.len() > 63 {
        errors.push(max_len_error(63));
    }
    if !is_dns1123_label(text) {
        if text.split('.').all(is_dns1123_label) {
            // A valid subdomain, and the length is checked: it has dots.
            errors.push("must not contain dots".to_string());
        } else {
            errors.push(regex_error(
                DNS1123_LABEL_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errors
}

/// `maskTrailingDash`: a name given as the prefix of generated names may end with `-`,
/// which is read as a letter. (Go drops the last two characters and adds `a`.)
pub fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        // Byte-wise as Go; a cut through a character leaves what precedes it.
        let cut = (0..=name.len() - 2)
            .rev()
            .find(|at| name.is_char_boundary(*at))
            .unwrap_or(0);
        let mut masked = name[..cut].to_string();
        masked.push('a');
        masked
    } else {
        name.to_string()
    }
}
