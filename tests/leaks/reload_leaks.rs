//! 100 consecutive policy swaps leak no file descriptors, watches or threads. Alone in
//! its own test binary, so no other test's sockets or threads blur the counts.

use std::time::Duration;

use crate::support::reload::*;
use crate::support::server::*;

const SWAPS: u64 = 100;
/// Slack for descriptors and threads that come and go on their own (a blocking-pool
/// thread retiring or starting, a connection the runtime has not closed yet).
const FD_TOLERANCE: usize = 4;
const THREAD_TOLERANCE: usize = 2;

fn count(dir: &str) -> Result<usize> {
    Ok(std::fs::read_dir(dir)?.count())
}

/// inotify watches held by this process, from the fdinfo of its inotify descriptors.
fn inotify_watches() -> Result<usize> {
    let mut watches = 0;
    for entry in std::fs::read_dir("/proc/self/fdinfo")? {
        let info = std::fs::read_to_string(entry?.path()).unwrap_or_default();
        watches += info
            .lines()
            .filter(|l| l.starts_with("inotify wd:"))
            .count();
    }
    Ok(watches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_swaps_leak_nothing() -> Result {
    tokio::time::timeout(Duration::from_secs(120), async {
        let volume = ConfigMapDir::new(&[(FILE, versioned("v0"))])?;
        let watch = graft::watch::WatchConfig {
            debounce: Duration::from_millis(20),
            ..graft::watch::WatchConfig::default()
        };
        let mut harness = Harness::start(&volume.dir(), watch).await?;
        let mut generation = 0;
        let mut swap = async |harness: &mut Harness| -> Result {
            generation += 1;
            volume.write(&[(FILE, versioned(&format!("v{generation}")))])?;
            harness
                .wait_reload(|status| status.successes >= generation)
                .await?;
            Ok(())
        };
        // Warm up: the blocking pool's thread and the runtime's lazies exist from here.
        for _ in 0..5 {
            swap(&mut harness).await?;
        }
        let (fds, threads, watches) = (
            count("/proc/self/fd")?,
            count("/proc/self/task")?,
            inotify_watches()?,
        );
        for _ in 0..SWAPS {
            swap(&mut harness).await?;
        }
        let (fds_after, threads_after, watches_after) = (
            count("/proc/self/fd")?,
            count("/proc/self/task")?,
            inotify_watches()?,
        );
        println!(
            "after {SWAPS} swaps: fds {fds} -> {fds_after}, threads {threads} -> \
             {threads_after}, inotify watches {watches} -> {watches_after}"
        );
        assert!(fds_after <= fds + FD_TOLERANCE, "fds {fds} -> {fds_after}");
        assert!(
            threads_after <= threads + THREAD_TOLERANCE,
            "threads {threads} -> {threads_after}"
        );
        assert_eq!(watches_after, watches, "inotify watches");
        assert_eq!(harness.reloads.borrow().successes, SWAPS + 5);
        assert_eq!(harness.reloads.borrow().failures, 0);
        harness.server.shutdown().await
    })
    .await?
}
