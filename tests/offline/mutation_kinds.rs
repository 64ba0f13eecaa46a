//! The mutation kinds beyond plain set, merge and remove: `foreach`, `ifAbsent`,
//! `append`, `position: First`, and `names` in match and exclude, run through the engine
//! on small inline policies.

use crate::support::policies::{evaluate_converging, load_in_dir, pod_policy_yaml};
use graft::engine::{Evaluation, Outcome, PolicyResult};
use serde_json::{Value, json};

/// Loads `policies` (YAML) and evaluates a CREATE of `object`; checks that the patch
/// applies to the original and that a second review of the result changes nothing.
fn evaluate(policies: &str, object: Value) -> Evaluation<'static> {
    evaluate_converging(&load_in_dir(policies), object)
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1"},
    "spec": {
        "initContainers": [{"name": "init", "image": "busybox:latest"}],
        "containers": [
            {"name": "app", "image": "docker.io/app:latest"},
            {"name": "side", "image": "registry.example.com/side:1", "imagePullPolicy": "IfNotPresent"}
        ]}})
}

fn mutated(evaluation: &Evaluation<'_>) -> Value {
    evaluation.mutated().expect("a change")
}

#[test]
fn foreach_sets_a_field_on_every_element_its_when_selects() {
    let policies = pod_policy_yaml(
        "latest",
        "",
        "    - foreach: \"$.spec['containers','initContainers'][*]\"\n      when: \"element.image.endsWith(':latest')\"\n      set: {path: \"@.imagePullPolicy\", value: Always}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let spec = &mutated(&evaluation)["spec"];
    assert_eq!(spec["containers"][0]["imagePullPolicy"], "Always");
    assert_eq!(spec["containers"][1]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(spec["initContainers"][0]["imagePullPolicy"], "Always");
}

#[test]
fn an_element_is_the_value_it_views_to_every_kind_of_expression() {
    // `element` is read in place, as `object` is: whole-value equality, indexing, `has`,
    // paths below it, functions over it and scalar elements must see what a converted
    // value would show.
    let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
    "spec": {"containers": [
        {"name": "app", "image": "a", "resources": {"limits": {"cpu": "2"}}, "args": ["x", "y"]},
        {"name": "side", "image": "s", "ports": [{"containerPort": 80}]}
    ]}});
    let mutation = |when: &str| {
        format!(
            "    - foreach: \"$.spec.containers[*]\"\n      when: \"{when}\"\n      set: {{path: \"@.hit\", value: \"{{{{ string(index) }}}}\"}}\n"
        )
    };
    let hits = |when: &str| -> Vec<Value> {
        let evaluation = evaluate(&pod_policy_yaml("p", "", &mutation(when)), object.clone());
        let containers = evaluation
            .mutated()
            .map(|mutated| mutated["spec"]["containers"].clone())
            .unwrap_or_else(|| object["spec"]["containers"].clone());
        containers
            .as_array()
            .unwrap()
            .iter()
            .map(|container| container["hit"].clone())
            .collect()
    };
    let first = vec![json!("0"), Value::Null];
    let second = vec![Value::Null, json!("1")];
    assert_eq!(
        hits("element == {'name': 'side', 'image': 's', 'ports': [{'containerPort': 80}]}"),
        second
    );
    assert_eq!(hits("element['name'] == 'app'"), first);
    assert_eq!(hits("has(element.ports)"), second);
    assert_eq!(
        hits("has(element.resources) && element.resources.limits.cpu == '2'"),
        first
    );
    assert_eq!(
        hits("element.?resources.?limits.cpu.orValue('') == '2'"),
        first
    );
    assert_eq!(hits("size(element) == 3"), second);
    assert_eq!(hits("element.exists(k, k == 'args')"), first);
    assert_eq!(hits("'y' in element.?args.orValue([])"), first);
    assert_eq!(
        hits("index == 1 && element.ports[0].containerPort == 80"),
        second
    );

    // A scalar element.
    let policies = pod_policy_yaml(
        "args",
        "",
        "    - foreach: \"$.spec.containers[0].args[*]\"\n      when: \"element == 'y' && index == 1\"\n      set: {path: \"@\", value: \"{{ element + '!' }}\"}\n",
    );
    let evaluation = evaluate(&policies, object.clone());
    assert_eq!(
        mutated(&evaluation)["spec"]["containers"][0]["args"],
        json!(["x", "y!"])
    );
}

