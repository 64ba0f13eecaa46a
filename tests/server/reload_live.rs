//! Hot reload of the policy set under load, for each way a policy directory changes:
//! kubelet's AtomicWriter on a mounted ConfigMap, an in-place edit, and an editor's
//! write-then-rename. While a client sends reviews without pause: no request fails, a
//! valid update shows through exactly one reload the change triggered, an invalid one
//! keeps the old behaviour and is reported, and a later valid one is picked up.
//!
//! How soon an update shows depends on the machine's load, so it is printed, not
//! asserted (BENCHMARKS.md records it); what is asserted holds on any machine: each
//! change is seen through the watch (inotify: nothing rescans on a timer) and causes
//! one successful reload, never two and never a restart.

use crate::support::reload::*;
use crate::support::server::*;

async fn check(editor: impl Editor, how: &str) -> Result {
    let mut harness = Harness::start(&editor.dir(), graft::watch::WatchConfig::default()).await?;
    let mut load = harness.load()?;
    load.wait_version(Some("v1")).await?;
    let first_revision = harness.revision();

    // A valid update.
    let changed = editor.write(&[(FILE, versioned("v2"))])?;
    let seen = load.wait_version(Some("v2")).await?;
    let took = delay(changed, seen);
    println!("{how}: v2 answered {took:?} after the change");
    harness.wait_reload(|status| status.successes >= 1).await?;
    assert_eq!(harness.reloads.borrow().successes, 1, "{how}");
    let second_revision = harness.revision();
    assert_ne!(first_revision, second_revision);

    // An invalid update: reported, and the old behaviour stays.
    let failures = harness.reloads.borrow().failures;
    editor.write(&[(FILE, invalid())])?;
    harness
        .wait_reload(|status| status.failures > failures)
        .await?;
    load.wait_answers(20).await?;
    assert_eq!(load.observed.borrow().version.as_deref(), Some("v2"));
    assert_eq!(harness.revision(), second_revision);
    let metrics = harness.metrics().await?;
    assert!(
        metrics.contains("graft_policy_reloads_total{result=\"error\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("graft_policy_last_reload_success_timestamp_seconds"),
        "{metrics}"
    );
    // Serving the last good set is correct: still ready.
    assert_eq!(harness.ready().await?, 200);

    // A later valid update is picked up.
    let changed = editor.write(&[(FILE, versioned("v3"))])?;
    let seen = load.wait_version(Some("v3")).await?;
    let took = delay(changed, seen);
    println!("{how}: v3 answered {took:?} after the change");

    let observed = load.finish().await?;
    assert!(
        observed.failures.is_empty(),
        "{how}: failed requests: {:?}",
        observed.failures
    );
    // Never a request on the broken set, never back to an older one.
    assert_eq!(
        Load::versions(&observed),
        [Some("v1"), Some("v2"), Some("v3")],
        "{how}"
    );
    println!("{how}: {} reviews answered", observed.answered);

    // The revision is in every answer's auditAnnotations and in the metrics.
    let revision = harness.revision();
    let body = fixture(FIXTURE)?;
    let mut h1 = http1(connect(harness.server.running.addr, harness.client.clone()).await?).await?;
    let (_, answer) = send1(
        &mut h1,
        mutate_request("POST", "application/json", body.clone())?,
    )
    .await?;
    assert_eq!(
        read_answer(&body, &answer)?,
        (Some("v3".to_string()), revision.clone())
    );
    let metrics = harness.metrics().await?;
    assert!(
        metrics.contains(&format!(
            "graft_policy_set_info{{revision=\"{revision}\"}} 1"
        )),
        "{metrics}"
    );
    assert!(!metrics.contains(&first_revision), "{metrics}");
    assert!(!metrics.contains(&second_revision), "{metrics}");
    assert!(
        metrics.contains("graft_policy_reloads_total{result=\"success\"} 2"),
        "{metrics}"
    );
    harness.server.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_atomic_writer_update_under_load() -> Result {
    let volume = ConfigMapDir::new(&[(FILE, versioned("v1"))])?;
    // The volume as kubelet lays it out: the key is a symlink through `..data`.
    let link = std::fs::read_link(volume.dir().join(FILE))?;
    assert_eq!(link, std::path::PathBuf::from(format!("..data/{FILE}")));
    tokio::time::timeout(DEADLINE, check(volume, "AtomicWriter")).await?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_place_edit_under_load() -> Result {
    let dir = PlainDir::new(Edit::InPlace, &[(FILE, versioned("v1"))])?;
    tokio::time::timeout(DEADLINE, check(dir, "in place")).await?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_rename_under_load() -> Result {
    let dir = PlainDir::new(Edit::Rename, &[(FILE, versioned("v1"))])?;
    tokio::time::timeout(DEADLINE, check(dir, "rename")).await?
}
