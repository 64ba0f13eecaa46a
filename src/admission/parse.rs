//! The parse of an AdmissionReview: one pass over the body, in any field order, into a
//! request whose objects are trees borrowing their strings from the body.
//!
//! What a policy does not read is not built, without predicting what it reads: an
//! object's `metadata.managedFields` and the whole `oldObject` are kept as their text,
//! checked as building them would check them, and built on first read ([`Tree::Text`]).
//! The object itself is built when the request has candidate policies, which the
//! apiserver's order (the fields that route a request before the objects) tells when
//! the object is reached; otherwise, or in a body in another order, it is kept as text
//! too. Either way the review is the same JSON.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};

use super::{AdmissionRequest, BadReview, Review, checked};
use crate::policy::{PolicySet, Route};
use crate::tree::{self, Tree};

/// The keys whose values an object keeps as text until they are read: large, and
/// rarely read.
const KEPT: &[&str] = &["managedFields"];

/// The review's fields are inside one map.
const ENVELOPE_DEPTH: usize = 1;
/// The objects are the values of a request, inside the review: two maps enclose them.
const OBJECT_DEPTH: usize = 2;

/// A parsed review and its route: which policies the request is for, asked once.
#[derive(Debug)]
pub struct Parsed<'b, 's> {
    pub review: Review<'b>,
    /// `None`: no policy is for the request.
    pub route: Option<Route<'s>>,
}

/// Parses a review body for `policies`. The route is asked when the parse reaches the
/// object, with the fields read before it (the apiserver sends the fields that route a
/// request first): the object is built only for a request some policy is for. In a
/// body where a field that routes comes after the object, the route is asked again
/// once the whole request is read, and the object, kept as text, is built when read.
pub fn parse<'b, 's>(body: &'b [u8], policies: &'s PolicySet) -> Result<Parsed<'b, 's>, BadReview> {
    let mut at_object = None;
    let mut builds = |request: &AdmissionRequest<'_>| {
        let route = policies.route(request);
        at_object = Some(route);
        route.is_some()
    };
    let routed = Cell::new(false);
    let review = parse_text(utf8(body)?, &mut builds, &routed)?;
    let route = match at_object {
        Some(route) if routed.get() => route,
        _ => policies.route(&review.request),
    };
    Ok(Parsed { review, route })
}

/// Parses a review body for its request alone, every object built: for the commands
/// that show or keep the objects (`graft apply`, `graft test`).
pub fn read_request(body: &[u8]) -> Result<Review<'_>, BadReview> {
    parse_text(utf8(body)?, &mut |_| true, &Cell::new(false))
}

/// The body as text. simdutf8 only says whether the body is valid; for a body that is
/// not, core's check says where, for the error.
pub(super) fn utf8(body: &[u8]) -> Result<&str, std::str::Utf8Error> {
    simdutf8::basic::from_utf8(body).or_else(|_| std::str::from_utf8(body))
}

/// Whether a request has candidate policies, asked with the fields read before its
/// object: only then is the object built as it is read.
type Builds<'d> = &'d mut dyn FnMut(&AdmissionRequest<'_>) -> bool;

/// What a failed read of the body was doing, for its error: the error itself is
/// serde_json's, which says where in the body it is.
#[derive(Clone, Copy, Default)]
enum Reading {
    #[default]
    Envelope,
    Object(&'static str),
}

/// Parses `text`, building the object when `builds` says so; `routed` is set when every
/// field that routes a request was read before the object, so the answer `builds` gave
/// holds for the whole request.
pub(super) fn parse_text<'b>(
    text: &'b str,
    builds: Builds<'_>,
    routed: &Cell<bool>,
) -> Result<Review<'b>, BadReview> {
    match pass(text, builds, Keep::Text, routed) {
        // A text's check fails where the text ends: read once more with everything built,
        // serde_json says where in the body the error is.
        Err(first @ (BadReview::Object { .. } | BadReview::Json(_))) => {
            match pass(text, builds, Keep::Nothing, routed) {
                Err(exact @ (BadReview::Object { .. } | BadReview::Json(_))) => Err(exact),
                _ => Err(first),
            }
        }
        parsed => parsed,
    }
}

