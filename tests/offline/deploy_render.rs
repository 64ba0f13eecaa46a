//! Renders the kustomize trees exactly as `kubectl apply -k` would and checks every object
//! that matters for a safe install. Needs `kubectl` on PATH: without it these tests fail
//! (they never skip), because a manifest nobody rendered is a manifest nobody tested.

use std::process::Command;

use crate::support::fs::copy_tree;
use crate::support::kustomize::{find, render as kustomize};
use crate::support::repo;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::Value;

const POLICY_FILES: [&str; 4] = [
    "multus-networks.yaml",
    "sidecar-injection.yaml",
    "statefulset-node-selector.yaml",
    "node-overcommit.yaml",
];

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn contains_key(value: &Value, key: &str) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(k, v)| k == key || contains_key(v, key)),
        Value::Array(items) => items.iter().any(|v| contains_key(v, key)),
        _ => false,
    }
}

/// The checks every install path must pass, whatever manages the certificate: graft
/// itself, graft's example policies and the webhook configuration generated from them.
fn check_install(objects: &[Value]) {
    check_graft(objects);
    check_configmap(find(objects, "ConfigMap", "graft-policies"));
    check_webhooks(find(objects, "MutatingWebhookConfiguration", "graft"));
}

/// What deploy/install holds, and so every install: graft without its policies.
fn check_graft(objects: &[Value]) {
    for object in objects {
        assert!(
            !contains_key(object, "subPath") && !contains_key(object, "subPathExpr"),
            "subPath mounts never update; found one in {} {}",
            object["kind"],
            object["metadata"]["name"]
        );
        let cluster_scoped = [
            "Namespace",
            "MutatingWebhookConfiguration",
            "ClusterRole",
            "ClusterRoleBinding",
        ];
        if !cluster_scoped.contains(&object["kind"].as_str().unwrap_or_default()) {
            assert_eq!(object["metadata"]["namespace"], "graft", "{object}");
        }
    }

    find(objects, "Namespace", "graft");
    let account = find(objects, "ServiceAccount", "graft");
    assert_eq!(account["automountServiceAccountToken"], false);

    check_rbac(objects);
    check_deployment(find(objects, "Deployment", "graft"));
    check_service(find(objects, "Service", "graft"));

    let pdb = find(objects, "PodDisruptionBudget", "graft");
    assert_eq!(pdb["apiVersion"], "policy/v1");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"],
        "graft"
    );

    let hpa = find(objects, "HorizontalPodAutoscaler", "graft");
    assert_eq!(hpa["apiVersion"], "autoscaling/v2");
    assert!(hpa["spec"]["minReplicas"].as_u64().unwrap_or(0) >= 2);
    assert_eq!(hpa["spec"]["scaleTargetRef"]["kind"], "Deployment");
    assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], "graft");
    let metric = &hpa["spec"]["metrics"][0];
    assert_eq!(metric["resource"]["name"], "cpu");
}

/// graft may get, list and watch Namespaces, and do nothing else: one ClusterRole with
/// exactly that rule, bound to graft's ServiceAccount and to nobody else, and no other
/// role or binding.
fn check_rbac(objects: &[Value]) {
    let rbac: Vec<&Value> = objects
        .iter()
        .filter(|o| {
            o["apiVersion"]
                .as_str()
                .unwrap_or_default()
                .starts_with("rbac.authorization.k8s.io/")
        })
        .collect();
    let kinds: Vec<&str> = rbac.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(kinds, ["ClusterRole", "ClusterRoleBinding"], "RBAC objects");
    let role = find(objects, "ClusterRole", "graft-namespace-reader");
    assert_eq!(
        role["rules"],
        serde_json::json!([{
            "apiGroups": [""],
            "resources": ["namespaces"],
            "verbs": ["get", "list", "watch"],
        }]),
        "graft reads Namespaces and nothing else"
    );
    assert!(
        role["aggregationRule"].is_null(),
        "no aggregated permissions"
    );
    let binding = find(objects, "ClusterRoleBinding", "graft-namespace-reader");
    assert_eq!(
        binding["roleRef"],
        serde_json::json!({
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "graft-namespace-reader",
        })
    );
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": "graft", "namespace": "graft"}])
    );
}

