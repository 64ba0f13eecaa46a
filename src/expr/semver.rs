//! Kubernetes' CEL semver library (`k8s.io/apiserver/pkg/cel/library/semverlib.go`,
//! version 1, in Kubernetes since 1.33), parsing as blang/semver v4 does:
//!
//! | Call | Result |
//! |---|---|
//! | `semver(s)`, `semver(s, normalize)` | a `kubernetes.Semver`; with `normalize`, `v1.02` reads as `1.2.0` |
//! | `isSemver(s)`, `isSemver(s, normalize)` | `bool` |
//! | `v.major()`, `v.minor()`, `v.patch()` | `int` |
//! | `v.isGreaterThan(w)`, `v.isLessThan(w)`, `v.compareTo(w)` | `bool`, `bool`, `int` (-1, 0, 1): build metadata aside |
//!
//! Two versions are equal when they compare equal (`semver('1.0.0+a') == semver('1.0.0')`).

use std::any::Any;
use std::cmp::Ordering;

use cel::ExecutionError;
use cel::common::types::{BOOL_TYPE, CelBool, CelInt, STRING_TYPE, Type};
use cel::common::value::{CowVal, StaticVal, Val};

use super::functions::{Overload, arity, fail, string_arg};

type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

static SEMVER_TYPE: Type = Type::new_unspecified_type("kubernetes.Semver");

/// A prerelease identifier: numeric ones order below alphanumeric ones.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pre {
    Number(u64),
    Text(String),
}

impl Pre {
    fn compare(&self, other: &Pre) -> Ordering {
        match (self, other) {
            (Pre::Number(a), Pre::Number(b)) => a.cmp(b),
            (Pre::Number(_), Pre::Text(_)) => Ordering::Less,
            (Pre::Text(_), Pre::Number(_)) => Ordering::Greater,
            (Pre::Text(a), Pre::Text(b)) => a.cmp(b),
        }
    }
}

/// A version, as blang/semver's `Version` (its build metadata checked, then dropped:
/// nothing the library does reads it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<Pre>,
}

impl Semver {
    /// blang/semver's `Version.Compare`: build metadata does not count.
    fn compare(&self, other: &Semver) -> Ordering {
        let numbers =
            (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch));
        if numbers != Ordering::Equal {
            return numbers;
        }
        match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            (false, false) => {}
        }
        for (a, b) in self.pre.iter().zip(&other.pre) {
            let order = a.compare(b);
            if order != Ordering::Equal {
                return order;
            }
        }
        self.pre.len().cmp(&other.pre.len())
    }
}

