//! Message signatures: DingTalk's and Feishu's robot signatures and a webhook's body HMAC.

use ring::hmac;

/// DingTalk's `sign` for `timestamp_ms`: HMAC-SHA256 keyed with the secret over
/// `timestamp + "\n" + secret`, base64, then percent-encoded for the query string.
pub fn dingtalk(secret: &str, timestamp_ms: u128) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    let tag = hmac::sign(&key, format!("{timestamp_ms}\n{secret}").as_bytes());
    let encoded = base64_simd::STANDARD.encode_to_string(tag.as_ref());
    form_urlencoded::byte_serialize(encoded.as_bytes()).collect()
}

/// Feishu's (Lark's) `sign` for `timestamp_s` (seconds): HMAC-SHA256 keyed with
/// `timestamp + "\n" + secret` over an empty message, base64; it goes in the body.
pub fn feishu(secret: &str, timestamp_s: u64) -> String {
    let key = hmac::Key::new(
        hmac::HMAC_SHA256,
        format!("{timestamp_s}\n{secret}").as_bytes(),
    );
    base64_simd::STANDARD.encode_to_string(hmac::sign(&key, b"").as_ref())
}

/// A webhook's signature header value: `sha256=` and the hex HMAC-SHA256 of the body.
pub fn webhook(secret: &str, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    let tag = hmac::sign(&key, body);
    let mut out = String::from("sha256=");
    for byte in tag.as_ref() {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_matches_rfc_4231_case_2() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        assert_eq!(
            webhook("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn dingtalk_is_url_encoded_base64() {
        let sign = dingtalk("SEC000", 1_700_000_000_000);
        assert!(!sign.contains('+') && !sign.contains('/') && !sign.contains('='));
        assert!(sign.ends_with("%3D"), "{sign}");
    }
}
