//! graft's CEL functions: thin wrappers that unpack CEL arguments, call the
//! pure logic in [`crate::k8s`], and pack the result.
//!
//! | Function | Result |
//! |---|---|
//! | `podOrdinal(object)` | `int`: label `apps.kubernetes.io/pod-index`, else the number after the name's last `-` |
//! | `quantityValue(string)` | `double`: a `resource.Quantity` in base units (cores, bytes) |
//! | `formatQuantity(double\|int, string unit)` | `string`: rounded down to `m`, `""`, `k`..`E` or `Ki`..`Ei` |
//! | `scaleQuantity(string, double\|int factor, string unit)` | `string`: `q × factor` rounded down to `unit`, the product exact in decimal |
//! | `jsonDecode(string)` | `dyn` |
//! | `jsonEncode(dyn)` | `string`: compact, keys sorted |
//! | `annotationJSON(object, string key)` | `dyn`: the annotation decoded, null when absent |
//! | `multusNetworks(string existing, list desired, string podNamespace)` | `string`: the merged networks annotation |
//! | `multusParse(string value, string podNamespace)` | `list(map)`: the networks, namespaces filled in |
//! | `parseImageReference(string)` | `map`: `registry`, `repository`, `tag`, `digest`, normalised ([`crate::k8s::image`]) |
//! | `formatImageReference(map)` | `string`: the inverse |
//! | `imageWithRegistry(string image, string registry)` | `string`: the image on another registry |
//!
//! They are declared as overloads of the shared [`Env`], once, rather than
//! added to each evaluation's context. Errors name the function (the
//! interpreter prefixes `Error executing function 'NAME'`).

use cel::common::functions::Function;
use cel::common::types::{
    CelDouble, CelInt, CelNull, CelString, CelUInt, DYN_TYPE, LIST_TYPE, MAP_TYPE, STRING_TYPE,
    Type,
};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::convert;
use crate::k8s::image::ImageReference;
use crate::k8s::{MAX_STRING_BYTES, multus, ordinal, quantity};
use crate::tree::{Map, Tree};

type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// One declared overload: registered on the environment, and listed for the
/// load-time check ([`super::check`]), so the two cannot drift apart.
pub struct Overload {
    pub name: &'static str,
    pub id: &'static str,
    /// The receiver's type for a method (`x.f()`), `None` for a function (`f(x)`).
    pub target: Option<Type>,
    pub args: Vec<Type>,
    pub op: Function,
}

impl Overload {
    /// A function, called as `name(args...)`.
    pub fn function(name: &'static str, id: &'static str, args: Vec<Type>, op: Function) -> Self {
        Overload {
            name,
            id,
            target: None,
            args,
            op,
        }
    }

    /// A method, called as `target.name(args...)`.
    pub fn method(
        name: &'static str,
        id: &'static str,
        target: Type,
        args: Vec<Type>,
        op: Function,
    ) -> Self {
        Overload {
            name,
            id,
            target: Some(target),
            args,
            op,
        }
    }
}

/// Every overload graft adds to the CEL standard library that CEL source can call.
pub fn overloads() -> Vec<Overload> {
    let mut all = every_overload();
    all.retain(|overload| !is_internal(overload.name));
    all
}

/// Whether `name` is one only graft's rewrites of a program call: `@` cannot begin a
/// name in CEL source.
pub fn is_internal(name: &str) -> bool {
    name.starts_with('@')
}

/// Every overload graft declares, the internal ones of its macros and rewrites too.
fn every_overload() -> Vec<Overload> {
    let mut all = own();
    all.extend(super::lists::overloads());
    all.extend(super::lists_ext::overloads());
    all.extend(super::net::overloads());
    all.extend(super::quantities::overloads());
    all.extend(super::urls::overloads());
    all.extend(super::format::overloads());
    all.extend(super::optionals::overloads());
    all.extend(super::comprehensions::overloads());
    all.extend(super::semver::overloads());
    all.extend(super::formats::overloads());
    all.extend(super::structs::overloads());
    all.extend(super::structs::internal_overloads());
    all
}

