//! Tests of expressions, scopes, templates and the CEL functions, through the
//! public API only.

use serde_json::{Value, json};

use std::sync::LazyLock;

use super::template::Template;
use super::{Bindings, Declarations, ExprError, Expression, Needs, Scope};
use crate::tree::Tree;

/// What the tests' policy declares: the keys of [`params`] (and `y`, `b`), and the
/// variables the tests set.
fn declarations() -> Declarations<'static> {
    static PARAMS: LazyLock<Tree<'static>> = LazyLock::new(|| {
        let mut declared = params();
        declared["y"] = json!(1);
        declared["b"] = json!("b");
        Tree::from(declared)
    });
    static VARIABLES: LazyLock<Vec<String>> = LazyLock::new(|| {
        ["x", "a", "b", "key", "value", "cpuRatio"]
            .map(String::from)
            .to_vec()
    });
    Declarations {
        params: &PARAMS,
        variables: &VARIABLES,
        all_variables: &VARIABLES,
        object: None,
    }
}

fn compile(source: &str) -> Result<Expression, ExprError> {
    Expression::compile(source, &declarations())
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-3",
            "labels": {"app": "web"},
            "annotations": {
                "graft.dev/overcommit-ratio": "{\"cpu\": 4, \"memory\": 1.5}",
                "broken": "{not json"
            }
        },
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
        "status": {"capacity": {"cpu": "12", "memory": "41231686041600m"}}
    })
}

fn request() -> Value {
    json!({
        "uid": "u-1", "namespace": "ns", "name": "web-3", "operation": "CREATE",
        "userInfo": {"username": "admin"}, "dryRun": false,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": ""
    })
}

fn params() -> Value {
    json!({
        "networks": ["roce-a", "roce-b"],
        "networkNamespace": "net",
        "ratios": {"cpu": 2}
    })
}

/// The bindings of a request with no old object and no namespace object.
/// The trees of `object`, the test request and the test params, for [`bindings`].
fn trees(object: &Value) -> (Tree<'static>, Tree<'static>, Tree<'static>) {
    (
        Tree::from(object),
        Tree::from(request()),
        Tree::from(params()),
    )
}

fn bindings<'a>(object: &'a Tree<'a>, request: &'a Tree<'a>, params: &'a Tree<'a>) -> Bindings<'a> {
    Bindings {
        object,
        old_object: None,
        namespace_object: None,
        request,
        params,
    }
}

/// Evaluates `source` against `object` with the default request and params.
fn eval_on(object: &Value, source: &str) -> Result<Value, ExprError> {
    let (object, request, params) = trees(object);
    let expression = compile(source)?;
    Scope::new(bindings(&object, &request, &params))
        .evaluate(&expression)
        .map(|value| value.to_value())
}

/// An evaluation's result as a `serde_json::Value`, which the tests write their
/// expectations in.
fn as_json(result: Result<Tree<'static>, ExprError>) -> Result<Value, ExprError> {
    result.map(|value| value.to_value())
}

fn eval(source: &str) -> Result<Value, ExprError> {
    eval_on(&pod(), source)
}

fn check(source: &str, expected: Value) {
    assert_eq!(eval(source), Ok(expected), "{source}");
}

fn check_err(source: &str, needle: &str) {
    match eval(source) {
        Ok(value) => panic!("{source}: expected an error, got {value}"),
        Err(error) => assert!(error.to_string().contains(needle), "{source}: {error}"),
    }
}

fn render(template: Value) -> Result<Value, ExprError> {
    let (object, request, params) = trees(&pod());
    let template =
        Template::compile(&Tree::from(template), &declarations()).map_err(|e| e.error)?;
    let bindings = bindings(&object, &request, &params);
    let mut scope = Scope::new(bindings);
    scope.set_variable("key", &Tree::from(json!("zone")));
    scope.set_variable("value", &Tree::from(json!("a")));
    template.render(&scope).map(|rendered| rendered.to_value())
}

#[test]
fn expression_and_template_are_send_sync_debug() {
    fn assert_traits<T: Send + Sync + std::fmt::Debug>() {}
    assert_traits::<Expression>();
    assert_traits::<Template>();
}