impl Val for Semver {
    fn get_type(&self) -> &Type {
        &SEMVER_TYPE
    }
    fn cel_type() -> &'static Type {
        &SEMVER_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<Semver>()
            .is_some_and(|other| self.compare(other) == Ordering::Equal)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for Semver {}

const NUMBERS: &str = "0123456789";
const ALPHANUMERIC: &str = "-ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

fn contains_only(text: &str, set: &str) -> bool {
    text.chars().all(|c| set.contains(c))
}

fn has_leading_zeroes(text: &str) -> bool {
    text.len() > 1 && text.starts_with('0')
}

/// Go's `strconv.ParseUint(text, 10, 64)`, with its messages.
fn parse_uint(text: &str) -> Result<u64, String> {
    text.parse::<u64>().map_err(|_| {
        let reason = if !text.is_empty() && contains_only(text, NUMBERS) {
            "value out of range"
        } else {
            "invalid syntax"
        };
        format!("strconv.ParseUint: parsing {}: {reason}", go_quote(text))
    })
}

fn go_quote(text: &str) -> String {
    crate::k8s::go_text::quote(text)
}

/// The number of `part` (`major`, `minor`, `patch`), as blang/semver checks it.
fn number(text: &str, part: &str, capitalised: &str) -> Result<u64, String> {
    if !contains_only(text, NUMBERS) {
        return Err(format!(
            "Invalid character(s) found in {part} number {}",
            go_quote(text)
        ));
    }
    if has_leading_zeroes(text) {
        return Err(format!(
            "{capitalised} number must not contain leading zeroes {}",
            go_quote(text)
        ));
    }
    parse_uint(text)
}

/// blang/semver v4's `Parse`, with its messages.
pub fn parse(text: &str) -> Result<Semver, String> {
    if text.is_empty() {
        return Err("Version string empty".to_owned());
    }
    let parts: Vec<&str> = text.splitn(3, '.').collect();
    let [major, minor, rest] = parts.as_slice() else {
        return Err("No Major.Minor.Patch elements found".to_owned());
    };
    let major = number(major, "major", "Major")?;
    let minor = number(minor, "minor", "Minor")?;
    let mut patch_text = *rest;
    let mut build = Vec::new();
    if let Some((before, metadata)) = patch_text.split_once('+') {
        build = metadata.split('.').map(str::to_owned).collect();
        patch_text = before;
    }
    let mut prerelease = Vec::new();
    if let Some((before, pre)) = patch_text.split_once('-') {
        prerelease = pre.split('.').collect();
        patch_text = before;
    }
    let patch = number(patch_text, "patch", "Patch")?;
    let mut pre = Vec::new();
    for identifier in prerelease {
        if identifier.is_empty() {
            return Err("Prerelease is empty".to_owned());
        }
        if contains_only(identifier, NUMBERS) {
            if has_leading_zeroes(identifier) {
                return Err(format!(
                    "Numeric PreRelease version must not contain leading zeroes {}",
                    go_quote(identifier)
                ));
            }
            pre.push(Pre::Number(parse_uint(identifier)?));
        } else if contains_only(identifier, ALPHANUMERIC) {
            pre.push(Pre::Text(identifier.to_owned()));
        } else {
            return Err(format!(
                "Invalid character(s) found in prerelease {}",
                go_quote(identifier)
            ));
        }
    }
    for metadata in &build {
        if metadata.is_empty() {
            return Err("Build meta data is empty".to_owned());
        }
        if !contains_only(metadata, ALPHANUMERIC) {
            return Err(format!(
                "Invalid character(s) found in build meta data {}",
                go_quote(metadata)
            ));
        }
    }
    Ok(Semver {
        major,
        minor,
        patch,
        pre,
    })
}

/// Kubernetes' `normalizeAndParse`: a leading `v` dropped, leading zeroes of the numbers
/// dropped, a missing minor or patch number read as 0.
fn normalize_and_parse(text: &str) -> Result<Semver, String> {
    let text = text.strip_prefix('v').unwrap_or(text);
    let mut parts: Vec<String> = text
        .splitn(3, '.')
        .map(|part| {
            if part.len() <= 1 {
                return part.to_owned();
            }
            let trimmed = part.trim_start_matches('0');
            if trimmed.is_empty() || !trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                format!("0{trimmed}")
            } else {
                trimmed.to_owned()
            }
        })
        .collect();
    if parts.len() < 3 {
        if parts.last().is_some_and(|last| last.contains(['+', '-'])) {
            return Err("short version cannot contain PreRelease/Build meta data".to_owned());
        }
        parts.resize(3, "0".to_owned());
    }
    parse(&parts.join("."))
}

/// The overloads of this module.
pub fn overloads() -> Vec<Overload> {
    let v = || SEMVER_TYPE.to_owned();
    vec![
        Overload::function("semver", "string_to_semver", vec![STRING_TYPE], make),
        Overload::function(
            "semver",
            "string_bool_to_semver",
            vec![STRING_TYPE, BOOL_TYPE],
            make,
        ),
        Overload::function("isSemver", "is_semver_string", vec![STRING_TYPE], is_semver),
        Overload::function(
            "isSemver",
            "is_semver_string_bool",
            vec![STRING_TYPE, BOOL_TYPE],
            is_semver,
        ),
        Overload::method("major", "semver_major", v(), vec![], major),
        Overload::method("minor", "semver_minor", v(), vec![], minor),
        Overload::method("patch", "semver_patch", v(), vec![], patch),
        Overload::method(
            "isGreaterThan",
            "semver_is_greater_than",
            v(),
            vec![v()],
            is_greater_than,
        ),
        Overload::method(
            "isLessThan",
            "semver_is_less_than",
            v(),
            vec![v()],
            is_less_than,
        ),
        Overload::method("compareTo", "semver_compare_to", v(), vec![v()], compare_to),
    ]
}

