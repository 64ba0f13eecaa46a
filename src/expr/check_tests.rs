//! The load-time check, one rule at a time: what passes, and what fails with which
//! message and hint.

use serde_json::json;

use super::{CheckError, Declarations, check};
use crate::tree::Tree;

/// The policy the cases are checked in: these params, and the variables `first`
/// and `second`, of which `first` is evaluated before the expression.
fn checked(source: &str) -> Result<(), CheckError> {
    let params =
        Tree::from(json!({"registry": "example.com", "ratios": {"cpu": 2}, "zones": ["a"]}));
    let all = ["first".to_string(), "second".to_string()];
    let declarations = Declarations {
        params: &params,
        variables: &all[..1],
        all_variables: &all,
        object: None,
    };
    checked_in(source, &declarations)
}

fn checked_in(source: &str, declarations: &Declarations<'_>) -> Result<(), CheckError> {
    let env = crate::expr::environment().expect("the environment builds");
    let program = env.compile(source).expect(source);
    check(program.expression(), env, declarations)
}

fn passes(sources: &[&str]) {
    for source in sources {
        assert_eq!(checked(source), Ok(()), "{source}");
    }
}

/// Each case: the source, the message, the hint.
fn fails(cases: &[(&str, &str, Option<&str>)]) {
    for (source, message, hint) in cases {
        let error = checked(source).expect_err(source);
        assert_eq!(error.message, *message, "{source}");
        assert_eq!(error.hint.as_deref(), *hint, "{source}");
    }
}

#[test]
fn identifiers_resolve_to_variables_comprehension_variables_and_types() {
    passes(&[
        "object.metadata.name == oldObject.metadata.name",
        "namespaceObject == null || namespaceObject.metadata.labels.size() > 0",
        "object.spec.containers.all(c, c.image != '')",
        "object.spec.containers.exists(c, c.ports.exists_one(p, p.containerPort == 80))",
        "object.spec.containers.map(c, c.name).filter(n, n.startsWith('a'))",
        "object.spec.containers.map(c, c.name != '', c.name)",
        "{'a': 1}.all(k, k == 'a')",
        "optional.of(object.metadata.name).optMap(n, n + '-x').orValue('')",
        "type(object) == map && type(1) == int && type('') == string && type(null) == null_type",
        "[bool, bytes, double, list, type, uint].size() == 6",
        "int('1') + dyn(1) == 2 && uint(1) == 1u && double(1) == 1.0",
        // Bound under a foreach (which the policy compiler checks), methods included.
        "element.image.startsWith('docker.io/') && index >= 0",
    ]);
    fails(&[
        (
            "objekt.metadata.name == 'x'",
            "unknown name objekt",
            Some("did you mean object?"),
        ),
        (
            "oldObjet == null",
            "unknown name oldObjet",
            Some("did you mean oldObject?"),
        ),
        (
            "object.spec.containers.all(c, true) && c.image == ''",
            "unknown name c",
            Some(
                "the variables are object, oldObject, namespaceObject, request, params, variables (and element, index under a foreach)",
            ),
        ),
        (
            "object.spec.containers.all(container, contianer.image != '')",
            "unknown name contianer",
            Some("did you mean container?"),
        ),
    ]);
}

#[test]
fn functions_and_methods_exist_with_their_arities() {
    passes(&[
        "podOrdinal(object) > 0 && quantityValue('1Gi') > 0.0",
        "'a,b'.split(',').join('-').lowerAscii().upperAscii().trim() != ''",
        "'abc'.substring(1, 2) + 'abc'.substring(1) + 'x'.replace('x', 'y', 1) != ''",
        "'%s'.format(['a']).indexOf('a') + 'a'.lastIndexOf('a', 0) >= 0",
        "object.metadata.name.matches('^w') && matches(object.metadata.name, 'w')",
        "size(object.spec.containers) == object.spec.containers.size()",
        "optional.none().hasValue() || optional.ofNonZeroValue(1).value() == 1",
        "object.?spec.?nodeName.or(optional.of('x')).orValue('') != ''",
        "strings.quote('a') != ''",
    ]);
    fails(&[
        (
            "podOrdnal(object) > 0",
            "unknown function podOrdnal",
            Some("did you mean podOrdinal?"),
        ),
        (
            "object.metadata.name.lowerAsci() == 'a'",
            "unknown method lowerAsci",
            Some("did you mean lowerAscii?"),
        ),
        (
            "podOrdinal(object, 1) > 0",
            "podOrdinal takes 1 argument, not 2",
            None,
        ),
        (
            "'a'.startsWith()",
            "startsWith takes 1 argument, not 0",
            None,
        ),
        (
            "'a'.substring(1, 2, 3) == ''",
            "substring takes 1 or 2 arguments, not 3",
            None,
        ),
        (
            "object.spec.containers.all(c)",
            "all takes 2 arguments, not 1",
            None,
        ),
        (
            "lowerAscii('A') == 'a'",
            "lowerAscii cannot be called this way",
            Some("lowerAscii is a method: write value.lowerAscii(...)"),
        ),
        (
            "object.podOrdinal() == 0",
            "podOrdinal cannot be called this way",
            Some("podOrdinal is a function: write podOrdinal(value, ...)"),
        ),
        (
            "optional.off(1).hasValue()",
            "unknown function optional.off",
            Some("did you mean optional.of?"),
        ),
        ("math.abs(-1) == 1", "unknown function math.abs", None),
        (
            "cel.Thing{a: 1} == null",
            "unknown message type cel.Thing",
            Some("graft declares no message types: build a map with {'key': value}"),
        ),
    ]);
}

