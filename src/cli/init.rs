//! `graft init DIR`: write a small repository that a team owns, which installs a pinned
//! graft release as a remote kustomize base together with the team's own policies, their
//! golden tests, the webhook configuration generated from them, a certificate and a CI
//! script. graft's own repository then stays graft's: a team adopts it without a fork.
//!
//! The files are templates in `init/`, filled in with the release (`@VERSION@`), the
//! repository (`@REPOSITORY@`), the base (`@BASE@`) and the policy schema's address
//! (`@SCHEMA@`). `certificates.yaml` is graft's own
//! `deploy/components/cert-manager/certificates.yaml`, so the two cannot drift apart.

use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::Context as _;

/// graft's repository and this release, from Cargo.toml: the base is pinned to them.
const REPOSITORY: &str = env!("CARGO_PKG_REPOSITORY");
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Write a repository for a team's own policies that installs this graft release.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  graft init my-graft\n  \
        graft init --certs self-signed my-graft\n  \
        cd my-graft && ./ci.sh && kubectl apply -k . --dry-run=server")]
pub struct Args {
    /// Directory to write the repository into: created if missing, and refused if it
    /// holds anything but `.git`, unless --force.
    pub dir: PathBuf,
    /// The install base kustomization.yaml names: a kustomize remote URL, or a local
    /// directory (such as a checkout's deploy/install), written relative to DIR.
    #[arg(long, default_value_t = default_base())]
    pub base: String,
    /// Who makes graft's serving certificate: cert-manager (already running in the
    /// cluster), or `graft certs` once before the first apply.
    #[arg(long, value_enum, default_value_t = Certs::CertManager)]
    pub certs: Certs,
    /// Write into a DIR that is not empty, replacing files of the same names.
    #[arg(long)]
    pub force: bool,
}

/// How graft's serving certificate and the webhooks' caBundle are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Certs {
    /// cert-manager issues and renews the certificate and injects the caBundle.
    CertManager,
    /// `graft certs --out certs` makes them; no cluster dependency.
    SelfSigned,
}

/// This release's install base: `deploy/install` of the repository at the release's tag.
pub fn default_base() -> String {
    format!("{REPOSITORY}//deploy/install?ref=v{VERSION}")
}

/// One file of the repository: its path from DIR, its text, and whether it runs.
struct File {
    path: &'static str,
    text: String,
    executable: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let local_base = local_directory(&args.base)?;
    check_target(&args.dir, args.force)?;
    fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let base = match local_base {
        Some(base) => relative_to(&args.dir, &base)?,
        None => args.base.clone(),
    };
    let files = files(&base, args.certs);
    for file in &files {
        write(&args.dir, file)?;
    }
    write_webhook_config(&args.dir)?;

    let next = match args.certs {
        Certs::CertManager => "",
        Certs::SelfSigned => " && graft certs --out certs",
    };
    let written: Vec<&str> = files.iter().map(|file| file.path).collect();
    say!(
        "wrote {}, webhook.yaml to {} (graft {VERSION} from {base})",
        written.join(", "),
        args.dir.display()
    );
    say!(
        "next: cd {}{next} && ./ci.sh && kubectl apply -k . --dry-run=server; \
         README.md there has the daily loop",
        args.dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The files of the repository, `webhook.yaml` aside (it is generated from them).
fn files(base: &str, certs: Certs) -> Vec<File> {
    let fill = |template: &str| {
        template
            .replace("@VERSION@", VERSION)
            .replace("@REPOSITORY@", REPOSITORY)
            .replace("@BASE@", base)
            .replace("@SCHEMA@", super::schema::SCHEMA_ID)
    };
    let (kustomization, install, listed) = match certs {
        Certs::CertManager => (
            include_str!("init/kustomization-cert-manager.yaml"),
            include_str!("init/install-cert-manager.md"),
            "| `certificates.yaml` | cert-manager's Issuers and Certificates for graft's serving certificate. |\n",
        ),
        Certs::SelfSigned => (
            include_str!("init/kustomization-self-signed.yaml"),
            include_str!("init/install-self-signed.md"),
            "| `certs/` | Written by `graft certs --out certs`: the CA, graft's serving certificate and key. Git-ignored. |\n",
        ),
    };
    let readme = fill(include_str!("init/README.md"))
        .replace("@FILES@", listed)
        .replace("@INSTALL@", install.trim_end());
    let text = |path, text: String| File {
        path,
        text,
        executable: false,
    };
    let mut files = vec![
        text("README.md", readme),
        text("kustomization.yaml", fill(kustomization)),
        text(
            "policies/Kustomization",
            include_str!("init/policies-Kustomization").to_string(),
        ),
        text(
            "policies/team-label.yaml",
            fill(include_str!("init/team-label.yaml")),
        ),
        text(
            "tests/team-label.yaml",
            include_str!("init/team-label.test.yaml").to_string(),
        ),
        File {
            path: "ci.sh",
            text: fill(include_str!("init/ci.sh")),
            executable: true,
        },
    ];
    files.push(match certs {
        Certs::CertManager => text(
            "certificates.yaml",
            include_str!("../../deploy/components/cert-manager/certificates.yaml").to_string(),
        ),
        Certs::SelfSigned => text(
            ".gitignore",
            include_str!("init/gitignore-self-signed").to_string(),
        ),
    });
    files
}

/// The base as a local directory, if it names one; `None` for a remote URL. Anything
/// else is a mistake kustomize would only report at the first apply.
fn local_directory(base: &str) -> anyhow::Result<Option<PathBuf>> {
    let path = Path::new(base);
    if path.is_dir() {
        let path = path
            .canonicalize()
            .with_context(|| format!("--base {base}: cannot resolve the directory"))?;
        return Ok(Some(path));
    }
    // The forms of kustomize's remote targets: `SCHEME://...` (https, ssh, file),
    // `git@host:owner/repo`, `git::...` and `github.com/owner/repo`.
    let remote = base.contains("://")
        || ["git::", "git@", "github.com/"]
            .iter()
            .any(|prefix| base.starts_with(prefix));
    if remote {
        return Ok(None);
    }
    anyhow::bail!(
        "--base {base} is neither a directory nor a kustomize remote URL \
         (such as {})",
        default_base()
    )
}

/// Refuses a `dir` that is a file, or a directory holding anything but `.git` (a fresh
/// clone of an empty repository is where a team starts), unless `force`.
fn check_target(dir: &Path, force: bool) -> anyhow::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    if !dir.is_dir() {
        anyhow::bail!("{} exists and is not a directory", dir.display());
    }
    if force {
        return Ok(());
    }
    let mut present: Vec<String> = fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != ".git")
        .collect();
    if present.is_empty() {
        return Ok(());
    }
    present.sort();
    let shown = present.len().min(5);
    let more = if present.len() > shown { ", ..." } else { "" };
    anyhow::bail!(
        "refusing to write into {}, which is not empty ({}{more}); choose a new directory, \
         or pass --force to write into it, replacing files of the same names",
        dir.display(),
        present[..shown].join(", ")
    )
}

