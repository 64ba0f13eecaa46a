//! The server's parse in one pass over the body. The apiserver sends the fields that
//! route a request (`resource`, `subResource`, `namespace`, `operation`) before
//! `object` and `oldObject`, so what the candidate policies can see is known when the
//! objects are reached, and each object is built as [`super::lean`] would build it, or
//! only checked, as it is read: the body is not scanned twice.
//!
//! Anything else gives up (`None`) and the caller parses the body the two-pass way,
//! which has the answer, or the refusal, for every body: an error of any kind (so every
//! refusal, and its message, is the two-pass parse's), a repeated field, a field that
//! routes the request after the objects, `oldObject` before `object`, an escaped key, a
//! review that is not a JSON object.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use super::lean::{Checked, Level};
use super::{AdmissionRequest, Review, checked};
use crate::namespaces::NamespaceData;
use crate::policy::Reads;

/// What the candidate policies of a request can see (`None`: there are none), and the
/// data of its namespace as far as they need it.
pub(super) type Decision = (Option<Reads>, NamespaceData);

/// Decides for the request as read so far: its routing fields are final by then.
pub(super) type Decide<'d> = &'d mut dyn FnMut(&AdmissionRequest) -> Decision;

/// The review in `text`, with the objects built as `decide` says, or `None` when the
/// two-pass parse must answer (see the module's documentation).
pub(super) fn parse(text: &str, decide: Decide<'_>) -> Option<(Review, NamespaceData)> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let envelope = EnvelopeSeed { decide }
        .deserialize(&mut deserializer)
        .ok()?;
    deserializer.end().ok()?;
    let (request, (_, namespace)) =
        checked(&envelope.api_version, envelope.kind, envelope.request).ok()?;
    if request.uid.is_empty() {
        return None;
    }
    let review = Review {
        api_version: envelope.api_version,
        request,
    };
    Some((review, namespace))
}

struct Envelope {
    api_version: String,
    kind: String,
    request: Option<(AdmissionRequest, Decision)>,
}

struct EnvelopeSeed<'d> {
    decide: Decide<'d>,
}

impl<'de> DeserializeSeed<'de> for EnvelopeSeed<'_> {
    type Value = Envelope;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Envelope, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EnvelopeSeed<'_> {
    type Value = Envelope;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an AdmissionReview")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        let mut envelope = Envelope {
            api_version: String::new(),
            kind: String::new(),
            request: None,
        };
        let mut seen = 0;
        while let Some(key) = map.next_key::<&str>()? {
            // Each arm gives its field's bit for `first_time`.
            let bit = match key {
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
                    });
                    envelope.request = map.next_value_seed(seed)?;
                    4
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            first_time(&mut seen, bit, key)?;
        }
        Ok(envelope)
    }
}

struct RequestSeed<'d> {
    decide: Decide<'d>,
}

impl<'de> DeserializeSeed<'de> for RequestSeed<'_> {
    type Value = (AdmissionRequest, Decision);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RequestSeed<'_> {
    type Value = (AdmissionRequest, Decision);

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an AdmissionRequest")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut request = AdmissionRequest::default();
        let mut seen = 0;
        let mut decision: Option<Decision> = None;
        while let Some(key) = map.next_key::<&str>()? {
            let routes = matches!(key, "resource" | "subResource" | "namespace" | "operation");
            if routes && decision.is_some() {
                return Err(de::Error::custom(
                    "a field that routes the request follows the objects",
                ));
            }
            let field = match key {
                "uid" => read(&mut request.uid, &mut map, Field::Uid)?,
                "kind" => read(&mut request.kind, &mut map, Field::Kind)?,
                "resource" => read(&mut request.resource, &mut map, Field::Resource)?,
                "subResource" => read(&mut request.sub_resource, &mut map, Field::SubResource)?,
                "name" => read(&mut request.name, &mut map, Field::Name)?,
                "namespace" => read(&mut request.namespace, &mut map, Field::Namespace)?,
                "operation" => read(&mut request.operation, &mut map, Field::Operation)?,
                "userInfo" => read(&mut request.user_info, &mut map, Field::UserInfo)?,
                "dryRun" => read(&mut request.dry_run, &mut map, Field::DryRun)?,
                "object" => {
                    let (reads, _) = decision.get_or_insert_with(|| (self.decide)(&request));
                    request.object = match reads {
                        None => map.next_value_seed(Optional(Checked)).map(|_| None)?,
                        Some(reads) => map.next_value_seed(Optional(Build {
                            managed_fields: reads.managed_fields,
                        }))?,
                    };
                    Field::Object
                }
                "oldObject" => {
                    if seen & Field::Object.bit() == 0 {
                        return Err(de::Error::custom("oldObject comes before object"));
                    }
                    let (reads, _) = decision.get_or_insert_with(|| (self.decide)(&request));
                    // As `lean::build_objects`: without an object (DELETE) the old object
                    // is what policies match on; otherwise it is built when read.
                    let build = match reads {
                        None => None,
                        Some(reads) if request.object.is_none() => Some(Build {
                            managed_fields: reads.managed_fields || reads.old_object,
                        }),
                        Some(reads) if reads.old_object => Some(Build {
                            managed_fields: true,
                        }),
                        Some(_) => None,
                    };
                    request.old_object = match build {
                        None => map.next_value_seed(Optional(Checked)).map(|_| None)?,
                        Some(build) => map.next_value_seed(Optional(build))?,
                    };
                    Field::OldObject
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            first_time(&mut seen, field.bit(), key)?;
        }
        let decision = match decision {
            Some(decision) => decision,
            None => (self.decide)(&request),
        };
        Ok((request, decision))
    }
}