/// Declares every overload graft has on `env`. Before the `cel` crate's strings
/// extension: the first overload that takes a call's arguments is the one it calls, and
/// graft's `format` is to be that one (`super::format`).
pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    for overload in every_overload() {
        match overload.target {
            Some(target) => env.add_member_overload(
                overload.name,
                overload.id,
                target,
                overload.args,
                overload.op,
            )?,
            None => env.add_overload(overload.name, overload.id, overload.args, overload.op)?,
        }
    }
    Ok(())
}

/// The Kubernetes helpers of this module.
fn own() -> Vec<Overload> {
    vec![
        Overload::function("podOrdinal", "podOrdinal_dyn", vec![DYN_TYPE], pod_ordinal),
        Overload::function(
            "quantityValue",
            "quantityValue_string",
            vec![STRING_TYPE],
            quantity_value,
        ),
        Overload::function(
            "formatQuantity",
            "formatQuantity_number_string",
            vec![DYN_TYPE, STRING_TYPE],
            format_quantity,
        ),
        Overload::function(
            "scaleQuantity",
            "scaleQuantity_string_number_string",
            vec![STRING_TYPE, DYN_TYPE, STRING_TYPE],
            scale_quantity,
        ),
        Overload::function(
            "jsonDecode",
            "jsonDecode_string",
            vec![STRING_TYPE],
            json_decode,
        ),
        Overload::function("jsonEncode", "jsonEncode_dyn", vec![DYN_TYPE], json_encode),
        Overload::function(
            "annotationJSON",
            "annotationJSON_dyn_string",
            vec![DYN_TYPE, STRING_TYPE],
            annotation_json,
        ),
        Overload::function(
            "multusNetworks",
            "multusNetworks_string_list_string",
            vec![STRING_TYPE, LIST_TYPE, STRING_TYPE],
            multus_networks,
        ),
        Overload::function(
            "multusParse",
            "multusParse_string_string",
            vec![STRING_TYPE, STRING_TYPE],
            multus_parse,
        ),
        Overload::function(
            "parseImageReference",
            "parseImageReference_string",
            vec![STRING_TYPE],
            parse_image_reference,
        ),
        Overload::function(
            "formatImageReference",
            "formatImageReference_map",
            vec![MAP_TYPE],
            format_image_reference,
        ),
        Overload::function(
            "imageWithRegistry",
            "imageWithRegistry_string_string",
            vec![STRING_TYPE, STRING_TYPE],
            image_with_registry,
        ),
    ]
}

/// `podOrdinal(object) -> int`
fn pod_ordinal<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "podOrdinal";
    let [object] = arity::<1>(NAME, &args)?;
    let text = |path: &[&str]| at_path(object, path, |v| str_of(v).map(str::to_owned)).flatten();
    let name = text(&["metadata", "name"]);
    let generate_name = text(&["metadata", "generateName"]);
    let label = text(&["metadata", "labels", ordinal::POD_INDEX_LABEL]);
    let identity = ordinal::PodIdentity {
        name: name.as_deref(),
        generate_name: generate_name.as_deref(),
        pod_index_label: label.as_deref(),
    };
    let ordinal = ordinal::pod_ordinal(identity).map_err(|e| fail(NAME, e))?;
    Ok(CowVal::owned(CelInt::from(ordinal)))
}

/// `quantityValue(string) -> double`
fn quantity_value<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "quantityValue";
    let [text] = arity::<1>(NAME, &args)?;
    let value = quantity::quantity_value(string_arg(NAME, text)?).map_err(|e| fail(NAME, e))?;
    Ok(CowVal::owned(CelDouble::from(value)))
}

/// `formatQuantity(double|int value, string unit) -> string`
fn format_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "formatQuantity";
    let [value, unit] = arity::<2>(NAME, &args)?;
    let value = number_arg(NAME, value)?;
    let text =
        quantity::format_quantity(value, string_arg(NAME, unit)?).map_err(|e| fail(NAME, e))?;
    Ok(CowVal::owned(CelString::from(text)))
}

