//! The parse of an AdmissionReview: one pass over the body, building of each object only
//! what the candidate policies can see ([`parse_lean`], for the server and `graft
//! review`), or everything ([`parse`], for the commands that show the objects).
//!
//! The apiserver sends the fields that route a request (`resource`, `subResource`,
//! `namespace`, `operation`) before `object` and `oldObject`, so what the candidates can
//! see is decided when the objects are reached, and each is built that far, or only
//! checked, as it is read. A body in another order (a routing field after the objects,
//! `oldObject` before `object`) is read once more with the objects built whole, then
//! trimmed to what the decision on the whole request builds: the same review either way.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use super::objects::{Build, Checked, Optional};
use super::{
    AdmissionRequest, BadReview, Review, Reviewed, answer, candidate_reads, checked, resolve,
};
use crate::k8s::json_text::Plain;
use crate::namespaces::{NamespaceData, NamespaceSource};
use crate::policy::{PolicySet, Reads};

/// Parses and answers one review body as [`super::review`] does, building only the
/// parts of the objects the candidate policies can see. `review.request.object` (and
/// `evaluation.mutated`) may lack `metadata.managedFields`, and the objects are `None`
/// when no policy is a candidate: use [`super::review`] where the objects matter. The
/// request's namespace is looked up in `namespaces` only when a candidate policy needs
/// its data.
pub fn review_lean(
    body: &[u8],
    policies: &PolicySet,
    namespaces: &dyn NamespaceSource,
) -> Result<Reviewed, BadReview> {
    let (review, namespace) = parse_lean(body, policies, namespaces)?;
    Ok(answer(review, &namespace, policies))
}

/// The parse half of [`review_lean`], for callers that want to know which request they
/// hold before evaluating it (the server names it in its logs first): the review, and
/// its namespace's data as far as a candidate policy needs it.
pub fn parse_lean(
    body: &[u8],
    policies: &PolicySet,
    namespaces: &dyn NamespaceSource,
) -> Result<(Review, NamespaceData), BadReview> {
    let mut decide = |request: &AdmissionRequest| {
        let reads = candidate_reads(request, policies);
        (reads, resolve(request, reads, namespaces))
    };
    parse_text(utf8(body)?, &mut decide)
}

/// Parses an AdmissionReview body with both objects built whole, for callers that show
/// or keep the objects (`graft apply`, `graft test`).
pub fn parse(body: &[u8]) -> Result<Review, BadReview> {
    let everything = Reads {
        managed_fields: true,
        old_object: true,
        ..Reads::default()
    };
    let mut decide = |_: &AdmissionRequest| (Some(everything), NamespaceData::NotLookedUp);
    Ok(parse_text(utf8(body)?, &mut decide)?.0)
}

/// The body as text. simdutf8 only says whether the body is valid; for a body that is
/// not, core's check says where, for the error.
fn utf8(body: &[u8]) -> Result<&str, std::str::Utf8Error> {
    simdutf8::basic::from_utf8(body).or_else(|_| std::str::from_utf8(body))
}

/// What the candidate policies of a request can see (`None`: there are none), and the
/// data of its namespace as far as they need it.
type Decision = (Option<Reads>, NamespaceData);

/// Decides for a request: called once per pass, with its routing fields read.
type Decide<'d> = &'d mut dyn FnMut(&AdmissionRequest) -> Decision;

fn parse_text(text: &str, decide: Decide<'_>) -> Result<(Review, NamespaceData), BadReview> {
    match pass(text, decide, Order::Apiserver) {
        Err(Stop::OutOfOrder(_)) => pass(text, decide, Order::Any),
        parsed => parsed,
    }
    .map_err(|stop| match stop {
        Stop::Bad(bad) => bad,
        // A pass in any order does not stop for the order; were it to, the body is
        // still not one graft reads.
        Stop::OutOfOrder(error) => BadReview::Json(error),
    })
}

/// The order a pass expects the request's fields in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    /// The apiserver's: what routes the request, then `object`, then `oldObject`. The
    /// objects are built as decided when they are reached.
    Apiserver,
    /// Any: the objects are built whole, and trimmed once the request is read.
    Any,
}

/// Why a pass gave no review.
enum Stop {
    /// The body is not in the order the pass expects.
    OutOfOrder(serde_json::Error),
    Bad(BadReview),
}