fn check_deployment(deployment: &Value) {
    let spec = &deployment["spec"];
    assert!(spec["replicas"].as_u64().unwrap_or(0) >= 2, "replicas >= 2");
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "graft");
    assert_eq!(pod["automountServiceAccountToken"], false);
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap_or(0);
    assert!(
        grace > 15,
        "terminationGracePeriodSeconds {grace} must exceed serve's 15 s grace"
    );

    // Spread by hostname, by a hard topology spread or a pod anti-affinity.
    let spread = pod["topologySpreadConstraints"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c["topologyKey"] == "kubernetes.io/hostname"
                && c["whenUnsatisfiable"] == "DoNotSchedule"
        });
    let anti_affinity = contains_key(&pod["affinity"]["podAntiAffinity"], "topologyKey");
    assert!(spread || anti_affinity, "replicas must spread across nodes");

    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    let container = &containers[0];
    assert_eq!(
        strings(&container["args"]),
        [
            "serve",
            "--policies",
            "/etc/graft/policies",
            "--tls-cert",
            "/etc/graft/tls/tls.crt",
            "--tls-key",
            "/etc/graft/tls/tls.key",
            "--log-format",
            "json"
        ]
    );

    // Probes on the plain-HTTP metrics port.
    let port_of = |name: &str| {
        container["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == name)
            .map(|p| p["containerPort"].clone())
    };
    assert_eq!(port_of("https"), Some(Value::from(8443)));
    assert_eq!(port_of("metrics"), Some(Value::from(8080)));
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert!(
            get["port"] == "metrics" || get["port"] == 8080,
            "{probe} on the metrics port"
        );
    }

    for resource in ["cpu", "memory"] {
        for bound in ["requests", "limits"] {
            assert!(
                container["resources"][bound][resource].is_string(),
                "resources.{bound}.{resource}"
            );
        }
    }

    // The container's security context, falling back to the pod's where Kubernetes does.
    let security = &container["securityContext"];
    let pod_security = &pod["securityContext"];
    let effective = |field: &str| {
        if security[field].is_null() {
            pod_security[field].clone()
        } else {
            security[field].clone()
        }
    };
    assert_eq!(effective("runAsNonRoot"), true);
    assert_eq!(effective("runAsUser"), 65532);
    assert_eq!(effective("seccompProfile")["type"], "RuntimeDefault");
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(strings(&security["capabilities"]["drop"]), ["ALL"]);

    // The ConfigMap and the Secret are mounted as whole directories.
    let volume = |source: &str, key: &str, name: &str| -> String {
        pod["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v[source][key] == name)
            .and_then(|v| v["name"].as_str())
            .unwrap_or_else(|| panic!("no {source} volume for {name}"))
            .to_string()
    };
    let mount_path = |volume: &str| {
        container["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["name"] == volume)
            .map(|m| m["mountPath"].clone())
    };
    let policies = volume("configMap", "name", "graft-policies");
    let tls = volume("secret", "secretName", "graft-tls");
    assert_eq!(
        mount_path(&policies),
        Some(Value::from("/etc/graft/policies"))
    );
    assert_eq!(mount_path(&tls), Some(Value::from("/etc/graft/tls")));

    // The one API credential: a projected, kubelet-rotated token where the in-cluster
    // configuration reads it, mounted read-only (automount stays off).
    let token_volumes: Vec<&Value> = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| contains_key(&v["projected"], "serviceAccountToken"))
        .collect();
    assert_eq!(token_volumes.len(), 1, "exactly one token volume");
    let token_volume = token_volumes[0];
    let sources = token_volume["projected"]["sources"]
        .as_array()
        .expect("projected sources");
    let expiration = sources
        .iter()
        .find_map(|s| s["serviceAccountToken"]["expirationSeconds"].as_u64())
        .unwrap_or(0);
    assert!(
        (600..=86_400).contains(&expiration),
        "a short-lived token, not {expiration} s"
    );
    assert!(
        sources
            .iter()
            .any(|s| s["configMap"]["name"] == "kube-root-ca.crt"),
        "the cluster CA is mounted beside the token"
    );
    let token_name = token_volume["name"].as_str().expect("volume name");
    let token_mount = container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["name"] == token_name)
        .expect("the token volume is mounted");
    assert_eq!(
        token_mount["mountPath"],
        "/var/run/secrets/kubernetes.io/serviceaccount"
    );
    assert_eq!(token_mount["readOnly"], true);

    // The private key is not world-readable, yet readable by graft through its group.
    let tls_volume = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == tls.as_str())
        .expect("tls volume");
    let mode = tls_volume["secret"]["defaultMode"]
        .as_u64()
        .unwrap_or(0o644);
    assert_eq!(
        mode & 0o007,
        0,
        "Secret defaultMode {mode:o} is world-readable"
    );
    assert_eq!(
        pod_security["fsGroup"], 65532,
        "fsGroup lets user 65532 read the key"
    );
}