#[test]
fn needs_follow_references() {
    let needs = |s: &str| compile(s).map(|e| e.needs());
    assert_eq!(
        needs("object.metadata.name + request.namespace"),
        Ok(Needs {
            object: true,
            request: true,
            request_fields: crate::expr::RequestFields::of("namespace"),
            ..Needs::default()
        })
    );
    assert_eq!(
        needs("has(oldObject.metadata) && variables.x == params.y"),
        Ok(Needs {
            old_object: true,
            params: true,
            variables: true,
            ..Needs::default()
        })
    );
    assert_eq!(needs("1 + 2"), Ok(Needs::default()));
}

#[test]
fn compile_errors() {
    assert!(matches!(compile("1 +"), Err(ExprError::Compile(_))));
    assert!(matches!(compile("  "), Err(ExprError::Compile(_))));
}

#[test]
fn json_and_cel_types_round_trip() {
    check(
        "object.spec.containers[0]",
        json!({"image": "nginx", "name": "app"}),
    );
    check("1", json!(1));
    check(
        "18446744073709551615u",
        json!(18_446_744_073_709_551_615u64),
    );
    check("1.5", json!(1.5));
    check("null", Value::Null);
    check("[true, 'x', null]", json!([true, "x", null]));
    check(
        "{2: 'b', 1: 'a', true: 'c'}",
        json!({"1": "a", "2": "b", "true": "c"}),
    );
    check("optional.of(3)", json!(3));
    check("optional.none()", Value::Null);
    check_err("b'abc'", "bytes");
    check_err("1.0 / 0.0", "JSON");
    assert_eq!(
        eval_on(
            &json!({"big": 18_446_744_073_709_551_615u64}),
            "object.big > 1u"
        ),
        Ok(json!(true))
    );
}

#[test]
fn map_keys_come_out_sorted() {
    let value = eval("{'b': 1, 'a': {'z': 1, 'y': 2}, 'c': 3}").unwrap();
    assert_eq!(
        serde_json::to_string(&value).unwrap(),
        r#"{"a":{"y":2,"z":1},"b":1,"c":3}"#
    );
}

#[test]
fn optional_syntax_and_has() {
    let no_annotations = json!({"metadata": {"name": "web-0"}});
    let networks = "object.metadata.?annotations['k8s.v1.cni.cncf.io/networks'].orValue('')";
    assert_eq!(eval_on(&no_annotations, networks), Ok(json!("")));
    assert_eq!(
        eval_on(&no_annotations, "has(object.metadata.annotations)"),
        Ok(json!(false))
    );
    check("has(object.metadata.annotations)", json!(true));
    check("object.metadata.?labels.app.orValue('none')", json!("web"));
}

#[test]
fn strings_extension_is_available() {
    check("'Web-3'.lowerAscii().split('-')", json!(["web", "3"]));
}

#[test]
fn evaluate_bool_rejects_other_types() {
    let (object, request, params) = trees(&pod());
    let scope = Scope::new(bindings(&object, &request, &params));
    let truth = compile("request.operation == 'CREATE'").unwrap();
    assert_eq!(scope.evaluate_bool(&truth), Ok(true));
    let number = compile("1").unwrap();
    assert!(matches!(
        scope.evaluate_bool(&number),
        Err(ExprError::ResultType { .. })
    ));
    // The type, never the value: it may be the object's contents, and reasons are logged.
    let labels = compile("object.metadata.labels").unwrap();
    assert_eq!(
        scope.evaluate_bool(&labels).unwrap_err().to_string(),
        "expected a bool result, got an object"
    );
}

#[test]
fn old_object_is_null_when_absent_and_variables_accumulate() {
    let (object, request, params) = trees(&pod());
    let old = Tree::from(json!({"metadata": {"name": "old"}}));
    let mut scope = Scope::new(bindings(&object, &request, &params));
    let expr = |s: &str| compile(s).unwrap();
    assert_eq!(
        as_json(scope.evaluate(&expr("oldObject == null"))),
        Ok(json!(true))
    );
    scope.set_variable("a", &Tree::from(json!(2)));
    let doubled = scope.evaluate(&expr("variables.a * 2")).unwrap();
    scope.set_variable("b", &doubled);
    assert_eq!(
        as_json(scope.evaluate(&expr("[variables.a, variables.b]"))),
        Ok(json!([2, 4]))
    );
    let with_old = Scope::new(Bindings {
        old_object: Some(&old),
        ..bindings(&object, &request, &params)
    });
    assert_eq!(
        as_json(with_old.evaluate(&expr("oldObject.metadata.name"))),
        Ok(json!("old"))
    );
}

