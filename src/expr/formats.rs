//! Kubernetes' CEL format library (`k8s.io/apiserver/pkg/cel/library/format.go`, in
//! Kubernetes since 1.31): named string formats, and the messages a string that is not
//! of one gets.
//!
//! | Call | Result |
//! |---|---|
//! | `format.dns1123Label()`, `format.dns1123Subdomain()`, `format.dns1035Label()`, `format.qualifiedName()`, `format.dns1123LabelPrefix()`, `format.dns1123SubdomainPrefix()`, `format.dns1035LabelPrefix()`, `format.labelValue()`, `format.uri()`, `format.uuid()`, `format.byte()`, `format.date()`, `format.datetime()` | a `kubernetes.NamedFormat` |
//! | `format.named(name)` | `optional`: the format of that name (`dns1123Label`, ...), none for another |
//! | `f.validate(s)` | `optional(list(string))`: none when `s` is of the format, else apimachinery's messages |
//!
//! The name formats are apimachinery's ([`crate::k8s::names`]); the others are
//! kube-openapi's `strfmt` checks (`uri` as Go's `url.ParseRequestURI`).

use std::any::Any;
use std::sync::LazyLock;

use cel::ExecutionError;
use cel::common::types::{CelList, CelOptional, CelString, STRING_TYPE, Type};
use cel::common::value::{CowVal, StaticVal, Val};
use regex::Regex;

use super::functions::{Overload, arity, fail, string_arg};
use crate::k8s::names;

type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

static FORMAT_TYPE: Type = Type::new_unspecified_type("kubernetes.NamedFormat");

/// A named format: one of [`FORMATS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedFormat(usize);

/// What a format says of a string: nothing when it is of the format.
type Check = fn(&str) -> Vec<String>;

/// The formats, by the name `format.named` knows them by.
const FORMATS: [(&str, Check); 13] = [
    ("dns1123Label", names::dns1123_label),
    ("dns1123Subdomain", names::dns1123_subdomain),
    ("dns1035Label", names::dns1035_label),
    ("qualifiedName", names::qualified_name),
    ("dns1123LabelPrefix", |s| {
        names::dns1123_label(&names::mask_trailing_dash(s))
    }),
    ("dns1123SubdomainPrefix", |s| {
        names::dns1123_subdomain(&names::mask_trailing_dash(s))
    }),
    ("dns1035LabelPrefix", |s| {
        names::dns1035_label(&names::mask_trailing_dash(s))
    }),
    ("labelValue", names::label_value),
    ("uri", uri),
    ("uuid", |s| {
        unless(is_uuid(s), "does not match the UUID format")
    }),
    ("byte", |s| unless(is_base64(s), "invalid base64")),
    ("date", |s| unless(is_date(s), "invalid date")),
    ("datetime", |s| unless(is_datetime(s), "invalid datetime")),
];

fn unless(valid: bool, message: &str) -> Vec<String> {
    if valid {
        Vec::new()
    } else {
        vec![message.to_owned()]
    }
}

impl Val for NamedFormat {
    fn get_type(&self) -> &Type {
        &FORMAT_TYPE
    }
    fn cel_type() -> &'static Type {
        &FORMAT_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<NamedFormat>() == Some(self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(*self)
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for NamedFormat {}

/// The overloads of this module.
pub fn overloads() -> Vec<Overload> {
    let mut all = vec![
        Overload::function("format.named", "format_named", vec![STRING_TYPE], named),
        Overload::method(
            "validate",
            "format_validate",
            FORMAT_TYPE.to_owned(),
            vec![STRING_TYPE],
            validate,
        ),
    ];
    // One constant function per format: a function knows no more than its arguments,
    // so each format has one of its own.
    macro_rules! constants {
        ($($index:literal => $name:literal),* $(,)?) => {
            $(
                all.push(Overload::function(
                    concat!("format.", $name),
                    concat!("format_", $name),
                    vec![],
                    |_| Ok(CowVal::owned(NamedFormat($index))),
                ));
            )*
        };
    }
    constants!(
        0 => "dns1123Label",
        1 => "dns1123Subdomain",
        2 => "dns1035Label",
        3 => "qualifiedName",
        4 => "dns1123LabelPrefix",
        5 => "dns1123SubdomainPrefix",
        6 => "dns1035LabelPrefix",
        7 => "labelValue",
        8 => "uri",
        9 => "uuid",
        10 => "byte",
        11 => "date",
        12 => "datetime",
    );
    all
}

/// `format.named(name)`.
fn named<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [name] = arity::<1>("format.named", &args)?;
    let name = string_arg("format.named", name)?;
    let found = FORMATS.iter().position(|(known, _)| *known == name);
    Ok(CowVal::owned(match found {
        Some(index) => CelOptional::of(Box::new(NamedFormat(index))),
        None => CelOptional::none(),
    }))
}

/// `f.validate(s)`.
fn validate<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [format, text] = arity::<2>("validate", &args)?;
    let NamedFormat(index) = *format
        .downcast_ref::<NamedFormat>()
        .ok_or_else(|| fail("validate", "expected a format"))?;
    let check = FORMATS
        .get(index)
        .map(|(_, check)| check)
        .ok_or_else(|| fail("validate", "unknown format"))?;
    let messages = check(string_arg("validate", text)?);
    Ok(CowVal::owned(if messages.is_empty() {
        CelOptional::none()
    } else {
        let list: Vec<Box<dyn Val>> = messages
            .into_iter()
            .map(|m| Box::new(CelString::from(m)) as Box<dyn Val>)
            .collect();
        CelOptional::of(Box::new(CelList::from(list)))
    }))
}

