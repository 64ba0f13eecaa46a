//! graft against a real kube-apiserver: the example policies through real admission, the
//! namespace cache through real list + watch with exactly the RBAC deploy/install grants,
//! deploy/ and a repository written by `graft init` accepted by the apiserver's
//! server-side dry run, and the cert-manager overlays refused by it, creating nothing,
//! on a cluster without cert-manager.
//!
//! Needs `KUBEBUILDER_ASSETS` (a directory holding `kube-apiserver` and `etcd`; .ci/run
//! sets it) and kubectl on PATH. Without `KUBEBUILDER_ASSETS` every test is reported
//! ignored, and one line says why.
//!
//! One apiserver serves the whole binary (a custom harness, so it can be stopped in order
//! after the last test); every test works in its own namespaces, and each `graft serve`
//! registers its own MutatingWebhookConfiguration scoped to them.

mod e2e;
#[path = "../support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use libtest_mimic::{Arguments, Failed, Trial};
use serde::Deserialize as _;
use serde_json::{Value, json};

use e2e::{Cluster, Graft, GraftOptions, Result, poll};

/// Every wait for the apiserver or graft to act.
const WAIT: Duration = Duration::from_secs(30);

type Test = fn(&Env) -> Result;

const TESTS: &[(&str, Test)] = &[
    (
        "example_policies_mutate_pods_through_the_apiserver",
        example_pods,
    ),
    (
        "node_overcommit_mutates_status_updates_as_kubelet_sends_them",
        example_nodes,
    ),
    (
        "deploy_is_accepted_by_a_server_side_dry_run",
        deploy_dry_run,
    ),
    (
        "graft_init_repository_passes_its_ci_and_a_server_side_dry_run",
        init_repository,
    ),
    (
        "namespace_labels_are_followed_live_and_survive_a_watch_outage",
        namespaces_live,
    ),
    ("without_the_rbac_graft_never_gets_ready", without_rbac),
    (
        "events_are_recorded_for_mutated_and_denied_pods",
        events_recorded,
    ),
];

