//! The views behave as the fully converted JSON does: every expression here is
//! evaluated twice, once with `object` and `params` bound through views (what a
//! [`Scope`](super::Scope) does) and once with them converted whole, and the results,
//! errors included, must be the same.

use std::sync::Arc;

use cel::Context;
use cel::common::value::Val;
use cel::context::VariableResolver;
use serde_json::{Value, json};

use super::{Bindings, Declarations, Expression, Scope, convert, cost};
use crate::tree::Tree;

fn object() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-3",
            "labels": {"app": "web", "tier": "front"},
            "annotations": {"a": "1"},
            "finalizers": ["x", "y"],
            "empty": {},
        },
        "spec": {
            "replicas": 3,
            "big": 18446744073709551615u64,
            "ratio": 1.5,
            "whole": 2.0,
            "negative": -4,
            "flag": true,
            "nothing": null,
            "containers": [
                {"name": "app", "image": "nginx", "ports": [{"containerPort": 80}]},
                {"name": "side", "image": "envoy", "ports": []}
            ],
            "nested": [[1, 2], [3]],
            "none": [],
        }
    })
}

fn params() -> Value {
    json!({"labels": {"app": "web", "tier": "front"}, "names": ["app", "side"], "n": 3})
}

/// What the expressions here may refer to.
fn declarations() -> Declarations<'static> {
    static PARAMS: std::sync::LazyLock<Tree<'static>> =
        std::sync::LazyLock::new(|| Tree::from(params()));
    Declarations {
        params: &PARAMS,
        variables: &[],
        all_variables: &[],
        object: None,
    }
}

/// The bindings converted whole, as before views.
struct Converted {
    object: Box<dyn Val>,
    params: Box<dyn Val>,
}

impl VariableResolver for Converted {
    fn resolve<'b>(&'b self, variable: &str) -> Option<cel::common::value::CowVal<'b, 'b>> {
        let value = match variable {
            "object" => &self.object,
            "params" => &self.params,
            _ => return None,
        };
        Some(cel::common::value::CowVal::Borrowed(value.as_ref()))
    }
}

fn with_conversion(
    expression: &Expression,
    object: &Value,
    params: &Value,
) -> Result<Value, String> {
    let converted = Converted {
        object: convert::json_to_owned_val(&Tree::from(object)).map_err(|e| e.to_string())?,
        params: convert::json_to_owned_val(&Tree::from(params)).map_err(|e| e.to_string())?,
    };
    // The expression as written: nothing folded, every part evaluated here.
    let program = expression
        .env
        .compile(expression.source())
        .map_err(|e| e.to_string())?;
    let unfolded = cost::meter(program.expression());
    let mut context = Context::with_env(Arc::clone(&expression.env));
    context.set_variable_resolver(&converted);
    let (result, exhausted) = cost::with_budget(|| {
        cel::Value::resolve_val(&unfolded, &context)
            .map_err(|e| e.to_string())
            .and_then(|value| convert::val_to_json(value.as_ref()).map_err(|e| e.to_string()))
            .map(|value| value.to_value())
    });
    if exhausted {
        return Err(cost::exhausted_message());
    }
    result
}

fn with_views(expression: &Expression, object: &Value, params: &Value) -> Result<Value, String> {
    let empty = Tree::from(json!({}));
    let (object, params) = (Tree::from(object), Tree::from(params));
    let bindings = Bindings {
        object: &object,
        old_object: None,
        namespace_object: None,
        request: &empty,
        params: &params,
    };
    Scope::new(bindings)
        .evaluate(expression)
        .map(|value| value.to_value())
        .map_err(|e| e.to_string())
}

/// Each expression gives the same result, or the same error, both ways.
fn same(sources: &[&str]) {
    let (object, params) = (object(), params());
    for source in sources {
        let expression = Expression::compile(source, &declarations())
            .unwrap_or_else(|e| panic!("{source}: {e}"));
        let expected = with_conversion(&expression, &object, &params);
        let got = with_views(&expression, &object, &params);
        assert_eq!(got, expected, "{source}");
    }
}

