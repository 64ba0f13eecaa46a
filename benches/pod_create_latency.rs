//! The latency of creating a pod through a real kube-apiserver, five ways, taking turns
//! in rounds on one cluster: (a) no mutation, (b) the Multus example as a
//! MutatingAdmissionPolicy run in-tree by the apiserver, (c) the same MAP run by `graft
//! serve` as the webhook, (d) the Multus example as graft's own policy, (e) graft called
//! as the webhook with nothing to do (the MAP's binding selects no namespace): the
//! webhook's round trip alone. Each way creates the realistic GPU worker pod
//! (`benches/fixtures/pod-create-realistic.json`) `CREATES` times (default 2,000), one
//! at a time, in four rounds (after 100 unmeasured creates in the first, 20 in the others:
//! a switch of ways opens new connections), and checks that every
//! stored pod carries the annotation exactly when a mutation was installed. It also
//! prints graft's own mean time per review.
//!
//! `KUBEBUILDER_ASSETS=... cargo bench --bench pod_create_latency`; `PIN=1` puts etcd,
//! kube-apiserver and graft on CPU 0 and this process (the client) on CPU 1 (`taskset`).
//! Without `KUBEBUILDER_ASSETS` it says so and does nothing.

#[allow(dead_code)]
#[path = "../tests/apiserver/e2e.rs"]
mod e2e;
#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use e2e::{Cluster, Graft, GraftOptions, Result, poll};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const NAMESPACE: &str = "dynamo-system";
const ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";
const WARM_UP: usize = 100;
/// The ways take turns this many times.
const ROUNDS: usize = 4;
/// Unmeasured creates after each switch of ways in the later rounds.
const ROUND_WARM_UP: usize = 20;
const WAIT: Duration = Duration::from_secs(60);

fn main() -> Result {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it as a test: skip then.
    if !std::env::args().any(|arg| arg == "--bench") {
        return Ok(());
    }
    let Some(assets) = std::env::var_os("KUBEBUILDER_ASSETS") else {
        println!(
            "pod_create_latency: skipped, KUBEBUILDER_ASSETS is unset (a directory with kube-apiserver and etcd)"
        );
        return Ok(());
    };
    let creates: usize = match std::env::var("CREATES") {
        Ok(text) => text.parse()?,
        Err(_) => 2_000,
    };
    let pin = std::env::var("PIN").is_ok_and(|value| value == "1");
    let cluster = Cluster::start(Path::new(&assets))?;
    let result = run(&cluster, creates, pin);
    cluster.stop();
    result
}

