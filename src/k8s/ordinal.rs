//! The ordinal of a StatefulSet pod.
//!
//! Since Kubernetes 1.28 the StatefulSet controller labels each pod with
//! `apps.kubernetes.io/pod-index`; before that (and still, as a fallback) the
//! ordinal is the number after the last `-` of the pod name (`web-3`). Pods of
//! Deployments have only `generateName` at CREATE and no ordinal at all.

/// The label the StatefulSet controller sets to the pod's ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// What [`pod_ordinal`] reads from a pod's metadata.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodIdentity<'a> {
    pub name: Option<&'a str>,
    pub generate_name: Option<&'a str>,
    pub pod_index_label: Option<&'a str>,
}

/// Why a pod has no ordinal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{pod} has no ordinal: neither a numeric label {POD_INDEX_LABEL} nor a number after the last '-' of its name (only StatefulSet pods have one)"
)]
pub struct OrdinalError {
    /// How the pod is named in the message: `pod 'web-x'` or `pod with generateName 'web-'`.
    pub pod: String,
}

/// The pod's ordinal: the pod-index label when it holds a valid number,
/// otherwise the number after the last `-` of the name.
pub fn pod_ordinal(pod: PodIdentity<'_>) -> Result<i64, OrdinalError> {
    if let Some(ordinal) = pod.pod_index_label.and_then(parse_ordinal) {
        return Ok(ordinal);
    }
    if let Some(ordinal) = pod
        .name
        .and_then(|name| name.rsplit_once('-'))
        .and_then(|(_, suffix)| parse_ordinal(suffix))
    {
        return Ok(ordinal);
    }
    Err(OrdinalError { pod: describe(pod) })
}

/// A non-negative decimal integer that fits an `i64` (CEL's `int`). Signs,
/// spaces and empty strings are rejected: the controller writes plain digits.
fn parse_ordinal(text: &str) -> Option<i64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<i64>().ok()
}

fn describe(pod: PodIdentity<'_>) -> String {
    match (pod.name, pod.generate_name) {
        (Some(name), _) if !name.is_empty() => format!("pod '{name}'"),
        (_, Some(generate_name)) if !generate_name.is_empty() => {
            format!("pod with generateName '{generate_name}'")
        }
        _ => "pod without a name".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        name: Option<&str>,
        generate_name: Option<&str>,
        label: Option<&str>,
    ) -> Result<i64, String> {
        pod_ordinal(PodIdentity {
            name,
            generate_name,
            pod_index_label: label,
        })
        .map_err(|e| e.to_string())
    }

    #[test]
    fn label_wins_over_name() {
        assert_eq!(check(Some("web-3"), None, Some("7")), Ok(7));
    }

    #[test]
    fn name_suffix_when_no_label() {
        assert_eq!(check(Some("web-3"), None, None), Ok(3));
        assert_eq!(check(Some("my-db-12"), None, None), Ok(12));
        assert_eq!(check(Some("web-0"), None, None), Ok(0));
    }

    #[test]
    fn invalid_label_falls_back_to_name() {
        assert_eq!(check(Some("web-4"), None, Some("x")), Ok(4));
        assert_eq!(check(Some("web-4"), None, Some("-1")), Ok(4));
        assert_eq!(check(Some("web-4"), None, Some("")), Ok(4));
    }

    #[test]
    fn generate_name_only_pod_is_an_error_naming_it() {
        let err = check(None, Some("web-7d9f-"), None).unwrap_err();
        assert!(err.contains("generateName 'web-7d9f-'"), "{err}");
    }

    #[test]
    fn non_numeric_suffix_is_an_error_naming_the_pod() {
        let err = check(Some("web-abc"), None, None).unwrap_err();
        assert!(err.contains("pod 'web-abc'"), "{err}");
        assert!(check(Some("web"), None, None).is_err());
        assert!(check(Some("web-"), None, None).is_err());
        assert!(check(Some("web-+3"), None, None).is_err());
        assert!(check(None, None, None).is_err());
    }

    #[test]
    fn huge_numbers_do_not_panic() {
        assert!(check(Some("web-99999999999999999999999"), None, None).is_err());
        assert_eq!(
            check(Some("web-9223372036854775807"), None, None),
            Ok(i64::MAX)
        );
    }
}