fn write(dir: &Path, file: &File) -> anyhow::Result<()> {
    let path = dir.join(file.path);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    fs::write(&path, &file.text).with_context(|| format!("cannot write {}", path.display()))?;
    #[cfg(unix)]
    if file.executable {
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot make {} executable", path.display()))?;
    }
    Ok(())
}

/// Generates `webhook.yaml` by running this binary's `graft webhook-config` in `dir`,
/// exactly as README.md tells a team to and as `ci.sh` does to check it: the file
/// names the command in its header, so only the same command in the same directory
/// writes the same bytes.
fn write_webhook_config(dir: &Path) -> anyhow::Result<()> {
    let graft = std::env::current_exe().context("cannot find the graft binary to run")?;
    let output = Command::new(&graft)
        .current_dir(dir)
        .args([
            "webhook-config",
            "--policies",
            "policies",
            "--out",
            "webhook.yaml",
        ])
        .output()
        .with_context(|| format!("cannot run {}", graft.display()))?;
    if !output.status.success() {
        anyhow::bail!(
            "graft webhook-config --policies policies --out webhook.yaml in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// `target` as a path from `dir`, as kustomize wants a local base (it refuses absolute
/// ones). Both are resolved first, so `..` and symlinks cannot mislead the walk.
fn relative_to(dir: &Path, target: &Path) -> anyhow::Result<String> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    let from: Vec<Component> = dir.components().collect();
    let to: Vec<Component> = target.components().collect();
    let shared = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut path = PathBuf::new();
    for _ in shared..from.len() {
        path.push("..");
    }
    for component in &to[shared..] {
        path.push(component);
    }
    let text = path
        .to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))?;
    Ok(if text.is_empty() {
        ".".to_string()
    } else {
        text.to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_base_is_this_release_of_deploy_install() {
        assert_eq!(
            default_base(),
            format!("https://github.com/graft-dev/graft//deploy/install?ref=v{VERSION}")
        );
    }

    #[test]
    fn a_local_base_is_written_relative_to_the_directory() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().join("graft/deploy/install");
        let dir = root.path().join("teams/platform");
        fs::create_dir_all(&base).unwrap();
        fs::create_dir_all(&dir).unwrap();
        let base = base.canonicalize().unwrap();
        assert_eq!(
            relative_to(&dir, &base).unwrap(),
            "../../graft/deploy/install"
        );
        assert_eq!(relative_to(&base, &base).unwrap(), ".");
    }

    #[test]
    fn a_base_that_is_neither_a_directory_nor_a_url_is_refused() {
        let error = local_directory("no/such/dir").unwrap_err().to_string();
        assert!(error.contains("neither a directory nor"), "{error}");
        assert_eq!(local_directory(&default_base()).unwrap(), None);
    }

    #[test]
    fn every_placeholder_is_filled() {
        let placeholder = regex::Regex::new("@[A-Z]+@").unwrap();
        for certs in [Certs::CertManager, Certs::SelfSigned] {
            for file in files("../base", certs) {
                let left = placeholder.find(&file.text).map(|m| m.as_str());
                assert_eq!(left, None, "{}", file.path);
            }
        }
    }
}
