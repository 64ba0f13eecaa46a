//! The `url` a webhook's `clientConfig` can hold instead of a Service: where the apiserver
//! calls a graft it cannot reach through a Service (a `graft serve` on a developer's
//! machine, or behind a load balancer).
//!
//! A URL is checked as the apiserver checks it (`ValidateWebhookURL` in
//! k8s.io/apiserver/pkg/util/webhook/validation.go), so a bad one is refused when the
//! configuration is rendered rather than when it is applied: the `https` scheme, a host,
//! and no user information, query or fragment.

use std::fmt;
use std::str::FromStr;

use hyper::Uri;

/// How a webhook URL is written, said after every refusal.
const FORM: &str = "the form is https://HOST[:PORT][/PATH]";

/// A checked base URL of graft: the webhooks' paths are appended to its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl(String);

/// Why a text is not a webhook URL the apiserver accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("not a URL ({reason}); {FORM}")]
    Invalid { reason: String },
    #[error("no scheme: the apiserver calls webhooks over https only; {FORM}")]
    NoScheme,
    #[error("the scheme is {scheme}, but the apiserver calls webhooks over https only; {FORM}")]
    Scheme { scheme: String },
    #[error("no host; {FORM}")]
    NoHost,
    #[error("user information (USER@) is not permitted in a webhook URL; {FORM}")]
    UserInfo,
    #[error(
        "a query (?...) is not permitted in a webhook URL (the apiserver adds its own, ?timeout=); {FORM}"
    )]
    Query,
    #[error("a fragment (#...) is not permitted in a webhook URL; {FORM}")]
    Fragment,
}

impl WebhookUrl {
    /// Checks `text` as the apiserver checks a webhook's `clientConfig.url`.
    pub fn parse(text: &str) -> Result<WebhookUrl, UrlError> {
        // Checked on the text: the URI parser drops a fragment without a word.
        if text.contains('#') {
            return Err(UrlError::Fragment);
        }
        let uri: Uri = text
            .parse()
            .map_err(|error: hyper::http::uri::InvalidUri| UrlError::Invalid {
                reason: error.to_string(),
            })?;
        let scheme = uri.scheme_str().ok_or(UrlError::NoScheme)?;
        if !scheme.eq_ignore_ascii_case("https") {
            return Err(UrlError::Scheme {
                scheme: scheme.to_string(),
            });
        }
        let authority = uri.authority().ok_or(UrlError::NoHost)?;
        if authority.as_str().contains('@') {
            return Err(UrlError::UserInfo);
        }
        if authority.host().is_empty() {
            return Err(UrlError::NoHost);
        }
        // The URI parser takes any port text; Go's URL parser, and so the apiserver, wants
        // digits.
        let after_host = authority
            .as_str()
            .strip_prefix(authority.host())
            .unwrap_or_default();
        if let Some(port) = after_host.strip_prefix(':')
            && port.parse::<u16>().is_err()
        {
            return Err(UrlError::Invalid {
                reason: format!("the port {port:?} is not a number"),
            });
        }
        // Any `?`, even with nothing after it: a path appended after it would be a query.
        if uri.query().is_some() || text.contains('?') {
            return Err(UrlError::Query);
        }
        Ok(WebhookUrl(text.to_string()))
    }

    /// The URL of the webhook served at `path` (such as `/mutate`): `path` appended to
    /// this URL's path, as a Service's `path` is to the Service.
    pub fn join(&self, path: &str) -> String {
        format!(
            "{}/{}",
            self.0.trim_end_matches('/'),
            path.trim_start_matches('/')
        )
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for WebhookUrl {
    type Err = UrlError;

    fn from_str(text: &str) -> Result<WebhookUrl, UrlError> {
        WebhookUrl::parse(text)
    }
}

impl fmt::Display for WebhookUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<&str, UrlError>) {
        let found = WebhookUrl::parse(text).map(|url| url.join("/mutate"));
        assert_eq!(found.as_deref().map_err(Clone::clone), expected, "{text}");
    }

    #[test]
    fn the_path_is_appended_to_the_urls_path() {
        check(
            "https://127.0.0.1:8443",
            Ok("https://127.0.0.1:8443/mutate"),
        );
        check(
            "https://127.0.0.1:8443/",
            Ok("https://127.0.0.1:8443/mutate"),
        );
        check("https://[::1]:8443", Ok("https://[::1]:8443/mutate"));
        check(
            "https://hooks.example.com/graft",
            Ok("https://hooks.example.com/graft/mutate"),
        );
        check(
            "https://hooks.example.com/graft/",
            Ok("https://hooks.example.com/graft/mutate"),
        );
        check("HTTPS://localhost", Ok("HTTPS://localhost/mutate"));
    }

    #[test]
    fn what_the_apiserver_refuses_is_refused() {
        let scheme = |scheme: &str| {
            Err(UrlError::Scheme {
                scheme: scheme.to_string(),
            })
        };
        check("http://127.0.0.1:8443", scheme("http"));
        check("ftp://host/", scheme("ftp"));
        check("127.0.0.1:8443", Err(UrlError::NoScheme));
        check("/mutate", Err(UrlError::NoScheme));
        check("https://user:secret@host/", Err(UrlError::UserInfo));
        check("https://host/?a=b", Err(UrlError::Query));
        check("https://host/?", Err(UrlError::Query));
        check("https://host/#top", Err(UrlError::Fragment));
        check("https://host#", Err(UrlError::Fragment));
        for text in [
            "",
            "https://",
            "https:///mutate",
            "https://ho st/",
            "https://host:port/",
        ] {
            assert!(
                matches!(
                    WebhookUrl::parse(text),
                    Err(UrlError::Invalid { .. } | UrlError::NoHost)
                ),
                "{text:?}: {:?}",
                WebhookUrl::parse(text)
            );
        }
    }

    #[test]
    fn refusals_say_the_form() {
        let error = WebhookUrl::parse("http://host").unwrap_err().to_string();
        assert_eq!(
            error,
            "the scheme is http, but the apiserver calls webhooks over https only; \
             the form is https://HOST[:PORT][/PATH]"
        );
    }
}