#[test]
fn field_selection_indexing_and_presence() {
    same(&[
        "object.metadata.name",
        "object['kind']",
        "object.spec.containers[1].image",
        "object.spec.containers[1u].name",
        "object.spec.containers[1.0].name",
        "object.spec.containers[2]",
        "object.spec.containers[-1]",
        "object.spec.containers['a']",
        "object.metadata.missing",
        "object.metadata.labels['missing']",
        "object.metadata.name.missing",
        "object.metadata.labels[1]",
        "has(object.metadata.labels)",
        "has(object.metadata.missing)",
        "has(object.spec.containers[0].ports)",
        "has(object.metadata.name.x)",
        "object.spec.nested[0][1]",
        "object.spec.replicas.x",
        "object.spec.nothing.x",
        "has(object.spec.nothing.x)",
        "object.spec.containers.x",
        "object.metadata.missing.x.y",
        "object.metadata.labels.app.size()",
        "object.metadata.labels[[1]]",
        "object.metadata.labels[{}]",
        "object.spec.containers[0].ports[0].containerPort",
        "params.labels.tier",
        "object",
        "object.metadata",
        "params",
    ]);
}

#[test]
fn numbers_keep_their_cel_types() {
    same(&[
        "type(object.spec.replicas) == int",
        "type(object.spec.big) == uint",
        "type(object.spec.ratio) == double",
        "type(object.spec.whole) == double",
        "type(object.spec.negative) == int",
        "type(object.spec.nothing) == null_type",
        "type(object.spec.flag) == bool",
        "type(object.metadata) == map",
        "type(object.spec.containers) == list",
        "object.spec.replicas + 1",
        "object.spec.big",
        "object.spec.replicas == 3.0",
        "object.spec.whole == 2",
        "object.spec.replicas == params.n",
    ]);
}

#[test]
fn equality_both_ways() {
    same(&[
        "object.metadata.labels == {'app': 'web', 'tier': 'front'}",
        "{'app': 'web', 'tier': 'front'} == object.metadata.labels",
        "{'tier': 'front', 'app': 'web'} != object.metadata.labels",
        "object.metadata.labels == {'app': 'web'}",
        "object.metadata.labels == params.labels",
        "params.labels == object.metadata.labels",
        "object.metadata.finalizers == ['x', 'y']",
        "['x', 'y'] == object.metadata.finalizers",
        "['y', 'x'] == object.metadata.finalizers",
        "object.spec.nested == [[1, 2], [3]]",
        "[[1, 2], [3]] == object.spec.nested",
        "[[1.0, 2u], [3]] == object.spec.nested",
        "object.metadata.empty == {}",
        "{} == object.metadata.empty",
        "object.spec.none == []",
        "[] == object.spec.none",
        "object.metadata.labels == object.metadata.labels",
        "object.metadata == object.metadata.labels",
        "[object.metadata.labels] == [{'app': 'web', 'tier': 'front'}]",
        "[{'app': 'web', 'tier': 'front'}] == [object.metadata.labels]",
        "object.metadata.labels == 'web'",
    ]);
}

#[test]
fn membership_and_size() {
    same(&[
        "'app' in object.metadata.labels",
        "'nope' in object.metadata.labels",
        "1 in object.metadata.labels",
        "1.5 in object.metadata.labels",
        "[1] in object.metadata.labels",
        "'x' in object.metadata.finalizers",
        "'z' in object.metadata.finalizers",
        "[1, 2] in object.spec.nested",
        "object.metadata.labels in [{'app': 'web', 'tier': 'front'}]",
        "object.spec.nested[1] in [[3]]",
        "size(object.metadata.labels)",
        "object.spec.containers.size()",
        "size(object.metadata.empty)",
        "object.metadata.name in params.names",
    ]);
}