fn check_configmap(configmap: &Value) {
    // The exact name, no `-<hash>` suffix: edits must update the mounted files in place.
    assert_eq!(configmap["metadata"]["name"], "graft-policies");
    let data = configmap["data"].as_object().expect("ConfigMap data");
    let mut keys: Vec<&str> = data.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut expected = POLICY_FILES.to_vec();
    expected.sort_unstable();
    assert_eq!(keys, expected);
    // What kubelet would mount is a valid policy set: lint it as graft serve would load it.
    let mounted = tempfile::tempdir().expect("tempdir");
    for (key, text) in data {
        std::fs::write(
            mounted.path().join(key),
            text.as_str().expect("string data"),
        )
        .expect("write");
    }
    let lint = Command::new(env!("CARGO_BIN_EXE_graft"))
        .args(["lint", "--strict"])
        .arg(mounted.path())
        .output()
        .expect("graft lint");
    assert!(
        lint.status.success(),
        "graft lint on the rendered ConfigMap:\n{}",
        String::from_utf8_lossy(&lint.stdout)
    );
    for file in POLICY_FILES {
        let on_disk = std::fs::read_to_string(repo().join("policies").join(file))
            .unwrap_or_else(|e| panic!("policies/{file}: {e}"));
        assert_eq!(
            data[file],
            on_disk.as_str(),
            "ConfigMap key {file} is the file itself"
        );
    }
}

fn check_service(service: &Value) {
    let ports = service["spec"]["ports"].as_array().expect("Service ports");
    let port = |name: &str| {
        ports
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("Service port {name}"))
    };
    assert_eq!(port("https")["port"], 443);
    assert!(port("https")["targetPort"] == "https" || port("https")["targetPort"] == 8443);
    assert_eq!(port("metrics")["port"], 8080);
}

fn check_webhooks(config: &Value) {
    let webhooks = config["webhooks"].as_array().expect("webhooks");
    for webhook in webhooks {
        let name = &webhook["name"];
        assert_eq!(webhook["sideEffects"], "None", "{name}");
        assert_eq!(
            strings(&webhook["admissionReviewVersions"]),
            ["v1"],
            "{name}"
        );
        assert_eq!(webhook["reinvocationPolicy"], "IfNeeded", "{name}");
        assert_eq!(webhook["matchPolicy"], "Equivalent", "{name}");
        assert_eq!(webhook["failurePolicy"], "Ignore", "{name}");
        let timeout = webhook["timeoutSeconds"].as_u64().unwrap_or(0);
        assert!(
            (1..=10).contains(&timeout),
            "{name}: timeoutSeconds {timeout}"
        );
        let service = &webhook["clientConfig"]["service"];
        assert_eq!(service["name"], "graft", "{name}");
        assert_eq!(service["namespace"], "graft", "{name}");
        assert_eq!(service["path"], "/mutate", "{name}");
        assert_eq!(service["port"], 443, "{name}");
        for rule in webhook["rules"].as_array().expect("rules") {
            assert_eq!(rule["scope"], "*", "{name}");
        }
    }

    let webhook = |name: &str| {
        webhooks
            .iter()
            .find(|w| w["name"] == name)
            .unwrap_or_else(|| panic!("no webhook {name}"))
    };
    let excluded = |webhook: &Value| -> Vec<String> {
        webhook["namespaceSelector"]["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["key"] == "kubernetes.io/metadata.name" && e["operator"] == "NotIn")
            .flat_map(|e| strings(&e["values"]).into_iter().map(str::to_string))
            .collect()
    };
    let covers = |webhook: &Value, resource: &str, operation: &str| {
        webhook["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|rule| {
                strings(&rule["resources"]).contains(&resource)
                    && strings(&rule["operations"])
                        .iter()
                        .any(|op| *op == operation || *op == "*")
            })
    };

    let pods = webhook("pods.graft.dev");
    assert!(
        covers(pods, "pods", "CREATE"),
        "pods webhook covers pods CREATE"
    );
    let pods_excluded = excluded(pods);
    assert!(
        pods_excluded.iter().any(|n| n == "graft"),
        "{pods_excluded:?}"
    );
    assert!(
        pods_excluded.iter().any(|n| n == "kube-system"),
        "{pods_excluded:?}"
    );

    let status = webhook("nodes-status.graft.dev");
    assert!(covers(status, "nodes/status", "UPDATE"));
    assert!(status["timeoutSeconds"].as_u64().unwrap_or(99) <= 5);
    assert!(excluded(status).iter().any(|n| n == "graft"));
}

