//! `graft certs` refuses what it cannot issue with a usage error, never a panic, and a
//! rotation leaves the private files readable by their owner only.

use crate::support::cli::{graft_certs, stderr};
use std::path::Path;
use std::process::Output;
use std::time::{SystemTime, UNIX_EPOCH};

/// 9999-12-31T23:59:59Z: X.509's four-digit years end there.
const LATEST_NOT_AFTER: u64 = 253_402_300_799;
const SECONDS_PER_DAY: u64 = 24 * 60 * 60;
const FILES: [&str; 4] = ["ca.crt", "tls.crt", "tls.key", "secret.yaml"];

/// A refusal: the usage exit code (a panic exits 101), the message, and nothing written.
fn assert_refused(out: &Path, output: &Output, message: &str) {
    let stderr = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains(message),
        "expected {message:?} in: {stderr}"
    );
    for file in FILES {
        assert!(
            !out.join(file).exists(),
            "{file} written despite the refusal"
        );
    }
}

/// Days from now to the last day a certificate can end on.
fn days_left() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    (LATEST_NOT_AFTER - now) / SECONDS_PER_DAY
}

#[test]
fn days_past_year_9999_are_a_usage_error_not_a_panic() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let out = scratch.path().join("certs");
    let just_past = (days_left() + 1).to_string();
    for days in [just_past.as_str(), "3000000", "4000000", "4294967295"] {
        let output = graft_certs(&out, &["--days", days]);
        assert_refused(
            &out,
            &output,
            &format!("--days {days} is too far in the future"),
        );
    }
    // Past u32, clap refuses the value itself.
    let output = graft_certs(&out, &["--days", "4294967296"]);
    assert_refused(&out, &output, "--days");
}

#[test]
fn days_up_to_year_9999_issue_certificates() {
    let scratch = tempfile::tempdir().expect("tempdir");
    // One day of margin: the binary's clock reads a little later than this test's.
    let days = (days_left() - 1).to_string();
    let output = graft_certs(scratch.path(), &["--days", &days]);
    assert!(output.status.success(), "{}", stderr(&output));
    let pem = std::fs::read(scratch.path().join("tls.crt")).expect("tls.crt");
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).expect("PEM");
    let cert = pem.parse_x509().expect("X.509");
    assert_eq!(cert.validity().not_after.to_datetime().year(), 9999);
}

#[test]
fn service_and_namespace_must_be_kubernetes_names() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let out = scratch.path().join("certs");
    let long = "a".repeat(64);
    let refused: [(&str, &str, &str); 9] = [
        ("Bad_Name!", "graft", "--service"),
        ("graft", "", "--namespace"),
        ("", "graft", "--service"),
        // A Service name is a DNS-1035 label: it starts with a letter.
        ("1graft", "graft", "--service"),
        ("graft-", "graft", "--service"),
        ("graft.hooks", "graft", "--service"),
        ("graft", "Graft", "--namespace"),
        ("graft", "-graft", "--namespace"),
        ("graft", &long, "--namespace"),
    ];
    for (service, namespace, flag) in refused {
        let output = graft_certs(
            &out,
            &[
                &format!("--service={service}"),
                &format!("--namespace={namespace}"),
            ],
        );
        assert_refused(&out, &output, flag);
    }

    let longest = "a".repeat(63);
    // A namespace is a DNS-1123 label: it may start with a digit.
    for (service, namespace) in [("a", "1-x"), (longest.as_str(), longest.as_str())] {
        let dir = scratch
            .path()
            .join(format!("{}-{namespace}", service.len()));
        let output = graft_certs(&dir, &["--service", service, "--namespace", namespace]);
        assert!(
            output.status.success(),
            "{service}.{namespace}: {}",
            stderr(&output)
        );
    }
}

#[cfg(unix)]
#[test]
fn rotation_leaves_private_files_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;

    let scratch = tempfile::tempdir().expect("tempdir");
    let out = scratch.path();
    let issued = graft_certs(out, &[]);
    assert!(issued.status.success(), "{}", stderr(&issued));
    let key_before = std::fs::read(out.join("tls.key")).expect("tls.key");
    // A copy, a restore from a backup or a loose umask can leave the old files readable.
    for private in ["tls.key", "secret.yaml"] {
        std::fs::set_permissions(out.join(private), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
    }

    let rotated = graft_certs(out, &["--force"]);
    assert!(rotated.status.success(), "{}", stderr(&rotated));
    assert_ne!(
        std::fs::read(out.join("tls.key")).expect("tls.key"),
        key_before,
        "a new key"
    );
    for private in ["tls.key", "secret.yaml"] {
        let mode = std::fs::metadata(out.join(private))
            .expect("metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{private}: mode {mode:o}");
    }
    let mut names: Vec<String> = std::fs::read_dir(out)
        .expect("read dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    let mut expected = FILES.map(String::from).to_vec();
    expected.sort();
    assert_eq!(names, expected, "no temporary files left behind");
}