/// `scaleQuantity(string quantity, double|int factor, string unit) -> string`
fn scale_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "scaleQuantity";
    let [text, factor, unit] = arity::<3>(NAME, &args)?;
    let text = quantity::scale_quantity(
        string_arg(NAME, text)?,
        number_arg(NAME, factor)?,
        string_arg(NAME, unit)?,
    )
    .map_err(|e| fail(NAME, e))?;
    Ok(CowVal::owned(CelString::from(text)))
}

/// `jsonDecode(string) -> dyn`
fn json_decode<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "jsonDecode";
    let [text] = arity::<1>(NAME, &args)?;
    let json = Tree::parse(string_arg(NAME, text)?)
        .map_err(|e| fail(NAME, format!("invalid JSON: {e}")))?;
    let value = convert::json_to_owned_val(&json).map_err(|e| fail(NAME, e))?;
    Ok(CowVal::Owned(value))
}

/// `jsonEncode(dyn) -> string`: compact, keys sorted.
fn json_encode<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "jsonEncode";
    let [value] = arity::<1>(NAME, &args)?;
    let json = convert::val_to_json(value).map_err(|e| fail(NAME, e))?;
    let text = convert::to_json_string(&json).map_err(|e| fail(NAME, e))?;
    Ok(CowVal::owned(CelString::from(text)))
}

/// `annotationJSON(object, string key) -> dyn`: null when the annotation is
/// absent, its decoded JSON otherwise.
fn annotation_json<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "annotationJSON";
    let [object, key] = arity::<2>(NAME, &args)?;
    let key = string_arg(NAME, key)?;
    let decoded = at_path(object, &["metadata", "annotations", key], |annotation| {
        if annotation.downcast_ref::<CelNull>().is_some() {
            return Ok(None);
        }
        let text = str_of(annotation)
            .ok_or_else(|| fail(NAME, format!("annotation '{key}' is not a string")))?;
        let json = Tree::parse(text)
            .map_err(|e| fail(NAME, format!("annotation '{key}' is not valid JSON: {e}")))?;
        convert::json_to_owned_val(&json)
            .map(Some)
            .map_err(|e| fail(NAME, e))
    });
    match decoded.transpose()?.flatten() {
        Some(value) => Ok(CowVal::Owned(value)),
        None => Ok(CowVal::owned(CelNull)),
    }
}

/// The argument a function of this module converts to JSON first thing, by position:
/// a folded value there is converted once, at load ([`convert::JsonArgument`]).
pub(super) fn json_argument(function: &str) -> Option<usize> {
    match function {
        "multusNetworks" => Some(1),
        _ => None,
    }
}

/// `multusNetworks(string existing, list desired, string podNamespace) -> string`
fn multus_networks<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "multusNetworks";
    let [existing, desired, namespace] = arity::<3>(NAME, &args)?;
    let desired = convert::argument_json(desired).map_err(|e| fail(NAME, e))?;
    let Some(desired) = desired.as_list() else {
        return Err(fail(
            NAME,
            format!(
                "desired networks must be a list, got {}",
                desired.type_name()
            ),
        ));
    };
    let text = multus::merge(
        string_arg(NAME, existing)?,
        desired,
        string_arg(NAME, namespace)?,
    )
    .map_err(|e| fail(NAME, e))?;
    Ok(CowVal::owned(CelString::from(text)))
}

/// `multusParse(string value, string podNamespace) -> list(map)`
fn multus_parse<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "multusParse";
    let [value, namespace] = arity::<2>(NAME, &args)?;
    let entries = multus::parse_resolved(string_arg(NAME, value)?, string_arg(NAME, namespace)?)
        .map_err(|e| fail(NAME, e))?;
    let json = Tree::from(entries.into_iter().map(Tree::from).collect::<Vec<_>>());
    let value = convert::json_to_owned_val(&json).map_err(|e| fail(NAME, e))?;
    Ok(CowVal::Owned(value))
}

