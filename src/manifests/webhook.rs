//! Renders the MutatingWebhookConfiguration a policy set needs.
//!
//! The apiserver only calls graft for requests that some webhook rule covers, so the rules
//! must cover exactly what the policies can match: too few and a policy silently never runs,
//! too many and every unrelated request pays a network round trip. This module is pure: it
//! turns a list of [`PolicyRule`]s (one per resource a policy matches) into the configuration
//! object; reading policies and writing YAML happen in `graft webhook-config`.
//!
//! Rules are split into two webhooks:
//!
//! - [`MAIN_WEBHOOK`] (pods and every other resource) with the configurable failure policy,
//!   `Ignore` by default.
//! - [`STATUS_WEBHOOK`] for `*/status` subresources, always `Ignore` with a 5 s timeout:
//!   `nodes/status` is written by every kubelet every few seconds, and an outage of graft
//!   must never turn nodes NotReady.

use std::collections::{BTreeMap, BTreeSet};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use serde::Serialize;

use super::webhook_url::WebhookUrl;

/// Name of the webhook for pods and every resource that is not a `*/status` subresource.
pub const MAIN_WEBHOOK: &str = "pods.graft.dev";
/// Name of the webhook for `*/status` subresources (`nodes/status`).
pub const STATUS_WEBHOOK: &str = "nodes-status.graft.dev";
/// Timeout of the status webhook; kubelet heartbeats must not wait on graft for long.
pub const STATUS_TIMEOUT_SECONDS: u32 = 5;

/// One resource a policy can match, in the terms of an admission webhook rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRule {
    /// The policy the rule comes from (kept for error messages and debugging).
    pub policy: String,
    /// API group: `""` is the core group, `"*"` any group.
    pub group: String,
    /// API version, `"*"` for any.
    pub version: String,
    /// Plural resource name, `"*"` for any.
    pub resource: String,
    /// Subresource such as `status`; `None` for the resource itself.
    pub subresource: Option<String>,
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `"*"`.
    pub operations: Vec<String>,
}

/// What the webhook's failure to answer does to the request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
pub enum FailurePolicy {
    /// Admit the request unmutated.
    #[default]
    #[value(name = "Ignore")]
    Ignore,
    /// Reject the request.
    #[value(name = "Fail")]
    Fail,
}

/// Where the webhook is served and how the main webhook fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookOptions {
    /// Name of the MutatingWebhookConfiguration object.
    pub name: String,
    /// The Service in front of graft.
    pub service: String,
    /// The namespace graft runs in; always excluded so graft can restart itself.
    pub namespace: String,
    /// Where graft serves the webhooks: the Service's path, or appended to `url`'s.
    pub path: String,
    pub port: u16,
    /// The URL the apiserver calls instead of the Service (`service` and `port` then
    /// unused), with `path` appended.
    pub url: Option<WebhookUrl>,
    /// Base64 of the CA bundle (PEM) that signed graft's serving certificate, if known.
    pub ca_bundle: Option<String>,
    /// Failure policy of the main webhook; the status webhook is always `Ignore`.
    pub failure_policy: FailurePolicy,
    pub timeout_seconds: u32,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        WebhookOptions {
            name: "graft".to_string(),
            service: "graft".to_string(),
            namespace: "graft".to_string(),
            path: "/mutate".to_string(),
            port: 443,
            url: None,
            ca_bundle: None,
            failure_policy: FailurePolicy::Ignore,
            timeout_seconds: 10,
        }
    }
}

/// An `admissionregistration.k8s.io/v1` MutatingWebhookConfiguration.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookConfiguration {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: ObjectMeta,
    pub webhooks: Vec<Webhook>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectMeta {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    pub name: String,
    pub admission_review_versions: Vec<String>,
    pub client_config: ClientConfig,
    pub failure_policy: FailurePolicy,
    pub match_policy: &'static str,
    pub namespace_selector: LabelSelector,
    pub reinvocation_policy: &'static str,
    pub rules: Vec<Rule>,
    pub side_effects: &'static str,
    pub timeout_seconds: u32,
}

/// How the apiserver reaches a webhook: exactly one of `service` and `url`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceReference {
    pub name: String,
    pub namespace: String,
    pub path: String,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    pub match_expressions: Vec<SelectorRequirement>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelectorRequirement {
    pub key: String,
    pub operator: &'static str,
    pub values: Vec<String>,
}

