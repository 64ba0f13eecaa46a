//! The functions, methods and macros an expression may call, with their arities:
//! what the load-time check ([`super::check`]) holds calls against.
//!
//! The `cel` crate does not list what an environment declares, so the standard
//! library, its strings extension and its macros are listed here, and a test proves
//! each entry is declared; graft's own overloads are listed from the very table that
//! registers them ([`super::functions::overloads`]).

use std::sync::LazyLock;

use super::functions;

/// How a function is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `name(args...)`, including namespaced ones such as `optional.of(x)`.
    Function,
    /// `target.name(args...)`.
    Method,
}

/// One way to call a name: its style and number of arguments (the target excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    pub name: &'static str,
    pub style: Style,
    pub arity: usize,
}

const fn function(name: &'static str, arity: usize) -> Signature {
    Signature {
        name,
        style: Style::Function,
        arity,
    }
}

const fn method(name: &'static str, arity: usize) -> Signature {
    Signature {
        name,
        style: Style::Method,
        arity,
    }
}

/// The `cel` crate's standard library (with its `regex` and `chrono` features) and
/// strings extension, as graft's environment declares them.
pub const CEL_LIBRARY: &[Signature] = &[
    // Conversions and the type function.
    function("bool", 1),
    function("bytes", 1),
    function("double", 1),
    function("duration", 1),
    function("dyn", 1),
    function("int", 1),
    function("string", 1),
    function("timestamp", 1),
    function("type", 1),
    function("uint", 1),
    function("size", 1),
    method("size", 0),
    // Strings.
    method("contains", 1),
    method("endsWith", 1),
    method("startsWith", 1),
    function("matches", 2),
    method("matches", 1),
    // Timestamps and durations, with an optional time zone.
    method("getDate", 0),
    method("getDate", 1),
    method("getDayOfMonth", 0),
    method("getDayOfMonth", 1),
    method("getDayOfWeek", 0),
    method("getDayOfWeek", 1),
    method("getDayOfYear", 0),
    method("getDayOfYear", 1),
    method("getFullYear", 0),
    method("getFullYear", 1),
    method("getHours", 0),
    method("getHours", 1),
    method("getMilliseconds", 0),
    method("getMilliseconds", 1),
    method("getMinutes", 0),
    method("getMinutes", 1),
    method("getMonth", 0),
    method("getMonth", 1),
    method("getSeconds", 0),
    method("getSeconds", 1),
    // Optional values.
    function("optional.none", 0),
    function("optional.of", 1),
    function("optional.ofNonZeroValue", 1),
    method("hasValue", 0),
    method("value", 0),
    method("or", 1),
    method("orValue", 1),
    // The strings extension.
    method("charAt", 1),
    method("format", 1),
    method("indexOf", 1),
    method("indexOf", 2),
    method("join", 0),
    method("join", 1),
    method("lastIndexOf", 1),
    method("lastIndexOf", 2),
    method("lowerAscii", 0),
    function("strings.quote", 1),
    method("replace", 2),
    method("replace", 3),
    method("reverse", 0),
    method("split", 1),
    method("split", 2),
    method("substring", 1),
    method("substring", 2),
    method("trim", 0),
    method("upperAscii", 0),
];

/// The macros, as they are written. A well-formed call is expanded by the parser and
/// never reaches the check; one left as a call has the wrong number of arguments.
pub const MACROS: &[Signature] = &[
    function("has", 1),
    method("all", 2),
    method("exists", 2),
    method("exists_one", 2),
    method("existsOne", 2),
    method("filter", 2),
    method("map", 2),
    method("map", 3),
    method("optFlatMap", 2),
    method("optMap", 2),
    // Two-variable comprehensions (`super::comprehensions`). `all`, `exists`,
    // `exists_one` and `existsOne` with three arguments are left out, so that a call with
    // a wrong count names the form most write.
    method("transformList", 3),
    method("transformList", 4),
    method("transformMap", 3),
    method("transformMap", 4),
    method("transformMapEntry", 3),
    method("transformMapEntry", 4),
    // The lists extension (`super::lists_ext`).
    method("sortBy", 2),
];

