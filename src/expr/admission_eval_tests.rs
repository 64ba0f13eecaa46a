//! MutatingAdmissionPolicy expressions evaluated as the conformance cases recorded against
//! kube-apiserver v1.36.2 (the research behind this module) say the apiserver evaluates
//! them: their results, and their errors' words.

use serde_json::{Value, json};

use super::admission::{
    AdmissionActivation, AdmissionBindings, AdmissionDeclarations, AdmissionError,
    AdmissionExpression, AdmissionKind,
};
use crate::k8s::json_patch_v4::Operation;
use crate::tree::Tree;

fn declarations(kind: AdmissionKind) -> AdmissionDeclarations<'static> {
    AdmissionDeclarations {
        params: false,
        variables: &[],
        kind,
    }
}

fn compile(source: &str, kind: AdmissionKind) -> Result<AdmissionExpression, AdmissionError> {
    AdmissionExpression::compile(source, &declarations(kind))
}

/// The message the apiserver refuses `source` with, as a `kind` expression.
fn refused(source: &str, kind: AdmissionKind) -> String {
    compile(source, kind).expect_err(source).to_string()
}

fn config_map() -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "ns", "labels": {"tier": "gold"}},
        "data": {"a": "x", "b": "y", "name": "web", "version": "1.36.2", "ip": "10.1.2.3",
                 "url": "https://example.com:8443/a/b", "image": "registry.k8s.io/pause:3.10",
                 "csv": "a,b,c,d"}
    })
}

fn request() -> Value {
    json!({
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
        "name": "cfg", "namespace": "ns", "operation": "CREATE",
        "userInfo": {"username": "admin"}, "dryRun": false
    })
}

/// Inputs to evaluate against: the ConfigMap, and `variables` as given.
struct Inputs {
    object: Tree<'static>,
    request: Tree<'static>,
    params: Option<Tree<'static>>,
    variables: Vec<(String, AdmissionExpression)>,
}

impl Inputs {
    fn new() -> Inputs {
        Inputs {
            object: Tree::from(config_map()),
            request: Tree::from(request()),
            params: None,
            variables: Vec::new(),
        }
    }

    /// Adds a variable, compiled seeing those before it.
    fn variable(mut self, name: &str, source: &str) -> Inputs {
        let names: Vec<String> = self.variables.iter().map(|(n, _)| n.clone()).collect();
        let expression = AdmissionExpression::compile(
            source,
            &AdmissionDeclarations {
                params: self.params.is_some(),
                variables: &names,
                kind: AdmissionKind::Variable,
            },
        )
        .expect(source);
        self.variables.push((name.to_owned(), expression));
        self
    }

    fn names(&self) -> Vec<String> {
        self.variables.iter().map(|(n, _)| n.clone()).collect()
    }

    fn activation(&self) -> AdmissionActivation<'_> {
        AdmissionActivation::new(AdmissionBindings {
            object: Some(&self.object),
            old_object: None,
            request: &self.request,
            params: self.params.as_ref(),
            namespace_object: None,
            variables: &self.variables,
        })
    }

    fn compile(&self, source: &str, kind: AdmissionKind) -> AdmissionExpression {
        let names = self.names();
        AdmissionExpression::compile(
            source,
            &AdmissionDeclarations {
                params: self.params.is_some(),
                variables: &names,
                kind,
            },
        )
        .expect(source)
    }

    fn apply(&self, source: &str) -> Result<Value, AdmissionError> {
        let expression = self.compile(source, AdmissionKind::ApplyConfiguration);
        self.activation()
            .evaluate_apply_configuration(&expression)
            .map(|tree| tree.to_value())
    }

    fn patch(&self, source: &str) -> Result<Vec<Operation<'static>>, AdmissionError> {
        let expression = self.compile(source, AdmissionKind::JsonPatch);
        self.activation().evaluate_json_patch(&expression)
    }
}

/// The annotations an ApplyConfiguration gives, `Object{metadata: Object.metadata{
/// annotations: {...}}}` being the cases' way to show values.
fn annotations(source: &str) -> Value {
    let applied = Inputs::new().apply(source).expect(source);
    applied["metadata"]["annotations"].clone()
}

#[test]
fn comprehensions_nest_as_deep_as_a_policy_likes() {
    let source = "Object{spec: Object.spec{replicas: variables.list.all(x1, \
                  variables.list.all(x2, variables.list.all(x3, variables.list.all(x4, \
                  variables.list.all(x5, variables.list.all(x5, \"0123456789\" == \
                  \"0123456789\"))))))? 1 : 0}}";
    let inputs = Inputs::new().variable("list", "[0,1,2,3,4,5,6,7,8,9]");
    assert_eq!(
        inputs.apply(source).expect_err(source).to_string(),
        format!(
            "expression '{source}' resulted in error: operation cancelled: actual cost limit \
             exceeded"
        )
    );
}

