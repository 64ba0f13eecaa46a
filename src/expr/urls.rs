//! Kubernetes' CEL URL library (`k8s.io/apiserver/pkg/cel/library`, `urls.go`), with the
//! semantics of Go's `net/url`, which it is built on:
//!
//! | Call | Result |
//! |---|---|
//! | `url(s)`, `isURL(s)` | a URL; whether `s` is one. It must be an absolute URI or an absolute path |
//! | `getScheme()`, `getHost()`, `getHostname()`, `getPort()` | the parts as written (`[::1]:80`, `::1`, `80`); `''` when absent |
//! | `getEscapedPath()` | the path, percent-encoded: `/a b` gives `/a%20b` |
//! | `getQuery()` | `map(string, list(string))`, keys and values unescaped |
//!
//! The string is split by RFC 3986's own regular expression (Appendix B) and then held
//! to what Go's `url.ParseRequestURI` accepts. Unlike a WHATWG parser, nothing is
//! normalised: the host keeps its case and `https://h:443/` its port, as in Kubernetes.

use std::any::Any;
use std::sync::LazyLock;

use cel::ExecutionError;
use cel::common::types::{CelBool, CelString, STRING_TYPE, Type};
use cel::common::value::{CowVal, StaticVal, Val};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC};
use regex::Regex;

use super::convert;
use super::functions::{Overload, arity, fail, string_arg};
use crate::tree::{Map, Tree};

type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

static URL_TYPE: Type = Type::new_unspecified_type("kubernetes.URL");

/// What Go's path escaping leaves alone: the unreserved characters and `$&+,/:;=@`.
const PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b',')
    .remove(b'/')
    .remove(b':')
    .remove(b';')
    .remove(b'=')
    .remove(b'@');

/// RFC 3986, Appendix B: scheme, authority, path, query, fragment.
static PARTS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"^(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$").ok()
});

/// A parsed URL: the parts Kubernetes' functions return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    scheme: String,
    /// `host[:port]`, without user information.
    host: String,
    /// The path as written.
    raw_path: String,
    raw_query: String,
}

impl Url {
    /// Parses as Kubernetes' `url()` does: an absolute URI or an absolute path.
    pub fn parse(text: &str) -> Result<Url, String> {
        let invalid = |why: &str| format!("URL parse error during conversion from string: {why}");
        if text.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err(invalid("invalid control character in URL"));
        }
        if text.is_empty() {
            return Err(invalid("empty url"));
        }
        let parts = PARTS
            .as_ref()
            .and_then(|parts| parts.captures(text))
            .ok_or_else(|| invalid("not a URI"))?;
        let part = |i: usize| parts.get(i).map(|m| m.as_str());
        let scheme = part(1).unwrap_or("");
        if text.starts_with(':') {
            return Err(invalid("missing protocol scheme"));
        }
        let scheme_ok = scheme.bytes().enumerate().all(|(i, b)| {
            b.is_ascii_alphabetic() || (i > 0 && (b.is_ascii_digit() || b"+-.".contains(&b)))
        });
        if !scheme_ok {
            return Err(invalid(&format!(
                "first path segment in URL cannot contain colon: {text:?}"
            )));
        }
        // Without a scheme, `///x` is a path to Go, not an empty authority.
        let (authority, raw_path) = if scheme.is_empty() && text.starts_with("///") {
            (None, text.split(['?', '#']).next().unwrap_or(""))
        } else {
            (part(2), part(3).unwrap_or(""))
        };
        // Without a scheme, only an absolute path is a request URI; `//host/path` is
        // one too (Kubernetes checks with `ParseRequestURI`, then reads the parts of
        // `Parse`, which finds the host).
        if scheme.is_empty() && authority.is_none() && !raw_path.starts_with('/') {
            return Err(invalid(&format!("invalid URI for request: {text:?}")));
        }
        let host = match authority {
            Some(authority) => checked_host(authority).map_err(|why| invalid(&why))?,
            None => String::new(),
        };
        unescape(raw_path).map_err(|why| invalid(&why))?;
        Ok(Url {
            scheme: scheme.to_ascii_lowercase(),
            host,
            raw_path: raw_path.to_string(),
            raw_query: part(4).unwrap_or("").to_string(),
        })
    }

    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    /// The host without its port, and an IPv6 address without its brackets.
    pub fn hostname(&self) -> &str {
        let (host, _) = split_port(&self.host);
        host.strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
    }

    pub fn port(&self) -> &str {
        split_port(&self.host).1
    }

    /// The path as written when it is validly encoded, else the decoded path
    /// re-encoded, as Go's `EscapedPath`.
    pub fn escaped_path(&self) -> String {
        if valid_encoded(&self.raw_path) {
            return self.raw_path.clone();
        }
        let path = unescape(&self.raw_path).unwrap_or_default();
        percent_encoding::utf8_percent_encode(&path, PATH).to_string()
    }

    /// The query's values by key, as Go's `Query`: pairs split on `&`, `+` a space,
    /// and a pair with `;` or an invalid escape left out.
    pub fn query(&self) -> Map<'static> {
        let mut query = Map::new();
        for pair in self.raw_query.split('&') {
            if pair.is_empty() || pair.contains(';') || !escapes_valid(pair) {
                continue;
            }
            for (key, value) in form_urlencoded::parse(pair.as_bytes()) {
                let value = Tree::from(value.into_owned());
                match query.get_mut(&key).and_then(Tree::list_mut) {
                    Some(values) => values.push(value),
                    None => {
                        query.insert(key.into_owned(), Tree::from(vec![value]));
                    }
                }
            }
        }
        query
    }
}