/// `url.ParseRequestURI`'s verdict, in Go's words.
fn uri(text: &str) -> Vec<String> {
    match super::urls::Url::parse(text) {
        Ok(_) => Vec::new(),
        Err(_) => vec![format!(
            "parse {}: invalid URI for request",
            crate::k8s::go_text::quote(text)
        )],
    }
}

fn is_uuid(text: &str) -> bool {
    static UUID: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$").ok()
    });
    UUID.as_ref().is_some_and(|re| re.is_match(text))
}

/// govalidator's `IsBase64`.
fn is_base64(text: &str) -> bool {
    static BASE64: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(
            r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$",
        )
        .ok()
    });
    BASE64.as_ref().is_some_and(|re| re.is_match(text))
}

/// Go's `time.Parse("2006-01-02", text)`.
fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = text.get(range)?;
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return false;
    }
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// kube-openapi's `IsDateTime`: a date, `t`, and a time with a zone.
fn is_datetime(text: &str) -> bool {
    static TIME: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$").ok()
    });
    if text.len() < 4 {
        return false;
    }
    let lower = text.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let Some(captures) = TIME.as_ref().and_then(|re| re.captures(parts[1])) else {
        return false;
    };
    let field = |i: usize| captures.get(i).map_or("", |m| m.as_str());
    field(1) <= "23" && field(2) <= "59" && field(3) <= "59"
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::evaluate_unbound as eval;

    #[test]
    fn formats_validate_as_kubernetes_does() {
        for source in [
            "format.dns1123Label().validate('my-name') == optional.none()",
            "format.dns1123Label().validate('a.b').value() == ['must not contain dots']",
            "format.dns1123LabelPrefix().validate('my-name-') == optional.none()",
            "format.dns1123Subdomain().validate('example.com') == optional.none()",
            "format.dns1035Label().validate('1abc').hasValue()",
            "format.qualifiedName().validate('example.com/my-name') == optional.none()",
            "format.labelValue().validate('') == optional.none()",
            "format.uri().validate('https://example.com/a') == optional.none()",
            "format.uri().validate('a b').hasValue()",
            "format.uuid().validate('123e4567-e89b-12d3-a456-426614174000') == optional.none()",
            "format.uuid().validate('x').value() == ['does not match the UUID format']",
            "format.byte().validate('aGk=') == optional.none()",
            "format.byte().validate('a').value() == ['invalid base64']",
            "format.date().validate('2024-02-29') == optional.none()",
            "format.date().validate('2023-02-29').value() == ['invalid date']",
            "format.datetime().validate('2024-01-02T03:04:05Z') == optional.none()",
            "format.datetime().validate('2024-01-02T24:04:05Z').value() == ['invalid datetime']",
            "format.named('dns1123Label').value() == format.dns1123Label()",
            "!format.named('nope').hasValue()",
        ] {
            assert_eq!(eval(source), Ok(json!(true)), "{source}");
        }
        assert_eq!(
            eval("format.dns1123Label().validate('My_Name').value()"),
            Ok(json!([
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters \
                 or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  \
                 or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]))
        );
    }
}
