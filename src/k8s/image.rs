//! Container image references (`nginx`, `quay.io/org/app:v1`, `app@sha256:...`),
//! parsed by the grammar of the distribution project's `reference` package, which
//! the container runtimes use, and normalised as Kubernetes and containerd do: a
//! name without a registry is on `docker.io`, and a one-part name there is under
//! `library/` (`nginx` is `docker.io/library/nginx`). A missing tag stays empty
//! (the runtime pulls `latest`), so rebuilding never adds one.

/// The parts of an image reference. `tag` and `digest` are empty when absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageReference {
    pub registry: String,
    pub repository: String,
    pub tag: String,
    pub digest: String,
}

/// Why a string is not an image reference. The reason names the part at fault
/// and what it must look like, never the text: references come from the object
/// under review, and reasons are logged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid image reference: {reason}")]
pub struct ImageError {
    pub reason: &'static str,
}

/// The registry of a reference that names none.
pub const DEFAULT_REGISTRY: &str = "docker.io";

/// The longest name (registry and repository) the grammar allows.
const MAX_NAME_LENGTH: usize = 255;

impl ImageReference {
    /// Parses and normalises `reference`.
    pub fn parse(reference: &str) -> Result<ImageReference, ImageError> {
        let error = |reason: &'static str| ImageError { reason };
        if reference.is_empty() {
            return Err(error(
                "it is empty (expected [registry/]repository[:tag][@digest], such as nginx:1.25)",
            ));
        }
        let (rest, digest) = match reference.split_once('@') {
            Some((rest, digest)) => {
                check_digest(digest).map_err(error)?;
                (rest, digest.to_string())
            }
            None => (reference, String::new()),
        };
        // A `:` after the last `/` starts the tag; one before it is a registry's port.
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (&rest[..last_slash + i], &rest[last_slash + i + 1..]),
            None => (rest, ""),
        };
        if !tag.is_empty() || rest.len() != name.len() {
            check_tag(tag).map_err(error)?;
        }
        if name.len() > MAX_NAME_LENGTH {
            return Err(error("the name is longer than 255 characters"));
        }
        let (registry, repository) = match name.split_once('/') {
            Some((first, remainder)) if is_registry(first) => (first, remainder.to_string()),
            _ => (DEFAULT_REGISTRY, name.to_string()),
        };
        check_registry(registry).map_err(error)?;
        let registry = if registry == "index.docker.io" {
            DEFAULT_REGISTRY
        } else {
            registry
        };
        let repository = if registry == DEFAULT_REGISTRY && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        check_repository(&repository).map_err(error)?;
        Ok(ImageReference {
            registry: registry.to_string(),
            repository,
            tag: tag.to_string(),
            digest,
        })
    }
}

/// `registry/repository[:tag][@digest]`, the normalised form.
impl std::fmt::Display for ImageReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if !self.tag.is_empty() {
            write!(f, ":{}", self.tag)?;
        }
        if !self.digest.is_empty() {
            write!(f, "@{}", self.digest)?;
        }
        Ok(())
    }
}

/// The first part of a name is a registry when it looks like a host: it has a `.`
/// or a port, or is `localhost`, and no upper case (as the reference package decides).
fn is_registry(first: &str) -> bool {
    (first.contains('.') || first.contains(':') || first == "localhost")
        && !first.chars().any(|c| c.is_ascii_uppercase())
}

/// A host (DNS labels, or an IPv6 address in brackets) with an optional port.
fn check_registry(registry: &str) -> Result<(), &'static str> {
    const BAD: &str = "the registry is not a host[:port] (DNS labels or a bracketed IPv6 \
                       address, then an optional numeric port, such as quay.io or localhost:5000)";
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        let (address, after) = rest.split_once(']').ok_or(BAD)?;
        address.parse::<std::net::Ipv6Addr>().map_err(|_| BAD)?;
        match after {
            "" => (None, None),
            _ => (None, Some(after.strip_prefix(':').ok_or(BAD)?)),
        }
    } else {
        match registry.split_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(registry), None),
        }
    };
    if let Some(host) = host {
        let label = |label: &str| {
            !label.is_empty()
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        };
        if !host.split('.').all(label) {
            return Err(BAD);
        }
    }
    if let Some(port) = port
        && (port.is_empty() || !port.chars().all(|c| c.is_ascii_digit()))
    {
        return Err(BAD);
    }
    Ok(())
}

/// Path components of lower-case letters and digits, joined inside by `.`, `_`,
/// `__` or runs of `-`.
fn check_repository(repository: &str) -> Result<(), &'static str> {
    for component in repository.split('/') {
        let valid = !component.is_empty()
            && component.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && component.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && component
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
            && !component.contains("..")
            && !component.contains("___")
            && !separators_mixed(component);
        if !valid {
            return Err(
                "the repository is not '/'-separated path components of lower-case letters and \
                 digits, separated by '.', '_', '__' or '-' (such as library/nginx)",
            );
        }
    }
    Ok(())
}

/// A separator other than a run of `-`, `.` or `__` between two alphanumerics.
fn separators_mixed(component: &str) -> bool {
    let mut run = String::new();
    for c in component.chars() {
        if c.is_ascii_alphanumeric() {
            let fine = run.is_empty()
                || run == "."
                || run == "_"
                || run == "__"
                || run.chars().all(|c| c == '-');
            if !fine {
                return true;
            }
            run.clear();
        } else {
            run.push(c);
        }
    }
    false
}

