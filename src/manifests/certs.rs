//! A private CA and a serving certificate for the webhook Service, for clusters without
//! cert-manager.
//!
//! The apiserver reaches graft as `https://SERVICE.NAMESPACE.svc:443` and checks the served
//! certificate against the `caBundle` of the webhook configuration, so the serving
//! certificate carries every DNS name the Service answers to, and the CA goes into the
//! `caBundle`. Everything here is pure (no file I/O) so it can be tested directly;
//! `graft certs` writes the files.

use std::time::{Duration, SystemTime};

use base64_simd::STANDARD as BASE64;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::manifests::webhook::{MAIN_WEBHOOK, STATUS_WEBHOOK};

/// Name of the Secret the Deployment mounts at `/etc/graft/tls`.
pub const SECRET_NAME: &str = "graft-tls";
/// Name of the MutatingWebhookConfiguration the caBundle patch targets.
pub const WEBHOOK_CONFIGURATION_NAME: &str = "graft";

const SECONDS_PER_DAY: u64 = 24 * 60 * 60;
/// Certificates start one hour in the past so that a node with a slightly slow clock
/// does not reject a freshly issued certificate.
const BACKDATE: Duration = Duration::from_secs(60 * 60);

/// What to issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertOptions {
    pub service: String,
    pub namespace: String,
    /// Validity of both the CA and the serving certificate, in days.
    pub days: u32,
}

/// The PEM files `graft certs` writes.
#[derive(Debug, Clone)]
pub struct CertBundle {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("--days must be at least 1")]
    ZeroDays,
    #[error("--days {0} is too far in the future")]
    TooLong(u32),
    #[error("cannot issue the {what}: {source}")]
    Issue {
        what: &'static str,
        #[source]
        source: rcgen::Error,
    },
    #[error("cannot render {what}: {source}")]
    Yaml {
        what: &'static str,
        #[source]
        source: serde_yaml::Error,
    },
}

/// The DNS names the apiserver (and anything else in the cluster) may use for the Service.
pub fn dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// Issues a new CA and a serving certificate signed by it (ECDSA P-256 keys).
pub fn generate(options: &CertOptions) -> Result<CertBundle, CertError> {
    if options.days == 0 {
        return Err(CertError::ZeroDays);
    }
    // rcgen takes `time::OffsetDateTime`; converting from `SystemTime` (time's `std`
    // feature, which rcgen's encoder enables) avoids a direct dependency on `time`.
    let now = SystemTime::now();
    let not_before = now.checked_sub(BACKDATE).unwrap_or(now);
    let not_after = now
        .checked_add(Duration::from_secs(
            u64::from(options.days) * SECONDS_PER_DAY,
        ))
        .ok_or(CertError::TooLong(options.days))?;
    let issue = |what| move |source| CertError::Issue { what, source };

    let ca_key = KeyPair::generate().map_err(issue("CA key"))?;
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name = common_name(&format!(
        "graft CA ({}.{})",
        options.service, options.namespace
    ));
    // A path length of 0: this CA signs serving certificates only, never other CAs.
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params.not_before = not_before.into();
    ca_params.not_after = not_after.into();
    let ca_cert = ca_params.self_signed(&ca_key).map_err(issue("CA"))?;
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate().map_err(issue("serving key"))?;
    let names = dns_names(&options.service, &options.namespace);
    let mut params = CertificateParams::new(names).map_err(issue("serving certificate"))?;
    params.distinguished_name =
        common_name(&format!("{}.{}.svc", options.service, options.namespace));
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = not_before.into();
    params.not_after = not_after.into();
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(issue("serving certificate"))?;

    Ok(CertBundle {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A `kubernetes.io/tls` Secret with the serving pair, and the CA as `ca.crt` so that
/// tools (and people) can find the trust anchor next to the certificate.
pub fn secret_yaml(bundle: &CertBundle, namespace: &str) -> Result<String, CertError> {
    let secret = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": SECRET_NAME,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "graft"},
        },
        "type": "kubernetes.io/tls",
        "data": {
            "ca.crt": BASE64.encode_to_string(&bundle.ca_pem),
            "tls.crt": BASE64.encode_to_string(&bundle.cert_pem),
            "tls.key": BASE64.encode_to_string(&bundle.key_pem),
        },
    });
    serde_yaml::to_string(&secret).map_err(|source| CertError::Yaml {
        what: "secret.yaml",
        source,
    })
}

/// A strategic-merge patch for kustomize that sets `caBundle` on both of graft's webhooks.
///
/// Webhooks merge by `name`, so the patch leaves every other field as rendered.
pub fn cabundle_patch_yaml(ca_pem: &str) -> Result<String, CertError> {
    let ca_bundle = BASE64.encode_to_string(ca_pem);
    let webhooks: Vec<serde_json::Value> = [MAIN_WEBHOOK, STATUS_WEBHOOK]
        .iter()
        .map(|name| serde_json::json!({"name": name, "clientConfig": {"caBundle": ca_bundle}}))
        .collect();
    let patch = serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_CONFIGURATION_NAME},
        "webhooks": webhooks,
    });
    serde_yaml::to_string(&patch).map_err(|source| CertError::Yaml {
        what: "webhook-cabundle-patch.yaml",
        source,
    })
}

fn common_name(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cover_every_service_form() {
        assert_eq!(
            dns_names("graft", "graft"),
            [
                "graft",
                "graft.graft",
                "graft.graft.svc",
                "graft.graft.svc.cluster.local"
            ]
        );
    }

    #[test]
    fn zero_days_is_refused() {
        let options = CertOptions {
            service: "graft".into(),
            namespace: "graft".into(),
            days: 0,
        };
        assert!(matches!(generate(&options), Err(CertError::ZeroDays)));
    }

    #[test]
    fn patch_targets_both_webhooks() {
        let patch = cabundle_patch_yaml("PEM").unwrap();
        assert!(patch.contains(MAIN_WEBHOOK) && patch.contains(STATUS_WEBHOOK));
        assert!(patch.contains(&BASE64.encode_to_string("PEM")));
    }
}
