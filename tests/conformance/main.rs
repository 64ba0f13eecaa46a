//! Differential conformance of graft's MutatingAdmissionPolicies against the apiserver's
//! in-tree ones: each `cases/NNN-name.yaml` holds policies, a request and what a real
//! kube-apiserver v1.36 with in-tree MAP stored or answered (`expect:`, see README.md).
//! Here the same request goes through a real kube-apiserver whose only mutating
//! admission for it is graft (`graft serve`, called as a webhook, running the case's
//! policies from its policy directory), and the results must be the same.
//!
//! One trial a case (`cargo test --test conformance -- 042`). Cases listed in
//! `divergences.txt` are reported ignored while they still differ, and fail once they
//! match (so the list stays true). Without `KUBEBUILDER_ASSETS` every trial is ignored.

mod api;
mod case;
#[allow(dead_code)]
#[path = "../apiserver/e2e.rs"]
mod e2e;
#[path = "../support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures::StreamExt as _;
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use serde_json::{Value, json};

use api::Api;
use case::{Case, diff, normalize, with_namespace};
use e2e::{Cluster, ClusterConfig, Graft, GraftOptions, Result};

/// The user every case request is sent as (what the recorder's user was called); only
/// its requests go to graft.
const REQUEST_USER: &str = "map-admin";
const REQUEST_TOKEN: &str = "map-admin-token";
/// The user that creates namespaces, setup objects and old objects (graft never sees
/// them, as the in-tree policies did not exist yet when the recorder created them).
const SETUP_TOKEN: &str = "map-setup-token";
/// The webhook's name, which the apiserver puts in front of a denial.
const WEBHOOK: &str = "graft.conformance.test";
const PROBE_NS: &str = "map-probe";
const PROBE_NAME: &str = "map-sentinel-probe";
/// Cases set up at once.
const SETUP_CONCURRENCY: usize = 8;

