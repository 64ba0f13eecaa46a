//! The edges of policy reload: changes that leave the set as it is, an empty set, a
//! directory that disappears and comes back, and polling for filesystems without events.

use std::time::Duration;

use crate::support::reload::*;
use crate::support::server::*;

fn fast() -> graft::watch::WatchConfig {
    graft::watch::WatchConfig {
        debounce: Duration::from_millis(50),
        ..graft::watch::WatchConfig::default()
    }
}

#[tokio::test]
async fn editor_leftovers_and_identical_content_change_nothing() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let dir = PlainDir::new(Edit::Rename, &[(FILE, versioned("v1"))])?;
        let mut harness = Harness::start(&dir.dir(), fast()).await?;
        let revision = harness.revision();

        // Swap and backup files beside the policy, then the same content saved again.
        std::fs::write(dir.dir().join(format!(".{FILE}.swp")), "\u{0}garbage: [")?;
        std::fs::write(dir.dir().join(format!("{FILE}~")), "garbage: [")?;
        harness.wait_reload(|status| status.unchanged >= 1).await?;
        let unchanged = harness.reloads.borrow().unchanged;
        dir.write(&[(FILE, versioned("v1"))])?;
        harness
            .wait_reload(|status| status.unchanged > unchanged)
            .await?;

        let status = harness.reloads.borrow().clone();
        assert_eq!((status.successes, status.failures), (0, 0), "{status:?}");
        assert_eq!(status.revision, revision);
        assert_eq!(harness.revision(), revision);
        let metrics = harness.metrics().await?;
        // Counters of known results start at 0: counted means present and not 0.
        assert!(
            metrics.contains("graft_policy_reloads_total{result=\"unchanged\"}")
                && !metrics.contains("graft_policy_reloads_total{result=\"unchanged\"} 0\n"),
            "{metrics}"
        );
        assert!(
            metrics.contains("graft_policy_reloads_total{result=\"success\"} 0\n")
                && metrics.contains("graft_tls_reloads_total{result=\"success\"} 0\n"),
            "{metrics}"
        );
        harness.server.shutdown().await
    })
    .await?
}

#[tokio::test]
async fn an_empty_set_is_a_valid_update() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let dir = PlainDir::new(Edit::InPlace, &[(FILE, versioned("v1"))])?;
        let mut harness = Harness::start(&dir.dir(), fast()).await?;
        let mut load = harness.load()?;
        load.wait_version(Some("v1")).await?;

        dir.write(&[])?;
        harness.wait_reload(|status| status.successes >= 1).await?;
        load.wait_version(None).await?;
        assert_eq!(harness.server.running.state.policies().len(), 0);
        assert!(harness.metrics().await?.contains("graft_policies_loaded 0"));
        assert_eq!(harness.ready().await?, 200);

        let observed = load.finish().await?;
        assert!(observed.failures.is_empty(), "{:?}", observed.failures);
        assert_eq!(Load::versions(&observed), [Some("v1"), None]);
        harness.server.shutdown().await
    })
    .await?
}

#[tokio::test]
async fn a_directory_that_disappears_keeps_the_set_and_returns() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let root = tempfile::tempdir()?;
        let policies = root.path().join("policies");
        std::fs::create_dir(&policies)?;
        std::fs::write(policies.join(FILE), versioned("v1"))?;
        let mut harness = Harness::start(&policies, fast()).await?;
        let mut load = harness.load()?;
        load.wait_version(Some("v1")).await?;

        std::fs::remove_dir_all(&policies)?;
        harness.wait_reload(|status| status.failures >= 1).await?;
        load.wait_answers(10).await?;
        assert_eq!(load.observed.borrow().version.as_deref(), Some("v1"));
        assert_eq!(harness.ready().await?, 200);
        let metrics = harness.metrics().await?;
        assert!(
            metrics.contains("graft_policy_reloads_total{result=\"error\"}")
                && !metrics.contains("graft_policy_reloads_total{result=\"error\"} 0\n"),
            "{metrics}"
        );

        // It comes back whole, as a renamed directory (a new inode at the old path).
        let staging = root.path().join("staging");
        std::fs::create_dir(&staging)?;
        std::fs::write(staging.join(FILE), versioned("v2"))?;
        std::fs::rename(&staging, &policies)?;
        load.wait_version(Some("v2")).await?;

        // And the new directory is watched: an edit in it is seen too.
        std::fs::write(policies.join(FILE), versioned("v3"))?;
        load.wait_version(Some("v3")).await?;

        let observed = load.finish().await?;
        assert!(observed.failures.is_empty(), "{:?}", observed.failures);
        assert_eq!(
            Load::versions(&observed),
            [Some("v1"), Some("v2"), Some("v3")]
        );
        harness.server.shutdown().await
    })
    .await?
}

#[tokio::test]
async fn poll_mode_sees_a_kubelet_update() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let volume = ConfigMapDir::new(&[(FILE, versioned("v1"))])?;
        let watch = graft::watch::WatchConfig {
            mode: graft::watch::WatchMode::Poll,
            poll_interval: Duration::from_millis(100),
            ..fast()
        };
        let mut harness = Harness::start(&volume.dir(), watch).await?;
        let mut load = harness.load()?;
        load.wait_version(Some("v1")).await?;
        volume.write(&[(FILE, versioned("v2"))])?;
        harness.wait_reload(|status| status.successes >= 1).await?;
        load.wait_version(Some("v2")).await?;
        let observed = load.finish().await?;
        assert!(observed.failures.is_empty(), "{:?}", observed.failures);
        harness.server.shutdown().await
    })
    .await?
}

#[tokio::test]
async fn watch_none_never_reloads() -> Result {
    tokio::time::timeout(DEADLINE, async {
        let dir = PlainDir::new(Edit::InPlace, &[(FILE, versioned("v1"))])?;
        let watch = graft::watch::WatchConfig {
            mode: graft::watch::WatchMode::None,
            ..fast()
        };
        let harness = Harness::start(&dir.dir(), watch).await?;
        let mut load = harness.load()?;
        load.wait_version(Some("v1")).await?;
        dir.write(&[(FILE, versioned("v2"))])?;
        // No event can arrive; many answers later the old set still serves.
        load.wait_answers(50).await?;
        let observed = load.finish().await?;
        assert_eq!(Load::versions(&observed), [Some("v1")]);
        assert_eq!(
            *harness.reloads.borrow(),
            graft::server::PolicyReloadStatus {
                revision: harness.revision(),
                ..Default::default()
            }
        );
        harness.server.shutdown().await
    })
    .await?
}