/// Whether a pass keeps what it may as text, or builds everything.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    Text,
    Nothing,
}

impl Keep {
    /// Reads the value of a field graft does not use, `depth` maps deep, and drops it. It
    /// is checked as building it would check it, as the rest of the body is: serde's
    /// `IgnoredAny` would let a lone surrogate, a number out of range or nesting past the
    /// recursion limit through, which a plain serde_json parse of the body refuses.
    fn skip<'de, A: MapAccess<'de>>(self, map: &mut A, depth: usize) -> Result<(), A::Error> {
        match self {
            Keep::Text => map.next_value_seed(tree::text_seed(depth)).map(drop),
            Keep::Nothing => map.next_value_seed(tree::seed(depth, &[])).map(drop),
        }
    }
}

fn pass<'b>(
    text: &'b str,
    builds: Builds<'_>,
    keep: Keep,
    routed: &Cell<bool>,
) -> Result<Review<'b>, BadReview> {
    let reading = Cell::new(Reading::Envelope);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let seed = EnvelopeSeed {
        builds,
        keep,
        reading: &reading,
        routed,
    };
    let envelope = seed
        .deserialize(&mut deserializer)
        .and_then(|envelope| deserializer.end().map(|()| envelope))
        .map_err(|error| match reading.get() {
            Reading::Envelope => BadReview::Json(error),
            Reading::Object(field) => BadReview::Object { field, error },
        })?;
    let request = checked(&envelope.api_version, envelope.kind, envelope.request)?;
    if request.uid.is_empty() {
        return Err(BadReview::MissingUid);
    }
    Ok(Review {
        api_version: envelope.api_version,
        request,
    })
}

struct Envelope<'b> {
    api_version: String,
    kind: String,
    request: Option<AdmissionRequest<'b>>,
}

struct EnvelopeSeed<'p, 'd> {
    builds: Builds<'d>,
    keep: Keep,
    reading: &'p Cell<Reading>,
    routed: &'p Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for EnvelopeSeed<'_, '_> {
    type Value = Envelope<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Envelope<'de>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EnvelopeSeed<'_, '_> {
    type Value = Envelope<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an AdmissionReview object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope<'de>, A::Error> {
        let mut envelope = Envelope {
            api_version: String::new(),
            kind: String::new(),
            request: None,
        };
        let mut seen = 0;
        while let Some(Key(key)) = map.next_key()? {
            // Each arm gives its field's bit for `first_time`.
            let bit = match key.as_ref() {
                "apiVersion" => {
                    envelope.api_version = map.next_value()?;
                    1
                }
                "kind" => {
                    envelope.kind = map.next_value()?;
                    2
                }
                "request" => {
                    let seed = Optional(RequestSeed {
                        builds: &mut *self.builds,
                        keep: self.keep,
                        reading: self.reading,
                        routed: self.routed,
                    });
                    envelope.request = map.next_value_seed(seed)?;
                    4
                }
                _ => {
                    self.keep.skip(&mut map, ENVELOPE_DEPTH)?;
                    continue;
                }
            };
            first_time(&mut seen, bit, &key)?;
        }
        Ok(envelope)
    }
}

struct RequestSeed<'p, 'd> {
    builds: Builds<'d>,
    keep: Keep,
    reading: &'p Cell<Reading>,
    routed: &'p Cell<bool>,
}

impl RequestSeed<'_, '_> {
    /// Reads a value kept as its text (checked as building it would check it), or null.
    fn text<'de, A: MapAccess<'de>>(&self, map: &mut A) -> Result<Option<Tree<'de>>, A::Error> {
        match self.keep {
            Keep::Text => map.next_value_seed(Optional(tree::text_seed(OBJECT_DEPTH))),
            Keep::Nothing => map.next_value_seed(Optional(tree::seed(OBJECT_DEPTH, &[]))),
        }
    }

    /// Reads an object, built (its kept keys as text) or kept whole as text, naming it in
    /// the error if it is not valid JSON.
    fn object<'de, A: MapAccess<'de>>(
        &self,
        map: &mut A,
        build: bool,
        field: &'static str,
    ) -> Result<Option<Tree<'de>>, A::Error> {
        self.reading.set(Reading::Object(field));
        let object = match (self.keep, build) {
            (Keep::Nothing, _) => map.next_value_seed(Optional(tree::seed(OBJECT_DEPTH, &[])))?,
            (Keep::Text, true) => map.next_value_seed(Optional(tree::seed(OBJECT_DEPTH, KEPT)))?,
            (Keep::Text, false) => map.next_value_seed(Optional(tree::text_seed(OBJECT_DEPTH)))?,
        };
        self.reading.set(Reading::Envelope);
        Ok(object)
    }
}

