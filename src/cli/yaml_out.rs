//! YAML output that kubectl reads back as written.
//!
//! serde_yaml writes YAML 1.2, where `yes`, `on` and `n` are plain strings; kubectl
//! reads YAML 1.1, where they are booleans, so an annotation `inject: yes` would come
//! back as `true`. Plain scalars that YAML 1.1 reads as booleans are quoted here.

/// Serialises `value` as one YAML document safe for YAML 1.1 readers.
pub fn to_string(value: &serde_json::Value) -> Result<String, serde_yaml::Error> {
    Ok(quote_yaml11_booleans(&serde_yaml::to_string(value)?))
}

fn is_yaml11_boolean(scalar: &str) -> bool {
    matches!(
        scalar,
        "y" | "Y"
            | "yes"
            | "Yes"
            | "YES"
            | "n"
            | "N"
            | "no"
            | "No"
            | "NO"
            | "on"
            | "On"
            | "ON"
            | "off"
            | "Off"
            | "OFF"
    )
}

/// Quotes `key: VALUE` and `- VALUE` plain scalars, outside block scalars.
fn quote_yaml11_booleans(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // Lines indented deeper than this belong to a block scalar (`|` or `>`).
    let mut block_indent: Option<usize> = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        if let Some(level) = block_indent {
            if indent > level || line.trim().is_empty() {
                out.push_str(line);
                out.push('\n');
                continue;
            }
            block_indent = None;
        }
        let (head, scalar) = match line.rsplit_once(": ") {
            Some((head, scalar)) => (format!("{head}: "), scalar),
            None => match line.trim_start().strip_prefix("- ") {
                Some(scalar) => (line[..line.len() - scalar.len()].to_string(), scalar),
                None => (String::new(), ""),
            },
        };
        if is_yaml11_boolean(scalar) {
            out.push_str(&head);
            out.push('\'');
            out.push_str(scalar);
            out.push('\'');
        } else {
            out.push_str(line);
        }
        out.push('\n');
        let trimmed = line.trim_end();
        if trimmed.ends_with('|')
            || trimmed.ends_with("|-")
            || trimmed.ends_with('>')
            || trimmed.ends_with(">-")
        {
            block_indent = Some(indent);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn yaml11_booleans_are_quoted_and_round_trip() {
        let value = json!({"a": "yes", "b": ["on", "Off"], "c": "true", "d": "text: yes", "e": "line\n- yes\nend"});
        let text = to_string(&value).unwrap();
        assert!(text.contains("a: 'yes'"), "{text}");
        assert!(text.contains("- 'on'"), "{text}");
        assert!(text.contains("- 'Off'"), "{text}");
        let back: serde_json::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(back, value);
    }
}
