//! `graft certs`: issue a CA and a serving certificate for clusters without cert-manager.
//!
//! Writes `ca.crt`, `tls.crt`, `tls.key` and `secret.yaml` (Secret `graft-tls`, with
//! `ca.crt`) into `--out`, for the `deploy/self-signed` kustomize overlay and a
//! repository from `graft init --certs self-signed`, which copy the Secret's `ca.crt`
//! into every webhook's `caBundle`.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;

use crate::manifests::certs::{self, CertOptions};

/// Generate a CA and a serving certificate for the webhook Service, and a Secret manifest
/// holding them.
///
/// The `deploy/self-signed` overlay and a repository from `graft init --certs self-signed`
/// install the Secret and copy its `ca.crt` into every webhook's `caBundle`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  graft certs --service graft --namespace graft --out deploy/self-signed/certs\n  kubectl apply -k deploy/self-signed"
)]
pub struct Args {
    /// Name of the webhook Service.
    #[arg(long, default_value = "graft")]
    pub service: String,
    /// Namespace of the webhook Service (and of the generated Secret).
    #[arg(long, default_value = "graft")]
    pub namespace: String,
    /// Directory to write the files into; created if missing.
    #[arg(long)]
    pub out: PathBuf,
    /// Validity of the CA and the serving certificate, in days.
    #[arg(long, default_value_t = 365)]
    pub days: u32,
    /// Overwrite existing files (a rotation); otherwise existing files are an error.
    #[arg(long)]
    pub force: bool,
}

const CA: &str = "ca.crt";
const CERT: &str = "tls.crt";
const KEY: &str = "tls.key";
const SECRET: &str = "secret.yaml";

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Issuing touches no file, so bad flags are reported before existing files are.
    let options = CertOptions {
        service: args.service,
        namespace: args.namespace,
        days: args.days,
    };
    let bundle = certs::generate(&options)?;
    let secret = certs::secret_yaml(&bundle, &options.namespace)?;

    // Check every target before writing any, so a refusal leaves the directory untouched
    // rather than holding a CA that does not match the certificate next to it.
    if !args.force {
        let existing: Vec<String> = [CA, CERT, KEY, SECRET]
            .iter()
            .map(|name| args.out.join(name))
            .filter(|path| path.exists())
            .map(|path| path.display().to_string())
            .collect();
        if !existing.is_empty() {
            anyhow::bail!(
                "refusing to overwrite {}; pass --force to replace them (a certificate rotation)",
                existing.join(", ")
            );
        }
    }

    fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let force = args.force;
    write(&args.out.join(CA), &bundle.ca_pem, force, false)?;
    write(&args.out.join(CERT), &bundle.cert_pem, force, false)?;
    write(&args.out.join(KEY), &bundle.key_pem, force, true)?;
    write(&args.out.join(SECRET), &secret, force, true)?;

    say!(
        "wrote {CA}, {CERT}, {KEY}, {SECRET} to {} (DNS names: {}; valid {} days)",
        args.out.display(),
        certs::dns_names(&options.service, &options.namespace).join(", "),
        options.days
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes a file; private ones (the key, and the Secret that embeds it) are created
/// readable by the owner only. Without `force` the file must not exist yet, even if it
/// appeared after the check in `run`.
///
/// With `force` the contents go to a new file that is then renamed over the old one: the
/// old file's mode (0644 after a copy or a restore) and any reader that has it open would
/// otherwise carry over to the new key, and an interrupted rotation would leave a
/// truncated file where the old one was.
fn write(path: &Path, contents: &str, force: bool, private: bool) -> anyhow::Result<()> {
    if !force {
        return write_new(path, contents, private)
            .with_context(|| format!("cannot write {}", path.display()));
    }
    let temp = temporary_path(path);
    let replaced = write_new(&temp, contents, private).and_then(|()| fs::rename(&temp, path));
    if replaced.is_err() {
        // Best effort: the error that matters is the one returned below.
        let _ = fs::remove_file(&temp);
    }
    replaced.with_context(|| format!("cannot write {}", path.display()))
}

/// Creates `path`, which must not exist, and writes `contents` to disk.
fn write_new(path: &Path, contents: &str, private: bool) -> std::io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut file = options.open(path)?;
    file.write_all(contents.as_bytes())?;
    // Before a rename, so that a crash cannot leave the new name on an empty file.
    file.sync_all()
}

/// A hidden name next to `path`, unique to this process, for the file that replaces it.
fn temporary_path(path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(".graft-{}.tmp", std::process::id()));
    path.with_file_name(name)
}