fn main() {
    let args = Arguments::from_args();
    let Some(assets) = std::env::var_os("KUBEBUILDER_ASSETS").filter(|a| !a.is_empty()) else {
        const WHY: &str = "KUBEBUILDER_ASSETS is not set (a directory with kube-apiserver \
                           and etcd, such as setup-envtest installs; .ci/run sets it)";
        println!("apiserver: every test ignored: {WHY}");
        // Ignored, not passed: nothing was checked. Run anyway (--ignored), each fails
        // saying what it needs.
        let trials = TESTS
            .iter()
            .map(|(name, _)| Trial::test(*name, || Err(Failed::from(WHY))).with_ignored_flag(true))
            .collect();
        libtest_mimic::run(&args, trials).exit();
    };
    // Listing or filtering tests starts nothing.
    let wanted = !args.list
        && TESTS
            .iter()
            .any(|(name, _)| args.filter.as_deref().is_none_or(|f| name.contains(f)));
    let env = if wanted {
        match Env::start(Path::new(&assets)) {
            Ok(env) => Some(Arc::new(env)),
            Err(error) => {
                eprintln!("cannot start the test cluster: {error}");
                std::process::exit(101);
            }
        }
    } else {
        None
    };
    let trials = TESTS
        .iter()
        .map(|(name, test)| {
            let env = env.clone();
            let test = *test;
            Trial::test(*name, move || {
                let env = env.ok_or("the test cluster did not start")?;
                test(&env).map_err(Failed::from)
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(env) = env.and_then(Arc::into_inner) {
        env.cluster.stop();
    }
    conclusion.exit();
}

/// What every test shares: the cluster, graft's RBAC from deploy/install, a webhook PKI.
struct Env {
    cluster: Cluster,
    repo: PathBuf,
    /// A token of graft's ServiceAccount, which deploy/install's ClusterRoleBinding binds.
    graft_token: String,
    /// A kubeconfig with that token, straight to the apiserver.
    graft_kubeconfig: PathBuf,
    /// The CA that signed graft's serving certificate (the webhooks' caBundle).
    webhook_ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Env {
    fn start(assets: &Path) -> Result<Env> {
        let cluster = Cluster::start(assets)?;
        let repo = support::repo();
        let root = cluster.dir.path().to_path_buf();

        // graft's identity and permissions exactly as deploy/install renders them: its
        // Namespace, ServiceAccount, ClusterRole and ClusterRoleBinding.
        let install = repo.join("deploy/install").display().to_string();
        let rendered = cluster.kubectl(&["kustomize", &install])?;
        let identity: Vec<Value> = yaml_documents(&rendered)?
            .into_iter()
            .filter(|o| {
                [
                    "Namespace",
                    "ServiceAccount",
                    "ClusterRole",
                    "ClusterRoleBinding",
                ]
                .contains(&o["kind"].as_str().unwrap_or_default())
            })
            .collect();
        if identity.len() != 4 {
            return Err(format!(
                "deploy/install renders {} of the 4 RBAC objects",
                identity.len()
            )
            .into());
        }
        cluster.apply_json(&json!({"apiVersion": "v1", "kind": "List", "items": identity}))?;
        let graft_token = cluster
            .kubectl(&[
                "-n",
                "graft",
                "create",
                "token",
                "graft",
                "--duration",
                "1h",
            ])?
            .trim()
            .to_string();

        let graft_kubeconfig = cluster.kubeconfig_for("graft", &cluster.server, &graft_token)?;

        let pki = support::server::Pki::new("graft-e2e-webhook-ca")?;
        let pair = pki.issue(&["127.0.0.1"])?;
        let (webhook_ca, cert, key) = (
            root.join("webhook-ca.crt"),
            root.join("graft.crt"),
            root.join("graft.key"),
        );
        std::fs::write(&webhook_ca, pki.ca_pem())?;
        std::fs::write(&cert, &pair.cert_pem)?;
        std::fs::write(&key, &pair.key_pem)?;
        Ok(Env {
            cluster,
            repo,
            graft_token,
            graft_kubeconfig,
            webhook_ca,
            cert,
            key,
        })
    }

    fn graft(&self, name: &str, policies: &Path, kubeconfig: Option<&Path>) -> Result<Graft> {
        self.graft_with(name, policies, kubeconfig, &[])
    }

    fn graft_with(
        &self,
        name: &str,
        policies: &Path,
        kubeconfig: Option<&Path>,
        extra_args: &[&str],
    ) -> Result<Graft> {
        Graft::start(&GraftOptions {
            name,
            policies,
            cert: &self.cert,
            key: &self.key,
            kubeconfig,
            log_dir: self.cluster.dir.path(),
            extra_args,
        })
    }

    /// Registers `graft` for the webhooks `graft webhook-config` generates from
    /// `policies`, called by URL, for pods in `namespaces` only and for Nodes labelled
    /// `graft-e2e/owner: NAME` only (so tests never see each other's graft).
    fn register(&self, name: &str, graft: &Graft, policies: &Path, namespaces: &[&str]) -> Result {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_graft"))
            .arg("webhook-config")
            .arg("--policies")
            .arg(policies)
            .arg("--ca-bundle-file")
            .arg(&self.webhook_ca)
            .output()?;
        if !output.status.success() {
            return Err(format!(
                "graft webhook-config: {}",
                String::from_utf8_lossy(&output.stderr)
            )
            .into());
        }
        let mut config: Value = serde_yaml::from_slice(&output.stdout)?;
        config["metadata"]["name"] = json!(format!("graft-e2e-{name}"));
        let ca_bundle =
            base64::engine::general_purpose::STANDARD.encode(std::fs::read(&self.webhook_ca)?);
        for webhook in config["webhooks"].as_array_mut().ok_or("no webhooks")? {
            webhook["clientConfig"] = json!({
                "url": format!("https://{}/mutate", graft.addr),
                "caBundle": ca_bundle,
            });
            let expressions = webhook["namespaceSelector"]["matchExpressions"]
                .as_array_mut()
                .ok_or("no namespaceSelector")?;
            expressions.push(json!({
                "key": "kubernetes.io/metadata.name",
                "operator": "In",
                "values": namespaces,
            }));
            // namespaceSelector never filters cluster-scoped objects such as Nodes.
            webhook["objectSelector"] = json!({
                "matchExpressions": [{
                    "key": "graft-e2e/owner",
                    "operator": "In",
                    "values": [name],
                }],
            });
        }
        self.cluster.apply_json(&config)
    }
}

/// The documents of a multi-document YAML text, as JSON values.
fn yaml_documents(text: &str) -> Result<Vec<Value>> {
    let mut documents = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(document)?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}

fn pod(namespace: &str, name: &str, owner: &str, extra: Value) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"graft-e2e/owner": owner},
        },
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]},
    });
    merge(&mut pod, extra);
    pod
}

/// JSON merge (RFC 7386 without deletion): enough to add fields to a test object.
fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(target.entry(key).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch,
    }
}

fn container_names(pod: &Value) -> Vec<&str> {
    pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect()
}

/// Waits until the apiserver calls `graft` for this webhook configuration: a
/// server-side dry run of `probe` comes back changed by `changed`.
fn wait_until_called(env: &Env, probe: &Value, changed: impl Fn(&Value) -> bool) -> Result<Value> {
    poll(WAIT, "the apiserver to call graft", || {
        let stored = env.cluster.dry_run_create(probe)?;
        Ok(changed(&stored).then_some(stored))
    })
}