/// `parseImageReference(string) -> map`: `registry`, `repository`, `tag`, `digest`.
fn parse_image_reference<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "parseImageReference";
    let [text] = arity::<1>(NAME, &args)?;
    let reference = ImageReference::parse(string_arg(NAME, text)?).map_err(|e| fail(NAME, e))?;
    let mut json = Map::with_capacity(4);
    json.insert("registry", Tree::from(reference.registry));
    json.insert("repository", Tree::from(reference.repository));
    json.insert("tag", Tree::from(reference.tag));
    json.insert("digest", Tree::from(reference.digest));
    let value = convert::json_to_owned_val(&Tree::from(json)).map_err(|e| fail(NAME, e))?;
    Ok(CowVal::Owned(value))
}

/// `formatImageReference(map) -> string`: the inverse of `parseImageReference`;
/// `tag` and `digest` may be absent or empty.
fn format_image_reference<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "formatImageReference";
    let [parts] = arity::<1>(NAME, &args)?;
    let json = convert::val_to_json(parts).map_err(|e| fail(NAME, e))?;
    let part = |key: &str, required: bool| match json.get(key) {
        Some(Tree::String(text)) => Ok(text.to_string()),
        None | Some(Tree::Null) if !required => Ok(String::new()),
        None | Some(Tree::Null) => Err(fail(NAME, format!("the map has no {key}"))),
        Some(other) => Err(fail(
            NAME,
            format!("{key} must be a string, got {}", other.type_name()),
        )),
    };
    let reference = ImageReference {
        registry: part("registry", true)?,
        repository: part("repository", true)?,
        tag: part("tag", false)?,
        digest: part("digest", false)?,
    };
    // Parsed back, so a bad part is an error here rather than an unpullable image.
    let text = reference.to_string();
    ImageReference::parse(&text).map_err(|e| fail(NAME, e))?;
    Ok(CowVal::owned(CelString::from(text)))
}

/// `imageWithRegistry(string image, string registry) -> string`: the image, normalised,
/// on another registry.
fn image_with_registry<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "imageWithRegistry";
    let [image, registry] = arity::<2>(NAME, &args)?;
    let mut reference =
        ImageReference::parse(string_arg(NAME, image)?).map_err(|e| fail(NAME, e))?;
    reference.registry = string_arg(NAME, registry)?
        .trim_end_matches('/')
        .to_string();
    let text = reference.to_string();
    ImageReference::parse(&text).map_err(|e| fail(NAME, e))?;
    Ok(CowVal::owned(CelString::from(text)))
}

pub(super) fn fail(function: &str, error: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, error)
}

/// The arguments as an array; the overload declarations make a mismatch a bug,
/// reported rather than panicking.
pub(super) fn arity<'a, 'b, 'v, const N: usize>(
    function: &str,
    args: &'a [CowVal<'b, 'v>],
) -> Result<[&'a (dyn Val + 'v); N], ExecutionError> {
    if args.len() != N {
        return Err(fail(
            function,
            format!("expected {N} arguments, got {}", args.len()),
        ));
    }
    Ok(std::array::from_fn(|i| args[i].as_ref()))
}

pub(super) fn string_arg<'a>(
    function: &str,
    value: &'a dyn Val,
) -> Result<&'a str, ExecutionError> {
    let text = str_of(value).ok_or_else(|| {
        fail(
            function,
            format!("expected a string, got {}", value.get_type().name()),
        )
    })?;
    if text.len() > MAX_STRING_BYTES {
        return Err(fail(
            function,
            format!("argument is longer than {MAX_STRING_BYTES} bytes"),
        ));
    }
    Ok(text)
}

fn str_of(value: &dyn Val) -> Option<&str> {
    value.downcast_ref::<CelString>().map(|s| s.inner())
}

/// A double, or an int or uint widened to one, so `scaleQuantity(q, 2, 'm')`
/// works as well as `scaleQuantity(q, 1.5, 'm')`.
fn number_arg(function: &str, value: &dyn Val) -> Result<f64, ExecutionError> {
    if let Some(d) = value.downcast_ref::<CelDouble>() {
        return Ok(*d.inner());
    }
    if let Some(i) = value.downcast_ref::<CelInt>() {
        return Ok(*i.inner() as f64);
    }
    if let Some(u) = value.downcast_ref::<CelUInt>() {
        return Ok(*u.inner() as f64);
    }
    Err(fail(
        function,
        format!("expected a number, got {}", value.get_type().name()),
    ))
}