/// What a failed read of the body was doing, for its error: the error itself is
/// serde_json's, which says where in the body it is.
#[derive(Clone, Copy, Default)]
enum Reading {
    #[default]
    Envelope,
    Object(&'static str),
    OutOfOrder,
}

fn pass(text: &str, decide: Decide<'_>, order: Order) -> Result<(Review, NamespaceData), Stop> {
    let reading = Cell::new(Reading::Envelope);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let seed = EnvelopeSeed {
        decide,
        order,
        reading: &reading,
    };
    let envelope = seed
        .deserialize(&mut deserializer)
        .and_then(|envelope| deserializer.end().map(|()| envelope))
        .map_err(|error| match reading.get() {
            Reading::Envelope => Stop::Bad(BadReview::Json(error)),
            Reading::Object(field) => Stop::Bad(BadReview::Object { field, error }),
            Reading::OutOfOrder => Stop::OutOfOrder(error),
        })?;
    let (request, (_, namespace)) =
        checked(&envelope.api_version, envelope.kind, envelope.request).map_err(Stop::Bad)?;
    if request.uid.is_empty() {
        return Err(Stop::Bad(BadReview::MissingUid));
    }
    let review = Review {
        api_version: envelope.api_version,
        request,
    };
    Ok((review, namespace))
}

struct Envelope {
    api_version: String,
    kind: String,
    request: Option<(AdmissionRequest, Decision)>,
}

struct EnvelopeSeed<'p, 'd> {
    decide: Decide<'d>,
    order: Order,
    reading: &'p Cell<Reading>,
}

impl<'de> DeserializeSeed<'de> for EnvelopeSeed<'_, '_> {
    type Value = Envelope;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Envelope, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EnvelopeSeed<'_, '_> {
    type Value = Envelope;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an AdmissionReview object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
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
                        decide: &mut *self.decide,
                        order: self.order,
                        reading: self.reading,
                    });
                    envelope.request = map.next_value_seed(seed)?;
                    4
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            first_time(&mut seen, bit, &key)?;
        }
        Ok(envelope)
    }
}

struct RequestSeed<'p, 'd> {
    decide: Decide<'d>,
    order: Order,
    reading: &'p Cell<Reading>,
}

impl RequestSeed<'_, '_> {
    /// Stops the pass: the body is not in the order it expects.
    fn out_of_order<E: de::Error>(&self, what: &str) -> E {
        self.reading.set(Reading::OutOfOrder);
        E::custom(what)
    }

    /// Reads an object as `build` says, naming it in the error if it is not valid JSON.
    fn object<'de, A: MapAccess<'de>>(
        &self,
        map: &mut A,
        build: Option<Build>,
        field: &'static str,
    ) -> Result<Option<serde_json::Value>, A::Error> {
        self.reading.set(Reading::Object(field));
        let object = match build {
            None => map.next_value_seed(Optional(Checked)).map(|_| None)?,
            Some(build) => map.next_value_seed(Optional(build))?,
        };
        self.reading.set(Reading::Envelope);
        Ok(object)
    }
}