impl<'de> DeserializeSeed<'de> for RequestSeed<'_, '_> {
    type Value = AdmissionRequest<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RequestSeed<'_, '_> {
    type Value = AdmissionRequest<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an AdmissionRequest object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut request = AdmissionRequest::default();
        let mut seen = 0;
        // The fields that route the request, as read when the object was reached.
        let mut routing_at_object = None;
        while let Some(Key(key)) = map.next_key()? {
            let field = match key.as_ref() {
                "uid" => read(&mut request.uid, &mut map, Field::Uid)?,
                "kind" => read(&mut request.kind, &mut map, Field::Kind)?,
                "resource" => read(&mut request.resource, &mut map, Field::Resource)?,
                "subResource" => read(&mut request.sub_resource, &mut map, Field::SubResource)?,
                "name" => read(&mut request.name, &mut map, Field::Name)?,
                "namespace" => read(&mut request.namespace, &mut map, Field::Namespace)?,
                "operation" => read(&mut request.operation, &mut map, Field::Operation)?,
                "userInfo" => {
                    request.user_info = map.next_value_seed(tree::seed(OBJECT_DEPTH, &[]))?;
                    Field::UserInfo
                }
                "dryRun" => read(&mut request.dry_run, &mut map, Field::DryRun)?,
                "requestKind" => {
                    request.request_kind = self.text(&mut map)?;
                    Field::RequestKind
                }
                "requestResource" => {
                    request.request_resource = self.text(&mut map)?;
                    Field::RequestResource
                }
                "requestSubResource" => read(
                    &mut request.request_sub_resource,
                    &mut map,
                    Field::RequestSubResource,
                )?,
                "options" => {
                    request.options = self.text(&mut map)?;
                    Field::Options
                }
                "object" => {
                    routing_at_object = Some(seen & Field::ROUTING);
                    let build = (self.builds)(&request);
                    request.object = self.object(&mut map, build, "object")?;
                    Field::Object
                }
                "oldObject" => {
                    request.old_object = self.object(&mut map, false, "oldObject")?;
                    Field::OldObject
                }
                _ => {
                    self.keep.skip(&mut map, OBJECT_DEPTH)?;
                    continue;
                }
            };
            first_time(&mut seen, field.bit(), &key)?;
        }
        self.routed
            .set(routing_at_object == Some(seen & Field::ROUTING));
        Ok(request)
    }
}

/// A value or `null`, read by the seed `S`.
struct Optional<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Optional<S> {
    type Value = Option<S::Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for Optional<S> {
    type Value = Option<S::Value>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a value or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(deserializer).map(Some)
    }
}

/// A key of the review, borrowed from the body unless it holds an escape.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a field name")
    }

    fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(key)))
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(key.to_owned())))
    }

    fn visit_string<E: de::Error>(self, key: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(key)))
    }
}

/// The fields of a request the parse reads, numbered as serde's derive would number
/// them, so a repeated one is refused with the derive's words.
#[derive(Clone, Copy)]
enum Field {
    Uid,
    Kind,
    Resource,
    SubResource,
    Name,
    Namespace,
    Operation,
    UserInfo,
    Object,
    OldObject,
    DryRun,
    RequestKind,
    RequestResource,
    RequestSubResource,
    Options,
}

impl Field {
    /// The fields a request's route is asked with.
    const ROUTING: u16 = 1 << Field::Resource as u16
        | 1 << Field::SubResource as u16
        | 1 << Field::Namespace as u16
        | 1 << Field::Operation as u16;

    fn bit(self) -> u16 {
        1 << self as u16
    }
}