#[test]
fn foreach_templates_see_the_element_and_its_index() {
    let policies = pod_policy_yaml(
        "registry",
        "",
        "    - foreach: \"$.spec.containers[*]\"\n      when: \"!element.image.startsWith('mirror.local/')\"\n      set:\n        path: \"@.image\"\n        value: \"mirror.local/{{ element.image.split('/')[element.image.split('/').size() - 1] }}\"\n    - foreach: \"$.spec.containers[*]\"\n      merge: {value: {env: [{name: SLOT, value: \"{{ string(index) }}\"}]}}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let containers = &mutated(&evaluation)["spec"]["containers"];
    assert_eq!(containers[0]["image"], "mirror.local/app:latest");
    assert_eq!(containers[1]["image"], "mirror.local/side:1");
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "SLOT", "value": "0"}])
    );
    assert_eq!(
        containers[1]["env"],
        json!([{"name": "SLOT", "value": "1"}])
    );
}

/// An Ignore policy whose foreach fails at its second element leaves no trace of what
/// it wrote at the first, and its warning names the policy, the mutation and the field.
#[test]
fn a_foreach_failing_at_its_second_element_leaves_the_object_untouched() {
    let mut object = pod();
    object["spec"]["containers"][1]["securityContext"] = json!("not a map");
    let policies = pod_policy_yaml(
        "non-root",
        "  failurePolicy: Ignore\n",
        "    - foreach: \"$.spec.containers[*]\"\n      set: {path: \"@.securityContext.runAsNonRoot\", value: true}\n",
    );
    let evaluation = evaluate(&policies, object);
    assert_eq!(evaluation.outcome, Outcome::Allowed);
    assert!(evaluation.patch.0.is_empty(), "{:?}", evaluation.patch);
    assert!(evaluation.mutated().is_none());
    let PolicyResult::Ignored(failure) = &evaluation.policies[0].result else {
        panic!("{:?}", evaluation.policies);
    };
    assert_eq!(
        failure.to_string(),
        "spec.mutations[0].set.path: cannot set $.spec.containers[1].securityContext.runAsNonRoot: \
         $.spec.containers[1].securityContext is a string, not an object"
    );
    assert!(
        evaluation.warnings[0].starts_with("graft: policy non-root skipped: spec.mutations[0]")
    );
}

/// The same failure under Fail denies, and an error in a `when` names the element.
#[test]
fn a_failing_when_names_the_element() {
    let policies = pod_policy_yaml(
        "strict",
        "",
        "    - foreach: \"$.spec.containers[*]\"\n      when: \"element.ports.size() > 0\"\n      set: {path: \"@.x\", value: 1}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let Outcome::Denied { message, .. } = &evaluation.outcome else {
        panic!("{:?}", evaluation.outcome);
    };
    assert!(
        message.starts_with(
            "graft: policy strict: spec.mutations[0].when (element $.spec.containers[0]): "
        ),
        "{message}"
    );
}