#[test]
fn comprehensions() {
    same(&[
        "object.spec.containers.all(c, c.image != '')",
        "object.spec.containers.exists(c, c.name == 'side')",
        "object.spec.containers.exists_one(c, c.ports.size() > 0)",
        "object.spec.containers.map(c, c.name)",
        "object.spec.containers.filter(c, c.name == 'app')",
        "object.spec.containers.map(c, c)",
        // Map keys come in no fixed order: only order-free results are compared.
        "object.metadata.labels.map(k, k + '=' + object.metadata.labels[k]).exists(s, s == 'app=web')",
        "object.metadata.labels.all(k, k in params.labels)",
        "object.spec.nested.map(l, l.size())",
        "object.spec.containers.map(c, c.ports).filter(p, p.size() > 0)",
        "params.names.all(n, object.spec.containers.exists(c, c.name == n))",
    ]);
}

/// cel's own maps iterate in a random order per process: a map of the object is walked
/// in the object's order, so what an expression builds from it is the same on every
/// replica and in every review.
#[test]
fn a_map_of_the_object_is_walked_in_the_objects_order() {
    // Not sorted, and enough keys that a hash map's order matching it is no accident.
    let keys: Vec<String> = (0..40).map(|i| format!("k{:02}", (i * 7) % 40)).collect();
    let labels: serde_json::Map<String, Value> =
        keys.iter().map(|key| (key.clone(), json!("v"))).collect();
    let object = json!({"metadata": {"labels": labels}});
    for source in [
        "object.metadata.labels.map(k, k)",
        "object.metadata.labels.filter(k, k != '')",
        "object.metadata.?labels.orValue({}).map(k, k)",
    ] {
        let expression = Expression::compile(source, &declarations())
            .unwrap_or_else(|e| panic!("{source}: {e}"));
        let got = with_views(&expression, &object, &params());
        assert_eq!(got, Ok(json!(keys)), "{source}");
    }
}

#[test]
fn optionals() {
    same(&[
        "object.metadata.?labels.app.orValue('none')",
        "object.metadata.?labels['app'].orValue('none')",
        "object.metadata.?missing.app.orValue('none')",
        "object.?metadata.?labels.orValue({})",
        "object.spec.containers[?5].orValue('none')",
        "object.spec.containers[?0].name.orValue('none')",
        "object.metadata.?labels.hasValue()",
        "object.?spec.?containers[0].image",
        "optional.ofNonZeroValue(object.metadata.empty).hasValue()",
        "optional.ofNonZeroValue(object.metadata.labels).hasValue()",
        "has(object.?metadata.labels)",
    ]);
}

/// An optional selection hands cel an owned copy of the view (`optional.of(b)` of a
/// field `b`), which cel converts to index: the copies must read as the converted value
/// does, however many there are.
#[test]
fn copies_of_a_view_read_alike() {
    same(&[
        "object.metadata.?labels.app.orValue('') + object.metadata.?labels.tier.orValue('')",
        "object.metadata.?labels.value() == {'app': 'web', 'tier': 'front'} && object.metadata.?labels['app'].orValue('') == 'web'",
        "[object.metadata.?labels, object.metadata.?labels].map(o, o.orValue({}).size())",
        "object.metadata.?labels[1].orValue('n')",
        "object.spec.?containers[1].name.orValue('')",
        "object.spec.?containers.value()[0].ports[0].containerPort",
        "object.spec.?containers.value().size() + object.spec.?containers.value().size()",
        "object.spec.?nested[0][1].orValue(0)",
        "object.spec.?containers[5].orValue('none')",
        "object.spec.?containers['x'].orValue('bad')",
        "object.spec.?containers.value()[0] == object.spec.containers[0]",
    ]);
}