/// `f` applied to `value[path[0]][path[1]]...`, or `None` when a step is
/// missing or not a map. Each step borrows the previous one, hence the
/// callback rather than a returned reference.
fn at_path<R>(value: &dyn Val, path: &[&str], f: impl FnOnce(&dyn Val) -> R) -> Option<R> {
    let Some((key, rest)) = path.split_first() else {
        return Some(f(value));
    };
    let child = value.as_indexer()?.get(&CelString::from(*key)).ok()?;
    at_path(child.as_ref(), rest, f)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::evaluate_unbound as eval;

    fn error(source: &str) -> String {
        match eval(source) {
            Err(error) => error.to_string(),
            Ok(value) => panic!("{source}: expected an error, got {value}"),
        }
    }

    #[test]
    fn quantities_round_down_exactly() {
        for (source, expected) in [
            ("scaleQuantity('1Ti', 1.0, '')", "1099511627776"),
            ("scaleQuantity('3', 0.7, 'm')", "2100m"),
            ("scaleQuantity('64Gi', 0.9, 'Ki')", "60397977Ki"),
            ("scaleQuantity('1Ei', 1, '')", "1152921504606846976"),
            ("formatQuantity(1e12, '')", "1000000000000"),
            ("formatQuantity(1e15, 'm')", "1000000000000000"),
            ("formatQuantity(quantityValue('1Ti'), '')", "1099511627776"),
            ("formatQuantity(0.7 * 3.0, 'm')", "2099m"),
        ] {
            assert_eq!(eval(source), Ok(json!(expected)), "{source}");
        }
    }

    #[test]
    fn multus_networks_leaves_a_value_listing_every_network_as_it_is() {
        let desired = "[{'name': 'a', 'namespace': 'net'}, {'name': 'b'}]";
        for existing in [
            "net/a@eth1,ns/b",
            "net/a, b",
            "[{\"name\":\"b\"},{\"name\":\"a\",\"namespace\":\"net\"}]",
        ] {
            let source = format!("multusNetworks('{existing}', {desired}, 'ns')");
            assert_eq!(eval(&source), Ok(json!(existing)), "{source}");
        }
        assert_eq!(eval("multusNetworks('', [], 'ns')"), Ok(json!("")));
        assert_eq!(
            eval("multusNetworks('net/a', [{'name': 'c'}], 'ns')"),
            Ok(json!(r#"[{"name":"a","namespace":"net"},{"name":"c"}]"#))
        );
    }

    #[test]
    fn errors_name_types_never_values() {
        for (source, expected) in [
            (
                "formatImageReference({'registry': 'r.io', 'repository': 'a', 'tag': 12345})",
                "Error executing function 'formatImageReference': tag must be a string, got a number",
            ),
            (
                "formatImageReference({'registry': ['secret'], 'repository': 'a'})",
                "Error executing function 'formatImageReference': registry must be a string, got a list",
            ),
            (
                "parseImageReference('Secret')",
                "Error executing function 'parseImageReference': invalid image reference: the \
                 repository is not '/'-separated path components of lower-case letters and digits, \
                 separated by '.', '_', '__' or '-' (such as library/nginx)",
            ),
            (
                "quantityValue('12345 secret')",
                "Error executing function 'quantityValue': the value is not a Kubernetes quantity \
                 (expected a number with an optional suffix such as 500m, 1.5, 32Gi, 129e6)",
            ),
            (
                "scaleQuantity('12345', -1.5, 'm')",
                "Error executing function 'scaleQuantity': cannot format the value as a quantity: \
                 it is negative",
            ),
        ] {
            let message = error(source);
            assert_eq!(message, expected, "{source}");
            assert!(!message.to_lowercase().contains("secret"), "{message}");
            assert!(!message.contains("12345"), "{message}");
        }
    }
}