#[test]
fn a_part_on_literals_that_fails_fails_the_program() {
    assert_eq!(
        refused(
            r#"Object{metadata: Object.metadata{labels: {"n": string(int("not-a-number"))}}}"#,
            AdmissionKind::ApplyConfiguration
        ),
        "program instantiation failed: type conversion error from 'string' to 'int'"
    );
    // What reads the object is the review's to fail.
    assert!(
        compile(
            "object.data.a == string(1 / 1)",
            AdmissionKind::MatchCondition
        )
        .is_ok()
    );
    assert!(
        compile("int(object.data.a) == 1", AdmissionKind::MatchCondition)
            .expect("compiles")
            .folded_parts()
            == 0
    );
}

#[test]
fn the_libraries_give_what_the_apiserver_gave() {
    let cases = annotations(
        r#"Object{metadata: Object.metadata{annotations: {
            "s-d": "%s-%d".format([object.data.name, 42]),
            "f": "%.2f".format([3.14159]),
            "x-o-b": "%x|%o|%b".format([255, 8, 5]),
            "e": "%e".format([1200.0]),
            "list": "%s".format([[1, "a"]]),
            "pct": "%d%%".format([5]),
            "all": string(object.data.all(k, v, v != "")),
            "exists-index": string([10, 20].exists(i, v, i == 1 && v == 20)),
            "exists-one": string([1, 2].exists_one(i, v, v == 2)),
            "transform-list": [1, 2].transformList(i, v, i * 10 + v).map(x, string(x)).join(","),
            "transform-map": string(object.data.transformMap(k, v, v + "!")["a"]),
            "cpu-cmp": string(quantity("1500m").compareTo(quantity("1"))),
            "is-quantity": string(isQuantity("1Gi")) + "," + string(isQuantity("one gig")),
            "find": object.data.image.find("[0-9]+\\.[0-9]+"),
            "find-all": object.data.image.findAll("[0-9]+").join("-"),
            "char-at": object.data.csv.charAt(0),
            "quote": strings.quote("say \"hi\""),
            "ip-family": string(ip(object.data.ip).family()),
            "in-cidr": string(cidr("10.0.0.0/8").containsIP(object.data.ip)),
            "url-host": url(object.data.url).getHost(),
            "semver-major": string(semver(object.data.version).major()),
            "escaped": jsonpatch.escapeKey("k8s.io/x~y"),
            "range": string(lists.range(3).size()),
            "keys": object.data.map(k, k).sort().join(",")
        }}}"#,
    );
    assert_eq!(
        cases,
        json!({
            "s-d": "web-42", "f": "3.14", "x-o-b": "ff|10|101", "e": "1.200000×10⁰³",
            "list": "[1, \"a\"]", "pct": "5%", "all": "true", "exists-index": "true",
            "exists-one": "true", "transform-list": "1,12", "transform-map": "x!",
            "cpu-cmp": "1", "is-quantity": "true,false", "find": "3.10",
            "find-all": "8-3-10", "char-at": "a", "quote": "\"say \\\"hi\\\"\"",
            "ip-family": "4", "in-cidr": "true", "url-host": "example.com:8443",
            "semver-major": "1", "escaped": "k8s.io~1x~0y", "range": "3",
            "keys": "a,b,csv,image,ip,name,url,version"
        })
    );
}

#[test]
fn apply_configurations_are_trees_of_their_fields() {
    let inputs = Inputs::new();
    assert_eq!(
        inputs.apply(
            r#"Object{metadata: Object.metadata{
                labels: {
                  "present": object.metadata.?labels["tier"].orValue("none"),
                  "absent": object.metadata.?labels["missing"].orValue("none"),
                  ?"skipped": optional.none(),
                  ?"kept": optional.of("yes")
                },
                ?annotations: object.metadata.?annotations["nope"].hasValue() ? optional.of({"x": "y"}) : optional.none()
              },
              data: object.data.transformMapEntry(k, v, k in ["a", "b"], {"upper-" + k: v.upperAscii()})}"#
        ),
        Ok(json!({
            "metadata": {"labels": {"absent": "none", "kept": "yes", "present": "gold"}},
            "data": {"upper-a": "X", "upper-b": "Y"}
        }))
    );
    assert_eq!(
        inputs.apply("Object{spec: Object.specx{replicas: 1}}"),
        Err(AdmissionError::Result(
            "type mismatch: unexpected type name \"Object.specx\", expected \"Object.spec\", \
             which matches field name path from root Object type"
                .to_owned()
        ))
    );
    assert_eq!(
        inputs.apply(
            "Object{spec: Object.spec{containers: [Object.spec.containers{name: 'a', ports: \
             [Object.spec.containers.portsZ{containerPort: 80}]}]}}"
        ),
        Err(AdmissionError::Result(
            "type mismatch: unexpected type name \"Object.spec.containers.portsZ\", expected \
             \"Object.spec.containers.ports\", which matches field name path from root Object \
             type"
                .to_owned()
        ))
    );
    assert_eq!(
        inputs.apply(
            "Object{metadata: Object.metadata{labels: {'remove-me': null}}, n: 9007199254740993}"
        ),
        Ok(json!({"metadata": {"labels": {"remove-me": null}}, "n": 9007199254740993_i64}))
    );
}

