//! MutatingAdmissionPolicy expressions compiled as the conformance cases recorded
//! against kube-apiserver v1.36.2 (the research behind this module) say the apiserver
//! compiles them: what it refuses, and in which words.

use super::admission::{AdmissionDeclarations, AdmissionError, AdmissionExpression, AdmissionKind};

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

#[test]
fn undeclared_names_are_refused_in_the_apiserver_s_words() {
    assert_eq!(
        refused("variables.v == 'hello'", AdmissionKind::MatchCondition),
        "compilation failed: ERROR: <input>:1:1: undeclared reference to 'variables' (in \
         container '')\n | variables.v == 'hello'\n | ^"
    );
    assert_eq!(
        refused("variables.b + '!'", AdmissionKind::Variable),
        "compilation failed: ERROR: <input>:1:10: undefined field 'b'\n | variables.b + '!'\n \
         | .........^"
    );
    let source = r#"Object{metadata: Object.metadata{annotations: {"params-null": string(params == null)}}}"#;
    assert_eq!(
        refused(source, AdmissionKind::ApplyConfiguration),
        format!(
            "compilation failed: ERROR: <input>:1:70: undeclared reference to 'params' (in \
             container '')\n | {source}\n | {}^",
            ".".repeat(69)
        )
    );
    for (source, name) in [
        ("cel.bind(x, 1, x) == 1", "cel.bind"),
        ("math.greatest(1, 2) == 2", "math.greatest"),
        ("base64.encode(b'a') == 'YQ=='", "base64.encode"),
        ("podOrdinal(object) == 1", "podOrdinal"),
        ("'a'.regexReplace('a', 'b') == 'b'", "regexReplace"),
        ("jsonpatch.escapeKey('a') == 'a'", "jsonpatch.escapeKey"),
    ] {
        let message = refused(source, AdmissionKind::MatchCondition);
        assert!(
            message.contains(&format!(
                "undeclared reference to '{name}' (in container '')"
            )),
            "{source}: {message}"
        );
    }
    for (source, field) in [
        ("request.uid == ''", "uid"),
        ("request.userInfo.name == ''", "name"),
        ("namespaceObject.spec.foo == ''", "foo"),
        ("namespaceObject.metadata.uid == ''", "uid"),
    ] {
        let message = refused(source, AdmissionKind::MatchCondition);
        assert!(
            message.contains(&format!("undefined field '{field}'")),
            "{source}: {message}"
        );
    }
    for source in [
        "request.requestKind.kind == 'Pod' && request.options == null",
        "namespaceObject.metadata.UID == '' || namespaceObject.status.phase == ''",
        "authorizer.group('').resource('pods').check('create').allowed()",
        "authorizer.requestResource.check('create').allowed()",
        "type(1) == int && sign(quantity('1')) == 1 && [1].all(i, v, v > 0)",
        "object.data.?a.orValue('') == 'x' && google.protobuf.Duration == type(duration('1s'))",
    ] {
        assert!(
            compile(source, AdmissionKind::MatchCondition).is_ok(),
            "{source}"
        );
    }
}

#[test]
fn patch_types_exist_in_mutations_only() {
    for kind in [AdmissionKind::MatchCondition, AdmissionKind::Variable] {
        let message = refused("Object{}.a == 1", kind);
        assert!(
            message.contains("undeclared reference to 'Object' (in container '')"),
            "{message}"
        );
    }
    assert_eq!(
        refused("[JSONPatch{op: 1, path: '/a'}]", AdmissionKind::JsonPatch),
        "compilation failed: ERROR: <input>:1:14: expected type of field 'op' is 'string' but \
         provided type is 'int'\n | [JSONPatch{op: 1, path: '/a'}]\n | .............^"
    );
}

#[test]
fn literals_must_be_homogeneous() {
    let source = "Object{metadata: Object.metadata{annotations: {\n  \"from-object\": \
                  object.data.a,\n  \"literal\": \"x\"\n}}}";
    assert_eq!(
        refused(source, AdmissionKind::ApplyConfiguration),
        "compilation failed: ERROR: <input>:3:14: expected type 'dyn' but found 'string'\n |   \
         \"literal\": \"x\"\n | .............^"
    );
    for (source, message) in [
        ("[1, 'a'] == []", "expected type 'int' but found 'string'"),
        (
            "{'a': 1, 'b': 1.5} == {}",
            "expected type 'int' but found 'double'",
        ),
        (
            "[object.a, string(object.b)] == []",
            "expected type 'dyn' but found 'string'",
        ),
    ] {
        let refusal = refused(source, AdmissionKind::MatchCondition);
        assert!(refusal.contains(message), "{source}: {refusal}");
    }
    // What mixes nothing, or what graft cannot type, is let through; `format`'s
    // arguments are exempt.
    for source in [
        "[dyn(1), dyn('a')] == [] && ['a', 'b' + object.x] == []",
        "{'a': object.a, 'b': object.b} == {} && [object.x, variables.y] == []",
        "'%s %d'.format(['a', 1]) == '' && [[], [1]] == []",
        "{?'a': optional.of('x'), 'b': 'y'} == {}",
    ] {
        let declarations = AdmissionDeclarations {
            params: false,
            variables: &["y".to_owned()],
            kind: AdmissionKind::Variable,
        };
        if let Err(error) = AdmissionExpression::compile(source, &declarations) {
            panic!("{source}: {error}");
        }
    }
}