impl<'de> DeserializeSeed<'de> for RequestSeed<'_, '_> {
    type Value = (AdmissionRequest, Decision);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RequestSeed<'_, '_> {
    type Value = (AdmissionRequest, Decision);

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an AdmissionRequest object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let whole = Build {
            managed_fields: true,
        };
        let mut request = AdmissionRequest::default();
        let mut seen = 0;
        // Made at the objects in the apiserver's order, at the end in any other.
        let mut decision: Option<Decision> = None;
        while let Some(Key(key)) = map.next_key()? {
            let routes = matches!(
                key.as_ref(),
                "resource" | "subResource" | "namespace" | "operation"
            );
            if routes && decision.is_some() {
                return Err(
                    self.out_of_order("a field that routes the request follows the objects")
                );
            }
            let field = match key.as_ref() {
                "uid" => read(&mut request.uid, &mut map, Field::Uid)?,
                "kind" => read(&mut request.kind, &mut map, Field::Kind)?,
                "resource" => read(&mut request.resource, &mut map, Field::Resource)?,
                "subResource" => read(&mut request.sub_resource, &mut map, Field::SubResource)?,
                "name" => read(&mut request.name, &mut map, Field::Name)?,
                "namespace" => read(&mut request.namespace, &mut map, Field::Namespace)?,
                "operation" => read(&mut request.operation, &mut map, Field::Operation)?,
                "userInfo" => {
                    request.user_info = map.next_value_seed(Plain)?;
                    Field::UserInfo
                }
                "dryRun" => read(&mut request.dry_run, &mut map, Field::DryRun)?,
                "object" => {
                    let build = match self.order {
                        Order::Any => Some(whole),
                        Order::Apiserver => {
                            let (reads, _) =
                                decision.get_or_insert_with(|| (self.decide)(&request));
                            Build::object(*reads)
                        }
                    };
                    request.object = self.object(&mut map, build, "object")?;
                    Field::Object
                }
                "oldObject" => {
                    let build = match self.order {
                        Order::Any => Some(whole),
                        // Whether there is an object decides how the old one is built.
                        Order::Apiserver if seen & Field::Object.bit() == 0 => {
                            return Err(self.out_of_order("oldObject comes before object"));
                        }
                        Order::Apiserver => {
                            let (reads, _) =
                                decision.get_or_insert_with(|| (self.decide)(&request));
                            Build::old_object(*reads, request.object.is_some())
                        }
                    };
                    request.old_object = self.object(&mut map, build, "oldObject")?;
                    Field::OldObject
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            first_time(&mut seen, field.bit(), &key)?;
        }
        let decision = match decision {
            Some(decision) => decision,
            None => (self.decide)(&request),
        };
        if self.order == Order::Any {
            let (reads, _) = decision;
            let has_object = request.object.is_some();
            request.object = trimmed(request.object, Build::object(reads));
            request.old_object = trimmed(request.old_object, Build::old_object(reads, has_object));
        }
        Ok((request, decision))
    }
}

/// An object built whole, reduced to what `build` builds (`None`: nothing).
fn trimmed(object: Option<serde_json::Value>, build: Option<Build>) -> Option<serde_json::Value> {
    Some(build?.trim(object?))
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
}

impl Field {
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

    /// The routing fields a decision was asked with: resource, namespace, operation.
    type Routing = (String, Option<String>, String);

    /// The parse with `reads` decided for every request, and the routing of each
    /// decision.
    fn parsed_with(text: &str, reads: Option<Reads>) -> (Result<Review, BadReview>, Vec<Routing>) {
        let mut asked = Vec::new();
        let mut decide = |request: &AdmissionRequest| {
            asked.push((
                request.resource.resource.clone(),
                request.namespace.clone(),
                request.operation.clone(),
            ));
            (reads, NamespaceData::NotLookedUp)
        };
        let parsed = parse_text(text, &mut decide).map(|(review, _)| review);
        (parsed, asked)
    }

    fn everything() -> Option<Reads> {
        Some(Reads {
            managed_fields: true,
            old_object: true,
            ..Reads::default()
        })
    }

    /// The review `text` holds, read whole by serde_json and serde's derive.
    fn plain(text: &str) -> Review {
        let mut value: Value = serde_json::from_str(text).expect("valid JSON");
        Review {
            api_version: value["apiVersion"].as_str().unwrap_or_default().to_string(),
            request: serde_json::from_value(value["request"].take()).expect("a request"),
        }
    }

    #[test]
    fn the_apiservers_reviews_are_read_as_serde_json_reads_them_deciding_once() {
        for text in [
            include_str!("../../tests/fixtures/pod-create-multus-worker.json"),
            include_str!("../../tests/fixtures/pod-create-statefulset-web-3.json"),
            include_str!("../../tests/fixtures/node-status-update.json"),
            include_str!("../../benches/fixtures/pod-create-realistic.json"),
        ] {
            let (parsed, asked) = parsed_with(text, everything());
            let expected = plain(text);
            assert_eq!(parsed.expect("a valid review"), expected);
            // Decided once, when the objects were reached, with the routing fields read.
            let request = &expected.request;
            let routing = (
                request.resource.resource.clone(),
                request.namespace.clone(),
                request.operation.clone(),
            );
            assert_eq!(asked, [routing]);
        }
    }

    fn review(request: Value) -> String {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
            .to_string()
    }

    /// The same request in the apiserver's order and in another one, with a pod whose
    /// managedFields only some decisions build.
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
    fn a_body_in_another_order_gives_the_same_review_for_every_decision() {
        let pod =
            json!({"metadata": {"name": "a", "managedFields": [{"manager": "m"}]}, "spec": {}});
        let old = json!({"metadata": {"name": "a", "managedFields": [{"manager": "o"}]}});
        let decisions = [
            None,
            Some(Reads::default()),
            Some(Reads {
                old_object: true,
                ..Reads::default()
            }),
            Some(Reads {
                managed_fields: true,
                ..Reads::default()
            }),
            everything(),
        ];
        for (operation, object) in [("UPDATE", pod.clone()), ("DELETE", Value::Null)] {
            let [apiserver, other] = in_two_orders(operation, object, old.clone());
            for reads in decisions {
                let (expected, asked) = parsed_with(&apiserver, reads);
                assert_eq!(asked.len(), 1);
                let (parsed, asked) = parsed_with(&other, reads);
                let expected = expected.expect("valid");
                assert_eq!(parsed.expect("valid"), expected, "{operation} {reads:?}");
                // The first pass decides at the objects, the second with every field read.
                let last = asked.last().expect("decided");
                assert_eq!(last.1.as_deref(), Some("late"));
                assert_eq!(last.2, operation);
            }
        }
    }

    #[test]
    fn escaped_keys_are_the_keys_they_spell() {
        let escaped = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"\u0075id":"u","operation":"CREATE","obj\u0065ct":{"a":1}}}"#;
        let (parsed, _) = parsed_with(escaped, everything());
        let request = parsed.expect("valid").request;
        assert_eq!(request.uid, "u");
        assert_eq!(request.object, Some(json!({"a": 1})));
    }