/// The fields of a request the one pass reads, as serde's derive numbers them, so a
/// repeated one is refused as the derived parse refuses it.
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

/// Records the field with bit `bit` as read, refusing it the second time, as the derived
/// parse does (which accepts repeated unknown keys, as the caller does by not recording
/// them).
fn first_time<E: de::Error>(seen: &mut u16, bit: u16, key: &str) -> Result<(), E> {
    if *seen & bit != 0 {
        return Err(E::custom(format_args!("duplicate field `{key}`")));
    }
    *seen |= bit;
    Ok(())
}

/// An object built as a `Value`, whole or without `metadata.managedFields`.
#[derive(Clone, Copy)]
struct Build {
    managed_fields: bool,
}

impl<'de> DeserializeSeed<'de> for Build {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        if self.managed_fields {
            PhantomData::<Value>.deserialize(deserializer)
        } else {
            Level::Root.deserialize(deserializer)
        }
    }
}

/// `null` as `None`, anything else through the inner seed, as `Option<T>` deserializes.
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Both objects built whole.
    fn everything() -> Reads {
        Reads {
            managed_fields: true,
            old_object: true,
            ..Reads::default()
        }
    }

    /// The routing fields a decision was asked with: resource, namespace, operation.
    type Routing = (String, Option<String>, String);

    /// The one pass with every object built whole, and the routing of each decision.
    fn whole(text: &str) -> (Option<Review>, Vec<Routing>) {
        let mut asked = Vec::new();
        let mut decide = |request: &AdmissionRequest| {
            asked.push((
                request.resource.resource.clone(),
                request.namespace.clone(),
                request.operation.clone(),
            ));
            (Some(everything()), NamespaceData::NotLookedUp)
        };
        let parsed = parse(text, &mut decide).map(|(review, _)| review);
        (parsed, asked)
    }

    #[test]
    fn the_apiservers_reviews_are_parsed_in_one_pass_as_the_two_pass_parse_does() {
        for text in [
            include_str!("../../tests/fixtures/pod-create-multus-worker.json"),
            include_str!("../../tests/fixtures/pod-create-statefulset-web-3.json"),
            include_str!("../../tests/fixtures/node-status-update.json"),
            include_str!("../../benches/fixtures/pod-create-realistic.json"),
        ] {
            let (parsed, asked) = whole(text);
            let expected = super::super::parse(text.as_bytes()).expect("a valid review");
            assert_eq!(parsed.as_ref(), Some(&expected));
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

    #[test]
    fn other_orders_and_errors_are_left_to_the_two_pass_parse() {
        let pod = json!({"metadata": {"name": "a"}});
        let routed_late = format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","resource":{{"resource":"pods"}},"operation":"CREATE","object":{pod},"namespace":"late"}}}}"#
        );
        let old_first = format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","operation":"UPDATE","oldObject":{pod},"object":{pod}}}}}"#
        );
        let duplicate_uid = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","uid":"v"}}"#;
        let escaped_key = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"\u0075id":"u"}}"#;
        for text in [
            routed_late.as_str(),
            old_first.as_str(),
            duplicate_uid,
            escaped_key,
            &review(json!({"uid": ""})),
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"a":1e400}}}"#,
            r#"{"kind":"AdmissionReview","request":{"uid":"u"}} trailing"#,
            "[1]",
        ] {
            assert!(whole(text).0.is_none(), "{text}");
        }
        // What the two-pass parse then makes of them.
        assert!(super::super::parse(routed_late.as_bytes()).is_ok());
        assert!(super::super::parse(old_first.as_bytes()).is_ok());
        assert!(super::super::parse(escaped_key.as_bytes()).is_ok());
        assert!(super::super::parse(duplicate_uid.as_bytes()).is_err());
    }

    #[test]
    fn objects_are_built_or_checked_as_decided() {
        let text = review(json!({
            "uid": "u", "resource": {"resource": "pods"}, "operation": "DELETE",
            "object": null,
            "oldObject": {"metadata": {"name": "a", "managedFields": [{"manager": "m"}]}},
        }));
        let with = |reads: Option<Reads>| {
            let mut decide = |_: &AdmissionRequest| (reads, NamespaceData::NotLookedUp);
            parse(&text, &mut decide).map(|(review, _)| review.request)
        };
        // No candidate: nothing built.
        let request = with(None).expect("parsed");
        assert_eq!((request.object, request.old_object), (None, None));
        // Without an object, the old object is what policies see: built without
        // managedFields unless they are read.
        let lean = Reads {
            managed_fields: false,
            old_object: false,
            ..Reads::default()
        };
        let request = with(Some(lean)).expect("parsed");
        assert_eq!(request.old_object, Some(json!({"metadata": {"name": "a"}})));
        let request = with(Some(everything())).expect("parsed");
        assert_eq!(
            request.old_object,
            Some(json!({"metadata": {"name": "a", "managedFields": [{"manager": "m"}]}}))
        );
    }
}
