//! What a sink hears about one review, and the body each kind of sink is sent.
//!
//! A [`Notice`] is built on the review's thread from what the evaluation already holds:
//! the outcome, the policies, the object's kind, namespace and name, the operation, the
//! patch's operations and paths (never their values) and the reason. Nothing else of
//! the object is copied, so nothing else can be sent.

use serde_json::json;

use super::config::{Format, Outcome, SinkConfig, SinkKind};
use crate::admission::Reviewed;
use crate::engine::{Outcome as Decision, PolicyResult};

/// The longest patch summary and reason kept, in characters.
const FIELD_LIMIT: usize = 512;

/// One review's notice, as every sink receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// Every outcome the review had, the first the one named in messages.
    pub outcomes: Vec<Outcome>,
    /// The policies behind those outcomes.
    pub policies: Vec<String>,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub operation: String,
    /// `add /metadata/labels/x, replace /spec/nodeSelector`.
    pub patch: String,
    /// The denial message, or the skipped failures, or empty.
    pub reason: String,
}

impl Notice {
    /// The outcome messages name.
    pub fn outcome(&self) -> Outcome {
        self.outcomes.first().copied().unwrap_or(Outcome::Mutated)
    }

    /// What makes two notices repeats of each other.
    pub fn group_key(&self) -> String {
        format!(
            "{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}",
            self.outcome().as_str(),
            self.kind,
            self.namespace,
            self.name,
            self.policies.join(",")
        )
    }

    /// A notice for `graft notices test` and the docs.
    pub fn sample() -> Notice {
        Notice {
            outcomes: vec![Outcome::Mutated],
            policies: vec!["statefulset-node-selector".to_string()],
            kind: "Pod".to_string(),
            namespace: "default".to_string(),
            name: "web-3".to_string(),
            operation: "CREATE".to_string(),
            patch: "add /spec/nodeSelector".to_string(),
            reason: String::new(),
        }
    }
}

/// The notice for an answered review; `None` when nothing happened worth telling (or
/// the review was a dry run, which must leave no trace).
pub fn notice(reviewed: &Reviewed) -> Option<Notice> {
    let request = &reviewed.review.request;
    if request.dry_run == Some(true) {
        return None;
    }
    let evaluation = &reviewed.evaluation;
    let mut outcomes = Vec::new();
    let mut policies = Vec::new();
    let mut reasons = Vec::new();
    if let Decision::Denied { message, .. } = &evaluation.outcome {
        outcomes.push(Outcome::Denied);
        reasons.push(message.clone());
    } else if !evaluation.patch.0.is_empty() {
        outcomes.push(Outcome::Mutated);
    }
    for report in &evaluation.policies {
        let outcome = match &report.result {
            PolicyResult::Applied => Outcome::Mutated,
            PolicyResult::Failed(_) => Outcome::Denied,
            PolicyResult::Ignored(failure) => {
                reasons.push(format!("{} skipped: {failure}", report.policy));
                Outcome::Failed
            }
            PolicyResult::Audited { .. } => Outcome::Audited,
            PolicyResult::Unchanged => continue,
        };
        if !outcomes.contains(&outcome) {
            outcomes.push(outcome);
        }
        if !policies.contains(&report.policy) {
            policies.push(report.policy.clone());
        }
    }
    if outcomes.is_empty() {
        return None;
    }
    let patch: Vec<String> = evaluation
        .patch
        .to_json_patch()
        .0
        .iter()
        .map(|operation| {
            let value = serde_json::to_value(operation).unwrap_or_default();
            format!(
                "{} {}",
                value["op"].as_str().unwrap_or("?"),
                value["path"].as_str().unwrap_or("?")
            )
        })
        .collect();
    let name = request
        .name
        .clone()
        .filter(|name| !name.is_empty())
        .or_else(|| {
            let object = request.object.as_ref()?;
            object
                .pointer("/metadata/name")
                .or_else(|| object.pointer("/metadata/generateName"))?
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_default();
    Some(Notice {
        outcomes,
        policies,
        kind: request.kind.kind.clone(),
        namespace: request.namespace.clone().unwrap_or_default(),
        name,
        operation: request.operation.clone(),
        patch: cut(patch.join(", ")),
        reason: cut(reasons.join("; ")),
    })
}

/// `template` with its placeholders filled from `notice`.
pub fn render(template: &str, notice: &Notice) -> String {
    let reason = if notice.reason.is_empty() {
        String::new()
    } else {
        format!(" ({})", notice.reason)
    };
    let mut out = String::with_capacity(template.len() + 128);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[open..]);
            return out;
        };
        match &after[..close] {
            "outcome" => out.push_str(notice.outcome().as_str()),
            "policies" => out.push_str(&notice.policies.join(", ")),
            "kind" => out.push_str(&notice.kind),
            "namespace" => out.push_str(&notice.namespace),
            "name" => out.push_str(&notice.name),
            "operation" => out.push_str(&notice.operation),
            "patch" => out.push_str(&notice.patch),
            "reason" => out.push_str(&reason),
            other => {
                out.push('{');
                out.push_str(other);
                out.push('}');
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The JSON body for `sink`.
pub fn body(sink: &SinkConfig, notice: &Notice) -> serde_json::Value {
    let text = render(sink.template(), notice);
    match (sink.kind, sink.format) {
        (SinkKind::Dingtalk, Format::Text) => json!({"msgtype": "text", "text": {"content": text}}),
        (SinkKind::Dingtalk, Format::Markdown) => json!({
            "msgtype": "markdown",
            "markdown": {
                "title": format!("graft: {} {}", notice.outcome().as_str(), notice.name),
                "text": text,
            },
        }),
        (SinkKind::Feishu, _) => json!({"msg_type": "text", "content": {"text": text}}),
        (SinkKind::Slack, Format::Text) => json!({"text": text}),
        (SinkKind::Slack, Format::Markdown) => json!({"text": text, "mrkdwn": true}),
        (SinkKind::Webhook, _) => json!({
            "text": text,
            "outcome": notice.outcome().as_str(),
            "outcomes": notice.outcomes.iter().map(|o| o.as_str()).collect::<Vec<_>>(),
            "policies": notice.policies,
            "kind": notice.kind,
            "namespace": notice.namespace,
            "name": notice.name,
            "operation": notice.operation,
            "patch": notice.patch,
            "reason": notice.reason,
        }),
    }
}

fn cut(text: String) -> String {
    if text.chars().count() <= FIELD_LIMIT {
        return text;
    }
    let mut cut: String = text.chars().take(FIELD_LIMIT - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_fills_every_placeholder() {
        let mut notice = Notice::sample();
        let text = render(super::super::config::DEFAULT_TEMPLATE, &notice);
        assert_eq!(
            text,
            "graft mutated Pod default/web-3 (CREATE) by statefulset-node-selector: add /spec/nodeSelector"
        );
        notice.reason = "bad annotation".to_string();
        assert_eq!(
            render("{name}{reason} {x", &notice),
            "web-3 (bad annotation) {x"
        );
    }
}