#[test]
fn functions_and_operators_that_take_whole_values() {
    same(&[
        "jsonEncode(object.metadata)",
        "jsonEncode(object)",
        "object.metadata.finalizers.join(',')",
        "object.metadata.finalizers + ['z']",
        "['z'] + object.metadata.finalizers",
        "object.spec.nested + object.spec.nested",
        "podOrdinal(object)",
        "annotationJSON(object, 'a')",
        "dyn(object.metadata.labels)",
        "string(object.spec.replicas)",
        // One entry: the error message lists a map's entries in no fixed order.
        "object.metadata.annotations + {}",
        "object.spec.containers < []",
        "{'k': object.metadata.labels}",
        "[object.metadata.finalizers, object.spec.none]",
        "object.metadata.finalizers.isSorted()",
        "object.spec.containers.map(c, c.name).sum()",
        "object.metadata.finalizers.indexOf('y')",
        "object.spec.nested.max()",
    ]);
}

#[test]
fn parts_reading_only_params_fold_to_what_they_compute() {
    same(&[
        "params.names.map(n, n + '-x')",
        "params.names.filter(n, n != 'app').size()",
        "object.metadata.name + params.names.map(n, n.upperAscii()).join(',')",
        "params.labels.filter(k, params.labels[k] == 'web')",
        "{'n': params.n, 'u': 3u, 'd': 2.5, 'z': null, 't': true}",
        "type(params.names.map(n, 1u)[0])",
        "[1, 2][5]",
        "params.names.map(n, object.metadata.labels[n])",
        "object.spec.containers.map(c, params.labels.size())",
        "params.labels.all(k, k in object.metadata.labels)",
    ]);
}

/// A folded argument a function converts to JSON is converted at load: the function
/// gives the same result, or the same error, as with the argument evaluated per review.
#[test]
fn folded_json_arguments_give_what_the_function_gives() {
    same(&[
        "multusNetworks('', params.names.map(n, {'name': n, 'namespace': 'net'}), 'ns')",
        "multusNetworks('[{\"name\":\"app\",\"namespace\":\"net\"}]', params.names.map(n, {'name': n, 'namespace': 'net'}), 'ns')",
        "multusNetworks('a', params.names.map(n, {'name': n, 'interface': n + '0'}), object.metadata.name)",
        "multusNetworks('', params.names.map(n, {'namespace': 'net'}), 'ns')",
        "multusNetworks('', params.names.map(n, n), 'ns')",
        "multusNetworks('', params.names.map(n, {1: n}), 'ns')",
        "multusNetworks('', params.names.map(n, {'name': n, 'x': duration('1s')}), 'ns')",
        "[params.names.map(n, {'name': n})].size() + size(multusNetworks('', params.names.map(n, {'name': n}), 'ns'))",
    ]);
}

/// Only the argument of the function is converted; the same value elsewhere stays a
/// CEL value.
#[test]
fn only_the_argument_position_is_prepared() {
    let source = "params.names.map(n, {'name': n})[0].name != object.metadata.name && multusNetworks('', params.names.map(n, {'name': n}), object.metadata.name) != ''";
    let expression = Expression::compile(source, &declarations()).unwrap();
    assert_eq!(expression.folded_parts(), 2);
    assert_eq!(expression.prepared_json_arguments(), 1);
    same(&[source]);
}

