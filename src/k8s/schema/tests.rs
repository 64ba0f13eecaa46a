use serde_json::json;

use super::*;

fn schema() -> &'static Schema {
    builtin().expect("the built-in table parses")
}

/// The type at `path` below a kind: field names, `[]` for a list's items, `{}` for a
/// map's values.
fn at(group: &str, version: &str, kind: &str, path: &[&str]) -> TypeRef<'static> {
    let mut ty = schema()
        .kind(group, version, kind)
        .unwrap_or_else(|| panic!("kind {group}/{version}/{kind}"));
    for step in path {
        ty = match (ty.shape(), *step) {
            (Shape::List(list), "[]") => list.element(),
            (Shape::Map(map), "{}") => map.element(),
            (Shape::Struct(s), field) => s
                .field(field)
                .unwrap_or_else(|| panic!("{} has no field {field}", s.name())),
            (shape, step) => panic!("cannot step {step} into {shape:?}"),
        };
    }
    ty
}

fn pod(path: &[&str]) -> TypeRef<'static> {
    at("", "v1", "Pod", path)
}

fn container(path: &[&str]) -> TypeRef<'static> {
    let mut full = vec!["spec", "containers", "[]"];
    full.extend_from_slice(path);
    pod(&full)
}

fn struct_of(ty: TypeRef<'static>) -> StructType<'static> {
    match ty.shape() {
        Shape::Struct(s) => s,
        other => panic!("not a struct: {other:?}"),
    }
}

fn list_of(ty: TypeRef<'static>) -> ListType<'static> {
    match ty.shape() {
        Shape::List(list) => list,
        other => panic!("not a list: {other:?}"),
    }
}

fn map_of(ty: TypeRef<'static>) -> MapType<'static> {
    match ty.shape() {
        Shape::Map(map) => map,
        other => panic!("not a map: {other:?}"),
    }
}

fn scalar_of(ty: TypeRef<'static>) -> Scalar {
    match ty.shape() {
        Shape::Scalar(scalar) => scalar,
        other => panic!("not a scalar: {other:?}"),
    }
}

/// The keys of a map list and their defaults, as JSON.
fn keys(ty: TypeRef<'static>) -> Vec<(String, Option<serde_json::Value>)> {
    match list_of(ty).kind() {
        ListKind::Map(keys) => keys
            .iter()
            .map(|key| (key.name().to_string(), key.default().map(Tree::to_value)))
            .collect(),
        other => panic!("not a map list: {other:?}"),
    }
}

fn is_atomic_list(ty: TypeRef<'static>) -> bool {
    matches!(list_of(ty).kind(), ListKind::Atomic)
}

#[test]
fn the_embedded_table_parses_whole() {
    let schema = schema();
    assert_eq!(schema.kind_count(), 171);
    assert_eq!(schema.struct_count(), 672);
    assert_eq!(schema.source(), "Kubernetes v1.36.2, api/openapi-spec/v3");
    assert_eq!(struct_of(pod(&[])).name(), "core.v1.Pod");
    assert_eq!(
        struct_of(at("apps", "v1", "Deployment", &[])).name(),
        "apps.v1.Deployment"
    );
    assert!(
        schema.kind("", "v1", "PodList").is_none(),
        "list kinds are left out"
    );
    assert!(
        schema.kind("", "v1", "APIGroupList").is_some(),
        "no items: a kind"
    );
    assert!(schema.kind("apps", "v1", "DeleteOptions").is_some());
    assert!(schema.kind("autoscaling", "v1", "Scale").is_some());
    assert!(schema.kind("apps", "v1", "Pod").is_none());
}

#[test]
fn pod_spec_lists_are_keyed_as_the_apiserver_keys_them() {
    let name = || vec![("name".to_string(), Some(json!("")))];
    assert_eq!(keys(pod(&["spec", "containers"])), name());
    assert_eq!(keys(pod(&["spec", "initContainers"])), name());
    assert_eq!(keys(pod(&["spec", "ephemeralContainers"])), name());
    assert_eq!(
        struct_of(list_of(pod(&["spec", "containers"])).element()).name(),
        "core.v1.Container"
    );
    assert_eq!(
        keys(container(&["ports"])),
        vec![
            ("containerPort".to_string(), Some(json!(0))),
            ("protocol".to_string(), Some(json!("TCP"))),
        ]
    );
    assert!(is_atomic_list(pod(&["spec", "tolerations"])));
    assert_eq!(
        keys(pod(&["spec", "topologySpreadConstraints"])),
        vec![
            ("topologyKey".to_string(), Some(json!(""))),
            ("whenUnsatisfiable".to_string(), Some(json!(""))),
        ]
    );
    assert_eq!(keys(pod(&["spec", "imagePullSecrets"])), name());
    assert!(struct_of(list_of(pod(&["spec", "imagePullSecrets"])).element()).is_atomic());
    for field in ["volumes", "schedulingGates", "resourceClaims"] {
        assert_eq!(keys(pod(&["spec", field])), name(), "{field}");
    }
    assert_eq!(
        keys(pod(&["status", "conditions"])),
        vec![("type".to_string(), Some(json!("")))]
    );
    assert_eq!(
        keys(pod(&["spec", "hostAliases"])),
        vec![("ip".to_string(), Some(json!("")))]
    );
    assert!(is_atomic_list(pod(&["spec", "readinessGates"])));
    for field in ["nameservers", "options", "searches"] {
        assert!(
            is_atomic_list(pod(&["spec", "dnsConfig", field])),
            "{field}"
        );
    }
    assert!(
        is_atomic_list(pod(&["status", "hostIPs"])),
        "atomic despite merge"
    );
}

#[test]
fn container_fields() {
    assert_eq!(
        keys(container(&["env"])),
        vec![("name".to_string(), Some(json!("")))]
    );
    assert!(is_atomic_list(container(&["envFrom"])));
    assert_eq!(
        keys(container(&["volumeMounts"])),
        vec![("mountPath".to_string(), Some(json!("")))]
    );
    assert_eq!(
        keys(container(&["volumeDevices"])),
        vec![("devicePath".to_string(), Some(json!("")))]
    );
    for field in ["args", "command", "resizePolicy"] {
        assert!(is_atomic_list(container(&[field])), "{field}");
    }
    assert_eq!(
        scalar_of(list_of(container(&["args"])).element()),
        Scalar::String
    );
    let value_from = struct_of(container(&["env", "[]", "valueFrom"]));
    assert_eq!(value_from.name(), "core.v1.EnvVarSource");
    assert!(!value_from.is_atomic());
    for field in [
        "configMapKeyRef",
        "secretKeyRef",
        "fieldRef",
        "resourceFieldRef",
        "fileKeyRef",
    ] {
        let reference = value_from.field(field).expect(field);
        assert!(struct_of(reference).is_atomic(), "{field}");
    }
    let resources = struct_of(container(&["resources"]));
    assert_eq!(resources.name(), "core.v1.ResourceRequirements");
    for field in ["limits", "requests"] {
        let map = map_of(resources.field(field).expect(field));
        assert!(!map.is_atomic());
        assert_eq!(scalar_of(map.element()), Scalar::Quantity);
    }
    assert_eq!(
        keys(resources.field("claims").expect("claims")),
        vec![("name".to_string(), Some(json!("")))]
    );
}

#[test]
fn atomic_maps_and_structs() {
    for (group, version, kind, path) in [
        ("", "v1", "Pod", &["spec", "nodeSelector"][..]),
        ("", "v1", "Service", &["spec", "selector"]),
        ("", "v1", "ReplicationController", &["spec", "selector"]),
        (
            "node.k8s.io",
            "v1",
            "RuntimeClass",
            &["scheduling", "nodeSelector"],
        ),
    ] {
        let map = map_of(at(group, version, kind, path));
        assert!(map.is_atomic(), "{kind} {path:?}");
        assert_eq!(scalar_of(map.element()), Scalar::String);
    }
    let selector = struct_of(at("apps", "v1", "Deployment", &["spec", "selector"]));
    assert_eq!(selector.name(), "meta.v1.LabelSelector");
    assert!(selector.is_atomic());
    assert!(!map_of(selector.field("matchLabels").expect("matchLabels")).is_atomic());
    assert!(is_atomic_list(
        selector
            .field("matchExpressions")
            .expect("matchExpressions")
    ));
    let required = struct_of(pod(&[
        "spec",
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
    ]));
    assert_eq!(required.name(), "core.v1.NodeSelector");
    assert!(required.is_atomic());
    let term = list_of(required.field("nodeSelectorTerms").expect("terms")).element();
    assert!(struct_of(term).is_atomic());
}

#[test]
fn object_meta() {
    for field in ["labels", "annotations"] {
        let map = map_of(pod(&["metadata", field]));
        assert!(!map.is_atomic(), "{field}");
        assert_eq!(scalar_of(map.element()), Scalar::String);
    }
    let finalizers = list_of(pod(&["metadata", "finalizers"]));
    assert!(matches!(finalizers.kind(), ListKind::Set));
    assert_eq!(scalar_of(finalizers.element()), Scalar::String);
    assert_eq!(
        keys(pod(&["metadata", "ownerReferences"])),
        vec![("uid".to_string(), Some(json!("")))]
    );
    assert!(struct_of(pod(&["metadata", "ownerReferences", "[]"])).is_atomic());
    assert!(is_atomic_list(pod(&["metadata", "managedFields"])));
    let fields_v1 = struct_of(pod(&["metadata", "managedFields", "[]", "fieldsV1"]));
    assert_eq!(fields_v1.name(), "meta.v1.FieldsV1");
    assert!(fields_v1.preserves_unknown());
    assert_eq!(fields_v1.unknown_field().map(scalar_of), Some(Scalar::Any));
    assert_eq!(
        scalar_of(pod(&["metadata", "creationTimestamp"])),
        Scalar::DateTime
    );
    let meta = struct_of(pod(&["metadata"]));
    assert!(!meta.preserves_unknown());
    assert_eq!(meta.unknown_field(), None);
}

#[test]
fn scalars_and_free_form_values() {
    assert_eq!(
        scalar_of(at(
            "",
            "v1",
            "Service",
            &["spec", "ports", "[]", "targetPort"]
        )),
        Scalar::IntOrString
    );
    assert_eq!(
        keys(at("", "v1", "Service", &["spec", "ports"])),
        vec![
            ("port".to_string(), Some(json!(0))),
            ("protocol".to_string(), Some(json!("TCP"))),
        ]
    );
    assert_eq!(
        scalar_of(at("apps", "v1", "Deployment", &["spec", "replicas"])),
        Scalar::Int32
    );
    assert_eq!(
        scalar_of(at("apps", "v1", "ControllerRevision", &["data"])),
        Scalar::AnyAtomic
    );
    for field in ["allocatable", "capacity"] {
        let map = map_of(at("", "v1", "Node", &["status", field]));
        assert!(!map.is_atomic());
        assert_eq!(scalar_of(map.element()), Scalar::Quantity);
    }
    assert!(is_atomic_list(at(
        "batch",
        "v1",
        "Job",
        &["status", "conditions"]
    )));
    assert_eq!(scalar_of(container(&["stdin"])), Scalar::Boolean);
    assert_eq!(
        scalar_of(pod(&["spec", "activeDeadlineSeconds"])),
        Scalar::Integer
    );
}

#[test]
fn a_field_overrides_its_structs_atomicity() {
    let claim = struct_of(at("", "v1", "PersistentVolume", &["spec", "claimRef"]));
    assert_eq!(claim.name(), "core.v1.ObjectReference");
    assert!(!claim.is_atomic(), "claimRef is granular");
    let involved = struct_of(at("", "v1", "Event", &["involvedObject"]));
    assert_eq!(involved.name(), "core.v1.ObjectReference");
    assert!(involved.is_atomic(), "ObjectReference itself is atomic");
}

#[test]
fn structs_list_fields_and_required() {
    let container = struct_of(container(&[]));
    assert_eq!(container.required().collect::<Vec<_>>(), ["name"]);
    let names: Vec<&str> = container.fields().map(|(name, _)| name).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert!(names.contains(&"image"));
    assert!(container.field("imagex").is_none());
    assert!(!container.is_embedded());
}

#[test]
fn handles_compare_by_type() {
    assert_eq!(pod(&["spec"]), pod(&["spec"]));
    assert_ne!(pod(&["spec"]), pod(&["status"]));
    assert_eq!(
        container(&["image"]),
        schema().scalar(Scalar::String),
        "one string type"
    );
}

#[test]
fn tables_that_do_not_read() {
    let table = |kinds: serde_json::Value, types: serde_json::Value| {
        json!({"format": 1, "source": "test", "kinds": kinds, "types": types}).to_string()
    };
    let error = |text: String| Schema::parse(&text).expect_err("refused").to_string();
    assert_eq!(
        error(json!({"format": 2, "source": "", "kinds": {}, "types": {}}).to_string()),
        "the schema table has format 2; graft reads format 1"
    );
    assert_eq!(
        error(table(json!({"v1/A": "A"}), json!({}))),
        "v1/A: refers to type A, which the table does not define"
    );
    assert_eq!(
        error(table(json!({}), json!({"A": {"fields": {"b": "B"}}}))),
        "A.b: refers to type B, which the table does not define"
    );
    assert_eq!(
        error(table(
            json!({}),
            json!({"A": {"fields": {"b": {"list": "A", "listType": "map"}}}})
        )),
        "A.b: a map list without keys"
    );
    assert_eq!(
        error(table(
            json!({}),
            json!({"A": {"fields": {"b": {"list": "A", "listType": "map", "keys": ["c"]}}}})
        )),
        "A.b: key c is not a field of the items"
    );
    assert_eq!(
        error(table(
            json!({}),
            json!({"A": {"fields": {"b": {"map": "string", "mapType": "granular", "x": 1}}}})
        )),
        "A.b: unknown member \"x\""
    );
    assert_eq!(
        error(table(
            json!({}),
            json!({"A": {"fields": {}, "mapType": "loose"}})
        )),
        "A: unknown mapType \"loose\""
    );
    assert!(error("[]".to_string()).starts_with("the schema table is not a table of format 1"));
    let ok = Schema::parse(&table(
        json!({"g/v1/A": "A"}),
        json!({"A": {"fields": {"b": {"list": "A", "listType": "map", "keys": ["c"],
            "keyDefaults": {"c": "x"}}, "c": "string"}}}),
    ))
    .expect("a table of one type");
    let a = ok.kind("g", "v1", "A").expect("kind");
    let Shape::Struct(a) = a.shape() else {
        panic!("struct")
    };
    assert_eq!(
        format!("{:?}", a.field("b").expect("b")),
        "list of A (Map([c (default \"x\")]))"
    );
}