#[test]
fn json_patches_are_operations_with_their_values_converted() {
    let inputs = Inputs::new();
    let operations = inputs
        .patch(
            r#"[
              JSONPatch{op: "add", path: "/spec/template/spec/containers/-", value: Object.spec.template.spec.containers{
                  name: "x",
                  ports: [Object.spec.template.spec.containers.ports{containerPort: 8080}],
                }
              },
              JSONPatch{op: "add", path: "/data", value: Object.invalid{k: "v"}},
              JSONPatch{op: "add", path: "/metadata/labels/" + jsonpatch.escapeKey("app.kubernetes.io/name"), value: "web"},
              JSONPatch{op: "test", path: "/a", value: [dyn(9007199254740991), dyn(9007199254740992), dyn(-9007199254740992), dyn(18446744073709551615u), dyn(b'hi'), dyn(duration('1.5s')), dyn(1.5), dyn(null)]},
              JSONPatch{op: "move", from: "/a", path: "/b"},
              JSONPatch{op: "remove", path: "/c", from: ""},
            ]"#,
        )
        .expect("evaluates");
    let shown: Vec<Value> = operations
        .iter()
        .map(|o| {
            json!({"op": o.op, "path": o.path, "from": o.from,
                   "value": o.value.as_ref().map(Tree::to_value)})
        })
        .collect();
    assert_eq!(
        shown,
        vec![
            json!({"op": "add", "path": "/spec/template/spec/containers/-", "from": null,
                   "value": {"name": "x", "ports": [{"containerPort": 8080}]}}),
            json!({"op": "add", "path": "/data", "from": null, "value": {"k": "v"}}),
            json!({"op": "add", "path": "/metadata/labels/app.kubernetes.io~1name",
                   "from": null, "value": "web"}),
            json!({"op": "test", "path": "/a", "from": null,
                   "value": [9007199254740991_i64, "9007199254740992", "-9007199254740992",
                             "18446744073709551615", "aGk=", "1.5s", 1.5, null]}),
            json!({"op": "move", "path": "/b", "from": "/a", "value": null}),
            json!({"op": "remove", "path": "/c", "from": null, "value": null}),
        ]
    );
    assert_eq!(
        inputs.patch(
            r#"[JSONPatch{op: "add", path: "/spec", value: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: [Object.spec.template.spec.containers{ports: [Object.spec.template.spec.containers.portsZ{}]}]}}}}]"#
        ),
        Err(AdmissionError::Result(
            "type mismatch: unexpected type name \"Object.spec.template.spec.containers.portsZ\", \
             expected \"Object.spec.template.spec.containers.ports\", which matches field name \
             path from root Object type"
                .to_owned()
        ))
    );
    assert_eq!(
        inputs.patch("[JSONPatch{op: 'add', path: '/a', value: optional.of(1)}]"),
        Err(AdmissionError::Result(
            "JSONPath valueExpression evaluated to a type that could not marshal to JSON: type \
             conversion error from 'optional_type' to 'google.protobuf.Value'"
                .to_owned()
        ))
    );
}