/// Chains with optional steps or indexes below a binding are followed by the scope
/// ([`super::paths`]): as written, they give what the interpreter gives, errors
/// included, however they end.
#[test]
fn followed_chains_give_what_the_interpreter_gives() {
    same(&[
        "object.metadata.?annotations['a'].orValue('')",
        "object.metadata.?annotations['missing'].orValue('none')",
        "object.metadata.?missing['a'].orValue('none')",
        "object.metadata.?missing['a'].b.c.orValue('none')",
        "object.spec.containers[0].ports[?3].orValue('none')",
        "object.spec.containers[0].?ports[0].containerPort.orValue(0)",
        "object.spec.containers[0].?ports[0].missing.orValue(0)",
        "object.spec.containers[0].?ports[5].containerPort.orValue(0)",
        "object.spec.containers[?0].?ports[0]",
        "object.spec.containers[1].ports[0]",
        "object.spec.containers[-1].name",
        "object.spec.?containers[-1].orValue('none')",
        "object.spec.containers['0']",
        "object.spec.?containers['0'].orValue('none')",
        "object.spec.?replicas.x.orValue('none')",
        "object.spec.?replicas['x'].orValue('none')",
        "object.spec.?nothing.x",
        "object.spec.nested[1][0]",
        "object.spec.nested[1][1]",
        "object.spec.nested[?1][?1].orValue(-1)",
        "object.metadata.finalizers[1] + object.metadata.finalizers[0]",
        "object.metadata.labels[params.names[0]]",
        "object.spec.containers[params.n - 2].name",
        "has(object.spec.containers[0].ports)",
        "object.spec.containers[0] == {'name': 'app', 'image': 'nginx', 'ports': [{'containerPort': 80}]}",
        "{'name': 'app', 'image': 'nginx', 'ports': [{'containerPort': 80}]} == object.spec.containers[0]",
        "object.metadata.?labels.value() == {'app': 'web', 'tier': 'front'}",
        "object.spec.containers.map(c, c.?ports[0].containerPort.orValue(0))",
        "[object.metadata].map(object, object.?labels['app'].orValue(''))",
        "[{'labels': {'app': 'other'}}].map(object, object.?labels['app'].orValue(''))",
        "object.metadata.annotations['a'] + object.?metadata.name.orValue('')",
    ]);
}

/// What is followed: each chain with an optional step or an index, as long as it is,
/// with a constant key; a folded part of `params` is a constant.
#[test]
fn which_chains_are_followed() {
    let counted = [
        ("object.metadata.name", 0),
        ("object.metadata.?annotations['a'].orValue('')", 1),
        ("object.spec.containers[0].ports[0].containerPort", 1),
        ("object.metadata.labels[params.names[0]]", 1),
        ("object.metadata.labels[object.metadata.name]", 0),
        ("object.spec.containers.map(c, c.?ports[0])", 0),
        ("[object.metadata].map(object, object.?labels)", 0),
        (
            "object.?metadata.name.size() + object.spec.containers[1].name.size()",
            2,
        ),
    ];
    for (source, chains) in counted {
        let expression = Expression::compile(source, &declarations())
            .unwrap_or_else(|e| panic!("{source}: {e}"));
        assert_eq!(expression.followed_chains(), chains, "{source}");
    }
}

mod chain_properties {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::{Expression, declarations, params, with_conversion, with_views};

    /// JSON whose maps use a few keys, so that chains find some of them.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (-3i64..300).prop_map(Value::from),
            "[a-c]{0,3}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 40, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-c]", inner, 0..4)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    fn step() -> impl Strategy<Value = String> {
        let key = "[a-d]";
        let index = -1i64..4;
        prop_oneof![
            key.prop_map(|k| format!(".{k}")),
            key.prop_map(|k| format!(".?{k}")),
            key.prop_map(|k| format!("['{k}']")),
            key.prop_map(|k| format!("[?'{k}']")),
            index.clone().prop_map(|i| format!("[{i}]")),
            index.prop_map(|i| format!("[?{i}]")),
        ]
    }

    proptest! {
        // 512 cases, or `PROPTEST_CASES` for a deeper run.
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn a_followed_chain_gives_what_the_interpreter_gives(
            entries in prop::collection::btree_map("[a-c]", json_value(), 0..4),
            steps in prop::collection::vec(step(), 1..5),
        ) {
            let object = Value::Object(entries.into_iter().collect());
            let chain = format!("object{}", steps.concat());
            for source in [chain.clone(), format!("{chain}.orValue('none')"), format!("[{chain}]")] {
                let expression = Expression::compile(&source, &declarations()).unwrap();
                // Followed unless every step is a plain `.field`.
                let followed = steps.iter().any(|step| !step.starts_with('.') || step.starts_with(".?"));
                prop_assert_eq!(expression.followed_chains(), usize::from(followed), "{}", source);
                let expected = with_conversion(&expression, &object, &params());
                let got = with_views(&expression, &object, &params());
                prop_assert_eq!(got, expected, "{} on {}", source, json!(object));
            }
        }
    }
}