    #[test]
    fn bad_reviews_are_refused_with_what_is_wrong() {
        let bad = |text: &str| parsed_with(text, everything()).0.expect_err(text);
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
        for (text, reads, expected) in [
            (out_of_range, everything(), "object"),
            (out_of_range, None, "object"),
            (old_first, everything(), "oldObject"),
        ] {
            match parsed_with(text, reads).0 {
                Err(BadReview::Object { field, .. }) => assert_eq!(field, expected, "{text}"),
                other => panic!("{text}: {other:?}"),
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
    fn keys_are_read_as_written_whatever_is_built() {
        // serde_json's `Value` reads this key as JSON text to parse; the review holds
        // what the body says, in either order and for every decision.
        let raw = "$serde_json::private::RawValue";
        let object = json!({raw: "{\"metadata\": {}}", "metadata": {raw: 5, "name": "a"}});
        let user = json!({raw: "[1]"});
        for reads in [None, Some(Reads::default()), everything()] {
            for text in [
                review(
                    json!({"uid": "u", "operation": "CREATE", "userInfo": user, "object": object}),
                ),
                review(
                    json!({"object": object, "userInfo": user, "uid": "u", "operation": "CREATE"}),
                ),
            ] {
                let request = parsed_with(&text, reads).0.expect("valid").request;
                assert_eq!(request.user_info, user);
                let expected = reads.map(|_| object.clone());
                assert_eq!(request.object, expected, "{text}");
            }
        }
    }

    #[test]
    fn objects_nest_as_deep_as_the_body_allows() {
        // serde_json's recursion limit holds for the whole body (127 nested maps and
        // lists): the review and the request take two, so an object may nest 125 levels,
        // its own map included.
        let nested = |levels: usize| {
            let inner = format!("{}1{}", "[".repeat(levels - 1), "]".repeat(levels - 1));
            format!(
                r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","operation":"CREATE","object":{{"a":{inner}}}}}}}"#
            )
        };
        for reads in [None, everything()] {
            assert!(parsed_with(&nested(125), reads).0.is_ok());
            match parsed_with(&nested(126), reads).0 {
                Err(BadReview::Object { field, .. }) => assert_eq!(field, "object"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn objects_are_built_or_checked_as_decided() {
        let text = review(json!({
            "uid": "u", "resource": {"resource": "pods"}, "operation": "DELETE",
            "object": null,
            "oldObject": {"metadata": {"name": "a", "managedFields": [{"manager": "m"}]}},
        }));
        let with = |reads: Option<Reads>| parsed_with(&text, reads).0.expect("valid").request;
        // No candidate: nothing built.
        let request = with(None);
        assert_eq!((request.object, request.old_object), (None, None));
        // Without an object, the old object is what policies see: built without
        // managedFields unless they are read.
        let request = with(Some(Reads::default()));
        assert_eq!(request.old_object, Some(json!({"metadata": {"name": "a"}})));
        let request = with(everything());
        assert_eq!(
            request.old_object,
            Some(json!({"metadata": {"name": "a", "managedFields": [{"manager": "m"}]}}))
        );
    }
}