#[test]
fn json_patch_values_read_as_kubernetes_reads_them() {
    let labels = annotations(
        r#"Object{metadata: Object.metadata{annotations: {
            "op": string(JSONPatch{op: "opValue"}.op),
            "from": string(JSONPatch{from: "fromValue"}.from),
            "value": string(JSONPatch{value: "valueValue"}.value),
            "path-unset": string(has(JSONPatch{}.path)),
            "path-empty": JSONPatch{}.path,
            "op-set": string(has(JSONPatch{op: "x"}.op)),
            "same-all": string(JSONPatch{op: "add", path: "path", from: "from", value: 1} == JSONPatch{op: "add", path: "path", from: "from", value: 1}),
            "different-value": string(JSONPatch{op: "add", path: "path", from: "from", value: "1"} == JSONPatch{op: "add", path: "path", from: "from", value: 1}),
            "object-field": string(Object{field: "fieldValue"}.field),
            "object-equal": string(Object{field: "x"} == Object{field: "x"}),
            "object-has": string(has(Object{field: "x"}.field) && !has(Object{}.field)),
            "object-type": string(type(Object{}) == Object),
            "has-value": string(has(object.data.value))
        }}}"#,
    );
    assert_eq!(
        labels,
        json!({
            "op": "opValue", "from": "fromValue", "value": "valueValue", "path-unset": "false",
            "path-empty": "", "op-set": "true", "same-all": "true", "different-value": "false",
            "object-field": "fieldValue", "object-equal": "true", "object-has": "true",
            "object-type": "true", "has-value": "false"
        })
    );
    assert_eq!(
        Inputs::new().patch("[JSONPatch{op: 'add', path: '/a', nope: 1}]"),
        Err(AdmissionError::Evaluation {
            expression: "[JSONPatch{op: 'add', path: '/a', nope: 1}]".to_owned(),
            error: "unexpected JSONPatchType field: nope".to_owned()
        })
    );
}

#[test]
fn variables_are_evaluated_once_when_read_and_fail_only_those_that_read_them() {
    let inputs = Inputs::new()
        .variable("bad", "int('x' + object.data.a)")
        .variable("name", "object.data.name")
        .variable("upper", "variables.name.upperAscii()")
        .variable("list", "[3, 1, 2, 2]")
        .variable("q", "quantity('1Gi')");
    let activation = inputs.activation();
    let names = inputs.names();
    let compile = |source: &str| {
        AdmissionExpression::compile(
            source,
            &AdmissionDeclarations {
                params: false,
                variables: &names,
                kind: AdmissionKind::Variable,
            },
        )
        .expect(source)
    };
    for source in [
        "variables.upper == 'WEB' && variables.name == 'web'",
        "variables.list.sort() == [1, 2, 2, 3] && variables.list.distinct().size() == 3",
        "variables.q.isGreaterThan(quantity('1G'))",
        // An error a later operand absorbs, as cel-go absorbs it.
        "variables.bad == 1 || true",
    ] {
        assert_eq!(
            activation.evaluate_bool(&compile(source)),
            Ok(true),
            "{source}"
        );
    }
    let source = "string(variables.bad) == '1'";
    assert_eq!(
        activation.evaluate_bool(&compile(source)),
        Err(AdmissionError::Evaluation {
            expression: source.to_owned(),
            error: "composited variable \"bad\" fails to evaluate: type conversion error from \
                    'string' to 'int'"
                .to_owned()
        })
    );
}

#[test]
fn errors_read_as_cel_go_s() {
    let inputs = Inputs::new();
    let activation = inputs.activation();
    for (source, error) in [
        ("object.data.nope == ''", "no such key: nope"),
        ("1 / (size(object.data) - 8) == 1", "division by zero"),
        ("1 % (size(object.data) - 8) == 1", "modulus by zero"),
        (
            "9223372036854775807 + size(object.data) > 0",
            "integer overflow",
        ),
        ("object.data.name + 1 == ''", "no such overload"),
        (
            "authorizer.group('').resource('pods').check('create').allowed()",
            "graft does not evaluate authorizer checks yet: the authorizer cannot be read",
        ),
    ] {
        let expression = compile(source, AdmissionKind::MatchCondition).expect(source);
        assert_eq!(
            activation.evaluate_bool(&expression),
            Err(AdmissionError::Evaluation {
                expression: source.to_owned(),
                error: error.to_owned()
            }),
            "{source}"
        );
    }
    // A repeated key keeps the last, as in cel-go.
    let expression =
        compile("{'a': 1, 'a': 2}['a'] == 2", AdmissionKind::MatchCondition).expect("compiles");
    assert_eq!(activation.evaluate_bool(&expression), Ok(true));
}

#[test]
fn params_and_null_bindings_are_values() {
    let mut inputs = Inputs::new();
    inputs.params = Some(Tree::from(json!({"data": {"n": "3"}})));
    let params = inputs.compile(
        "int(params.data.n) == 3 && namespaceObject == null && oldObject == null",
        AdmissionKind::MatchCondition,
    );
    assert_eq!(inputs.activation().evaluate_bool(&params), Ok(true));
}

#[test]
fn a_field_the_request_lacks_is_no_such_key() {
    let mut inputs = Inputs::new();
    inputs.request = Tree::from(json!({"operation": "CREATE"}));
    let source = r#"Object{metadata: Object.metadata{labels: {"req-ns": request.namespace}}}"#;
    assert_eq!(
        inputs.apply(source),
        Err(AdmissionError::Evaluation {
            expression: source.to_owned(),
            error: "no such key: namespace".to_owned()
        })
    );
}