fn example_pods(env: &Env) -> Result {
    let (ns, multus_ns, unlabelled_ns) = ("e2e-examples", "dynamo-system", "e2e-examples-off");
    for namespace in [ns, multus_ns, unlabelled_ns] {
        env.cluster.create_namespace(namespace)?;
    }
    // The sidecar example injects only where the namespace asks for it.
    env.cluster
        .kubectl(&["label", "namespace", ns, "sidecar-injection=enabled"])?;
    let policies = env.repo.join("policies");
    // The examples read namespace labels: graft watches Namespaces as its ServiceAccount.
    let graft = env.graft("examples", &policies, Some(&env.graft_kubeconfig))?;
    poll(WAIT, "graft ready", || Ok(graft.ready().then_some(())))?;
    env.register(
        "examples",
        &graft,
        &policies,
        &[ns, multus_ns, unlabelled_ns],
    )?;

    let inject = json!({"metadata": {"annotations": {
        "sidecar-injector-webhook.morven.me/inject": "yes"}}});
    wait_until_called(env, &pod(ns, "probe", "examples", inject.clone()), |p| {
        container_names(p).contains(&"sidecar-nginx")
    })?;

    // sidecar-injection: the annotated pod gets the sidecar, its volume and the status
    // annotation; the plain pod is left alone.
    let injected = env
        .cluster
        .create(&pod(ns, "sidecar-yes", "examples", inject.clone()))?;
    assert_eq!(container_names(&injected), ["app", "sidecar-nginx"]);
    assert_eq!(
        injected["metadata"]["annotations"]["sidecar-injector-webhook.morven.me/status"],
        "injected"
    );
    let volumes: Vec<&str> = injected["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert!(volumes.contains(&"nginx-conf"), "{injected}");
    let elsewhere = env.cluster.create(&pod(
        unlabelled_ns,
        "sidecar-yes",
        "examples",
        inject.clone(),
    ))?;
    assert_eq!(
        container_names(&elsewhere),
        ["app"],
        "namespace not labelled for injection"
    );
    let plain = env
        .cluster
        .create(&pod(ns, "sidecar-no", "examples", json!({})))?;
    assert_eq!(container_names(&plain), ["app"]);
    assert!(plain["metadata"]["annotations"].is_null(), "{plain}");
    assert!(plain["spec"]["nodeSelector"].is_null(), "{plain}");

    // statefulset-node-selector: StatefulSet pods labelled for it alternate between two
    // nodes by ordinal; without the label they keep no selector.
    let stateful = |name: &str, labelled: bool| {
        let mut labels = json!({"graft-e2e/owner": "examples"});
        if labelled {
            labels["ab-build-different"] = json!("true");
        }
        pod(
            ns,
            name,
            "examples",
            json!({"metadata": {
                "labels": labels,
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                    "uid": "9e1b7f8a-52c3-4cc5-9d5f-3a6c1d0b2e41", "controller": true,
                }],
            }}),
        )
    };
    let web3 = env.cluster.create(&stateful("web-3", true))?;
    assert_eq!(
        web3["spec"]["nodeSelector"],
        json!({"name": "node2"}),
        "{web3}"
    );
    let web2 = env.cluster.create(&stateful("web-2", true))?;
    assert_eq!(
        web2["spec"]["nodeSelector"],
        json!({"name": "node1"}),
        "{web2}"
    );
    let unlabelled = env.cluster.create(&stateful("web-1", false))?;
    assert!(unlabelled["spec"]["nodeSelector"].is_null(), "{unlabelled}");

    // multus-networks: Dynamo workers on the RDMA nodes get the RoCE networks; a worker
    // on another node does not.
    let worker = |name: &str, alias: &str| {
        pod(
            multus_ns,
            name,
            "examples",
            json!({
                "metadata": {"labels": {"nvidia.com/dynamo-component-type": "worker"}},
                "spec": {"nodeSelector": {"dynamo.nodeAlias": alias}},
            }),
        )
    };
    let rdma = env.cluster.create(&worker("worker-rdma", "worker06"))?;
    let networks = rdma["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
        .as_str()
        .ok_or_else(|| format!("no networks annotation: {rdma}"))?;
    let networks: Value = serde_json::from_str(networks)?;
    let names: Vec<&str> = networks
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["name"].as_str())
        .collect();
    assert_eq!(names.len(), 10, "{networks}");
    assert_eq!(names[0], "roce5");
    assert_eq!(networks[0]["namespace"], "rdma-networks");
    let other = env.cluster.create(&worker("worker-other", "worker03"))?;
    assert!(other["metadata"]["annotations"].is_null(), "{other}");

    graft.stop();
    Ok(())
}

fn example_nodes(env: &Env) -> Result {
    let policies = env.repo.join("policies");
    let graft = env.graft("nodes", &policies, Some(&env.graft_kubeconfig))?;
    poll(WAIT, "graft ready", || Ok(graft.ready().then_some(())))?;
    // No pod namespace: this configuration is for Nodes only.
    env.register("nodes", &graft, &policies, &["e2e-nodes-none"])?;

    let node = |name: &str, overcommit: bool| {
        let mut labels = json!({"graft-e2e/owner": "nodes"});
        if overcommit {
            labels["graft.dev/overcommit"] = json!("true");
        }
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
    };
    env.cluster.create(&node("e2e-overcommit", true))?;
    env.cluster.create(&node("e2e-plain", false))?;
    let status = |cpu: &str, memory: &str| {
        json!({"status": {
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
        }})
    };
    let allocatable = |node: &Value| {
        (
            node["status"]["allocatable"]["cpu"].clone(),
            node["status"]["allocatable"]["memory"].clone(),
        )
    };
    // Kubelet's status update: a strategic-merge PATCH of nodes/status. The webhook
    // configuration may take a moment to reach the apiserver's admission chain.
    let patched = poll(WAIT, "graft to mutate the node status", || {
        let out = env.cluster.kubectl(&[
            "patch",
            "node",
            "e2e-overcommit",
            "--subresource=status",
            "--type=strategic",
            "-o",
            "json",
            "-p",
            &status("8", "1000Ki").to_string(),
        ])?;
        let node: Value = serde_json::from_str(&out)?;
        Ok((node["status"]["allocatable"]["cpu"] == "12").then_some(node))
    })?;
    assert_eq!(allocatable(&patched), (json!("12"), json!("1200Ki")));

    // A PUT of the whole status: capacity changed, allocatable derived from it again,
    // never compounded on the previous value.
    let mut replaced: Value = serde_json::from_str(&env.cluster.kubectl(&[
        "get",
        "node",
        "e2e-overcommit",
        "-o",
        "json",
    ])?)?;
    merge(&mut replaced, status("4", "2000Ki"));
    let out = env.cluster.kubectl_with_input(
        &[
            "replace",
            "--subresource=status",
            "--validate=false",
            "-o",
            "json",
            "-f",
            "-",
        ],
        Some(&replaced.to_string()),
    )?;
    let replaced: Value = serde_json::from_str(&out)?;
    assert_eq!(allocatable(&replaced), (json!("6"), json!("2400Ki")));

    // A node without the label keeps what kubelet sent.
    let out = env.cluster.kubectl(&[
        "patch",
        "node",
        "e2e-plain",
        "--subresource=status",
        "--type=strategic",
        "-o",
        "json",
        "-p",
        &status("8", "1000Ki").to_string(),
    ])?;
    let plain: Value = serde_json::from_str(&out)?;
    assert_eq!(allocatable(&plain), (json!("8"), json!("1000Ki")));

    graft.stop();
    Ok(())
}