fn main() {
    let mut args = Arguments::from_args();
    let root = support::repo().join("tests/conformance");
    let cases = match case::load_cases(&root.join("cases")) {
        Ok(cases) => cases,
        Err(error) => {
            eprintln!("cannot read the cases: {error}");
            std::process::exit(101);
        }
    };
    let divergences = match case::load_divergences(&root.join("divergences.txt")) {
        Ok(list) => list,
        Err(error) => {
            eprintln!("cannot read divergences.txt: {error}");
            std::process::exit(101);
        }
    };
    for id in divergences.keys() {
        if !cases.iter().any(|c| &c.id == id) {
            eprintln!("divergences.txt lists {id}, which is no case");
            std::process::exit(101);
        }
    }
    let assets = std::env::var_os("KUBEBUILDER_ASSETS").filter(|a| !a.is_empty());
    let Some(assets) = assets else {
        println!(
            "conformance: every case ignored: KUBEBUILDER_ASSETS is not set (it names a \
             directory with kube-apiserver and etcd; see tests/conformance/README.md)"
        );
        let trials = cases
            .iter()
            .map(|c| Trial::test(c.stem.clone(), || Ok(())).with_ignored_flag(true))
            .collect();
        libtest_mimic::run(&args, trials).exit();
    };
    // Cases swap graft's policy set: one at a time.
    args.test_threads = Some(1);

    let cases: Vec<Arc<Case>> = cases.into_iter().map(Arc::new).collect();
    let selected: Vec<Arc<Case>> = cases
        .iter()
        .filter(|c| {
            let probe = Trial::test(c.stem.clone(), || Ok(()));
            !args.list && !args.is_filtered_out(&probe) && (!args.ignored || args.include_ignored)
        })
        .cloned()
        .collect();
    let env = if selected.is_empty() {
        None
    } else {
        let started = Instant::now();
        match Env::start(Path::new(&assets), &selected) {
            Ok(env) => {
                eprintln!(
                    "conformance: cluster, setup of {} cases and graft ready in {:.1} s",
                    selected.len(),
                    started.elapsed().as_secs_f64()
                );
                Some(Arc::new(env))
            }
            Err(error) => {
                eprintln!("cannot start the conformance environment: {error}");
                std::process::exit(101);
            }
        }
    };
    let trials = cases
        .iter()
        .map(|c| {
            let env = env.clone();
            let case = c.clone();
            let listed = divergences.get(&c.id).cloned();
            Trial::ignorable_test(c.stem.clone(), move || {
                let env = env.ok_or("the environment did not start")?;
                let differences = env
                    .run_case(&case)
                    .map_err(|e| Failed::from(e.to_string()))?;
                match (listed, differences.is_empty()) {
                    (None, true) => Ok(Completion::Completed),
                    (None, false) => Err(differences.join("\n").into()),
                    (Some(_), true) => Err(format!(
                        "{} now matches the apiserver: remove it from divergences.txt",
                        case.id
                    )
                    .into()),
                    (Some(reason), false) => {
                        println!("\n{}: known divergence: {reason}", case.stem);
                        for line in &differences {
                            println!("    {line}");
                        }
                        Ok(Completion::ignored_with(reason))
                    }
                }
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(env) = env.and_then(Arc::into_inner) {
        env.stop();
    }
    conclusion.exit();
}

/// How graft's findings about a case's policies read.
#[derive(Clone, Debug)]
struct Finding {
    policy: String,
    text: String,
}

/// Which policies graft serves.
#[derive(Clone, PartialEq, Eq, Debug)]
enum PolicySet {
    /// Every case whose policies only ever match requests in its own namespace.
    Shared,
    /// One case's policies alone.
    Alone(String),
}

struct Env {
    rt: tokio::runtime::Runtime,
    cluster: Option<Cluster>,
    graft: Option<Graft>,
    setup: Api,
    request: Api,
    policies_dir: PathBuf,
    /// Errors of graft's lint by case id.
    lint: HashMap<String, Vec<Finding>>,
    /// Setup failures by case id.
    setup_errors: HashMap<String, String>,
    /// Cases that need the policy set to themselves, with their policies.
    alone: HashMap<String, Vec<Value>>,
    shared: Vec<Value>,
    current: Mutex<(Option<PolicySet>, u64)>,
}

impl Env {
    fn start(assets: &Path, cases: &[Arc<Case>]) -> Result<Env> {
        let tokens = [
            format!("{REQUEST_TOKEN},{REQUEST_USER},uid-map-admin,\"system:masters\""),
            format!("{SETUP_TOKEN},map-setup,uid-map-setup,\"system:masters\""),
        ];
        let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
        // The recorder's admission plugins (its ServiceAccount plugin adds a token volume
        // with a random name to every pod).
        let cluster = Cluster::start_with(
            assets,
            &ClusterConfig {
                enable_admission: "NamespaceLifecycle,MutatingAdmissionPolicy,\
                                   MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
                disable_admission: Some("ServiceAccount"),
                extra_tokens: &tokens,
            },
        )?;
        let root = cluster.dir.path().to_path_buf();
        let setup_kubeconfig = cluster.kubeconfig_for("setup", &cluster.server, SETUP_TOKEN)?;
        let request_kubeconfig =
            cluster.kubeconfig_for("request", &cluster.server, REQUEST_TOKEN)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let (setup, request) = rt.block_on(async {
            Ok::<_, support::Error>((
                Api::new(&setup_kubeconfig).await?,
                Api::new(&request_kubeconfig).await?,
            ))
        })?;

        // Every case's namespace, setup objects and old object, before graft is called
        // at all (as the recorder created them before the in-tree policies).
        let setup_errors: HashMap<String, String> = rt.block_on(async {
            futures::stream::iter(cases.iter())
                .map(|c| {
                    let setup = &setup;
                    async move { (c.id.clone(), setup_case(setup, c).await) }
                })
                .buffer_unordered(SETUP_CONCURRENCY)
                .filter_map(|(id, r)| async move { r.err().map(|e| (id, e.to_string())) })
                .collect()
                .await
        });

        // The parameter objects, as stored: graft reads them from a file at startup.
        let params = rt.block_on(async {
            let mut params = Vec::new();
            for c in cases.iter().filter(|c| !setup_errors.contains_key(&c.id)) {
                params.extend(stored_params(&setup, c).await?);
            }
            Ok::<_, support::Error>(params)
        })?;
        let params_file = root.join("params.yaml");
        std::fs::write(&params_file, yaml_stream(&params)?)?;

        let lint = lint(&root.join("lint"), cases)?;
        let mut shared = Vec::new();
        let mut alone = HashMap::new();
        for c in cases {
            if c.expect().get("rejected").is_some() || lint.contains_key(&c.id) {
                continue;
            }
            if rt.block_on(isolated(&setup, c))? {
                shared.extend(c.policies());
            } else {
                alone.insert(c.id.clone(), c.policies());
            }
        }

        let mut alone_ids: Vec<&String> = alone.keys().collect();
        alone_ids.sort();
        eprintln!(
            "conformance: {} policies and bindings in the shared set; cases with a set of \
             their own: {alone_ids:?}; graft refuses the policies of: {:?}",
            shared.len(),
            {
                let mut ids: Vec<&String> = lint.keys().collect();
                ids.sort();
                ids
            }
        );
        let policies_dir = root.join("policies");
        std::fs::create_dir_all(&policies_dir)?;
        std::fs::write(policies_dir.join("policies.yaml"), "")?;
        let pki = support::server::Pki::new("graft-conformance-webhook-ca")?;
        let pair = pki.issue(&["127.0.0.1"])?;
        let (cert, key) = (root.join("graft.crt"), root.join("graft.key"));
        std::fs::write(&cert, &pair.cert_pem)?;
        std::fs::write(&key, &pair.key_pem)?;
        let graft = Graft::start(&GraftOptions {
            name: "conformance",
            policies: &policies_dir,
            cert: &cert,
            key: &key,
            kubeconfig: Some(&setup_kubeconfig),
            log_dir: &root,
            extra_args: &["--params", params_file.to_str().ok_or("temp dir path")?],
        })?;
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(pki.ca_pem());
        let webhook = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "graft-conformance"},
            "webhooks": [{
                "name": WEBHOOK,
                "clientConfig": {
                    "url": format!("https://{}/mutate", graft.addr),
                    "caBundle": ca_bundle,
                },
                "rules": [{
                    "apiGroups": ["*"], "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE", "DELETE"],
                    "resources": ["*", "*/status"], "scope": "*",
                }],
                "matchPolicy": "Equivalent",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail",
                "reinvocationPolicy": "IfNeeded",
                "timeoutSeconds": 30,
                "matchConditions": [{
                    "name": "case-requests-only",
                    "expression": format!("request.userInfo.username == '{REQUEST_USER}'"),
                }],
            }],
        });
        rt.block_on(async {
            setup
                .create(&webhook, "")
                .await?
                .ok("the webhook configuration")?;
            // Created last: once graft knows this namespace, its namespace cache holds
            // every case's (one watch, in order).
            let probe_ns = json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": PROBE_NS, "labels": {"map-cases/probe": "true"}}});
            setup
                .create(&probe_ns, "")
                .await?
                .ok("the probe namespace")?;
            Ok::<_, support::Error>(())
        })?;
        let env = Env {
            rt,
            cluster: Some(cluster),
            graft: Some(graft),
            setup,
            request,
            policies_dir,
            lint,
            setup_errors,
            alone,
            shared,
            current: Mutex::new((None, 0)),
        };
        env.serve(&PolicySet::Shared)?;
        Ok(env)
    }

    fn stop(mut self) {
        if let Some(graft) = self.graft.take() {
            graft.stop();
        }
        if let Some(cluster) = self.cluster.take() {
            cluster.stop();
        }
    }

    /// Makes graft serve `set` (plus the probe policy), and waits until the apiserver's
    /// calls to graft show it: a dry-run probe comes back with this set's token.
    fn serve(&self, set: &PolicySet) -> Result {
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.0.as_ref() == Some(set) {
            return Ok(());
        }
        current.1 += 1;
        let token = format!("set-{}", current.1);
        let mut documents = probe_policy(&token);
        match set {
            PolicySet::Shared => documents.extend(self.shared.iter().cloned()),
            PolicySet::Alone(id) => documents.extend(self.alone[id].iter().cloned()),
        }
        let text = yaml_stream(&documents)?;
        // Written beside the directory and renamed in: graft never reads half a set.
        let staged = self.policies_dir.with_extension("staged.yaml");
        std::fs::write(&staged, text)?;
        std::fs::rename(&staged, self.policies_dir.join("policies.yaml"))?;
        let probe = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": PROBE_NAME, "namespace": PROBE_NS}});
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let reply = self
                .rt
                .block_on(self.request.dry_run_create(&probe, PROBE_NS))?;
            let label = &reply.body["metadata"]["labels"]["map-cases/sentinel"];
            if reply.code < 300 && label == token.as_str() {
                break;
            }
            let last = if reply.code < 300 {
                format!("label {label}")
            } else {
                reply.message()
            };
            if Instant::now() > deadline {
                let log = self.graft.as_ref().map(Graft::log_tail).unwrap_or_default();
                return Err(format!(
                    "graft did not serve policy set {set:?} within 60 s (last probe: {last})\n{log}"
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        current.0 = Some(set.clone());
        Ok(())
    }

    /// The differences between graft's result and the apiserver's; empty when equal.
    fn run_case(&self, case: &Case) -> Result<Vec<String>> {
        if let Some(error) = self.setup_errors.get(&case.id) {
            return Err(format!("setting the case up failed: {error}").into());
        }
        let lint = self.lint.get(&case.id).cloned().unwrap_or_default();
        if let Some(want) = case.expect()["rejected"].as_str() {
            return Ok(check_rejected(want, &lint));
        }
        if !lint.is_empty() {
            return Ok(lint
                .iter()
                .map(|f| {
                    format!(
                        "graft refuses policy {} that the apiserver accepts: {}",
                        f.policy, f.text
                    )
                })
                .collect());
        }
        let set = if self.alone.contains_key(&case.id) {
            PolicySet::Alone(case.id.clone())
        } else {
            PolicySet::Shared
        };
        self.serve(&set)?;
        let got = self.rt.block_on(self.send(case))?;
        Ok(compare(case.expect(), &got))
    }

    /// Sends the case's request as the recorder did, and reads back what was stored.
    async fn send(&self, case: &Case) -> Result<Outcome> {
        let ns = case.namespace();
        let request = &case.doc["request"];
        let (_, namespaced) = self.setup.collection(&request["object"], ns).await?;
        let object = with_namespace(&request["object"], namespaced, ns);
        let reply = match case.operation() {
            "CREATE" => self.request.create(&object, ns).await?,
            "UPDATE" => {
                let subresource = request["subresource"].as_str();
                self.request.replace(&object, ns, subresource).await?
            }
            "DELETE" => {
                let reply = self.request.delete(&object, ns).await?;
                if reply.code >= 300 {
                    reply
                } else {
                    let stored = self.setup.get(&object, ns).await?;
                    if stored.code == 404 {
                        return Ok(Outcome::Gone);
                    }
                    stored
                }
            }
            other => return Err(format!("unsupported operation {other}").into()),
        };
        if reply.code >= 300 {
            return Ok(Outcome::Denied {
                message: reply.message(),
                code: reply.code,
            });
        }
        Ok(Outcome::Object(normalize(&reply.body, &object)))
    }
}

enum Outcome {
    Object(Value),
    Gone,
    Denied { message: String, code: u16 },
}

/// Graft's result against the recorded `expect`.
fn compare(expect: &Value, got: &Outcome) -> Vec<String> {
    let prefix = format!("admission webhook \"{WEBHOOK}\" denied the request: ");
    let mut out = Vec::new();
    match got {
        Outcome::Object(object) if expect.get("object").is_some() => {
            diff(&expect["object"], object, "", &mut out);
        }
        Outcome::Gone if expect["gone"] == json!(true) => {}
        Outcome::Denied { message, code } if expect.get("denied").is_some() => {
            let inner = message.strip_prefix(&prefix).unwrap_or(message);
            if expect["denied"] != inner {
                out.push(format!(
                    "denial: expected {}, got {}",
                    expect["denied"],
                    json!(inner)
                ));
            }
            if expect["code"] != *code {
                out.push(format!(
                    "HTTP code: expected {}, got {code}",
                    expect["code"]
                ));
            }
        }
        _ => {
            let want = if let Some(denied) = expect.get("denied") {
                format!("denied ({}): {denied}", expect["code"])
            } else if expect.get("gone").is_some() {
                "the object gone".to_string()
            } else {
                format!("object {}", expect["object"])
            };
            let got = match got {
                Outcome::Object(object) => format!("object {object}"),
                Outcome::Gone => "the object gone".to_string(),
                Outcome::Denied { message, code } => format!("denied ({code}): {message:?}"),
            };
            out.push(format!("expected {want}\n  got {got}"));
        }
    }
    out
}

/// A policy refused at creation (`expect.rejected`, `Kind.group "NAME" is invalid:
/// ERRORS`): graft's lint must refuse it with the same field errors.
fn check_rejected(want: &str, lint: &[Finding]) -> Vec<String> {
    let Some((head, errors)) = want.split_once(" is invalid: ") else {
        return vec![format!("unexpected form of the recorded refusal: {want}")];
    };
    let name = head
        .rsplit_once(' ')
        .map(|(_, n)| n.trim_matches('"'))
        .unwrap_or_default();
    let texts: Vec<&str> = lint
        .iter()
        .filter(|f| f.policy == name)
        .map(|f| f.text.as_str())
        .collect();
    let got = match texts.as_slice() {
        [] => {
            return vec![format!(
                "graft accepts {name}, which the apiserver refuses: {errors}"
            )];
        }
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    };
    if got == errors {
        Vec::new()
    } else {
        vec![format!(
            "graft refuses {name} with other words:\n  apiserver: {errors}\n  graft:     {got}"
        )]
    }
}

/// `graft lint` (the real binary) on every case's policies, one file a case: the errors
/// by case id.
fn lint(dir: &Path, cases: &[Arc<Case>]) -> Result<HashMap<String, Vec<Finding>>> {
    std::fs::create_dir_all(dir)?;
    for c in cases {
        std::fs::write(
            dir.join(format!("c{}.yaml", c.id)),
            yaml_stream(&c.policies())?,
        )?;
    }
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_graft"))
        .args(["lint", "--format", "json"])
        .arg(dir)
        .output()?;
    let report: Value = serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "graft lint: {e}: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    let mut out: HashMap<String, Vec<Finding>> = HashMap::new();
    for finding in report["findings"].as_array().into_iter().flatten() {
        if finding["severity"] != "error" {
            continue;
        }
        let file = finding["file"].as_str().unwrap_or_default();
        let Some(id) = Path::new(file)
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.strip_prefix('c'))
        else {
            return Err(format!("graft lint: a finding outside the cases: {finding}").into());
        };
        let field = finding["field"].as_str().unwrap_or_default();
        let message = finding["message"].as_str().unwrap_or_default();
        let text = if field.is_empty() {
            message.to_string()
        } else {
            format!("{field}: {message}")
        };
        out.entry(id.to_string()).or_default().push(Finding {
            policy: finding["policy"].as_str().unwrap_or_default().to_string(),
            text,
        });
    }
    Ok(out)
}

/// Creates the case's namespace (unless its setup holds it), its setup objects in order
/// (waiting for CRDs), and for UPDATE and DELETE the object first.
async fn setup_case(api: &Api, case: &Case) -> Result {
    let ns = case.namespace();
    let setup = case.setup();
    let own = |o: &Value| o["kind"] == "Namespace" && o["metadata"]["name"] == ns;
    if !setup.iter().any(own) {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        api.create(&namespace, ns).await?.ok("the namespace")?;
    }
    for object in &setup {
        let (_, namespaced) = api.collection(object, ns).await?;
        let object = with_namespace(object, namespaced, ns);
        api.create(&object, ns).await?.ok("a setup object")?;
        if object["kind"] == "CustomResourceDefinition" {
            api.wait_crd(&object).await?;
        }
    }
    if matches!(case.operation(), "UPDATE" | "DELETE") {
        let request = &case.doc["request"];
        let old = if request["oldObject"].is_null() {
            &request["object"]
        } else {
            &request["oldObject"]
        };
        let (_, namespaced) = api.collection(old, ns).await?;
        let old = with_namespace(old, namespaced, ns);
        api.create(&old, ns).await?.ok("the old object")?;
    }
    Ok(())
}

/// The case's setup objects of a kind one of its policies takes parameters of, as the
/// apiserver stored them.
async fn stored_params(api: &Api, case: &Case) -> Result<Vec<Value>> {
    let ns = case.namespace();
    let kinds: Vec<Value> = case
        .policies()
        .iter()
        .map(|p| p["spec"]["paramKind"].clone())
        .filter(|k| !k.is_null())
        .collect();
    let mut out = Vec::new();
    for object in case.setup() {
        let is_param = kinds
            .iter()
            .any(|k| k["apiVersion"] == object["apiVersion"] && k["kind"] == object["kind"]);
        if is_param {
            let (_, namespaced) = api.collection(&object, ns).await?;
            let object = with_namespace(&object, namespaced, ns);
            out.push(api.get(&object, ns).await?.ok("a parameter object")?);
        }
    }
    Ok(out)
}

/// Documents as one YAML stream.
fn yaml_stream(documents: &[Value]) -> Result<String> {
    let mut text = String::new();
    for document in documents {
        text.push_str("---\n");
        text.push_str(&serde_yaml::to_string(document)?);
    }
    Ok(text)
}

/// Whether every policy of the case matches requests in the case's namespace only: a
/// namespaceSelector on its name, and rules naming namespaced resources (or Namespaces,
/// which the selector filters too). Other cases get graft's policy set to themselves.
async fn isolated(api: &Api, case: &Case) -> Result<bool> {
    let ns = case.namespace();
    for policy in case.policies() {
        if policy["kind"] != "MutatingAdmissionPolicy" {
            continue;
        }
        let constraints = &policy["spec"]["matchConstraints"];
        let selector = &constraints["namespaceSelector"];
        let by_label = selector["matchLabels"]["kubernetes.io/metadata.name"] == ns;
        let by_expression = selector["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| {
                e["key"] == "kubernetes.io/metadata.name"
                    && e["operator"] == "In"
                    && e["values"] == json!([ns])
            });
        if !by_label && !by_expression {
            return Ok(false);
        }
        for rule in constraints["resourceRules"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if rule["scope"] == "Namespaced" {
                continue;
            }
            let strings = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            };
            for group in strings("apiGroups") {
                for version in strings("apiVersions") {
                    for resource in strings("resources") {
                        if [&group, &version, &resource]
                            .iter()
                            .any(|s| s.contains('*'))
                        {
                            return Ok(false);
                        }
                        let resource = resource.split('/').next().unwrap_or_default();
                        if group.is_empty() && resource == "namespaces" {
                            continue;
                        }
                        let api_version = if group.is_empty() {
                            version.clone()
                        } else {
                            format!("{group}/{version}")
                        };
                        if api.resource_named(&api_version, resource).await? != Some(true) {
                            return Ok(false);
                        }
                    }
                }
            }
        }
    }
    Ok(true)
}

/// The probe policy: labels the dry-run CREATE of ConfigMap map-probe/map-sentinel-probe
/// with `token`, so a probe shows which policy set graft serves.
fn probe_policy(token: &str) -> Vec<Value> {
    let expression = format!(
        "Object{{metadata: Object.metadata{{labels: {{\"map-cases/sentinel\": \"{token}\"}}}}}}"
    );
    vec![
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": "zz-probe"},
            "spec": {
                "matchConstraints": {
                    "namespaceSelector": {"matchLabels": {"map-cases/probe": "true"}},
                    "resourceRules": [{
                        "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"],
                        "operations": ["CREATE"], "resourceNames": [PROBE_NAME],
                    }],
                },
                "failurePolicy": "Fail",
                "reinvocationPolicy": "Never",
                "mutations": [{"patchType": "ApplyConfiguration",
                    "applyConfiguration": {"expression": expression}}],
            },
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": "zz-probe"},
            "spec": {"policyName": "zz-probe"},
        }),
    ]
}