/// The authority without user information, checked as Go checks a host and port.
fn checked_host(authority: &str) -> Result<String, String> {
    let host = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let allowed = |b: u8| b.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&b);
            if !userinfo.bytes().all(allowed) {
                return Err("net/url: invalid userinfo".to_string());
            }
            host
        }
        None => authority,
    };
    let port = if host.starts_with('[') {
        let close = host
            .rfind(']')
            .ok_or_else(|| "missing ']' in host".to_string())?;
        &host[close + 1..]
    } else {
        host.rfind(':').map_or("", |colon| &host[colon..])
    };
    if !valid_optional_port(port) {
        return Err(format!("invalid port {port:?} after host"));
    }
    let host_char =
        |b: u8| b >= 0x80 || b.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]<>\"%".contains(&b);
    if !host.bytes().all(host_char) {
        return Err(format!("invalid character in host name {host:?}"));
    }
    Ok(host.to_string())
}

/// `""`, or `:` followed by digits only.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
}

/// `host:port` split at a colon followed by digits only, as Go's `splitHostPort`.
fn split_port(host_port: &str) -> (&str, &str) {
    match host_port.rfind(':') {
        Some(colon) if valid_optional_port(&host_port[colon..]) => {
            (&host_port[..colon], &host_port[colon + 1..])
        }
        _ => (host_port, ""),
    }
}

/// Whether every `%` starts an escape of two hex digits.
fn escapes_valid(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().all(|(i, b)| {
        *b != b'%'
            || (bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    })
}

fn unescape(text: &str) -> Result<String, String> {
    if !escapes_valid(text) {
        return Err(format!("invalid URL escape in {text:?}"));
    }
    Ok(percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned())
}

/// Go's `validEncoded` for paths: only characters a path may hold unescaped (those
/// [`PATH`] leaves alone, and a few more sub-delimiters), and `%`.
fn valid_encoded(path: &str) -> bool {
    path.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.~$&+,/:;=@!'()*[]%".contains(&b))
}

impl Val for Url {
    fn get_type(&self) -> &Type {
        &URL_TYPE
    }
    fn cel_type() -> &'static Type {
        &URL_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<Url>().is_some_and(|o| o == self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for Url {}

/// The overloads of this module.
pub fn overloads() -> Vec<Overload> {
    let url = || URL_TYPE.to_owned();
    let getter = |name, id, op| Overload::method(name, id, url(), vec![], op);
    vec![
        Overload::function("url", "string_to_url", vec![STRING_TYPE], make_url),
        Overload::function("isURL", "is_url_string", vec![STRING_TYPE], is_url),
        getter("getScheme", "url_get_scheme", get_scheme),
        getter("getHost", "url_get_host", get_host),
        getter("getHostname", "url_get_hostname", get_hostname),
        getter("getPort", "url_get_port", get_port),
        getter("getEscapedPath", "url_get_escaped_path", get_escaped_path),
        getter("getQuery", "url_get_query", get_query),
    ]
}

fn url_arg<'a>(function: &str, value: &'a dyn Val) -> Result<&'a Url, ExecutionError> {
    value.downcast_ref::<Url>().ok_or_else(|| {
        fail(
            function,
            format!("expected a URL, got {}", value.get_type().name()),
        )
    })
}

fn make_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [text] = arity::<1>("url", &args)?;
    let url = Url::parse(string_arg("url", text)?).map_err(|e| fail("url", e))?;
    Ok(CowVal::owned(url))
}