/// One `webhooks[].rules[]` entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    pub api_groups: Vec<String>,
    pub api_versions: Vec<String>,
    pub operations: Vec<String>,
    pub resources: Vec<String>,
    pub scope: &'static str,
}

/// Why a file cannot be the webhooks' `caBundle`.
#[derive(Debug, thiserror::Error)]
pub enum CaBundleError {
    #[error(
        "it holds a private key (a {label} PEM block), which must never go into a cluster object; \
         pass the CA certificate (ca.crt), not a key"
    )]
    PrivateKey { label: String },
    #[error("it holds no PEM CERTIFICATE block")]
    NoCertificate,
    #[error("it is not valid PEM: {0}")]
    Pem(#[source] rustls::pki_types::pem::Error),
    #[error("its certificate {index} is not an X.509 certificate: {reason}")]
    NotX509 { index: usize, reason: String },
}

/// Checks that a file's contents can be a `caBundle`: PEM with at least one certificate
/// and no private key.
///
/// The apiserver stores `caBundle` without looking at it, so a mistake shows only when it
/// calls the webhook: a bundle without a usable certificate fails every call (under the
/// `Ignore` policy, silently: no policy applies), and a private key is readable by anyone
/// who may read webhook configurations.
pub fn check_ca_bundle(pem: &[u8]) -> Result<(), CaBundleError> {
    // Every BEGIN marker, not only those the PEM parser below knows: it skips blocks it
    // has no type for, such as ENCRYPTED PRIVATE KEY and OPENSSH PRIVATE KEY.
    const BEGIN: &[u8] = b"-----BEGIN ";
    for at in memchr::memmem::find_iter(pem, BEGIN) {
        let rest = &pem[at + BEGIN.len()..];
        let end = memchr::memmem::find(rest, b"-----")
            .into_iter()
            .chain(memchr::memchr2(b'\n', b'\r', rest))
            .min()
            .unwrap_or(rest.len());
        let label = String::from_utf8_lossy(&rest[..end]);
        if label.contains("PRIVATE KEY") {
            return Err(CaBundleError::PrivateKey {
                label: label.into_owned(),
            });
        }
    }
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(CaBundleError::Pem)?;
    if certificates.is_empty() {
        return Err(CaBundleError::NoCertificate);
    }
    for (index, der) in certificates.iter().enumerate() {
        let not_x509 = |reason: String| CaBundleError::NotX509 {
            index: index + 1,
            reason,
        };
        match x509_parser::parse_x509_certificate(der) {
            // Go, which reads the bundle in the apiserver, refuses trailing bytes too.
            Ok((rest, _)) if !rest.is_empty() => {
                return Err(not_x509("trailing bytes after the certificate".to_string()));
            }
            Ok(_) => {}
            Err(error) => return Err(not_x509(error.to_string())),
        }
    }
    Ok(())
}

/// Renders the configuration: one webhook per non-empty group of rules, rules merged and
/// sorted so that the output only changes when what the policies match changes.
pub fn render(rules: &[PolicyRule], options: &WebhookOptions) -> WebhookConfiguration {
    let (status, main): (Vec<&PolicyRule>, Vec<&PolicyRule>) = rules
        .iter()
        .partition(|rule| rule.subresource.as_deref() == Some("status"));

    let mut webhooks = Vec::new();
    if !main.is_empty() {
        // kube-system is left out of the main webhook as well as graft's own namespace:
        // the control plane's pods must be able to start while graft is down or broken.
        let excluded = vec![options.namespace.clone(), "kube-system".to_string()];
        webhooks.push(webhook(
            MAIN_WEBHOOK,
            &main,
            options,
            options.failure_policy,
            options.timeout_seconds,
            excluded,
        ));
    }
    if !status.is_empty() {
        webhooks.push(webhook(
            STATUS_WEBHOOK,
            &status,
            options,
            FailurePolicy::Ignore,
            STATUS_TIMEOUT_SECONDS.min(options.timeout_seconds),
            vec![options.namespace.clone()],
        ));
    }

    WebhookConfiguration {
        api_version: "admissionregistration.k8s.io/v1",
        kind: "MutatingWebhookConfiguration",
        metadata: ObjectMeta {
            name: options.name.clone(),
            labels: BTreeMap::from([("app.kubernetes.io/name".to_string(), "graft".to_string())]),
        },
        webhooks,
    }
}