#[test]
fn request_fields_are_those_graft_provides() {
    passes(&[
        "request.uid + request.name + request.namespace + request.operation + request.subResource != ''",
        "request.kind.group + request.kind.version + request.kind.kind != ''",
        "request.resource.group + request.resource.version + request.resource.resource != ''",
        "request.userInfo.username + request.userInfo.uid != '' && request.userInfo.groups.size() > 0",
        "size(request.userInfo.extra) >= 0 && !request.dryRun",
        "request.?options.hasValue() || has(request.userInfo.groups)",
    ]);
    fails(&[
        (
            "request.namespce == 'default'",
            "request has no field namespce",
            Some("did you mean request.namespace?"),
        ),
        (
            "has(request.namespce)",
            "request has no field namespce",
            Some("did you mean request.namespace?"),
        ),
        (
            "request.userInfo.usrname == 'admin'",
            "request.userInfo has no field usrname",
            Some("did you mean request.userInfo.username?"),
        ),
        (
            "request.kind.knd == 'Pod'",
            "request.kind has no field knd",
            Some("did you mean request.kind.kind?"),
        ),
        (
            "request.resource.zzz == ''",
            "request.resource has no field zzz",
            Some("request.resource has group, version, resource"),
        ),
        (
            "request.options.dryRun",
            "graft's request has no field options",
            Some("graft does not pass the operation's options"),
        ),
        (
            "request.requestKind.kind == 'Pod'",
            "graft's request has no field requestKind",
            Some("use request.kind"),
        ),
        (
            "request.object.metadata.name == ''",
            "graft's request has no field object",
            Some("use the variable object"),
        ),
    ]);
}

#[test]
fn params_refer_to_declared_keys() {
    passes(&[
        "params.registry + string(params.ratios.cpu) != ''",
        "params.zones[0] == 'a' && params.zones.size() == 1",
        "params.?missing.orValue('') == ''",
    ]);
    fails(&[
        (
            "params.registy == ''",
            "params.registy is not declared in spec.params",
            Some("did you mean params.registry?"),
        ),
        (
            "params.ratios.cpuu > 1",
            "params.ratios.cpuu is not declared in spec.params",
            Some("did you mean params.ratios.cpu?"),
        ),
        (
            "params.zzzzzz == ''",
            "params.zzzzzz is not declared in spec.params",
            Some("params has registry, ratios, zones"),
        ),
    ]);
    let error = checked_in("params.registry == ''", &Declarations::NONE).unwrap_err();
    assert_eq!(
        error.message,
        "params.registry is not declared: the policy has no spec.params"
    );
}

#[test]
fn variables_refer_to_those_evaluated_before() {
    passes(&["variables.first == 1", "has(variables.first)"]);
    fails(&[
        (
            "variables.second == 1",
            "variables.second is not evaluated yet here",
            Some(
                "variables are evaluated in order, after spec.match and spec.exclude: refer \
                 only to those declared above",
            ),
        ),
        (
            "variables.frist == 1",
            "variables.frist is not declared in spec.variables",
            Some("did you mean variables.first?"),
        ),
    ]);
}

#[test]
fn nothing_is_reported_for_values_the_shapes_do_not_cover() {
    let params = Tree::from(json!("a string"));
    let declarations = Declarations {
        params: &params,
        ..Declarations::NONE
    };
    assert_eq!(checked_in("params.anything == 1", &declarations), Ok(()));
    passes(&[
        "object.any.field.at.all == oldObject.too",
        "[1, 2].map(x, x * 2)[0] == 2",
    ]);
}

#[test]
fn the_libraries_kubernetes_enables_are_known() {
    passes(&[
        "[1].transformList(i, v, v) == [1] && {'a': 1}.transformMap(k, v, v).size() == 1",
        "[1].all(i, v, v > i) && [1].exists(i, v, true) && [1].existsOne(i, v, true)",
        "[[1]].flatten().sortBy(e, e) == lists.range(1).reverse().distinct().sort()",
        "[1].first().orValue(0) == 1 && optional.unwrap([]) == [].unwrapOpt()",
        "semver('1.0.0').major() == 1 && isSemver('1.0.0') && sign(quantity('1')) == 1",
        "format.dns1123Label().validate('a') == format.named('uri').value().validate('/a')",
        "jsonpatch.escapeKey('a/b') == '%s'.format(['a~1b'])",
    ]);
    fails(&[(
        "[1].transformList(i)",
        "transformList takes 3 or 4 arguments, not 1",
        None,
    )]);
}
