//! What a policy writes, checked against the object's kind as it writes it.
//!
//! kube-apiserver decodes a webhook's patched object into its Go type; a value of the
//! wrong JSON type fails that with an `InternalError` naming neither graft nor the
//! policy. Lint checks the values a policy writes literally (`policy::compile`); the
//! values its templates compute are known only at admission, so a policy that has
//! templates (or matches kinds lint could not type) has each value checked at the
//! location it is written to, before the write: a value the apiserver cannot decode fails
//! the policy by its `failurePolicy`, naming the field and the JSON type written (never
//! the value, which may be the object's contents). Fields the kind does not declare are
//! the apiserver's to drop, not a failure; kinds the table does not know (custom
//! resources) are not checked.

use super::Failure;
use super::run::failure;
use crate::jsonpath::Token;
use crate::k8s::schema::{self, ProblemKind, Reached, Shape, Step, Strings, TypeRef};
use crate::tree::Tree;

/// The kind of the object a policy writes to, to check its writes against.
pub(super) struct WriteTypes {
    /// The kind's type, whose name ends in the kind (`core.v1.Pod`).
    ty: TypeRef<'static>,
}

/// How a value is written at its location.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Written {
    /// As the field's value (`set`, `merge`).
    Whole,
    /// As items added to the list there (`append`).
    Items,
}

impl WriteTypes {
    /// Checks against `ty`, a kind's type (a struct).
    pub(super) fn new(ty: TypeRef<'static>) -> WriteTypes {
        WriteTypes { ty }
    }

    /// The kind's name (`Pod`), from its type's.
    fn kind(&self) -> &'static str {
        match self.ty.shape() {
            Shape::Struct(s) => s.name().rsplit('.').next().unwrap_or(s.name()),
            _ => "object",
        }
    }

    /// Whether the apiserver can decode `value` written at `at` by the mutation at
    /// `mutation`; the first value it cannot, as a failure at its `value`.
    pub(super) fn check(
        &self,
        mutation: &str,
        at: &[Token],
        value: &Tree<'_>,
        written: Written,
    ) -> Result<(), Failure> {
        let steps: Vec<Step<'_>> = at
            .iter()
            .map(|token| match token {
                Token::Key(key) => Step::Key(key),
                Token::Index(_) => Step::Item,
            })
            .collect();
        let Reached::Type(mut ty) = schema::follow(self.ty, &steps) else {
            return Ok(());
        };
        if written == Written::Items {
            match ty.shape() {
                Shape::List(list) => ty = list.element(),
                _ => return Ok(()),
            }
        }
        let values: &[Tree<'_>] = match (written, value.as_list()) {
            (Written::Items, Some(items)) => items,
            _ => std::slice::from_ref(value),
        };
        for (index, value) in values.iter().enumerate() {
            let problem = schema::problems(value, ty, Strings::Plain)
                .into_iter()
                .find(|p| matches!(p.kind, ProblemKind::Mismatch { .. }));
            let Some(problem) = problem else { continue };
            let ProblemKind::Mismatch {
                expected,
                found_type,
                ..
            } = &problem.kind
            else {
                continue;
            };
            let mut location = crate::jsonpath::display(at);
            location = location
                .trim_start_matches('$')
                .trim_start_matches('.')
                .to_string();
            if written == Written::Items {
                location.push_str(&format!("[+{index}]"));
            }
            if !problem.path.is_empty() {
                if !problem.path.starts_with('[') && !location.is_empty() {
                    location.push('.');
                }
                location.push_str(&problem.path);
            }
            return Err(failure(
                format!("{mutation}.value"),
                format!(
                    "{} field {location} expects {expected}, and the policy wrote {found_type}: \
                     the apiserver would refuse the object",
                    self.kind()
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key(k: &str) -> Token {
        Token::Key(k.to_string())
    }

    fn kind(group: &str, version: &str, kind: &str) -> Option<WriteTypes> {
        let table = schema::builtin().expect("the table parses");
        table.kind(group, version, kind).map(WriteTypes::new)
    }

    #[test]
    fn a_value_the_apiserver_cannot_decode_fails_naming_the_field() {
        let types = kind("", "v1", "Pod").expect("Pod is in the table");
        let at = [key("spec"), key("nodeSelector"), key("gpu")];
        let failure = types
            .check(
                "spec.mutations[0].set",
                &at,
                &Tree::from(json!(true)),
                Written::Whole,
            )
            .expect_err("refused");
        assert_eq!(failure.field, "spec.mutations[0].set.value");
        assert_eq!(
            failure.reason,
            "Pod field spec.nodeSelector.gpu expects a string, and the policy wrote a \
             boolean: the apiserver would refuse the object"
        );
        let tolerations = [key("spec"), key("tolerations")];
        let items = Tree::from(json!([{"key": "a"}, {"key": "b", "tolerationSeconds": "9"}]));
        let failure = types
            .check("f", &tolerations, &items, Written::Items)
            .expect_err("refused");
        assert!(
            failure
                .reason
                .starts_with("Pod field spec.tolerations[+1].tolerationSeconds expects an integer"),
            "{}",
            failure.reason
        );
    }

    #[test]
    fn what_decodes_and_what_the_table_lacks_pass() {
        let types = kind("apps", "v1", "Deployment").expect("Deployment");
        let ok = |at: &[Token], value| types.check("f", at, &Tree::from(value), Written::Whole);
        assert!(ok(&[key("spec"), key("paused")], json!(true)).is_ok());
        assert!(ok(&[key("spec"), key("bogus")], json!(1)).is_ok());
        assert!(ok(&[key("metadata"), key("labels")], json!({"a": "b"})).is_ok());
        assert!(kind("example.com", "v1", "Widget").is_none());
    }
}