fn webhook(
    name: &str,
    rules: &[&PolicyRule],
    options: &WebhookOptions,
    failure_policy: FailurePolicy,
    timeout_seconds: u32,
    excluded_namespaces: Vec<String>,
) -> Webhook {
    Webhook {
        name: name.to_string(),
        admission_review_versions: vec!["v1".to_string()],
        client_config: client_config(options),
        failure_policy,
        // Equivalent: a policy on apps/v1 statefulsets also sees requests made through
        // another version of the same resource, converted by the apiserver.
        match_policy: "Equivalent",
        namespace_selector: LabelSelector {
            match_expressions: vec![SelectorRequirement {
                key: "kubernetes.io/metadata.name".to_string(),
                operator: "NotIn",
                values: excluded_namespaces,
            }],
        },
        // Policies are idempotent, so a second call after another webhook's change is safe
        // and lets graft see (and adjust) the final object.
        reinvocation_policy: "IfNeeded",
        rules: merge_rules(rules),
        side_effects: "None",
        timeout_seconds,
    }
}

fn client_config(options: &WebhookOptions) -> ClientConfig {
    let ca_bundle = options.ca_bundle.clone();
    match &options.url {
        Some(url) => ClientConfig {
            ca_bundle,
            service: None,
            url: Some(url.join(&options.path)),
        },
        None => ClientConfig {
            ca_bundle,
            service: Some(ServiceReference {
                name: options.service.clone(),
                namespace: options.namespace.clone(),
                path: options.path.clone(),
                port: options.port,
            }),
            url: None,
        },
    }
}