/// The base a team's repository installs: graft alone. The policies ConfigMap and the
/// webhook configuration are the team's, generated from its own policies, and the
/// certificate is its choice.
#[test]
fn install_renders_graft_without_policies_webhooks_or_certificates() {
    let objects = kustomize(&repo().join("deploy/install"));
    check_graft(&objects);
    let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    for kind in [
        "ConfigMap",
        "MutatingWebhookConfiguration",
        "Secret",
        "Certificate",
        "Issuer",
    ] {
        assert!(!kinds.contains(&kind), "deploy/install holds a {kind}");
    }
}

#[test]
fn examples_render_and_are_safe() {
    check_install(&kustomize(&repo().join("deploy/examples")));
}

#[test]
fn cert_manager_overlay_renders_and_chains_issuers() {
    let objects = kustomize(&repo().join("deploy/cert-manager"));
    check_install(&objects);

    let config = find(&objects, "MutatingWebhookConfiguration", "graft");
    assert_eq!(
        config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "graft/graft"
    );

    // Self-signed Issuer -> CA Certificate -> CA Issuer -> serving Certificate.
    let serving = find(&objects, "Certificate", "graft");
    assert_eq!(serving["spec"]["secretName"], "graft-tls");
    assert_eq!(
        strings(&serving["spec"]["dnsNames"]),
        [
            "graft",
            "graft.graft",
            "graft.graft.svc",
            "graft.graft.svc.cluster.local"
        ]
    );
    let ca_issuer_name = serving["spec"]["issuerRef"]["name"]
        .as_str()
        .expect("issuerRef");
    let ca_issuer = find(&objects, "Issuer", ca_issuer_name);
    let ca_secret = &ca_issuer["spec"]["ca"]["secretName"];
    let ca = objects
        .iter()
        .find(|o| o["kind"] == "Certificate" && o["spec"]["secretName"] == *ca_secret)
        .expect("a Certificate writes the CA Issuer's secret");
    assert_eq!(ca["spec"]["isCA"], true);
    let root_name = ca["spec"]["issuerRef"]["name"].as_str().expect("issuerRef");
    let root = find(&objects, "Issuer", root_name);
    assert!(root["spec"]["selfSigned"].is_object());
}

/// The documented no-dependency flow, in a scratch copy of the repository so no key ever
/// lands in the working tree (the caBundle comes from the Secret, for every webhook):
///   graft certs --out deploy/self-signed/certs
///   kubectl apply -k deploy/self-signed        (rendered here with kubectl kustomize)
#[test]
fn self_signed_overlay_renders_after_graft_certs() {
    let scratch = tempfile::tempdir().expect("tempdir");
    copy_tree(&repo().join("deploy"), &scratch.path().join("deploy"));
    copy_tree(&repo().join("policies"), &scratch.path().join("policies"));
    // A stale copy of keys from a developer's own run must not mask a failure.
    let _ = std::fs::remove_dir_all(scratch.path().join("deploy/self-signed/certs"));

    let status = Command::new(env!("CARGO_BIN_EXE_graft"))
        .current_dir(scratch.path())
        .args(["certs", "--out", "deploy/self-signed/certs"])
        .status()
        .expect("run graft certs");
    assert!(status.success());

    let objects = kustomize(&scratch.path().join("deploy/self-signed"));
    check_install(&objects);

    let certs = scratch.path().join("deploy/self-signed/certs");
    let read = |name: &str| std::fs::read(certs.join(name)).expect(name);
    let secret = find(&objects, "Secret", "graft-tls");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    for key in ["ca.crt", "tls.crt", "tls.key"] {
        assert_eq!(
            secret["data"][key],
            BASE64.encode(read(key)),
            "Secret key {key}"
        );
    }
    let ca_bundle = BASE64.encode(read("ca.crt"));
    let config = find(&objects, "MutatingWebhookConfiguration", "graft");
    let webhooks = config["webhooks"].as_array().expect("webhooks");
    assert_eq!(webhooks.len(), 2, "the caBundle adds no webhook of its own");
    for webhook in webhooks {
        assert_eq!(
            webhook["clientConfig"]["caBundle"],
            ca_bundle.as_str(),
            "{}",
            webhook["name"]
        );
    }
}