/// `variables.NAME` is answered as a whole name; what is below it, and a name that is
/// not there, read as they do on a map literal.
#[test]
fn variables_read_as_a_map_of_them_does() {
    let (object, request, params) = trees(&pod());
    let mut scope = Scope::new(bindings(&object, &request, &params));
    scope.set_variable("a", &Tree::from(json!(2)));
    scope.set_variable("b", &Tree::from(json!({"k": "v", "n": {"x": 1}})));
    // `x` is declared and never set.
    let literal = "{'a': 2, 'b': {'k': 'v', 'n': {'x': 1}}}";
    for path in [
        "a",
        "b",
        "b.k",
        "b.n.x",
        "b.?n.x.orValue(0)",
        "b['k']",
        "x",
        "b.missing",
        "a.k",
    ] {
        let via_scope = scope.evaluate(&compile(&format!("variables.{path}")).unwrap());
        let via_literal = scope.evaluate(&compile(&format!("{literal}.{path}")).unwrap());
        assert_eq!(via_scope, via_literal, "variables.{path}");
    }
}

#[test]
fn deep_values_error_instead_of_overflowing() {
    let mut deep = json!(1);
    for _ in 0..300 {
        deep = json!([deep]);
    }
    let error = eval_on(&deep, "object").unwrap_err();
    assert!(error.to_string().contains("deeper"), "{error}");
    // Dropping a deep serde_json value recurses too; keep it shallow enough here.
}

// ---- the example policy expressions ----