/// Merges policy rules into webhook rules.
///
/// First the operations of every (group, version, resource) are unioned; then resources
/// with the same group, version and operations share one rule.
fn merge_rules(rules: &[&PolicyRule]) -> Vec<Rule> {
    type Key = (String, String, String);
    let mut operations: BTreeMap<Key, BTreeSet<String>> = BTreeMap::new();
    for rule in rules {
        let resource = match &rule.subresource {
            Some(subresource) => format!("{}/{}", rule.resource, subresource),
            None => rule.resource.clone(),
        };
        let key = (rule.group.clone(), rule.version.clone(), resource);
        let entry = operations.entry(key).or_default();
        if rule.operations.is_empty() {
            // An empty list in a policy means every operation.
            entry.insert("*".to_string());
        }
        entry.extend(rule.operations.iter().map(|op| op.to_uppercase()));
    }

    let mut grouped: BTreeMap<(String, String, Vec<String>), Vec<String>> = BTreeMap::new();
    for ((group, version, resource), mut ops) in operations {
        // "*" already covers every operation; listing others next to it is rejected by
        // the apiserver's validation.
        if ops.contains("*") {
            ops = BTreeSet::from(["*".to_string()]);
        }
        grouped
            .entry((group, version, ops.into_iter().collect()))
            .or_default()
            .push(resource);
    }

    grouped
        .into_iter()
        .map(|((group, version, operations), resources)| Rule {
            api_groups: vec![group],
            api_versions: vec![version],
            operations,
            resources,
            scope: "*",
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_bundle_holds_certificates_and_no_key() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["graft".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap()
            .pem();
        check_ca_bundle(cert.as_bytes()).unwrap();
        check_ca_bundle(format!("comment\n{cert}\n{cert}").as_bytes()).unwrap();

        let private =
            |label: &str| format!("{cert}-----BEGIN {label}-----\nAAAA\n-----END {label}-----\n");
        for label in ["PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY"] {
            match check_ca_bundle(private(label).as_bytes()) {
                Err(CaBundleError::PrivateKey { label: found }) => assert_eq!(found, label),
                other => panic!("{label}: {other:?}"),
            }
        }
        assert!(matches!(
            check_ca_bundle(key.serialize_pem().as_bytes()),
            Err(CaBundleError::PrivateKey { .. })
        ));
        for empty in [
            "",
            "not PEM\n",
            "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
        ] {
            assert!(
                matches!(
                    check_ca_bundle(empty.as_bytes()),
                    Err(CaBundleError::NoCertificate)
                ),
                "{empty:?}"
            );
        }
        let garbage = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(matches!(
            check_ca_bundle(format!("{cert}{garbage}").as_bytes()),
            Err(CaBundleError::NotX509 { index: 2, .. })
        ));
        let unterminated = cert.replace("-----END CERTIFICATE-----", "");
        assert!(matches!(
            check_ca_bundle(unterminated.as_bytes()),
            Err(CaBundleError::Pem(_))
        ));
    }

    fn rule(resource: &str, subresource: Option<&str>, ops: &[&str]) -> PolicyRule {
        PolicyRule {
            policy: "p".to_string(),
            group: "*".to_string(),
            version: "*".to_string(),
            resource: resource.to_string(),
            subresource: subresource.map(str::to_string),
            operations: ops.iter().map(|op| op.to_string()).collect(),
        }
    }

    #[test]
    fn identical_resources_merge_and_operations_union() {
        let rules = [
            rule("pods", None, &["CREATE"]),
            rule("pods", None, &["CREATE"]),
            rule("pods", None, &["UPDATE"]),
        ];
        let config = render(&rules, &WebhookOptions::default());
        assert_eq!(config.webhooks.len(), 1);
        let webhook = &config.webhooks[0];
        assert_eq!(webhook.name, MAIN_WEBHOOK);
        assert_eq!(webhook.rules.len(), 1);
        assert_eq!(webhook.rules[0].resources, vec!["pods"]);
        assert_eq!(webhook.rules[0].operations, vec!["CREATE", "UPDATE"]);
    }

    #[test]
    fn same_operations_share_a_rule_and_star_absorbs_others() {
        let mut statefulsets = rule("statefulsets", None, &["CREATE"]);
        statefulsets.group = "apps".to_string();
        let rules = [
            rule("pods", None, &["CREATE"]),
            rule("services", None, &["CREATE"]),
            rule("configmaps", None, &["CREATE", "*"]),
            rule("secrets", None, &[]),
            statefulsets,
        ];
        let config = render(&rules, &WebhookOptions::default());
        let found: Vec<(Vec<String>, Vec<String>, Vec<String>)> = config.webhooks[0]
            .rules
            .iter()
            .map(|r| {
                (
                    r.api_groups.clone(),
                    r.operations.clone(),
                    r.resources.clone(),
                )
            })
            .collect();
        let strings = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            found,
            vec![
                (
                    strings(&["*"]),
                    strings(&["*"]),
                    strings(&["configmaps", "secrets"])
                ),
                (
                    strings(&["*"]),
                    strings(&["CREATE"]),
                    strings(&["pods", "services"])
                ),
                (
                    strings(&["apps"]),
                    strings(&["CREATE"]),
                    strings(&["statefulsets"])
                ),
            ]
        );
    }

    #[test]
    fn status_rules_get_their_own_ignore_webhook() {
        let rules = [
            rule("pods", None, &["CREATE"]),
            rule("nodes", Some("status"), &["UPDATE"]),
        ];
        let options = WebhookOptions {
            failure_policy: FailurePolicy::Fail,
            ..WebhookOptions::default()
        };
        let config = render(&rules, &options);
        assert_eq!(config.webhooks.len(), 2);
        let (main, status) = (&config.webhooks[0], &config.webhooks[1]);
        assert_eq!(main.failure_policy, FailurePolicy::Fail);
        assert_eq!(status.name, STATUS_WEBHOOK);
        assert_eq!(status.failure_policy, FailurePolicy::Ignore);
        assert_eq!(status.timeout_seconds, STATUS_TIMEOUT_SECONDS);
        assert_eq!(status.rules[0].resources, vec!["nodes/status"]);
        assert_eq!(
            main.namespace_selector.match_expressions[0].values,
            vec!["graft", "kube-system"]
        );
    }

    #[test]
    fn a_url_replaces_the_service_in_every_webhook() {
        let rules = [
            rule("pods", None, &["CREATE"]),
            rule("nodes", Some("status"), &["UPDATE"]),
        ];
        let options = WebhookOptions {
            url: Some(WebhookUrl::parse("https://127.0.0.1:8443/graft/").unwrap()),
            ca_bundle: Some("Q0E=".to_string()),
            ..WebhookOptions::default()
        };
        let config = render(&rules, &options);
        assert_eq!(config.webhooks.len(), 2);
        for webhook in &config.webhooks {
            let client = &webhook.client_config;
            assert_eq!(
                client.url.as_deref(),
                Some("https://127.0.0.1:8443/graft/mutate")
            );
            assert_eq!(client.service, None);
            assert_eq!(client.ca_bundle.as_deref(), Some("Q0E="));
        }
        let default = render(&rules, &WebhookOptions::default());
        for webhook in &default.webhooks {
            assert_eq!(webhook.client_config.url, None);
            assert!(webhook.client_config.service.is_some());
        }
    }

    #[test]
    fn no_rules_no_webhooks() {
        assert!(render(&[], &WebhookOptions::default()).webhooks.is_empty());
    }
}

/// One rule of a deployed MutatingWebhookConfiguration, as read back from YAML.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployedRule {
    #[serde(default)]
    pub api_groups: Vec<String>,
    #[serde(default)]
    pub api_versions: Vec<String>,
    #[serde(default)]
    pub operations: Vec<String>,
    #[serde(default)]
    pub resources: Vec<String>,
}