fn run(cluster: &Cluster, creates: usize, pin: bool) -> Result {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let client = runtime.block_on(client(&cluster.admin_kubeconfig))?;
    let pods: Api<Pod> = Api::namespaced(client, NAMESPACE);
    cluster.create_namespace(NAMESPACE)?;
    let repo = support::repo();
    let map_file = repo.join("policies/map/multus-networks.yaml");
    let native_file = repo.join("policies/multus-networks.yaml");
    let pki = support::server::Pki::new("pod-create-latency webhook CA")?;
    let pair = pki.issue(&["127.0.0.1"])?;
    let root = cluster.dir.path();
    let (ca, cert, key) = (
        root.join("webhook-ca.crt"),
        root.join("graft.crt"),
        root.join("graft.key"),
    );
    std::fs::write(&ca, pki.ca_pem())?;
    std::fs::write(&cert, &pair.cert_pem)?;
    std::fs::write(&key, &pair.key_pem)?;
    if pin {
        pin_processes()?;
    }
    // The grafts run throughout; a way is installed only while it is measured. The idle
    // one runs the MAP with its binding pointed at a namespace that does not exist: the
    // apiserver calls it for every pod, and it answers each with no patch.
    let map_text = std::fs::read_to_string(&map_file)?;
    let idle_text = map_text.replace(
        "kubernetes.io/metadata.name: dynamo-system",
        "kubernetes.io/metadata.name: no-such-namespace",
    );
    if idle_text == map_text {
        return Err("the MAP example's binding no longer selects dynamo-system by name".into());
    }
    let mut grafts = Vec::new();
    for (name, text) in [
        ("map", map_text.clone()),
        ("native", std::fs::read_to_string(&native_file)?),
        ("idle", idle_text),
    ] {
        let policies = tempfile::tempdir()?;
        std::fs::write(policies.path().join("multus-networks.yaml"), text)?;
        let graft = Graft::start(&GraftOptions {
            name,
            policies: policies.path(),
            cert: &cert,
            key: &key,
            kubeconfig: Some(&cluster.admin_kubeconfig),
            log_dir: root,
            extra_args: &["--log-format", "json"],
        })?;
        poll(WAIT, "graft ready", || Ok(graft.ready().then_some(())))?;
        let config = webhook_config(&graft, policies.path(), &ca, name)?;
        grafts.push((graft, config, policies));
    }
    if pin {
        pin_processes()?;
    }
    let ways: [(&str, Install, bool); 5] = [
        ("(a) no mutation", Install::Nothing, false),
        ("(b) MAP in-tree", Install::Objects(map_text.clone()), true),
        (
            "(c) MAP in graft",
            Install::Objects(grafts[0].1.to_string()),
            true,
        ),
        (
            "(d) graft's own policy",
            Install::Objects(grafts[1].1.to_string()),
            true,
        ),
        (
            "(e) graft called, nothing to do",
            Install::Objects(grafts[2].1.to_string()),
            false,
        ),
    ];
    // Rounds alternate the ways, so that a slower cluster later in the run (more pods
    // stored) weighs on each way alike.
    let mut latencies: Vec<Vec<Duration>> = vec![Vec::with_capacity(creates); ways.len()];
    let per_round = creates.div_ceil(ROUNDS);
    let mut sequence = 0usize;
    let mut retried = 0usize;
    for round in 0..ROUNDS {
        for (index, (label, install, mutated)) in ways.iter().enumerate() {
            let mutated = *mutated;
            if let Install::Objects(objects) = install {
                cluster.kubectl_with_input(&["apply", "-f", "-"], Some(objects))?;
            }
            wait_for_annotation(cluster, mutated)?;
            // A switch of ways makes new connections (the apiserver's to the webhook):
            // their set-up is not what is measured.
            let warm_up = if round == 0 { WARM_UP } else { ROUND_WARM_UP };
            let wanted = per_round.min(creates - latencies[index].len());
            let mut done = 0;
            while done < warm_up + wanted {
                sequence += 1;
                let pod = worker_pod(&format!("worker-{sequence}"))?;
                let started = Instant::now();
                let stored = match runtime.block_on(pods.create(&PostParams::default(), &pod)) {
                    Ok(stored) => stored,
                    // A kept-alive connection the apiserver closed meanwhile: not a
                    // create's latency; the next create opens another.
                    Err(kube::Error::Service(error)) => {
                        eprintln!("{label}: create retried after a transport error: {error}");
                        retried += 1;
                        continue;
                    }
                    Err(error) => return Err(error.into()),
                };
                let elapsed = started.elapsed();
                let annotated = stored
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|annotations| annotations.contains_key(ANNOTATION));
                if annotated != mutated {
                    return Err(format!(
                        "{label}: the stored pod {} the Multus annotation",
                        if annotated { "has" } else { "lacks" }
                    )
                    .into());
                }
                if done >= warm_up {
                    latencies[index].push(elapsed);
                }
                done += 1;
            }
            if let Install::Objects(objects) = install {
                cluster.kubectl_with_input(&["delete", "-f", "-"], Some(objects))?;
            }
        }
    }
    wait_for_annotation(cluster, false)?;
    let mut review_seconds = Vec::new();
    for (mut graft, _, _) in grafts {
        graft.check_running()?;
        let sum = graft.metric("graft_admission_duration_seconds_sum{decision=\"allowed\"}")?;
        let count = graft.metric("graft_admission_duration_seconds_count{decision=\"allowed\"}")?;
        review_seconds.push(sum / count);
        graft.stop();
    }
    let rows: Vec<(&str, Vec<Duration>)> = ways
        .iter()
        .map(|(label, _, _)| *label)
        .zip(latencies)
        .collect();

    println!(
        "\npod creates through kube-apiserver, {creates} per way in {ROUNDS} rounds (the first \
         after {WARM_UP} unmeasured creates, the others after {ROUND_WARM_UP}), one at a time{}; \
         {retried} creates retried after a transport error",
        if pin { ", pinned" } else { "" }
    );
    println!("| way | p50 | p90 | p99 | mean |");
    println!("|---|---:|---:|---:|---:|");
    let mut p50 = Vec::new();
    for (label, mut latencies) in rows {
        latencies.sort();
        let at =
            |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
        let mean = latencies.iter().sum::<Duration>() / latencies.len() as u32;
        p50.push(at(0.5));
        println!(
            "| {label} | {} | {} | {} | {} |",
            ms(at(0.5)),
            ms(at(0.9)),
            ms(at(0.99)),
            ms(mean)
        );
    }
    println!(
        "\ngraft's own time per review (graft_admission_duration_seconds, mean): (c) {}, (d) {}, (e) {}",
        ms(Duration::from_secs_f64(review_seconds[0])),
        ms(Duration::from_secs_f64(review_seconds[1])),
        ms(Duration::from_secs_f64(review_seconds[2])),
    );
    println!(
        "\nat p50: (c) / (b) {:.2}x; (d) / (b) {:.2}x; (b) / (a) {:.2}x; (e) / (a) {:.2}x",
        p50[2].as_secs_f64() / p50[1].as_secs_f64(),
        p50[3].as_secs_f64() / p50[1].as_secs_f64(),
        p50[1].as_secs_f64() / p50[0].as_secs_f64(),
        p50[4].as_secs_f64() / p50[0].as_secs_f64(),
    );
    Ok(())
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