/// What the docs promise for a cluster, from a checkout of graft: `kubectl apply -k
/// deploy/install` (graft alone, the base of a team's repository), `deploy/examples`
/// (graft's examples, bring your own certificate) and `deploy/self-signed` after `graft
/// certs`, also with the network-policy component. The cert-manager overlay needs cert-manager's CRDs, which this apiserver does
/// not have: its dry run is refused, naming them, and creates nothing.
fn deploy_dry_run(env: &Env) -> Result {
    let scratch = tempfile::tempdir()?;
    support::fs::copy_tree(&env.repo.join("deploy"), &scratch.path().join("deploy"));
    support::fs::copy_tree(&env.repo.join("policies"), &scratch.path().join("policies"));
    let _ = std::fs::remove_dir_all(scratch.path().join("deploy/self-signed/certs"));
    run(Command::new(env!("CARGO_BIN_EXE_graft"))
        .current_dir(scratch.path())
        .args(["certs", "--out", "deploy/self-signed/certs"]))?;
    let graft_itself = [
        "namespace/graft",
        "deployment.apps/graft",
        "clusterrole.rbac.authorization.k8s.io/graft-namespace-reader",
        "clusterrolebinding.rbac.authorization.k8s.io/graft-namespace-reader",
        "poddisruptionbudget.policy/graft",
        "horizontalpodautoscaler.autoscaling/graft",
    ];
    let with_policies = [WEBHOOK_CONFIGURATION, "configmap/graft-policies"];
    let out = server_dry_run(env, &scratch.path().join("deploy/install"))?;
    for object in graft_itself {
        assert!(
            out.contains(object),
            "deploy/install: {object} not applied:\n{out}"
        );
    }
    for object in with_policies {
        assert!(
            !out.contains(object),
            "deploy/install holds {object}:\n{out}"
        );
    }
    for overlay in ["deploy/examples", "deploy/self-signed"] {
        let out = server_dry_run(env, &scratch.path().join(overlay))?;
        for object in graft_itself.iter().chain(&with_policies) {
            assert!(
                out.contains(object),
                "{overlay}: {object} not applied:\n{out}"
            );
        }
    }
    // The opt-in network-policy component on a complete overlay, patched as its
    // kustomization shows: the apiserver accepts the NetworkPolicy with the rest.
    let with_policy = scratch.path().join("with-network-policy");
    std::fs::create_dir(&with_policy)?;
    std::fs::write(
        with_policy.join("kustomization.yaml"),
        support::kustomize::network_policy_overlay("../deploy/self-signed"),
    )?;
    let out = server_dry_run(env, &with_policy)?;
    for object in graft_itself
        .iter()
        .chain(&with_policies)
        .chain(&["networkpolicy.networking.k8s.io/graft"])
    {
        assert!(
            out.contains(object),
            "with the network-policy component: {object} not applied:\n{out}"
        );
    }
    refused_without_cert_manager(env, &scratch.path().join("deploy/cert-manager"))
}