#[test]
fn generated_keys_are_git_ignored() {
    let ignore = std::fs::read_to_string(repo().join("deploy/self-signed/.gitignore"))
        .expect("deploy/self-signed/.gitignore");
    assert!(ignore.lines().any(|line| line.trim() == "/certs*/"));
}

/// The monitoring objects land in graft's namespace and point at what the install serves:
/// the ServiceMonitor selects the Service and scrapes its port named `metrics`, the rules
/// are the PrometheusRule file, and the dashboard ConfigMap holds dashboard.json for
/// Grafana's sidecar.
#[test]
fn monitoring_renders_and_scrapes_the_metrics_port() {
    let install = kustomize(&repo().join("deploy/install"));
    let service = find(&install, "Service", "graft");
    let objects = kustomize(&repo().join("deploy/monitoring"));
    assert_eq!(objects.len(), 3, "{objects:?}");
    for object in &objects {
        assert_eq!(object["metadata"]["namespace"], "graft", "{object}");
    }

    let monitor = find(&objects, "ServiceMonitor", "graft");
    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels");
    for (key, value) in selector {
        assert_eq!(&service["metadata"]["labels"][key], value, "{key}");
    }
    let ports: Vec<&str> = service["spec"]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .filter_map(|port| port["name"].as_str())
        .collect();
    for endpoint in monitor["spec"]["endpoints"].as_array().expect("endpoints") {
        let port = endpoint["port"].as_str().expect("a named port");
        assert!(
            ports.contains(&port),
            "{port} is not a Service port: {ports:?}"
        );
        assert_eq!(endpoint["path"], "/metrics");
    }

    let rule = find(&objects, "PrometheusRule", "graft");
    let source: Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo().join("deploy/monitoring/prometheusrule.yaml"))
            .expect("rules"),
    )
    .expect("rules are YAML");
    assert_eq!(rule["spec"], source["spec"]);

    let dashboard = find(&objects, "ConfigMap", "graft-dashboard");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let json = std::fs::read_to_string(repo().join("deploy/monitoring/dashboard.json"))
        .expect("dashboard");
    assert_eq!(dashboard["data"]["graft.json"], json.as_str());
}

/// The opt-in events component, added to the install base as the comment in its
/// kustomization shows: graft gets `--events` and may create and patch events.k8s.io
/// Events, nothing more; the base alone has neither.
#[test]
fn events_component_adds_the_flag_and_only_event_writes() {
    let scratch = tempfile::tempdir().expect("tempdir");
    copy_tree(&repo().join("deploy"), &scratch.path().join("deploy"));
    copy_tree(&repo().join("policies"), &scratch.path().join("policies"));
    let with_events = scratch.path().join("with-events");
    std::fs::create_dir(&with_events).expect("create dir");
    std::fs::write(
        with_events.join("kustomization.yaml"),
        "resources: [../deploy/install]\ncomponents: [../deploy/components/events]\n",
    )
    .expect("write kustomization");
    let objects = kustomize(&with_events);
    let args = |objects: &[Value]| -> Vec<String> {
        strings(&find(objects, "Deployment", "graft")["spec"]["template"]["spec"]["containers"][0]["args"])
            .into_iter()
            .map(str::to_string)
            .collect()
    };
    assert!(
        args(&objects).iter().any(|arg| arg == "--events"),
        "{:?}",
        args(&objects)
    );
    let base = kustomize(&repo().join("deploy/install"));
    assert!(!args(&base).iter().any(|arg| arg == "--events"));
    assert!(
        !base
            .iter()
            .any(|o| o["metadata"]["name"] == "graft-events-recorder"),
        "the base grants no event writes"
    );

    let role = find(&objects, "ClusterRole", "graft-events-recorder");
    assert_eq!(
        role["rules"],
        serde_json::json!([{
            "apiGroups": ["events.k8s.io"],
            "resources": ["events"],
            "verbs": ["create", "patch"],
        }]),
        "graft writes Events and nothing else"
    );
    let binding = find(&objects, "ClusterRoleBinding", "graft-events-recorder");
    assert_eq!(binding["roleRef"]["name"], "graft-events-recorder");
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": "graft", "namespace": "graft"}])
    );
    // The namespace reader is untouched.
    let reader = find(&objects, "ClusterRole", "graft-namespace-reader");
    assert_eq!(
        reader["rules"][0]["verbs"],
        serde_json::json!(["get", "list", "watch"])
    );
}