/// A word character, then up to 127 word characters, `.` or `-`.
fn check_tag(tag: &str) -> Result<(), &'static str> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let valid = tag.len() <= 128
        && tag.starts_with(word)
        && tag.chars().all(|c| word(c) || c == '.' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(
            "the tag is not up to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'",
        )
    }
}

/// `algorithm:hex`, with the hex length the common algorithms require.
fn check_digest(digest: &str) -> Result<(), &'static str> {
    const BAD: &str =
        "the digest is not algorithm:hex (such as sha256: then 64 lower-case hex digits)";
    let (algorithm, hex) = digest.split_once(':').ok_or(BAD)?;
    let algorithm_ok = !algorithm.is_empty()
        && algorithm
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+._-".contains(c));
    let hex_ok = hex.len() >= 32
        && hex
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
    let length_ok = match algorithm {
        "sha256" => hex.len() == 64,
        "sha384" => hex.len() == 96,
        "sha512" => hex.len() == 128,
        _ => true,
    };
    if algorithm_ok && hex_ok && length_ok {
        Ok(())
    } else {
        Err(BAD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn parts(reference: &str) -> (String, String, String, String) {
        let r = ImageReference::parse(reference).expect(reference);
        (r.registry, r.repository, r.tag, r.digest)
    }

    fn owned(parts: (&str, &str, &str, &str)) -> (String, String, String, String) {
        (
            parts.0.to_string(),
            parts.1.to_string(),
            parts.2.to_string(),
            parts.3.to_string(),
        )
    }

    #[test]
    fn references_are_split_and_normalised() {
        let with_digest = format!("quay.io/org/app:v1@{DIGEST}");
        let cases = [
            ("nginx", ("docker.io", "library/nginx", "", "")),
            ("nginx:1.25", ("docker.io", "library/nginx", "1.25", "")),
            ("bitnami/redis:7", ("docker.io", "bitnami/redis", "7", "")),
            (
                "index.docker.io/nginx",
                ("docker.io", "library/nginx", "", ""),
            ),
            ("localhost/app", ("localhost", "app", "", "")),
            (
                "localhost:5000/app:dev",
                ("localhost:5000", "app", "dev", ""),
            ),
            (
                "registry.k8s.io/pause:3.9",
                ("registry.k8s.io", "pause", "3.9", ""),
            ),
            (with_digest.as_str(), ("quay.io", "org/app", "v1", DIGEST)),
            ("[::1]:5000/a/b", ("[::1]:5000", "a/b", "", "")),
            (
                "my_org/app-x.y__z",
                ("docker.io", "my_org/app-x.y__z", "", ""),
            ),
        ];
        for (reference, expected) in cases {
            assert_eq!(parts(reference), owned(expected), "{reference}");
        }
        let app = ImageReference::parse(&format!("app@{DIGEST}")).unwrap();
        assert_eq!(app.to_string(), format!("docker.io/library/app@{DIGEST}"));
        assert_eq!(
            ImageReference::parse("quay.io/org/app:v1")
                .unwrap()
                .to_string(),
            "quay.io/org/app:v1"
        );
    }

    #[test]
    fn invalid_references_say_why() {
        const REPOSITORY: &str = "the repository is not '/'-separated path components of \
                                  lower-case letters and digits, separated by '.', '_', '__' \
                                  or '-' (such as library/nginx)";
        const TAG: &str = "the tag is not up to 128 letters, digits, '_', '.' and '-', not \
                           starting with '.' or '-'";
        const DIGEST: &str =
            "the digest is not algorithm:hex (such as sha256: then 64 lower-case hex digits)";
        const REGISTRY: &str = "the registry is not a host[:port] (DNS labels or a bracketed \
                                IPv6 address, then an optional numeric port, such as quay.io or \
                                localhost:5000)";
        let long = "a".repeat(256);
        for (reference, reason) in [
            (
                "",
                "it is empty (expected [registry/]repository[:tag][@digest], such as nginx:1.25)",
            ),
            ("Nginx", REPOSITORY),
            ("nginx:", TAG),
            ("nginx:-x", TAG),
            ("nginx@sha256:abc", DIGEST),
            ("a..b/c", REGISTRY),
            ("host:port/app", REGISTRY),
            ("[::1/app", REGISTRY),
            ("app//x", REPOSITORY),
            ("app/x-", REPOSITORY),
            ("app/x._y", REPOSITORY),
            (long.as_str(), "the name is longer than 255 characters"),
        ] {
            let error = ImageReference::parse(reference).expect_err(reference);
            assert_eq!(error, ImageError { reason }, "{reference}");
            assert_eq!(
                error.to_string(),
                format!("invalid image reference: {reason}")
            );
        }
    }

    #[test]
    fn errors_never_quote_the_reference() {
        for reference in [
            "Secret-Token-1",
            "quay.io/org/app:secret-token-1!",
            "app@sha256:secret-token-1",
            "secret-token-1.bad_host:x/app",
            "org/Secret-Token-1",
        ] {
            let message = ImageReference::parse(reference)
                .expect_err(reference)
                .to_string();
            assert!(!message.to_lowercase().contains("token"), "{message}");
        }
    }
}