/// The text and normalize flag of a `semver`/`isSemver` call, parsed.
fn parsed(name: &str, args: &[CowVal<'_, '_>]) -> Result<Result<Semver, String>, ExecutionError> {
    let text = args
        .first()
        .ok_or_else(|| fail(name, "expected a string"))?;
    let text = string_arg(name, text.as_ref())?;
    let normalize = match args.get(1) {
        Some(flag) => *flag
            .downcast_ref::<CelBool>()
            .ok_or_else(|| fail(name, "expected a bool"))?
            .inner(),
        None => false,
    };
    Ok(if normalize {
        normalize_and_parse(text)
    } else {
        parse(text)
    })
}

fn make<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let version = parsed("semver", &args)?.map_err(|e| fail("semver", e))?;
    Ok(CowVal::owned(version))
}

fn is_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let valid = parsed("isSemver", &args)?.is_ok();
    Ok(CowVal::owned(CelBool::from(valid)))
}

fn version<'a>(name: &str, value: &'a dyn Val) -> Result<&'a Semver, ExecutionError> {
    value.downcast_ref::<Semver>().ok_or_else(|| {
        fail(
            name,
            format!("expected a semver, got {}", value.get_type().name()),
        )
    })
}

fn part<'b, 'v>(
    name: &str,
    args: &[CowVal<'b, 'v>],
    pick: impl FnOnce(&Semver) -> u64,
) -> CelResult<'b, 'v> {
    let [value] = arity::<1>(name, args)?;
    // Go converts the uint64 to an int64 as it is, wrapping around.
    Ok(CowVal::owned(CelInt::from(
        pick(version(name, value)?) as i64
    )))
}

fn major<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    part("major", &args, |v| v.major)
}

fn minor<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    part("minor", &args, |v| v.minor)
}

fn patch<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    part("patch", &args, |v| v.patch)
}

fn order(name: &str, args: &[CowVal<'_, '_>]) -> Result<Ordering, ExecutionError> {
    let [a, b] = arity::<2>(name, args)?;
    Ok(version(name, a)?.compare(version(name, b)?))
}

fn is_greater_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let greater = order("isGreaterThan", &args)? == Ordering::Greater;
    Ok(CowVal::owned(CelBool::from(greater)))
}

fn is_less_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let less = order("isLessThan", &args)? == Ordering::Less;
    Ok(CowVal::owned(CelBool::from(less)))
}

fn compare_to<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let value = match order("compareTo", &args)? {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    };
    Ok(CowVal::owned(CelInt::from(value)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::evaluate_unbound as eval;

    #[test]
    fn versions_parse_and_compare_as_blang_semver() {
        for source in [
            "semver('1.36.2').major() == 1 && semver('1.36.2').minor() == 36",
            "semver('1.36.2').patch() == 2",
            "semver('1.2.3').isLessThan(semver('1.10.0'))",
            "semver('1.0.0').isGreaterThan(semver('1.0.0-rc.1'))",
            "semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1'))",
            "semver('1.0.0-1').isLessThan(semver('1.0.0-a'))",
            "semver('1.0.0+build.1') == semver('1.0.0')",
            "semver('2.0.0').compareTo(semver('1.9.9')) == 1",
            "semver('v1.02', true) == semver('1.2.0')",
            "semver('v1', true).major() == 1",
            "isSemver('1.2.3-beta+exp.sha.5114f85') && !isSemver('1.2') && !isSemver('v1.2.3')",
            "isSemver('v1.2', true) && !isSemver('1-rc', true)",
            "!isSemver('01.2.3') && !isSemver('1.2.3-01') && !isSemver('1.2.3+')",
        ] {
            assert_eq!(eval(source), Ok(json!(true)), "{source}");
        }
    }

    #[test]
    fn errors_are_blang_semver_s() {
        for (source, expected) in [
            ("semver('1.2')", "No Major.Minor.Patch elements found"),
            ("semver('')", "Version string empty"),
            (
                "semver('01.2.3')",
                "Major number must not contain leading zeroes \"01\"",
            ),
            (
                "semver('1.x.3')",
                "Invalid character(s) found in minor number \"x\"",
            ),
            ("semver('1.2.3-')", "Prerelease is empty"),
            (
                "semver('1-rc', true)",
                "short version cannot contain PreRelease/Build meta data",
            ),
        ] {
            let error = eval(source).expect_err(source).to_string();
            assert_eq!(
                error,
                format!("Error executing function 'semver': {expected}"),
                "{source}"
            );
        }
    }
}