fn is_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [text] = arity::<1>("isURL", &args)?;
    let valid = Url::parse(string_arg("isURL", text)?).is_ok();
    Ok(CowVal::owned(CelBool::from(valid)))
}

/// Applies a string-valued getter to the call's target.
fn text<'b, 'v>(name: &str, args: &[CowVal<'b, 'v>], get: fn(&Url) -> String) -> CelResult<'b, 'v> {
    let [url] = arity::<1>(name, args)?;
    Ok(CowVal::owned(CelString::from(get(url_arg(name, url)?))))
}

fn get_scheme<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    text("getScheme", &args, |url| url.scheme().to_string())
}

fn get_host<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    text("getHost", &args, |url| url.host().to_string())
}

fn get_hostname<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    text("getHostname", &args, |url| url.hostname().to_string())
}

fn get_port<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    text("getPort", &args, |url| url.port().to_string())
}

fn get_escaped_path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    text("getEscapedPath", &args, Url::escaped_path)
}

fn get_query<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "getQuery";
    let [url] = arity::<1>(NAME, &args)?;
    let query = Tree::from(url_arg(NAME, url)?.query());
    let value = convert::json_to_owned_val(&query).map_err(|e| fail(NAME, e))?;
    Ok(CowVal::Owned(value))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::evaluate_unbound as eval;

    /// Kubernetes' own examples (`urls.go`), each true.
    #[test]
    fn the_kubernetes_examples_hold() {
        for source in [
            "isURL('https://user:pass@example.com:80/path?query=val#fragment')",
            "isURL('/absolute-path') && !isURL('https://a:b:c/') && !isURL('../relative-path')",
            "url('/path').getScheme() == '' && url('https://example.com/').getScheme() == 'https'",
            "url('https://example.com:80/').getHost() == 'example.com:80'",
            "url('https://example.com/').getHost() == 'example.com'",
            "url('https://[::1]:80/').getHost() == '[::1]:80' && url('https://[::1]/').getHost() == '[::1]'",
            "url('/path').getHost() == ''",
            "url('https://example.com:80/').getHostname() == 'example.com'",
            "url('https://127.0.0.1:80/').getHostname() == '127.0.0.1'",
            "url('https://[::1]:80/').getHostname() == '::1' && url('/path').getHostname() == ''",
            "url('https://example.com:80/').getPort() == '80' && url('https://example.com/').getPort() == ''",
            "url('/path').getPort() == ''",
            "url('https://example.com/path').getEscapedPath() == '/path'",
            "url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'",
            "url('https://example.com').getEscapedPath() == ''",
            "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
            "url('https://example.com/path?key with spaces=value with spaces').getQuery() == {'key with spaces': ['value with spaces']}",
            "url('https://example.com/path?').getQuery() == {} && url('https://example.com/path').getQuery() == {}",
        ] {
            assert_eq!(eval(source), Ok(json!(true)), "{source}");
        }
    }

    /// Go's `net/url`, not WHATWG: nothing is normalised away.
    #[test]
    fn nothing_is_normalised() {
        for source in [
            "url('https://Example.COM:443/a/../b').getHost() == 'Example.COM:443'",
            "url('https://example.com:443/').getPort() == '443'",
            "url('https://example.com/a/../b').getEscapedPath() == '/a/../b'",
            "url('HTTPS://example.com/').getScheme() == 'https'",
            "url('https://example.com/a%2Fb').getEscapedPath() == '/a%2Fb'",
            "url('https://example.com/?a=1+2&b=%41&c;d=1&e=%zz').getQuery() == {'a': ['1 2'], 'b': ['A']}",
            "url('mailto:someone@example.com').getScheme() == 'mailto'",
            "url('//example.com/path').getHost() == 'example.com' && url('//example.com/path').getScheme() == ''",
            "url('///path').getHost() == '' && url('///path').getEscapedPath() == '///path'",
        ] {
            assert_eq!(eval(source), Ok(json!(true)), "{source}");
        }
    }

    #[test]
    fn malformed_urls_are_errors_that_say_why() {
        for (source, needle) in [
            ("url('')", "empty url"),
            ("url('relative/path')", "invalid URI for request"),
            ("url('https://a:b:c/')", "invalid port"),
            ("url('https://[::1/')", "missing ']'"),
            ("url('https://exa mple.com/')", "invalid character in host"),
            ("url('/a%zzb')", "invalid URL escape"),
            ("url(':no-scheme')", "missing protocol scheme"),
            ("url('/a\\nb')", "control character"),
            ("url(1)", "no matching overload"),
        ] {
            let error = eval(source).expect_err(source).to_string();
            assert!(error.contains(needle), "{source}: {error}");
        }
    }
}