/// The opt-in network-policy component, added with the patch its kustomization shows:
/// graft's pods admit the webhook port from the control plane's addresses only and the
/// metrics port from the namespace `monitoring` only, by the Deployment's own port names
/// and pod labels; no overlay in deploy/ turns it on.
#[test]
fn network_policy_component_admits_the_apiserver_and_monitoring_only() {
    use crate::support::kustomize::{CONTROL_PLANE_CIDR, network_policy_overlay};
    let scratch = tempfile::tempdir().expect("tempdir");
    copy_tree(&repo().join("deploy"), &scratch.path().join("deploy"));
    let overlay = scratch.path().join("with-network-policy");
    std::fs::create_dir(&overlay).expect("create dir");
    std::fs::write(
        overlay.join("kustomization.yaml"),
        network_policy_overlay("../deploy/install"),
    )
    .expect("write kustomization");
    let objects = kustomize(&overlay);
    let policy = find(&objects, "NetworkPolicy", "graft");
    assert_eq!(policy["metadata"]["namespace"], "graft");
    let deployment = find(&objects, "Deployment", "graft");
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"], deployment["spec"]["selector"]["matchLabels"],
        "the policy selects graft's pods"
    );
    assert_eq!(
        policy["spec"]["policyTypes"],
        serde_json::json!(["Ingress"])
    );
    let ports: Vec<&str> = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .filter_map(|port| port["name"].as_str())
        .collect();
    let ingress = policy["spec"]["ingress"].as_array().expect("ingress rules");
    assert_eq!(ingress.len(), 2, "{ingress:?}");
    for (rule, port) in ingress.iter().zip(["https", "metrics"]) {
        assert_eq!(
            rule["ports"],
            serde_json::json!([{"port": port, "protocol": "TCP"}])
        );
        assert!(ports.contains(&port), "the Deployment has no port {port}");
    }
    assert_eq!(
        ingress[0]["from"],
        serde_json::json!([{"ipBlock": {"cidr": CONTROL_PLANE_CIDR}}]),
        "the overlay's patch replaces the placeholder"
    );
    assert_eq!(
        ingress[1]["from"],
        serde_json::json!([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}])
    );

    // Unpatched, the webhook rule admits only the placeholder, which matches nothing.
    let unpatched = scratch.path().join("unpatched");
    std::fs::create_dir(&unpatched).expect("create dir");
    std::fs::write(
        unpatched.join("kustomization.yaml"),
        "resources: [../deploy/install]\ncomponents: [../deploy/components/network-policy]\n",
    )
    .expect("write kustomization");
    let placeholder = kustomize(&unpatched);
    assert_eq!(
        find(&placeholder, "NetworkPolicy", "graft")["spec"]["ingress"][0]["from"],
        serde_json::json!([{"ipBlock": {"cidr": "192.0.2.0/24"}}])
    );

    // Off by default: no overlay graft ships renders a NetworkPolicy.
    for shipped in ["deploy/install", "deploy/examples"] {
        assert!(
            !kustomize(&repo().join(shipped))
                .iter()
                .any(|object| object["kind"] == "NetworkPolicy"),
            "{shipped} renders a NetworkPolicy"
        );
    }
}

/// A release pins graft in one place for a team: the `ref` of the install base that
/// `graft init` writes. That base runs the image of the same release, and every `?ref=`
/// the manifests and docs show for graft's repository is that release.
#[test]
fn the_install_base_and_its_references_are_this_release() {
    let version = env!("CARGO_PKG_VERSION");
    let objects = kustomize(&repo().join("deploy/install"));
    let deployment = find(&objects, "Deployment", "graft");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        format!("ghcr.io/graft-dev/graft:{version}").as_str()
    );

    let mut files = vec![repo().join("README.md"), repo().join("docs/operations.md")];
    let mut dirs = vec![repo().join("deploy")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read deploy/") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    let pinned = format!("?ref=v{version}");
    let mut references = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        for (at, _) in text.match_indices("github.com/graft-dev/graft//") {
            let rest = &text[at..];
            let end = rest
                .find(|c: char| c.is_whitespace() || matches!(c, ']' | '`' | ')'))
                .unwrap_or(rest.len());
            let reference = &rest[..end];
            assert!(
                reference.ends_with(&pinned),
                "{}: {reference} is not pinned to this release ({pinned})",
                file.display()
            );
            references += 1;
        }
    }
    assert!(references >= 3, "the remote bases are shown somewhere");
}
