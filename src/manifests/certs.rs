//! A private CA and a serving certificate for the webhook Service, for clusters without
//! cert-manager.
//!
//! The apiserver reaches graft as `https://SERVICE.NAMESPACE.svc:443` and checks the served
//! certificate against the `caBundle` of the webhook configuration, so the serving
//! certificate carries every DNS name the Service answers to, and the CA goes into the
//! `caBundle`. Everything here is pure (no file I/O) so it can be tested directly;
//! `graft certs` writes the files.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64_simd::STANDARD as BASE64;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// Name of the Secret the Deployment mounts at `/etc/graft/tls`.
pub const SECRET_NAME: &str = "graft-tls";

const SECONDS_PER_DAY: u64 = 24 * 60 * 60;
/// Certificates start one hour in the past so that a node with a slightly slow clock
/// does not reject a freshly issued certificate.
const BACKDATE: Duration = Duration::from_secs(60 * 60);
/// 9999-12-31T23:59:59Z, the last instant X.509 can express (GeneralizedTime has four
/// digits of year). The `time` crate rcgen converts through stops there too, and panics
/// past it rather than returning an error, so the bound must be checked before.
const LATEST_NOT_AFTER: Duration = Duration::from_secs(253_402_300_799);
/// Kubernetes' limit on a DNS label (Service and namespace names).
const MAX_LABEL_LENGTH: usize = 63;

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
    #[error("--days {0} is too far in the future: certificates cannot expire after 9999-12-31")]
    TooLong(u32),
    #[error(transparent)]
    InvalidName(#[from] InvalidName),
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
    check_service_names(&options.service, &options.namespace)?;
    // rcgen takes `time::OffsetDateTime`; converting from `SystemTime` (time's `std`
    // feature, which rcgen's encoder enables) avoids a direct dependency on `time`.
    let (not_before, not_after) = validity(SystemTime::now(), options.days)?;
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

/// The validity period of certificates issued at `now` for `days` days.
fn validity(now: SystemTime, days: u32) -> Result<(SystemTime, SystemTime), CertError> {
    if days == 0 {
        return Err(CertError::ZeroDays);
    }
    let not_before = now.checked_sub(BACKDATE).unwrap_or(now);
    let not_after = now
        .checked_add(Duration::from_secs(u64::from(days) * SECONDS_PER_DAY))
        .filter(
            |end| !matches!(end.duration_since(UNIX_EPOCH), Ok(since) if since > LATEST_NOT_AFTER),
        )
        .ok_or(CertError::TooLong(days))?;
    Ok((not_before, not_after))
}

/// A `--service` or `--namespace` that is not a Kubernetes name: the names end up in
/// the certificate's DNS names, the Secret's namespace and the webhook's `clientConfig`,
/// where the apiserver would refuse them only at `kubectl apply`, or never match.
#[derive(Debug, thiserror::Error)]
#[error("--{flag} {value:?} is not a valid {what}: {reason}")]
pub struct InvalidName {
    pub flag: &'static str,
    what: &'static str,
    value: String,
    reason: &'static str,
}

/// Checks the Service's name (a DNS-1035 label) and its namespace's (DNS-1123).
pub fn check_service_names(service: &str, namespace: &str) -> Result<(), InvalidName> {
    check_label(
        service,
        Label::Dns1035,
        "service",
        "Service name (DNS-1035 label)",
    )?;
    check_label(
        namespace,
        Label::Dns1123,
        "namespace",
        "namespace name (DNS-1123 label)",
    )
}

/// The two kinds of DNS label Kubernetes names are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    /// RFC 1123: may start with a digit (namespaces).
    Dns1123,
    /// RFC 1035: starts with a letter (Services, whose names become environment variables).
    Dns1035,
}

fn check_label(
    value: &str,
    label: Label,
    flag: &'static str,
    what: &'static str,
) -> Result<(), InvalidName> {
    let invalid = |reason| InvalidName {
        flag,
        what,
        value: value.to_string(),
        reason,
    };
    let bytes = value.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return Err(invalid("it must not be empty"));
    };
    if bytes.len() > MAX_LABEL_LENGTH {
        return Err(invalid("it must be at most 63 characters"));
    }
    if !bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
    {
        return Err(invalid(
            "it must consist of lowercase letters, digits and '-' only",
        ));
    }
    match label {
        Label::Dns1035 if !first.is_ascii_lowercase() => {
            return Err(invalid("it must start with a lowercase letter"));
        }
        Label::Dns1123 if *first == b'-' => {
            return Err(invalid("it must start with a lowercase letter or a digit"));
        }
        _ => {}
    }
    if *last == b'-' {
        return Err(invalid("it must end with a lowercase letter or a digit"));
    }
    Ok(())
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

    fn options(service: &str, namespace: &str) -> CertOptions {
        CertOptions {
            service: service.into(),
            namespace: namespace.into(),
            days: 1,
        }
    }

    #[test]
    fn validity_ends_at_the_last_instant_x509_can_express() {
        let days: u32 = 10;
        let now =
            UNIX_EPOCH + LATEST_NOT_AFTER - Duration::from_secs(u64::from(days) * SECONDS_PER_DAY);
        let (_, not_after) = validity(now, days).unwrap();
        assert_eq!(not_after, UNIX_EPOCH + LATEST_NOT_AFTER);
        assert!(matches!(
            validity(now, days + 1),
            Err(CertError::TooLong(11))
        ));
        let today = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
        assert!(matches!(
            validity(today, u32::MAX),
            Err(CertError::TooLong(u32::MAX))
        ));
    }

    #[test]
    fn names_are_kubernetes_labels() {
        let long = "a".repeat(64);
        for (service, namespace, flag) in [
            ("Bad_Name!", "graft", "service"),
            ("1graft", "graft", "service"),
            ("graft", "", "namespace"),
            ("graft", "-graft", "namespace"),
            ("graft", "graft-", "namespace"),
            ("graft", long.as_str(), "namespace"),
        ] {
            match generate(&options(service, namespace)) {
                Err(CertError::InvalidName(InvalidName { flag: named, .. })) => {
                    assert_eq!(named, flag)
                }
                other => panic!("{service}.{namespace}: {other:?}"),
            }
        }
        let longest = "a".repeat(63);
        for (service, namespace) in [("a", "1"), ("a-1", "0-a"), (&*longest, &*longest)] {
            generate(&options(service, namespace)).unwrap();
        }
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
}