#[test]
fn example_multus_networks() {
    let source = "multusNetworks(object.metadata.?annotations['k8s.v1.cni.cncf.io/networks'].orValue(''), params.networks.map(n, {'name': n, 'namespace': params.networkNamespace}), request.namespace)";
    check(
        source,
        json!(r#"[{"name":"roce-a","namespace":"net"},{"name":"roce-b","namespace":"net"}]"#),
    );
    let mut object = pod();
    object["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] = json!("net/roce-a@eth1");
    assert_eq!(
        eval_on(&object, source),
        Ok(json!(
            r#"[{"name":"roce-a","namespace":"net","interface":"eth1"},{"name":"roce-b","namespace":"net"}]"#
        ))
    );
    let done = r#"[{"name":"roce-a","namespace":"net"}, {"name":"roce-b","namespace":"net"}]"#;
    object["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] = json!(done);
    assert_eq!(eval_on(&object, source), Ok(json!(done)));
    object["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] = json!("[{]");
    let error = eval_on(&object, source).unwrap_err().to_string();
    assert!(
        error.contains("multusNetworks") && error.contains("k8s.v1.cni.cncf.io/networks"),
        "{error}"
    );
}

#[test]
fn example_pod_ordinal() {
    check(
        "podOrdinal(object) % 2 == 0 ? 'node1' : 'node2'",
        json!("node2"),
    );
    check("podOrdinal(object)", json!(3));
    let labelled =
        json!({"metadata": {"name": "web-3", "labels": {"apps.kubernetes.io/pod-index": "8"}}});
    assert_eq!(eval_on(&labelled, "podOrdinal(object)"), Ok(json!(8)));
    let deployment = json!({"metadata": {"generateName": "web-5d8f9-"}});
    let error = eval_on(&deployment, "podOrdinal(object)")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("podOrdinal") && error.contains("web-5d8f9-"),
        "{error}"
    );
}

#[test]
fn example_typed_map_template() {
    assert_eq!(
        render(json!("{{ {variables.key: variables.value} }}")),
        Ok(json!({"zone": "a"}))
    );
}

#[test]
fn example_scale_quantity() {
    let (object, request, params) = trees(&pod());
    let mut scope = Scope::new(bindings(&object, &request, &params));
    let expr =
        compile("scaleQuantity(object.status.capacity.cpu, variables.cpuRatio, 'm')").unwrap();
    scope.set_variable("cpuRatio", &Tree::from(json!(1.5)));
    assert_eq!(as_json(scope.evaluate(&expr)), Ok(json!("18")));
    scope.set_variable("cpuRatio", &Tree::from(json!(0.875)));
    assert_eq!(as_json(scope.evaluate(&expr)), Ok(json!("10500m")));
    scope.set_variable("cpuRatio", &Tree::from(json!(2)));
    assert_eq!(as_json(scope.evaluate(&expr)), Ok(json!("24")));
}

#[test]
fn example_annotation_json_with_fallback() {
    let source = "double(annotationJSON(object, 'graft.dev/overcommit-ratio').?cpu.orValue(params.ratios.cpu))";
    check(source, json!(4.0));
    let plain = json!({"metadata": {"name": "web-0"}});
    assert_eq!(eval_on(&plain, source), Ok(json!(2.0)));
    let empty_annotations = json!({"metadata": {"annotations": {"other": "x"}}});
    assert_eq!(eval_on(&empty_annotations, source), Ok(json!(2.0)));
}

#[test]
fn example_interpolation() {
    assert_eq!(
        render(json!("prefix-{{ request.namespace }}-{{ 3 }}")),
        Ok(json!("prefix-ns-3"))
    );
}

// ---- functions ----

#[test]
fn quantity_functions() {
    check("quantityValue('500m')", json!(0.5));
    check("quantityValue('32Gi')", json!(34_359_738_368.0));
    check("quantityValue(object.status.capacity.cpu)", json!(12.0));
    check_err(
        "quantityValue('12 cores')",
        "the value is not a Kubernetes quantity",
    );
    check_err("quantityValue('12 cores')", "quantityValue");
    check("formatQuantity(12.0, 'm')", json!("12"));
    check("formatQuantity(10.5, 'm')", json!("10500m"));
    check("formatQuantity(0.25, 'm')", json!("250m"));
    check("formatQuantity(3, '')", json!("3"));
    check("formatQuantity(41231686041.6, 'Ki')", json!("40265318Ki"));
    check_err("formatQuantity(-1.0, 'm')", "negative");
    check_err("formatQuantity(1.0, 'Kb')", "formatQuantity");
    check("scaleQuantity('64Gi', 0.5, 'Gi')", json!("32Gi"));
    check("scaleQuantity('12', 2, 'm')", json!("24"));
    check_err("scaleQuantity('12', 'x', 'm')", "expected a number");
}

#[test]
fn json_functions() {
    check(
        "jsonDecode('{\"b\": [1, 2.5, null], \"a\": true}')",
        json!({"a": true, "b": [1, 2.5, null]}),
    );
    check_err("jsonDecode('{')", "jsonDecode");
    check_err("jsonDecode('{')", "EOF");
    check(
        "jsonEncode({'b': 1, 'a': [true, null, 'x']})",
        json!(r#"{"a":[true,null,"x"],"b":1}"#),
    );
    check("jsonEncode(jsonDecode('[1,2]'))", json!("[1,2]"));
    check_err("jsonEncode(b'x')", "jsonEncode");
}

/// A decoded map is walked in its JSON order, whatever cel's hash map's order is: what
/// an expression builds from it is the same on every replica.
#[test]
fn decoded_maps_are_walked_in_their_json_order() {
    let keys: Vec<String> = (0..40).map(|i| format!("k{:02}", (i * 7) % 40)).collect();
    let object: serde_json::Map<String, Value> =
        keys.iter().map(|key| (key.clone(), json!(1))).collect();
    let text = Value::Object(object).to_string().replace('\'', "\\'");
    check(&format!("jsonDecode('{text}').map(k, k)"), json!(keys));
    check(
        &format!("jsonDecode('[{text}]')[0].filter(k, k != '')"),
        json!(keys),
    );
}

#[test]
fn annotation_json_function() {
    check(
        "annotationJSON(object, 'graft.dev/overcommit-ratio')",
        json!({"cpu": 4, "memory": 1.5}),
    );
    check("annotationJSON(object, 'absent')", Value::Null);
    check_err(
        "annotationJSON(object, 'broken')",
        "annotation 'broken' is not valid JSON: ",
    );
    assert_eq!(
        eval_on(&json!({}), "annotationJSON(object, 'x')"),
        Ok(Value::Null)
    );
}

#[test]
fn multus_parse_function() {
    check(
        "multusParse('a@net1, other/b', request.namespace)",
        json!([{"interface": "net1", "name": "a", "namespace": "ns"}, {"name": "b", "namespace": "other"}]),
    );
    check("multusParse('', 'ns')", json!([]));
    check(
        "multusParse('[{\"name\":\"a\",\"ips\":[\"10.0.0.1\"]}]', 'ns').map(n, n.namespace + '/' + n.name)",
        json!(["ns/a"]),
    );
    check_err("multusParse('a,,b', 'ns')", "multusParse");
}

#[test]
fn wrong_argument_types_are_overload_errors() {
    check_err("quantityValue(1)", "quantityValue");
    check_err("multusNetworks('', 'x', 'ns')", "multusNetworks");
}

// ---- templates ----

#[test]
fn template_static_values_are_cloned() {
    let value = json!({"a": [1, "x"], "b": "no braces } here"});
    let template = Template::compile(&Tree::from(&value), &declarations()).unwrap();
    assert!(template.is_static());
    assert_eq!(template.needs(), Needs::default());
    assert_eq!(render(value.clone()), Ok(value));
}

#[test]
fn template_typed_and_interpolated() {
    let template = json!({
        "replicas": "{{ 1 + 2 }}",
        "spaced": "  {{ [1, 2] }}  ",
        "nested": {"{{ keys are literal }}": ["{{ request.namespace }}", 5]},
        "text": "n={{ 1 }} b={{ true }} null=[{{ null }}] m={{ {'b': 1, 'a': 2} }} s={{ 'x' }}",
        "map": "{{ {'a': {'b': 1}} }}",
        "strings": "{{ '}}' + \"{{\" }}",
        "two": "{{ 1 }}{{ 2 }}"
    });
    assert_eq!(
        render(template),
        Ok(json!({
            "replicas": 3,
            "spaced": [1, 2],
            "nested": {"{{ keys are literal }}": ["ns", 5]},
            "text": "n=1 b=true null=[] m={\"a\":2,\"b\":1} s=x",
            "map": {"a": {"b": 1}},
            "strings": "}}{{",
            "two": "12"
        }))
    );
}

#[test]
fn template_needs_are_the_union() {
    let template = Template::compile(
        &Tree::from(json!(["{{ object.a }}", "x-{{ params.b }}"])),
        &declarations(),
    )
    .unwrap();
    assert!(!template.is_static());
    assert_eq!(
        template.needs(),
        Needs {
            object: true,
            params: true,
            ..Needs::default()
        }
    );
}

#[test]
fn template_compile_errors_carry_the_path() {
    let error = |value: Value| Template::compile(&Tree::from(value), &declarations()).unwrap_err();
    let unterminated = error(json!({"spec": {"containers": [{"image": "x-{{ object.a"}]}}));
    assert_eq!(unterminated.path, "spec.containers[0].image");
    assert!(matches!(unterminated.error, ExprError::Compile(_)));
    let annotated = error(json!({"metadata": {"annotations": {"a.b/c": "{{ 1 + }}"}}}));
    assert_eq!(annotated.path, "metadata.annotations['a.b/c']");
    assert_eq!(error(json!("{{ }}")).path, "");
    assert!(
        error(json!("{{ '}} }}"))
            .to_string()
            .contains("no matching")
    );
}

#[test]
fn template_render_errors_name_the_path_and_expression() {
    let error = render(json!({"a": ["{{ podOrdinal({}) }}"]}))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("a[0]") && error.contains("podOrdinal({})"),
        "{error}"
    );
}

#[test]
fn oversized_results_are_errors() {
    let item = "x".repeat(50);
    let object = json!({"list": vec![item; 30_000]});
    for source in [
        "object.list",
        "jsonEncode(object.list)",
        "object.list.join(',')",
    ] {
        let result = eval_on(&object, source);
        if source.contains("join") {
            // The strings extension builds the string; graft bounds it on the way out.
            assert!(result.is_err(), "{source}");
            continue;
        }
        let error = result.unwrap_err().to_string();
        assert!(error.contains("larger than"), "{source}: {error}");
    }
    let error = eval_on(
        &json!({"s": "x".repeat(2 << 20)}),
        "quantityValue(object.s)",
    )
    .unwrap_err();
    assert!(error.to_string().contains("longer than"), "{error}");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn template_compile_never_panics(text in "[{}'\"a-z0-9 +.\\\\]{0,30}") {
            let _ = Template::compile(&Tree::from(json!(text)), &declarations());
        }

        #[test]
        // A non-blank prefix: a lone expression with only whitespace around it is typed.
        fn interpolation_keeps_literal_text(prefix in "[a-z -]{0,5}[a-z-][a-z -]{0,5}", suffix in "[a-z -]{0,10}") {
            let rendered = render(json!(format!("{prefix}{{{{ request.namespace }}}}{suffix}")));
            prop_assert_eq!(rendered, Ok(json!(format!("{prefix}ns{suffix}"))));
        }
    }
}

/// An object whose `spec.items` is `0..n`.
fn with_items(n: usize) -> Value {
    json!({"spec": {"items": (0..n).collect::<Vec<_>>()}})
}

#[test]
fn comprehensions_keep_their_results_when_metered() {
    let object = with_items(5);
    let cases = [
        ("object.spec.items.map(i, i * 2)", json!([0, 2, 4, 6, 8])),
        ("object.spec.items.filter(i, i % 2 == 0)", json!([0, 2, 4])),
        ("object.spec.items.map(i, i > 2, i)", json!([3, 4])),
        ("object.spec.items.all(i, i < 5)", json!(true)),
        ("object.spec.items.all(i, i < 4)", json!(false)),
        ("object.spec.items.exists(i, i == 3)", json!(true)),
        ("object.spec.items.exists_one(i, i > 3)", json!(true)),
        ("object.spec.items.exists_one(i, i > 2)", json!(false)),
        // Errors are still absorbed as CEL specifies: false wins over an error in `all`.
        ("object.spec.items.all(i, 10 / (i - 1) > 100)", json!(false)),
        (
            "object.spec.items.all(a, object.spec.items.exists(b, a == b))",
            json!(true),
        ),
        ("{'a': 1, 'b': 2}.all(k, k.size() == 1)", json!(true)),
    ];
    for (source, expected) in cases {
        assert_eq!(eval_on(&object, source), Ok(expected), "{source}");
    }
}

#[test]
fn every_comprehension_is_metered() {
    // 1,000 x 1,000 iterations: ten times the budget, whatever the macro.
    let object = with_items(1000);
    for source in [
        "object.spec.items.all(a, object.spec.items.all(b, a + b >= 0))",
        "object.spec.items.exists(a, object.spec.items.exists(b, a + b < 0))",
        "object.spec.items.map(a, object.spec.items.filter(b, b < 0).size())",
        "object.spec.items.filter(a, object.spec.items.exists_one(b, b == -1))",
        "object.spec.items.map(a, object.spec.items.map(b, a + b)).size()",
    ] {
        let error = eval_on(&object, source).expect_err(source);
        assert_eq!(
            error,
            ExprError::Evaluate(super::cost::exhausted_message()),
            "{source}"
        );
    }
    // Under the budget: 300 x 300.
    let object = with_items(300);
    assert_eq!(
        eval_on(
            &object,
            "object.spec.items.all(a, object.spec.items.all(b, a + b >= 0))"
        ),
        Ok(json!(true))
    );
}

#[test]
fn strings_built_in_comprehensions_count_against_the_budget() {
    // 10,000 copies of a 64 KiB string would be 640 MiB: refused after ~100.
    let object = json!({
        "spec": {"items": (0..10_000).collect::<Vec<_>>(), "chunk": "x".repeat(64 * 1024)}
    });
    let error = eval_on(
        &object,
        "object.spec.items.map(i, object.spec.chunk).join('')",
    )
    .expect_err("a 640 MiB string");
    assert_eq!(error, ExprError::Evaluate(super::cost::exhausted_message()));
}

#[test]
fn each_evaluation_gets_a_fresh_budget() {
    let object = with_items(300);
    // 90,300 units: under the budget once, and again on the next evaluation.
    for _ in 0..3 {
        assert_eq!(
            eval_on(
                &object,
                "object.spec.items.all(a, object.spec.items.all(b, b >= 0))"
            ),
            Ok(json!(true))
        );
    }
}

// ---- parts that read only params, evaluated at load ----

#[test]
fn parts_reading_only_params_are_folded_and_give_the_same_results() {
    let cases = [
        (
            "params.networks.map(n, {'name': n, 'namespace': params.networkNamespace})",
            1,
            json!([
                {"name": "roce-a", "namespace": "net"},
                {"name": "roce-b", "namespace": "net"}
            ]),
        ),
        // Only the params part folds; the rest reads the object on every review.
        (
            "object.metadata.name + ':' + params.networks.map(n, n.upperAscii()).join(',')",
            1,
            json!("web-3:ROCE-A,ROCE-B"),
        ),
        // Literals compute too: the list and the map are built once.
        (
            "object.metadata.name in ['web-3', 'web-4'] && {'a': 1}.size() == 1",
            2,
            json!(true),
        ),
        // Types survive the fold: uint stays uint, double stays double, int keys stay int.
        (
            "type(params.networks.map(n, 1u)[0]) == uint",
            1,
            json!(true),
        ),
        ("type([2.0][0]) == double", 1, json!(true)),
        ("{1: 'one'}[1] == 'one'", 1, json!(true)),
        // Fields of a folded map, presence tests on it and indexing into a folded list.
        (
            "{'a': {'b': 2}}.a.b == object.spec.containers.size() + 1",
            1,
            json!(true),
        ),
        (
            "has({'a': 1}.a) && object.metadata.name != ''",
            1,
            json!(true),
        ),
        (
            "has({'a': 1}.z) || object.metadata.name == ''",
            1,
            json!(false),
        ),
        ("[1, 2, 3][1] + object.metadata.name.size()", 1, json!(7)),
        // Names and fields of params are read as cheaply as a folded value.
        ("params.networkNamespace", 0, json!("net")),
    ];
    for (source, folded, expected) in cases {
        let expression = compile(source).expect(source);
        assert_eq!(expression.folded_parts(), folded, "{source}");
        assert_eq!(expression.warnings(), [], "{source}");
        assert_eq!(eval(source), Ok(expected), "{source}");
    }
}

#[test]
fn a_comprehension_variable_named_params_hides_params_from_the_fold() {
    let object = json!({"spec": {"items": [{"name": "a"}, {"name": "b"}]}});
    let source = "object.spec.items.map(params, params.name + '!')";
    assert_eq!(compile(source).expect(source).folded_parts(), 0);
    assert_eq!(eval_on(&object, source), Ok(json!(["a!", "b!"])));
}

#[test]
fn an_appended_item_stays_a_list_literal() {
    // `map` appends `[item]` on each step; the item may fold, the list around it not.
    let object = with_items(3);
    let source = "object.spec.items.map(i, params.networks.size())";
    assert_eq!(compile(source).expect(source).folded_parts(), 1);
    assert_eq!(eval_on(&object, source), Ok(json!([2, 2, 2])));
    let source = "object.spec.items.map(i, 'x')";
    assert_eq!(compile(source).expect(source).folded_parts(), 0);
    assert_eq!(eval_on(&object, source), Ok(json!(["x", "x", "x"])));
}

#[test]
fn a_part_that_fails_at_load_is_left_to_fail_at_review() {
    // The error is the review's, as without the fold.
    let source = "object.metadata.name == 'web-3' || params.ratios.cpu / 0 == 1";
    let expression = compile(source).expect(source);
    assert_eq!(expression.folded_parts(), 0);
    // Every review that reaches it fails: `graft lint` says so, once for the part.
    let [warning] = expression.warnings() else {
        panic!("{:?}", expression.warnings());
    };
    assert!(warning.message.contains("Division by zero"), "{warning:?}");
    assert_eq!(eval(source), Ok(json!(true)));
    check_err("params.ratios.cpu / 0 == 1", "Division by zero");
    // Over budget at load (400 x 400 iterations): left in place, and over budget at each
    // review. Its parts fold (the outer list, and the inner map, which alone is within
    // budget), and the review still pays for the 400 lists of 400 it builds.
    let items = (0..400)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let source = format!("[{items}].map(a, [{items}].map(b, b))");
    let source = source.as_str();
    let expression = compile(source).expect(source);
    assert_eq!(expression.folded_parts(), 2);
    let [warning] = expression.warnings() else {
        panic!("{:?}", expression.warnings());
    };
    assert!(warning.message.contains("cost budget"), "{warning:?}");
    assert_eq!(
        eval(source),
        Err(ExprError::Evaluate(super::cost::exhausted_message()))
    );
}