async fn client(kubeconfig: &Path) -> Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    Ok(kube::Client::try_from(config)?)
}

/// The realistic GPU worker pod, as a client creates it: the captured object without
/// what the apiserver sets, with the namespace's default ServiceAccount.
fn worker_pod(name: &str) -> Result<Pod> {
    let fixture: Value = serde_json::from_slice(&std::fs::read(
        support::repo().join("benches/fixtures/pod-create-realistic.json"),
    )?)?;
    let mut pod = fixture["request"]["object"].clone();
    let metadata = pod["metadata"].as_object_mut().ok_or("no metadata")?;
    for field in [
        "creationTimestamp",
        "managedFields",
        "ownerReferences",
        "uid",
        "generateName",
    ] {
        metadata.remove(field);
    }
    metadata.insert("name".into(), json!(name));
    let spec = pod["spec"].as_object_mut().ok_or("no spec")?;
    // The Priority admission plugin computes these itself and refuses a client's.
    for field in ["priority", "preemptionPolicy", "serviceAccount"] {
        spec.remove(field);
    }
    spec.insert("serviceAccountName".into(), json!("default"));
    pod.as_object_mut().ok_or("not an object")?.remove("status");
    Ok(serde_json::from_value(pod)?)
}

/// Waits until a server-side dry run of the pod shows the Multus annotation (or no
/// longer does): the mutation just installed (or removed) is in effect.
fn wait_for_annotation(cluster: &Cluster, present: bool) -> Result {
    let pod = serde_json::to_value(worker_pod("probe")?)?;
    poll(WAIT, "the mutation to take effect", || {
        let stored = cluster.dry_run_create(&pod)?;
        let annotated = stored["metadata"]["annotations"][ANNOTATION].is_string();
        Ok((annotated == present).then_some(()))
    })
}

/// The webhook configuration `graft webhook-config` generates for `policies`, calling
/// `graft` by URL, named `name`.
fn webhook_config(graft: &Graft, policies: &Path, ca: &Path, name: &str) -> Result<Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_graft"))
        .arg("webhook-config")
        .arg("--policies")
        .arg(policies)
        .args(["--failure-policy", "Fail"])
        .output()?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned().into());
    }
    let mut config: Value = serde_yaml::from_slice(&output.stdout)?;
    config["metadata"]["name"] = json!(format!("graft-{name}"));
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(std::fs::read(ca)?);
    for webhook in config["webhooks"].as_array_mut().ok_or("no webhooks")? {
        webhook["clientConfig"] = json!({
            "url": format!("https://{}/mutate", graft.addr),
            "caBundle": ca_bundle,
        });
    }
    Ok(config)
}

/// What a way installs while it is measured.
enum Install {
    Nothing,
    /// Objects to `kubectl apply` (and delete after): the MAP and its binding, or a
    /// webhook configuration.
    Objects(String),
}

/// Puts this process's children (etcd, kube-apiserver, graft), every thread, on CPU 0
/// and this process on CPU 1.
fn pin_processes() -> Result {
    let me = std::process::id().to_string();
    let children = Command::new("pgrep").args(["-P", &me]).output()?;
    for pid in String::from_utf8_lossy(&children.stdout).split_whitespace() {
        taskset("0", pid)?;
    }
    taskset("1", &me)
}

fn taskset(cpu: &str, pid: &str) -> Result {
    let status = Command::new("taskset")
        .args(["-a", "-p", "-c", cpu, pid])
        .stdout(std::process::Stdio::null())
        .status()?;
    if !status.success() {
        return Err(format!("taskset -apc {cpu} {pid} failed").into());
    }
    Ok(())
}