/// Every rule of every webhook in the MutatingWebhookConfigurations among `objects`.
pub fn deployed_rules(objects: &[serde_json::Value]) -> Vec<DeployedRule> {
    objects
        .iter()
        .filter(|o| o["kind"] == "MutatingWebhookConfiguration")
        .filter_map(|o| o["webhooks"].as_array())
        .flatten()
        .filter_map(|webhook| webhook["rules"].as_array())
        .flatten()
        .filter_map(|rule| serde_json::from_value(rule.clone()).ok())
        .collect()
}

/// What a policy can match, one (group, version, resource, subresource, operation) at a
/// time; `None` group or version means any.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub group: Option<&'a str>,
    pub version: Option<&'a str>,
    pub resource: &'a str,
    pub subresource: Option<&'a str>,
    pub operation: &'a str,
}

/// Whether some deployed rule sends such a request to graft, with the apiserver's
/// wildcard rules (`*`, `pods/*`, `*/status`, `*/*`).
pub fn sends(rules: &[DeployedRule], request: Request<'_>) -> bool {
    let overlaps = |list: &[String], wanted: Option<&str>| {
        list.iter()
            .any(|item| item == "*" || wanted.is_none_or(|w| item == w))
    };
    rules.iter().any(|rule| {
        overlaps(&rule.api_groups, request.group)
            && overlaps(&rule.api_versions, request.version)
            && rule
                .operations
                .iter()
                .any(|op| op == "*" || op == request.operation)
            && rule
                .resources
                .iter()
                .any(|entry| resource_entry_covers(entry, request.resource, request.subresource))
    })
}

fn resource_entry_covers(entry: &str, resource: &str, subresource: Option<&str>) -> bool {
    let (entry_resource, entry_sub) = match entry.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (entry, None),
    };
    let resource_ok = entry_resource == "*" || resource == "*" || entry_resource == resource;
    let sub_ok = match (entry_sub, subresource) {
        (None, None) => true,
        (Some("*"), Some(_)) => true,
        (Some(e), Some(s)) => e == s || s == "*",
        _ => false,
    };
    resource_ok && sub_ok
}

#[cfg(test)]
mod coverage_tests {
    use super::*;

    fn rule(groups: &[&str], resources: &[&str], operations: &[&str]) -> DeployedRule {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        DeployedRule {
            api_groups: strings(groups),
            api_versions: strings(&["*"]),
            operations: strings(operations),
            resources: strings(resources),
        }
    }

    fn request<'a>(
        resource: &'a str,
        subresource: Option<&'a str>,
        operation: &'a str,
    ) -> Request<'a> {
        Request {
            group: None,
            version: None,
            resource,
            subresource,
            operation,
        }
    }

    #[test]
    fn wildcards_follow_the_apiserver() {
        let rules = [rule(&[""], &["pods", "nodes/status"], &["CREATE"])];
        assert!(sends(&rules, request("pods", None, "CREATE")));
        assert!(!sends(&rules, request("pods", None, "UPDATE")));
        assert!(!sends(&rules, request("pods", Some("status"), "CREATE")));
        assert!(sends(&rules, request("nodes", Some("status"), "CREATE")));
        assert!(!sends(&rules, request("nodes", None, "CREATE")));
        let wide = [rule(&["*"], &["*/*"], &["*"])];
        assert!(sends(&wide, request("nodes", Some("status"), "UPDATE")));
        let sub = [rule(&["*"], &["pods/*"], &["*"])];
        assert!(!sends(&sub, request("pods", None, "CREATE")));
        assert!(sends(
            &sub,
            request("pods", Some("ephemeralcontainers"), "UPDATE")
        ));
    }
}