/// A foreach reads its elements as the policy found the object; a mutation before it in
/// the same policy that adds an element is caught instead of shifting the writes.
#[test]
fn a_foreach_after_a_mutation_that_moved_its_elements_fails_clearly() {
    let policies = pod_policy_yaml(
        "moved",
        "",
        "    - merge: {path: $.spec, position: First, value: {containers: [{name: first, image: f}]}}\n    - foreach: \"$.spec.containers[*]\"\n      set: {path: \"@.imagePullPolicy\", value: Always}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let Outcome::Denied { message, .. } = &evaluation.outcome else {
        panic!("{:?}", evaluation.outcome);
    };
    assert!(
        message.starts_with("graft: policy moved: spec.mutations[1].foreach: an earlier mutation of this policy changed the elements $.spec.containers[*] selects (2 before, 3 now)"),
        "{message}"
    );
    // Replacing an element in its place (same count, another name) is caught too: the
    // foreach planned its writes from the element it replaced.
    let policies = pod_policy_yaml(
        "replaced",
        "",
        "    - set: {path: \"$.spec.containers[?@.name=='side']\", value: {name: proxy, image: p}}\n    - foreach: \"$.spec.containers[*]\"\n      set: {path: \"@.env\", value: [{name: CONTAINER, value: \"{{ element.name }}\"}]}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let Outcome::Denied { message, .. } = &evaluation.outcome else {
        panic!("{:?}", evaluation.outcome);
    };
    assert!(
        message.starts_with("graft: policy replaced: spec.mutations[1].foreach: an earlier mutation of this policy replaced an element $.spec.containers[*] selects (its \"name\" changed)"),
        "{message}"
    );
    // Changing a field of an element, not its key, leaves the writes where they belong.
    let policies = pod_policy_yaml(
        "touched",
        "",
        "    - set: {path: \"$.spec.containers[*].imagePullPolicy\", value: Always}\n    - foreach: \"$.spec.containers[*]\"\n      set: {path: \"@.env\", value: [{name: CONTAINER, value: \"{{ element.name }}\"}]}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let containers = &mutated(&evaluation)["spec"]["containers"];
    assert_eq!(containers[1]["env"][0]["value"], "side");
    assert_eq!(containers[1]["imagePullPolicy"], "Always");
    // The other order works: the foreach first, then the new container (which the
    // foreach does not see, so it comes with the field already).
    let policies = pod_policy_yaml(
        "ordered",
        "",
        "    - foreach: \"$.spec.containers[*]\"\n      set: {path: \"@.imagePullPolicy\", value: Always}\n    - merge: {path: $.spec, position: First, value: {containers: [{name: first, image: f, imagePullPolicy: Always}]}}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let containers = &mutated(&evaluation)["spec"]["containers"];
    assert_eq!(
        containers[0],
        json!({"name": "first", "image": "f", "imagePullPolicy": "Always"})
    );
    assert_eq!(containers[1]["imagePullPolicy"], "Always");
    assert_eq!(containers[2]["imagePullPolicy"], "Always");
}

#[test]
fn set_if_absent_writes_only_where_nothing_is_set() {
    let policies = pod_policy_yaml(
        "defaults",
        "",
        "    - set: {path: \"$.spec.containers[*].imagePullPolicy\", value: Always, ifAbsent: true}\n    - set: {path: \"$.metadata.labels.team\", value: platform, ifAbsent: true}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let object = mutated(&evaluation);
    assert_eq!(object["spec"]["containers"][0]["imagePullPolicy"], "Always");
    assert_eq!(
        object["spec"]["containers"][1]["imagePullPolicy"],
        "IfNotPresent"
    );
    assert_eq!(object["metadata"]["labels"]["team"], "platform");
    let mut labelled = pod();
    labelled["metadata"]["labels"] = json!({"team": "web"});
    let evaluation = evaluate(&policies, labelled);
    assert_eq!(mutated(&evaluation)["metadata"]["labels"]["team"], "web");
}

#[test]
fn foreach_merge_if_absent_adds_missing_fields_and_mounts() {
    let policies = pod_policy_yaml(
        "hardening",
        "",
        "    - foreach: \"$.spec.containers[*]\"\n      merge:\n        ifAbsent: true\n        value:\n          securityContext: {runAsNonRoot: true, allowPrivilegeEscalation: false}\n          volumeMounts: [{name: certs, mountPath: /etc/certs, readOnly: true}]\n",
    );
    let mut object = pod();
    object["spec"]["containers"][1]["securityContext"] = json!({"runAsNonRoot": false});
    object["spec"]["containers"][1]["volumeMounts"] =
        json!([{"name": "other", "mountPath": "/etc/certs"}]);
    let evaluation = evaluate(&policies, object);
    let containers = &mutated(&evaluation)["spec"]["containers"];
    assert_eq!(
        containers[0]["securityContext"],
        json!({"runAsNonRoot": true, "allowPrivilegeEscalation": false})
    );
    assert_eq!(
        containers[0]["volumeMounts"],
        json!([{"name": "certs", "mountPath": "/etc/certs", "readOnly": true}])
    );
    assert_eq!(
        containers[1]["securityContext"],
        json!({"runAsNonRoot": false, "allowPrivilegeEscalation": false})
    );
    // Something is mounted at the same path already: that mount stays as it is.
    assert_eq!(
        containers[1]["volumeMounts"],
        json!([{"name": "other", "mountPath": "/etc/certs"}])
    );
}

#[test]
fn append_adds_list_items_once() {
    let policies = pod_policy_yaml(
        "tolerate",
        "",
        "    - append: {path: $.spec.tolerations, value: [{key: gpu, operator: Exists, effect: NoSchedule}]}\n    - foreach: \"$.spec.containers[*]\"\n      append: {path: \"@.args\", value: [\"--log-format=json\"], position: First}\n",
    );
    let mut object = pod();
    object["spec"]["containers"][1]["args"] = json!(["--v=2"]);
    let evaluation = evaluate(&policies, object);
    let spec = &mutated(&evaluation)["spec"];
    assert_eq!(
        spec["tolerations"],
        json!([{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])
    );
    assert_eq!(spec["containers"][0]["args"], json!(["--log-format=json"]));
    assert_eq!(
        spec["containers"][1]["args"],
        json!(["--log-format=json", "--v=2"])
    );
}

#[test]
fn an_append_template_that_gives_no_list_fails_naming_the_field() {
    let policies = pod_policy_yaml(
        "scalar",
        "",
        "    - append: {path: $.spec.tolerations, value: \"{{ 'x' }}\"}\n",
    );
    let evaluation = evaluate(&policies, pod());
    assert_eq!(
        evaluation.outcome,
        Outcome::Denied {
            message: "graft: policy scalar: spec.mutations[0].append.value: append takes a list of the items to add, and the value is a string".into(),
            code: 403,
        }
    );
}

#[test]
fn audit_mode_reports_a_foreach_without_applying_it() {
    let policies = pod_policy_yaml(
        "trial",
        "  mode: Audit\n  failurePolicy: Ignore\n",
        "    - foreach: \"$.spec.containers[*]\"\n      set: {path: \"@.imagePullPolicy\", value: Always, ifAbsent: true}\n",
    );
    let evaluation = evaluate(&policies, pod());
    assert!(evaluation.patch.0.is_empty());
    let PolicyResult::Audited { patch } = &evaluation.policies[0].result else {
        panic!("{:?}", evaluation.policies);
    };
    assert_eq!(
        serde_json::to_value(patch).unwrap(),
        json!([{"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "Always"}])
    );
}

#[test]
fn names_match_the_name_or_else_the_generate_name() {
    let policies = "---\napiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata: {name: named}\nspec:\n  match: {resources: [pods], names: [\"web-*\", exact]}\n  exclude: {names: [web-canary]}\n  mutations:\n    - set: {path: $.metadata.labels.named, value: \"yes\"}\n";
    let named = |metadata: Value| {
        let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": []}});
        evaluate(policies, object).mutated().is_some()
    };
    assert!(named(json!({"name": "web-1"})));
    assert!(named(json!({"name": "exact"})));
    assert!(named(json!({"generateName": "web-"})));
    assert!(!named(json!({"generateName": "exact-"})));
    assert!(!named(json!({"name": "web-canary"})));
    assert!(!named(json!({"name": "api-1"})));
    assert!(!named(json!({})));
}