/// Reads the next value into `slot`, as field `field`.
fn read<'de, T: serde::Deserialize<'de>, A: MapAccess<'de>>(
    slot: &mut T,
    map: &mut A,
    field: Field,
) -> Result<Field, A::Error> {
    *slot = map.next_value()?;
    Ok(field)
}

/// Records the field with bit `bit` as read, refusing it the second time, as serde's
/// derive does (repeated unknown keys are accepted, as the derive accepts them, by not
/// recording them).
fn first_time<E: de::Error>(seen: &mut u16, bit: u16, key: &str) -> Result<(), E> {
    if *seen & bit != 0 {
        return Err(E::custom(format_args!("duplicate field `{key}`")));
    }
    *seen |= bit;
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// The routing fields the question was asked with: resource, namespace, operation.
    type Routing = (String, Option<String>, String);

    /// The parse, the object built (`builds`) or kept as text, and the routing each
    /// question was asked with.
    fn parsed_with(text: &str, builds: bool) -> (Result<Review<'_>, BadReview>, Vec<Routing>) {
        let mut asked = Vec::new();
        let mut decide = |request: &AdmissionRequest<'_>| {
            asked.push((
                request.resource.resource.clone(),
                request.namespace.clone(),
                request.operation.clone(),
            ));
            builds
        };
        let parsed = parse_text(text, &mut decide, &Cell::new(false));
        (parsed, asked)
    }

    /// The request `text` holds, read whole by serde_json and serde's derive, as JSON.
    fn plain(text: &str) -> Value {
        let value: Value = serde_json::from_str(text).expect("valid JSON");
        let request = value["request"].to_string();
        let request: AdmissionRequest<'_> = serde_json::from_str(&request).expect("a request");
        serde_json::to_value(&request).expect("serializable")
    }

    fn as_json(review: &Review<'_>) -> Value {
        serde_json::to_value(&review.request).expect("serializable")
    }

    fn object_json(object: &Option<Tree<'_>>) -> Option<Value> {
        object.as_ref().map(Tree::to_value)
    }

    #[test]
    fn the_apiservers_reviews_are_read_as_serde_json_reads_them_asking_once() {
        for text in [
            include_str!("../../tests/fixtures/pod-create-multus-worker.json"),
            include_str!("../../tests/fixtures/pod-create-statefulset-web-3.json"),
            include_str!("../../tests/fixtures/node-status-update.json"),
            include_str!("../../benches/fixtures/pod-create-realistic.json"),
        ] {
            for builds in [false, true] {
                let (parsed, asked) = parsed_with(text, builds);
                let expected = plain(text);
                assert_eq!(as_json(&parsed.expect("a valid review")), expected);
                // Asked once, when the object was reached, with the routing fields read.
                let routing = (
                    expected["resource"]["resource"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    expected["namespace"].as_str().map(str::to_string),
                    expected["operation"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
                let objects = usize::from(!expected["object"].is_null());
                assert_eq!(asked, vec![routing; objects]);
            }
        }
    }

    fn review(request: Value) -> String {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
            .to_string()
    }

    /// The same request in the apiserver's order and in another one, with a pod whose
    /// managedFields are kept as text.
    fn in_two_orders(operation: &str, object: Value, old_object: Value) -> [String; 2] {
        let head = r#""uid":"u","resource":{"resource":"pods"},"namespace":"late""#;
        let apiserver = format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{{head},"operation":"{operation}","object":{object},"oldObject":{old_object}}}}}"#
        );
        let other = format!(
            r#"{{"kind":"AdmissionReview","request":{{"oldObject":{old_object},"uid":"u","object":{object},"resource":{{"resource":"pods"}},"operation":"{operation}","namespace":"late"}},"apiVersion":"admission.k8s.io/v1"}}"#
        );
        [apiserver, other]
    }

    #[test]
    fn a_body_in_another_order_gives_the_same_review_built_or_not() {
        let pod =
            json!({"metadata": {"name": "a", "managedFields": [{"manager": "m"}]}, "spec": {}});
        let old = json!({"metadata": {"name": "a", "managedFields": [{"manager": "o"}]}});
        for (operation, object) in [("UPDATE", pod.clone()), ("DELETE", Value::Null)] {
            let [apiserver, other] = in_two_orders(operation, object, old.clone());
            let expected = plain(&apiserver);
            for builds in [false, true] {
                for text in [&apiserver, &other] {
                    let (parsed, _) = parsed_with(text, builds);
                    assert_eq!(
                        as_json(&parsed.expect("valid")),
                        expected,
                        "{operation} {builds}"
                    );
                }
            }
        }
    }

    #[test]
    fn escaped_keys_are_the_keys_they_spell() {
        let escaped = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"\u0075id":"u","operation":"CREATE","obj\u0065ct":{"a":1}}}"#;
        let (parsed, _) = parsed_with(escaped, true);
        let request = parsed.expect("valid").request;
        assert_eq!(request.uid, "u");
        assert_eq!(object_json(&request.object), Some(json!({"a": 1})));
    }

    #[test]
    fn bad_reviews_are_refused_with_what_is_wrong() {
        let bad = |text: &str| parsed_with(text, true).0.expect_err(text);
        let duplicate_uid = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","uid":"v"}}"#;
        assert!(
            bad(duplicate_uid)
                .to_string()
                .contains("duplicate field `uid`")
        );
        let escaped_duplicate = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","\u0075id":"v"}}"#;
        assert!(
            bad(escaped_duplicate)
                .to_string()
                .contains("duplicate field `uid`")
        );
        assert!(matches!(
            bad(&review(json!({"uid": ""}))),
            BadReview::MissingUid
        ));
        assert!(matches!(
            bad(&review(json!(null))),
            BadReview::MissingRequest
        ));
        // An error inside an object names it, in either order, built or not.
        let out_of_range = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"a":1e400}}}"#;
        let old_first = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","oldObject":{"a":[1,}}}"#;
        let old_out_of_range = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","oldObject":{"a":-1e400}}}"#;
        for (text, builds, expected) in [
            (out_of_range, true, "object"),
            (out_of_range, false, "object"),
            (old_first, true, "oldObject"),
            (old_out_of_range, true, "oldObject"),
        ] {
            match parsed_with(text, builds).0 {
                Err(BadReview::Object { field, .. }) => assert_eq!(field, expected, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        // Where the error is, as serde_json says for the whole body, whether the object was
        // kept as text or built.
        let lone_surrogate = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","oldObject":{"a":"\udc00","b":1}}}"#;
        let scalar = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","oldObject":1e400}}"#;
        for text in [out_of_range, old_out_of_range, lone_surrogate, scalar] {
            let expected = serde_json::from_str::<Value>(text).expect_err(text);
            for builds in [false, true] {
                match parsed_with(text, builds).0 {
                    Err(BadReview::Object { error, .. }) => assert_eq!(
                        (error.line(), error.column()),
                        (expected.line(), expected.column()),
                        "{text}: {error}"
                    ),
                    other => panic!("{text}: {other:?}"),
                }
            }
        }
        // A field graft does not use is refused as serde_json refuses it, at the same
        // place, in the review and in the request.
        let deep = format!("{}1{}", "[".repeat(127), "]".repeat(127));
        for unused in [r#""a\ud999Z1""#, r#""\udc00""#, "1e400", "[-1e400]", &deep] {
            for text in [
                format!(
                    r#"{{"apiVersion":"admission.k8s.io/v1","extra":{{"x":{unused}}},"kind":"AdmissionReview","request":{{"uid":"u"}}}}"#
                ),
                format!(
                    r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","options":{unused},"object":{{}}}}}}"#
                ),
            ] {
                let expected = serde_json::from_str::<Value>(&text).expect_err(&text);
                for builds in [false, true] {
                    match parsed_with(&text, builds).0 {
                        Err(BadReview::Json(error)) => assert_eq!(
                            (error.line(), error.column()),
                            (expected.line(), expected.column()),
                            "{text}: {error}"
                        ),
                        other => panic!("{text}: {other:?}"),
                    }
                }
            }
        }
        for text in [
            r#"{"kind":"AdmissionReview","request":{"uid":"u"}} trailing"#,
            r#"["admission.k8s.io/v1","AdmissionReview",{"uid":"u"}]"#,
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":["u"]}"#,
        ] {
            assert!(matches!(bad(text), BadReview::Json(_)), "{text}");
        }
    }

    #[test]
    fn keys_are_read_as_written_built_or_not() {
        // serde_json's `Value` reads this key as JSON text to parse; the review holds
        // what the body says, in either order, built or not.
        let raw = "$serde_json::private::RawValue";
        let object = json!({raw: "{\"metadata\": {}}", "metadata": {raw: 5, "name": "a"}});
        let user = json!({raw: "[1]"});
        for builds in [false, true] {
            for text in [
                review(
                    json!({"uid": "u", "operation": "CREATE", "userInfo": user, "object": object}),
                ),
                review(
                    json!({"object": object, "userInfo": user, "uid": "u", "operation": "CREATE"}),
                ),
            ] {
                let request = parsed_with(&text, builds).0.expect("valid").request;
                assert_eq!(request.user_info, user);
                assert_eq!(object_json(&request.object), Some(object.clone()), "{text}");
            }
        }
    }

    #[test]
    fn objects_that_are_not_maps_are_read_as_the_values_they_are() {
        for value in [
            json!(5),
            json!("text"),
            json!(true),
            json!([1, {"a": null}]),
            json!({}),
        ] {
            let text = review(json!({
                "uid": "u", "operation": "UPDATE", "object": value, "oldObject": value,
            }));
            for builds in [false, true] {
                let request = parsed_with(&text, builds).0.expect("valid").request;
                assert_eq!(object_json(&request.object), Some(value.clone()), "{text}");
                assert_eq!(
                    object_json(&request.old_object),
                    Some(value.clone()),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn objects_nest_as_deep_as_the_body_allows() {
        // serde_json's recursion limit holds for the whole body (127 nested maps and
        // lists): the review and the request take two, so an object may nest 125 levels,
        // its own map included, built or kept as text.
        let nested = |field: &str, levels: usize| {
            let inner = format!("{}1{}", "[".repeat(levels - 1), "]".repeat(levels - 1));
            format!(
                r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","operation":"CREATE","{field}":{{"a":{inner}}}}}}}"#
            )
        };
        for field in ["object", "oldObject"] {
            for builds in [false, true] {
                let text = nested(field, 125);
                let (parsed, _) = parsed_with(&text, builds);
                let request = parsed.expect("within the limit").request;
                let object = request.object.or(request.old_object).expect("an object");
                assert!(object.to_value().is_object());
                match parsed_with(&nested(field, 126), builds).0 {
                    Err(BadReview::Object { field: named, .. }) => assert_eq!(named, field),
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    #[test]
    fn objects_are_built_or_kept_as_text_as_asked() {
        let text = review(json!({
            "uid": "u", "resource": {"resource": "pods"}, "operation": "UPDATE",
            "object": {"metadata": {"name": "a", "managedFields": [{"manager": "m"}]}},
            "oldObject": {"metadata": {"name": "a", "managedFields": [{"manager": "o"}]}},
        }));
        let with = |builds| parsed_with(&text, builds).0.expect("valid").request;
        // Not built: both objects are their text.
        let request = with(false);
        assert!(matches!(request.object, Some(Tree::Text(_))));
        assert!(matches!(request.old_object, Some(Tree::Text(_))));
        // Built: the object is a tree whose managedFields are their text; the old object
        // stays text until read.
        let request = with(true);
        let object = request.object.expect("an object");
        assert!(matches!(object, Tree::Map(_)));
        let managed = object.get("metadata").and_then(|m| m.get("managedFields"));
        assert!(matches!(managed, Some(Tree::Text(_))));
        assert!(matches!(request.old_object, Some(Tree::Text(_))));
        // Either way, the JSON the body holds.
        assert_eq!(
            object.to_value(),
            json!({"metadata": {"name": "a", "managedFields": [{"manager": "m"}]}})
        );
        assert_eq!(
            object_json(&request.old_object),
            Some(json!({"metadata": {"name": "a", "managedFields": [{"manager": "o"}]}}))
        );
    }
}