/// What graft has that Kubernetes' environment does not: a MutatingAdmissionPolicy that
/// calls one is refused, as the apiserver refuses it. (`'s'.reverse()`, strings
/// version 3, shares its name with the lists extension's `reverse` and is not told
/// apart.)
const GRAFT_ONLY: &[&str] = &[
    "podOrdinal",
    "quantityValue",
    "formatQuantity",
    "scaleQuantity",
    "jsonDecode",
    "jsonEncode",
    "annotationJSON",
    "multusNetworks",
    "multusParse",
    "parseImageReference",
    "formatImageReference",
    "imageWithRegistry",
    "regexReplace",
];

/// Kubernetes' authorizer library (`library/authz.go`): a MutatingAdmissionPolicy may
/// call it, and graft fails the evaluation that does (it cannot ask the apiserver's
/// authorizer yet).
const AUTHORIZER: &[Signature] = &[
    method("path", 1),
    method("group", 1),
    method("serviceAccount", 2),
    method("resource", 1),
    method("subresource", 1),
    method("namespace", 1),
    method("name", 1),
    method("check", 1),
    method("allowed", 0),
    method("reason", 0),
    method("errored", 0),
    method("error", 0),
    method("fieldSelector", 1),
    method("labelSelector", 1),
];

/// Every signature a MutatingAdmissionPolicy's expression may call.
fn map_signatures() -> &'static [Signature] {
    static ALL: LazyLock<Vec<Signature>> = LazyLock::new(|| {
        signatures()
            .iter()
            // `q.sign()`: Kubernetes declares `sign(q)` only.
            .filter(|s| {
                !(GRAFT_ONLY.contains(&s.name) || s.name == "sign" && s.style == Style::Method)
            })
            .chain(AUTHORIZER)
            .copied()
            .collect()
    });
    &ALL
}

/// Whether a MutatingAdmissionPolicy may call `name` in `style` with `arity` arguments.
pub fn map_has(name: &str, style: Style, arity: usize) -> bool {
    map_signatures()
        .iter()
        .any(|s| s.name == name && s.style == style && s.arity == arity)
}

/// Whether a MutatingAdmissionPolicy may call `name` in `style`, with some arity.
pub fn map_has_name(name: &str, style: Style) -> bool {
    map_signatures()
        .iter()
        .any(|s| s.name == name && s.style == style)
}

/// Every signature: the library's, the macros' and graft's own.
pub fn signatures() -> &'static [Signature] {
    static ALL: LazyLock<Vec<Signature>> = LazyLock::new(|| {
        let own = functions::overloads()
            .into_iter()
            .map(|overload| Signature {
                name: overload.name,
                style: if overload.target.is_some() {
                    Style::Method
                } else {
                    Style::Function
                },
                arity: overload.args.len(),
            });
        let mut all: Vec<Signature> = CEL_LIBRARY
            .iter()
            .chain(MACROS)
            .copied()
            .chain(own)
            .collect();
        all.sort_by_key(|s| (s.name, s.style == Style::Method, s.arity));
        all.dedup();
        all
    });
    &ALL
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Calls `signature` with `null` arguments: a declared name fails with "no such
    /// overload" (or runs), an undeclared one with "undeclared reference".
    fn is_declared(signature: &Signature) -> bool {
        let nulls = vec!["null"; signature.arity].join(", ");
        let source = match signature.style {
            Style::Function => format!("{}({nulls})", signature.name),
            Style::Method => format!("null.{}({nulls})", signature.name),
        };
        let env = super::super::environment().expect("the environment builds");
        let program = env.compile(&source).expect(&source);
        let context = cel::Context::with_env(Arc::clone(env));
        !matches!(
            program.execute(&context),
            Err(cel::ExecutionError::UndeclaredReference(_))
        )
    }

    #[test]
    fn every_listed_library_function_is_declared() {
        for signature in CEL_LIBRARY {
            assert!(is_declared(signature), "{signature:?}");
        }
    }

    #[test]
    fn every_graft_overload_is_listed_and_declared() {
        for overload in functions::overloads() {
            let signature = signatures()
                .iter()
                .find(|s| s.name == overload.name && s.arity == overload.args.len())
                .unwrap_or_else(|| panic!("{} is not listed", overload.name));
            assert!(is_declared(signature), "{signature:?}");
        }
    }

    #[test]
    fn an_unlisted_name_is_not_declared() {
        assert!(!is_declared(&function("podOrdnal", 1)));
        assert!(!is_declared(&method("lowerCase", 0)));
    }
}
