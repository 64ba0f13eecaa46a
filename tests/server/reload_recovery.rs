//! The real `graft serve` after a broken policy edit: once the files are valid again,
//! whether reverted to the running set or fixed with a new one, the log says at info that
//! the error is resolved, so its last word on the policies is not the error. A valid
//! reload with no error before it says nothing of the kind.

use std::sync::mpsc::Receiver;

use crate::support::Error;
use crate::support::reload::*;
use crate::support::server::*;

const INSTALLED: &str = "policy set installed";
const REJECTED: &str = "policy set not reloaded; keeping the running set";
const RESOLVED: &str = "policy set reloaded; the earlier error is resolved";

/// The JSON log lines up to and including the first whose message is `message`: the
/// lines before it, and it.
fn until(
    lines: &Receiver<String>,
    message: &str,
) -> Result<(Vec<serde_json::Value>, serde_json::Value)> {
    let before = std::cell::RefCell::new(Vec::new());
    let found = next_log_where(lines, |line| {
        if line["message"] == message {
            return true;
        }
        before.borrow_mut().push(line.clone());
        false
    })?;
    Ok((before.into_inner(), found))
}

fn messages(lines: &[serde_json::Value]) -> Vec<&str> {
    lines
        .iter()
        .filter_map(|line| line["message"].as_str())
        .collect()
}

#[test]
fn a_valid_reload_after_a_failed_one_says_the_error_is_resolved() -> Result {
    let pki = Pki::new("test CA")?;
    let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
    // Edited as an editor saves: write a new file, rename it over the old one.
    let policies = PlainDir::new(Edit::Rename, &[(FILE, versioned("v1"))])?;
    let mut child = serve_command(&policies.dir(), &secret).spawn()?;
    let lines = log_lines(&mut child)?;

    let outcome = (|| {
        until(&lines, "graft serving")?;

        // A valid edit with no error before it is an ordinary reload.
        policies.write(&[(FILE, versioned("v2"))])?;
        let (mut quiet, installed) = until(&lines, INSTALLED)?;
        let v2 = installed["revision"].clone();
        policies.write(&[(FILE, invalid())])?;
        let (between, rejected) = until(&lines, REJECTED)?;
        quiet.extend(between);
        assert!(
            !messages(&quiet).contains(&RESOLVED),
            "no error to resolve: {quiet:?}"
        );
        assert_eq!(rejected["level"], "ERROR", "{rejected}");
        assert_eq!(rejected["revision"], v2, "{rejected}");

        // The broken edit reverted: the files hold the running set again.
        policies.write(&[(FILE, versioned("v2"))])?;
        let (before, resolved) = until(&lines, RESOLVED)?;
        assert!(!messages(&before).contains(&INSTALLED), "{before:?}");
        assert_eq!(resolved["level"], "INFO", "{resolved}");
        assert_eq!(resolved["revision"], v2, "{resolved}");
        assert_eq!(resolved["changed"], false, "{resolved}");
        assert!(resolved["failed_reloads"].as_u64() >= Some(1), "{resolved}");

        // Broken again, then fixed with a new set: installed, then resolved.
        policies.write(&[(FILE, invalid())])?;
        until(&lines, REJECTED)?;
        policies.write(&[(FILE, versioned("v3"))])?;
        let (before, resolved) = until(&lines, RESOLVED)?;
        let installed = before
            .iter()
            .find(|line| line["message"] == INSTALLED)
            .ok_or("the new set was not installed before the error was resolved")?;
        assert_eq!(installed["previous"], v2, "{installed}");
        assert_eq!(resolved["revision"], installed["revision"], "{resolved}");
        assert_eq!(resolved["changed"], true, "{resolved}");
        Ok::<_, Error>(())
    })();

    child.kill()?;
    child.wait()?;
    outcome
}
