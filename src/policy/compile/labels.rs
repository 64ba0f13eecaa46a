//! Kubernetes' rules for label keys and values, as the compiler checks a selector's.

use super::Compiler;

/// The field path of a map entry: `labels.app`, or `labels['example.com/team']` for a
/// key that is not a plain name.
pub(super) fn map_entry(field: &str, key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        format!("{field}.{key}")
    } else {
        format!("{field}['{key}']")
    }
}

/// What a selector reads: label syntax is checked only for labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Over {
    Labels,
    Annotations,
}

/// Checks a label key as Kubernetes does: an optional DNS-subdomain prefix and `/`, then
/// a name.
pub(super) fn label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let label = |part: &str| {
            !part.is_empty()
                && part.len() <= 63
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        };
        if prefix.len() > 253 || !prefix.split('.').all(label) {
            return Err(format!(
                "the prefix {prefix:?} is not a lowercase DNS subdomain"
            ));
        }
    }
    if name.is_empty() {
        return Err("the name is empty".to_string());
    }
    label_value(name)
}

/// Checks a label value (also the name part of a key): at most 63 characters of
/// letters, digits, `-`, `_` and `.`, beginning and ending with a letter or digit.
fn label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    if value.len() > 63 {
        return Err(format!("{} characters, at most 63", value.len()));
    }
    let alphanumeric = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !alphanumeric(value.chars().next()) || !alphanumeric(value.chars().last()) {
        return Err("it must begin and end with a letter or digit".to_string());
    }
    match value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        Some(c) => Err(format!("{c:?} is not allowed")),
        None => Ok(()),
    }
}

impl Compiler<'_> {
    pub(super) fn check_label<'v>(
        &mut self,
        over: Over,
        field: &str,
        key: &str,
        values: impl IntoIterator<Item = &'v String>,
    ) {
        if over != Over::Labels {
            return;
        }
        if let Err(reason) = label_key(key) {
            self.warning_with_hint(
                field,
                key,
                &format!("{key:?} is not a valid label key: {reason}"),
                "label keys are [prefix/]name: a DNS subdomain prefix, a name of up to 63 letters, digits, '-', '_' or '.'",
            );
        }
        for value in values {
            if let Err(reason) = label_value(value) {
                self.warning_with_hint(
                    field,
                    value,
                    &format!("{value:?} is not a valid label value: {reason}"),
                    "label values are empty or up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
                );
            }
        }
    }
}