#[test]
fn results_must_be_of_the_type_their_place_needs() {
    assert_eq!(
        refused("\"I'm a teapot!\"", AdmissionKind::ApplyConfiguration),
        "must evaluate to Object but got string"
    );
    assert_eq!(
        refused("Object.spec.metadata{}", AdmissionKind::ApplyConfiguration),
        "must evaluate to Object but got Object.spec.metadata"
    );
    assert_eq!(
        refused("object.data", AdmissionKind::ApplyConfiguration),
        "must evaluate to Object but got dyn"
    );
    assert_eq!(
        refused("[]", AdmissionKind::JsonPatch),
        "must evaluate to list(JSONPatch) but got list(dyn)"
    );
    assert_eq!(
        refused(
            "JSONPatch{op: 'remove', path: '/a'}",
            AdmissionKind::JsonPatch
        ),
        "must evaluate to list(JSONPatch) but got JSONPatch"
    );
    assert_eq!(
        refused("object.data.a", AdmissionKind::MatchCondition),
        "must evaluate to bool but got dyn"
    );
    assert_eq!(
        refused(
            "object.spec.?hostNetwork.orValue(false)",
            AdmissionKind::MatchCondition
        ),
        "must evaluate to bool but got dyn"
    );
    for (source, kind) in [
        (
            "true ? Object{} : Object{spec: Object.spec{}}",
            AdmissionKind::ApplyConfiguration,
        ),
        (
            "object.data.a == 'x' ? [JSONPatch{op: 'remove', path: '/data/a'}] : []",
            AdmissionKind::JsonPatch,
        ),
        (
            "object.data.transformList(k, v, JSONPatch{op: 'remove', path: '/data/' + k})",
            AdmissionKind::JsonPatch,
        ),
        (
            "[JSONPatch{op: 'test', path: '/a'}] + object.data.map(k, JSONPatch{op: 'remove', \
             path: '/data/' + k}).filter(p, p.path != '/data/a')",
            AdmissionKind::JsonPatch,
        ),
        (
            "object.data.exists(k, k == 'a')",
            AdmissionKind::MatchCondition,
        ),
        ("object.anything", AdmissionKind::Variable),
    ] {
        if let Err(error) = compile(source, kind) {
            panic!("{source}: {error}");
        }
    }
}

#[test]
fn literal_format_strings_are_checked_against_their_arguments() {
    for (source, message) in [
        (
            "'%d'.format([1.0]) == ''",
            "error during formatting: decimal clause can only be used on integers, was given double",
        ),
        (
            "'%s'.format(['a', 'b']) == ''",
            "too many arguments supplied to string.format (expected 1, got 2)",
        ),
        ("'%s %s'.format(['a']) == ''", "index 1 out of range"),
        (
            "'%q'.format(['a']) == ''",
            "could not parse formatting clause: unrecognized formatting clause \"q\"",
        ),
        (
            "'%s'.format([optional.of(1)]) == ''",
            "was given optional_type",
        ),
        (
            "'%f'.format([[1]]) == ''",
            "fixed-point clause can only be used on doubles, was given list",
        ),
    ] {
        let refusal = refused(source, AdmissionKind::MatchCondition);
        assert!(refusal.contains(message), "{source}: {refusal}");
    }
    for source in [
        "'%s-%d %.2f %x'.format(['a', 1, 2.5, 'hi']) == ''",
        "'%d'.format([object.replicas]) == ''",
        "'%s'.format([[1, 'a', {'k': [true]}]]) == ''",
    ] {
        if let Err(error) = compile(source, AdmissionKind::MatchCondition) {
            panic!("{source}: {error}");
        }
    }
}

#[test]
fn issues_are_placed_as_cel_go_places_them() {
    // A syntax error, a name after characters of more than one byte.
    let message = refused("object.data[", AdmissionKind::MatchCondition);
    assert!(
        message.starts_with("compilation failed: ERROR: <input>:1:")
            && message.contains("\n | object.data[\n | "),
        "{message}"
    );
    assert_eq!(
        refused("'é' == params.x", AdmissionKind::MatchCondition),
        "compilation failed: ERROR: <input>:1:8: undeclared reference to 'params' (in container \
         '')\n | 'é' == params.x\n | .......^"
    );
}

#[test]
fn fields_namespace_object_does_not_declare_are_refused() {
    let source = "Object{metadata: Object.metadata{annotations: {\n  \"n\": \
                  string(size(namespaceObject.metadata.managedFields))\n}}}";
    assert_eq!(
        refused(source, AdmissionKind::ApplyConfiguration),
        format!(
            "compilation failed: ERROR: <input>:2:44: undefined field 'managedFields'\n |   \"n\": \
             string(size(namespaceObject.metadata.managedFields))\n | {}^",
            ".".repeat(43)
        )
    );
}

#[test]
fn graft_s_own_dialect_keeps_its_rules() {
    use super::{Declarations, Expression};
    // No patch types, and a repeated map key is still an error there.
    let error = Expression::compile("Object{}.a == 1", &Declarations::NONE)
        .expect_err("Object")
        .to_string();
    assert_eq!(error, "unknown message type Object");
    let repeated = super::evaluate_unbound("{'a': 1, 'a': 2}['a']").expect_err("repeated");
    assert!(repeated.to_string().contains("repeated key"), "{repeated}");
}