/// A team's repository from `graft init`, its base pointed at this checkout's
/// deploy/install (a test fetches no release): its CI script passes with the real graft
/// on PATH. With the certificate `graft certs` makes (`--certs self-signed`, as its
/// README says), the apiserver accepts all of it in a server-side dry run. With
/// cert-manager (the default) it renders cert-manager's objects and the annotation that
/// injects the caBundle, and the dry run is refused here, naming the missing kinds and
/// creating nothing, as its README warns.
fn init_repository(env: &Env) -> Result {
    let scratch = tempfile::tempdir()?;
    let graft = Path::new(env!("CARGO_BIN_EXE_graft"));
    let path = std::env::join_paths(graft.parent().map(Path::to_path_buf).into_iter().chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))?;
    // The scratch directory is elsewhere than the checkout: `graft init` writes the
    // base as a path from the repository, which kustomize wants relative.
    let init = |certs: &str| -> Result<PathBuf> {
        let dir = scratch.path().join(certs);
        run(Command::new(graft)
            .arg("init")
            .arg("--base")
            .arg(env.repo.join("deploy/install"))
            .args(["--certs", certs])
            .arg(&dir))?;
        let ci = run(Command::new(dir.join("ci.sh")).env("PATH", &path))?;
        assert!(ci.contains("2 passed, 0 failed"), "{ci}");
        assert!(ci.contains("webhook.yaml is current"), "{ci}");
        Ok(dir)
    };
    let kustomize = |dir: &Path| -> Result<Vec<Value>> {
        yaml_documents(
            &env.cluster
                .kubectl(&["kustomize", &dir.display().to_string()])?,
        )
    };
    let find = |objects: &[Value], kind: &str, name: &str| -> Result<Value> {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .cloned()
            .ok_or_else(|| format!("no {kind} {name} rendered").into())
    };

    let self_signed = init("self-signed")?;
    run(Command::new(graft)
        .current_dir(&self_signed)
        .args(["certs", "--out", "certs"]))?;
    let objects = kustomize(&self_signed)?;
    let policies = find(&objects, "ConfigMap", "graft-policies")?;
    let keys: Vec<&String> = policies["data"]
        .as_object()
        .map(|data| data.keys().collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        ["team-label.yaml"],
        "the team's policies, not graft's"
    );
    let ca = base64::engine::general_purpose::STANDARD
        .encode(std::fs::read(self_signed.join("certs/ca.crt"))?);
    let config = find(&objects, "MutatingWebhookConfiguration", "graft")?;
    let webhooks = config["webhooks"].as_array().ok_or("no webhooks")?;
    assert!(!webhooks.is_empty(), "{config}");
    for webhook in webhooks {
        assert_eq!(
            webhook["clientConfig"]["caBundle"],
            ca.as_str(),
            "{webhook}"
        );
    }
    let out = server_dry_run(env, &self_signed)?;
    for object in [
        "namespace/graft",
        "deployment.apps/graft",
        "service/graft",
        "clusterrolebinding.rbac.authorization.k8s.io/graft-namespace-reader",
        "secret/graft-tls",
        "configmap/graft-policies",
        WEBHOOK_CONFIGURATION,
    ] {
        assert!(out.contains(object), "{object} not applied:\n{out}");
    }

    let cert_manager = init("cert-manager")?;
    let objects = kustomize(&cert_manager)?;
    find(&objects, "Certificate", "graft")?;
    let config = find(&objects, "MutatingWebhookConfiguration", "graft")?;
    assert_eq!(
        config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "graft/graft"
    );
    refused_without_cert_manager(env, &cert_manager)
}

/// What kubectl names graft's webhook configuration in its output.
const WEBHOOK_CONFIGURATION: &str =
    "mutatingwebhookconfiguration.admissionregistration.k8s.io/graft";

/// `kubectl apply -k DIR --dry-run=server`: the apiserver admits every object and
/// stores none.
fn server_dry_run(env: &Env, dir: &Path) -> Result<String> {
    env.cluster.kubectl(&[
        "apply",
        "-k",
        &dir.display().to_string(),
        "--dry-run=server",
        "--validate=strict",
    ])
}

/// The dry run the docs ask for before applying a kustomization with cert-manager's
/// objects, on this cluster without cert-manager: it fails, naming the kinds the cluster
/// lacks, and leaves no webhook configuration `graft` behind (`kubectl apply` without it
/// would have created one without a caBundle).
fn refused_without_cert_manager(env: &Env, dir: &Path) -> Result {
    let error = match server_dry_run(env, dir) {
        Ok(out) => {
            return Err(format!("{}: the dry run passed:\n{out}", dir.display()).into());
        }
        Err(error) => error.to_string(),
    };
    for needle in [
        r#"no matches for kind "Certificate" in version "cert-manager.io/v1""#,
        r#"no matches for kind "Issuer" in version "cert-manager.io/v1""#,
        "ensure CRDs are installed first",
    ] {
        assert!(error.contains(needle), "{}: {error}", dir.display());
    }
    let configurations =
        env.cluster
            .kubectl(&["get", "mutatingwebhookconfigurations", "-o", "name"])?;
    assert!(
        !configurations
            .lines()
            .any(|line| line == WEBHOOK_CONFIGURATION),
        "a dry run created {WEBHOOK_CONFIGURATION}"
    );
    Ok(())
}

