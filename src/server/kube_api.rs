//! Connecting to the Kubernetes API, for the namespace cache and for Events.
//!
//! Inside a cluster graft uses its pod's ServiceAccount (the in-cluster configuration:
//! `KUBERNETES_SERVICE_HOST`/`_PORT` and the token and CA under
//! `/var/run/secrets/kubernetes.io/serviceaccount`). Outside one, `--kubeconfig FILE`
//! names a kubeconfig whose current context is used. Nothing else is guessed: a
//! `~/.kube/config` lying around never silently points a server at another cluster.

use std::path::{Path, PathBuf};

/// What graft needs the API for, named in the error when it cannot have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Namespaces,
    Events,
}

impl Purpose {
    fn need(self) -> &'static str {
        match self {
            Purpose::Namespaces => {
                "the policy set needs namespace data (a namespaceSelector or namespaceObject)"
            }
            Purpose::Events => "--events records Kubernetes Events through the API",
        }
    }

    fn alternative(self) -> &'static str {
        match self {
            Purpose::Namespaces => ", or --namespaces FILE to serve fixed Namespace objects",
            Purpose::Events => ", or leave --events off",
        }
    }
}

/// Why no Kubernetes API client could be made. The message carries the cause's text
/// (and is the whole chain), so a log line with just the error says everything.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(
        "{}, but graft is not running in a Kubernetes pod ({cause}): outside a cluster, \
         pass --kubeconfig FILE (or set GRAFT_KUBECONFIG){}",
        purpose.need(),
        purpose.alternative()
    )]
    NotInCluster {
        purpose: Purpose,
        cause: kube::config::InClusterError,
    },
    #[error(
        "{}, but the kubeconfig {path} cannot be used ({cause}): check the file and its \
         current context",
        purpose.need()
    )]
    Kubeconfig {
        purpose: Purpose,
        path: PathBuf,
        cause: kube::config::KubeconfigError,
    },
    #[error("cannot create a Kubernetes API client: {cause}")]
    Client { cause: kube::Error },
}

/// Whether an in-cluster configuration failed because graft is not in a pod at all
/// (kubelet sets `KUBERNETES_SERVICE_HOST` in every container), rather than because a
/// pod lacks its token or CA, which is a deployment error.
pub fn outside_a_pod(cause: &kube::config::InClusterError) -> bool {
    matches!(
        cause,
        kube::config::InClusterError::ReadEnvironmentVariable(std::env::VarError::NotPresent)
    )
}

/// A client for the in-cluster API, or for the current context of `kubeconfig`.
pub async fn client(
    kubeconfig: Option<&Path>,
    purpose: Purpose,
) -> Result<kube::Client, ConnectError> {
    let config = match kubeconfig {
        None => kube::Config::incluster()
            .map_err(|cause| ConnectError::NotInCluster { purpose, cause })?,
        Some(path) => {
            let kubeconfig_error = |cause| ConnectError::Kubeconfig {
                purpose,
                path: path.to_path_buf(),
                cause,
            };
            let file = kube::config::Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(kubeconfig_error)?
        }
    };
    kube::Client::try_from(config).map_err(|cause| ConnectError::Client { cause })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_kubeconfig_names_the_file_and_the_fix() {
        let error = client(
            Some(Path::new("/nonexistent/graft-kubeconfig")),
            Purpose::Namespaces,
        )
        .await
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
        assert!(error.contains("/nonexistent/graft-kubeconfig"), "{error}");
        assert!(error.contains("namespaceSelector"), "{error}");
    }

    #[tokio::test]
    async fn an_events_client_error_names_events() {
        let error = client(
            Some(Path::new("/nonexistent/graft-kubeconfig")),
            Purpose::Events,
        )
        .await
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
        assert!(error.contains("--events"), "{error}");
        assert!(!error.contains("namespaceSelector"), "{error}");
    }
}