/// Runs `command`; its standard output, or an error with everything it said.
fn run(command: &mut Command) -> Result<String> {
    let output = command.output()?;
    if !output.status.success() {
        return Err(format!(
            "{command:?} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// A policy that needs no namespace data: marks every pod it sees.
const SEEN_POLICY: &str = r#"
apiVersion: graft.dev/v1alpha1
kind: MutationPolicy
metadata:
  name: e2e-seen
spec:
  match:
    resources: [pods]
    operations: [CREATE]
  mutations:
    - set:
        path: $.metadata.labels['graft-e2e/seen']
        value: "yes"
"#;

/// A policy that needs namespace data: copies the namespace's `tier` label onto pods of
/// namespaces that have one.
const TIER_POLICY: &str = r#"
apiVersion: graft.dev/v1alpha1
kind: MutationPolicy
metadata:
  name: e2e-tier
spec:
  failurePolicy: Fail
  match:
    resources: [pods]
    operations: [CREATE]
    namespaceSelector:
      matchExpressions:
        - {key: tier, operator: Exists}
  mutations:
    - set:
        path: $.metadata.labels.tier
        value: "{{ namespaceObject.metadata.labels.tier }}"
"#;

/// The namespace cache end to end: started by the hot reload that adds a namespace-aware
/// policy, label changes honoured by the next reviews, the last known labels served
/// while the API is unreachable, recovery, and the cache stopped again by the reload
/// that drops the policy. graft reaches the apiserver through a proxy that can cut it
/// off, with the ServiceAccount token and nothing more.
fn namespaces_live(env: &Env) -> Result {
    let ns = "e2e-live";
    env.cluster.create_namespace(ns)?;
    let proxy = e2e::Proxy::start(env.cluster.apiserver_addr)?;
    let kubeconfig = env.cluster.kubeconfig_for(
        "graft-proxied",
        &format!("https://127.0.0.1:{}", proxy.addr.port()),
        &env.graft_token,
    )?;
    let policies = tempfile::tempdir()?;
    std::fs::write(policies.path().join("seen.yaml"), SEEN_POLICY)?;
    let graft = env.graft("live", policies.path(), Some(&kubeconfig))?;
    poll(WAIT, "graft ready", || Ok(graft.ready().then_some(())))?;
    // A set that needs no namespace data never talks to the API.
    assert_eq!(proxy.open_connections(), 0);
    assert_eq!(
        graft.metric("graft_namespace_cache_last_sync_timestamp_seconds")?,
        0.0
    );

    // The webhook rules cover what both policies match (pods CREATE).
    std::fs::write(policies.path().join("tier.yaml"), TIER_POLICY)?;
    env.register("live", &graft, policies.path(), &[ns])?;
    let probe = pod(ns, "probe", "live", json!({}));
    let tier_of = |pod: &Value| {
        pod["metadata"]["labels"]["tier"]
            .as_str()
            .map(str::to_string)
    };
    // The reload that adds the namespace-aware policy starts the cache before the set
    // goes live, so readiness never drops.
    wait_until_called(env, &probe, |p| {
        p["metadata"]["labels"]["graft-e2e/seen"] == "yes"
    })?;
    poll(
        WAIT,
        "the reload that adds the namespace-aware policy",
        || Ok((graft.metric("graft_policies_loaded")? == 2.0).then_some(())),
    )?;
    assert!(graft.metric("graft_namespace_cache_last_sync_timestamp_seconds")? > 0.0);
    assert!(graft.ready(), "{}", graft.log_tail());
    assert_eq!(tier_of(&env.cluster.dry_run_create(&probe)?), None);

    // Label added, changed, removed: each visible to the reviews that follow.
    let mut latencies = Vec::new();
    for (change, expect) in [
        ("tier=gold", Some("gold")),
        ("tier=silver", Some("silver")),
        ("tier-", None),
        ("tier=gold", Some("gold")),
    ] {
        env.cluster
            .kubectl(&["label", "--overwrite", "namespace", ns, change])?;
        let changed = Instant::now();
        poll(
            Duration::from_secs(5),
            &format!("reviews to see {change}"),
            || {
                let tier = tier_of(&env.cluster.dry_run_create(&probe)?);
                Ok((tier.as_deref() == expect).then_some(()))
            },
        )?;
        latencies.push(changed.elapsed());
    }
    let slowest = latencies.iter().max().copied().unwrap_or_default();
    eprintln!("namespace label changes reached reviews in {latencies:?}");
    assert!(
        slowest < Duration::from_millis(1500),
        "a label change took {slowest:?} to reach reviews"
    );

    // The API becomes unreachable: the watch fails and is counted, graft stays ready
    // and keeps answering from the last labels it knew, even as they change meanwhile.
    let restarts = graft.metric("graft_namespace_cache_watch_restarts_total")?;
    proxy.go_down();
    poll(WAIT, "the watch failure to be counted", || {
        Ok((graft.metric("graft_namespace_cache_watch_restarts_total")? > restarts).then_some(()))
    })?;
    env.cluster
        .kubectl(&["label", "--overwrite", "namespace", ns, "tier=bronze"])?;
    assert!(graft.ready(), "graft serves the last known namespaces");
    assert_eq!(
        tier_of(&env.cluster.dry_run_create(&probe)?).as_deref(),
        Some("gold")
    );
    graft.wait_for_log(WAIT, "namespace watch failed")?;

    // Back: the watcher re-lists after its backoff and catches up.
    let synced_before = graft.metric("graft_namespace_cache_last_sync_timestamp_seconds")?;
    proxy.come_up();
    poll(WAIT, "the cache to catch up after the outage", || {
        let tier = tier_of(&env.cluster.dry_run_create(&probe)?);
        Ok((tier.as_deref() == Some("bronze")).then_some(()))
    })?;
    assert!(graft.metric("graft_namespace_cache_last_sync_timestamp_seconds")? > synced_before);
    graft.wait_for_log(WAIT, "namespace watch recovered")?;

    // The reload that drops the last namespace-aware policy stops the cache: its watch
    // connection closes.
    std::fs::remove_file(policies.path().join("tier.yaml"))?;
    poll(WAIT, "the namespace watch to close", || {
        Ok((proxy.open_connections() == 0).then_some(()))
    })?;
    assert!(graft.ready());
    let seen = env.cluster.dry_run_create(&probe)?;
    assert_eq!(tier_of(&seen), None, "{seen}");
    graft.stop();
    Ok(())
}

/// graft with a user the cluster authenticates but RBAC grants nothing: the namespace
/// list is forbidden, the failures are counted and logged, and graft never reports
/// ready. This is what would happen if deploy/install's ClusterRole lacked a verb.
fn without_rbac(env: &Env) -> Result {
    let kubeconfig =
        env.cluster
            .kubeconfig_for("nobody", &env.cluster.server, e2e::NOBODY_TOKEN)?;
    let policies = tempfile::tempdir()?;
    std::fs::write(policies.path().join("tier.yaml"), TIER_POLICY)?;
    let mut graft = env.graft("nobody", policies.path(), Some(&kubeconfig))?;
    poll(WAIT, "a forbidden list to be counted", || {
        graft.check_running()?;
        Ok((graft.metric("graft_namespace_cache_watch_restarts_total")? >= 1.0).then_some(()))
    })?;
    assert!(!graft.ready(), "ready without ever listing the namespaces");
    assert_eq!(
        graft.metric("graft_namespace_cache_last_sync_timestamp_seconds")?,
        0.0
    );
    let log = graft.log();
    assert!(log.contains("forbidden"), "{}", graft.log_tail());
    graft.stop();
    Ok(())
}

/// Denies pods labelled `graft-e2e/deny: "yes"`: its value reads a field pods do not
/// have, and the policy fails closed.
const DENY_POLICY: &str = r#"
apiVersion: graft.dev/v1alpha1
kind: MutationPolicy
metadata:
  name: e2e-deny
spec:
  failurePolicy: Fail
  match:
    resources: [pods]
    operations: [CREATE]
    labels: {graft-e2e/deny: "yes"}
  mutations:
    - set:
        path: $.metadata.labels.missing
        value: "{{ object.spec.noSuchField.value }}"
"#;

/// The events.k8s.io Events in `namespace`.
fn events_in(env: &Env, namespace: &str) -> Result<Vec<Value>> {
    let out =
        env.cluster
            .kubectl(&["-n", namespace, "get", "events.events.k8s.io", "-o", "json"])?;
    let list: Value = serde_json::from_str(&out)?;
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

/// Waits for graft's Event with `reason` about the pod `name` (or `generateName`) in
/// `namespace` for which `also` holds.
fn wait_for_event(
    env: &Env,
    namespace: &str,
    reason: &str,
    name: &str,
    also: impl Fn(&Value) -> bool,
) -> Result<Value> {
    poll(
        WAIT,
        &format!("a {reason} Event about {namespace}/{name}"),
        || {
            Ok(events_in(env, namespace)?.into_iter().find(|event| {
                event["reason"] == reason
                    && event["reportingController"] == "graft"
                    && event["regarding"]["kind"] == "Pod"
                    && event["regarding"]["name"] == name
                    && event["regarding"]["namespace"] == namespace
                    && also(event)
            }))
        },
    )
}

/// `graft serve --events` with the events component's RBAC (rendered from
/// deploy/components/events): a mutated pod gets a Mutated Event, a pod created by
/// `generateName` one regarding its prefix, a denied pod a Denied Warning, its repeat a
/// series of two, and a third repeat is only counted. Without the RBAC, reviews still succeed and the failed
/// writes are counted.
fn events_recorded(env: &Env) -> Result {
    let (ns, ns_without) = ("e2e-events", "e2e-events-norbac");
    for namespace in [ns, ns_without] {
        env.cluster.create_namespace(namespace)?;
    }
    // The component's ClusterRole and binding, exactly as kustomize renders them.
    let scratch = tempfile::tempdir()?;
    support::fs::copy_tree(&env.repo.join("deploy"), &scratch.path().join("deploy"));
    support::fs::copy_tree(&env.repo.join("policies"), &scratch.path().join("policies"));
    let with_events = scratch.path().join("with-events");
    std::fs::create_dir(&with_events)?;
    std::fs::write(
        with_events.join("kustomization.yaml"),
        "resources: [../deploy/install]\ncomponents: [../deploy/components/events]\n",
    )?;
    let rendered = env
        .cluster
        .kubectl(&["kustomize", &with_events.display().to_string()])?;
    let rbac: Vec<Value> = yaml_documents(&rendered)?
        .into_iter()
        .filter(|o| o["metadata"]["name"] == "graft-events-recorder")
        .collect();
    if rbac.len() != 2 {
        return Err(format!("the events component renders {} RBAC objects", rbac.len()).into());
    }
    env.cluster
        .apply_json(&json!({"apiVersion": "v1", "kind": "List", "items": rbac}))?;

    let policies = tempfile::tempdir()?;
    std::fs::write(policies.path().join("seen.yaml"), SEEN_POLICY)?;
    std::fs::write(policies.path().join("deny.yaml"), DENY_POLICY)?;
    let started = Instant::now();
    let graft = env.graft_with(
        "events",
        policies.path(),
        Some(&env.graft_kubeconfig),
        &["--events"],
    )?;
    poll(WAIT, "graft ready", || Ok(graft.ready().then_some(())))?;
    env.register("events", &graft, policies.path(), &[ns])?;
    // A dry run is reviewed but records nothing.
    wait_until_called(env, &pod(ns, "probe", "events", json!({})), |p| {
        p["metadata"]["labels"]["graft-e2e/seen"] == "yes"
    })?;

    // Mutated: a named pod, regarded by namespace, kind and name; no uid at CREATE.
    let created = env
        .cluster
        .create(&pod(ns, "mutated-0", "events", json!({})))?;
    assert_eq!(created["metadata"]["labels"]["graft-e2e/seen"], "yes");
    let mutated = wait_for_event(env, ns, "Mutated", "mutated-0", |_| true)?;
    assert_eq!(mutated["type"], "Normal", "{mutated}");
    assert_eq!(mutated["action"], "Review", "{mutated}");
    assert_eq!(mutated["regarding"]["apiVersion"], "v1", "{mutated}");
    assert!(mutated["regarding"]["uid"].is_null(), "{mutated}");
    assert!(
        mutated["note"]
            .as_str()
            .is_some_and(|note| note.contains("e2e-seen") && note.contains("patch operation")),
        "{mutated}"
    );
    assert!(mutated["reportingInstance"].is_string(), "{mutated}");
    // The two ways docs/operations.md gives to find them.
    let listed = env
        .cluster
        .kubectl(&["events", "-n", ns, "--for", "pod/mutated-0"])?;
    assert!(listed.contains("Mutated"), "{listed}");
    let selected: Value = serde_json::from_str(&env.cluster.kubectl(&[
        "get",
        "events",
        "-n",
        ns,
        "--field-selector",
        "reportingComponent=graft",
        "-o",
        "json",
    ])?)?;
    assert!(
        selected["items"]
            .as_array()
            .is_some_and(|items| !items.is_empty()),
        "{selected}"
    );

    // A pod named by the apiserver after admission: regarded by its generateName.
    let mut generated = pod(ns, "unused", "events", json!({}));
    generated["metadata"]
        .as_object_mut()
        .ok_or("metadata")?
        .remove("name");
    generated["metadata"]["generateName"] = json!("gen-");
    env.cluster.create(&generated)?;
    wait_for_event(env, ns, "Mutated", "gen-", |_| true)?;

    // Denied, twice: one Warning Event with the message, then its series.
    let denied = pod(
        ns,
        "denied-0",
        "events",
        json!({"metadata": {"labels": {"graft-e2e/deny": "yes"}}}),
    );
    for _ in 0..2 {
        let refused = env.cluster.create(&denied);
        let error = refused.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("e2e-deny"), "not denied: {error}");
    }
    let warning = wait_for_event(env, ns, "Denied", "denied-0", |event| {
        event["series"]["count"] == 2
    })?;
    assert_eq!(warning["type"], "Warning", "{warning}");
    assert!(
        warning["note"]
            .as_str()
            .is_some_and(|note| note.contains("e2e-deny")),
        "{warning}"
    );
    // A third denial only counts: the series' count is written later, at most once a
    // minute.
    let refused = env.cluster.create(&denied);
    assert!(refused.is_err(), "the third denied pod was admitted");
    poll(WAIT, "the third denial to be aggregated", || {
        Ok((graft.metric("graft_events_total{result=\"aggregated\"}")? >= 1.0).then_some(()))
    })?;
    assert!(graft.metric("graft_events_total{result=\"sent\"}")? >= 4.0);
    assert_eq!(graft.metric("graft_events_total{result=\"failed\"}")?, 0.0);
    assert_eq!(graft.metric("graft_events_total{result=\"dropped\"}")?, 0.0);
    eprintln!(
        "events: graft started, reviewed and recorded 4 Events in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    graft.stop();

    // Without the component's RBAC: reviews succeed, the writes fail and are counted.
    let kubeconfig =
        env.cluster
            .kubeconfig_for("nobody-events", &env.cluster.server, e2e::NOBODY_TOKEN)?;
    let seen_only = tempfile::tempdir()?;
    std::fs::write(seen_only.path().join("seen.yaml"), SEEN_POLICY)?;
    let graft = env.graft_with(
        "events-nobody",
        seen_only.path(),
        Some(&kubeconfig),
        &["--events"],
    )?;
    poll(WAIT, "graft ready", || Ok(graft.ready().then_some(())))?;
    env.register("events-nobody", &graft, seen_only.path(), &[ns_without])?;
    let probe = pod(ns_without, "probe", "events-nobody", json!({}));
    wait_until_called(env, &probe, |p| {
        p["metadata"]["labels"]["graft-e2e/seen"] == "yes"
    })?;
    let created = env
        .cluster
        .create(&pod(ns_without, "mutated-0", "events-nobody", json!({})))?;
    assert_eq!(created["metadata"]["labels"]["graft-e2e/seen"], "yes");
    poll(WAIT, "the forbidden Event write to be counted", || {
        Ok((graft.metric("graft_events_total{result=\"failed\"}")? >= 1.0).then_some(()))
    })?;
    assert_eq!(graft.metric("graft_events_total{result=\"sent\"}")?, 0.0);
    graft.wait_for_log(WAIT, "cannot record an Event")?;
    assert!(events_in(env, ns_without)?.is_empty());
    graft.stop();
    Ok(())
}
