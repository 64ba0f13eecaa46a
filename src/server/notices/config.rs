//! The notice-sinks file (`graft serve --notices FILE`): which chat or HTTP endpoints
//! hear about which reviews, and how the message reads.
//!
//! URLs and secrets are never written in this file: each sink names files (a mounted
//! Secret) that are read at every delivery, so a rotated Secret takes effect with the
//! next message and the file itself can live in a ConfigMap.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// The template used when a sink names none: every field graft offers, none of the
/// object's contents.
pub const DEFAULT_TEMPLATE: &str =
    "graft {outcome} {kind} {namespace}/{name} ({operation}) by {policies}: {patch}{reason}";

/// The placeholders a template may use. Anything else in braces is refused, so a typo
/// cannot silently send nothing, and nothing of the object's contents can be named.
pub const PLACEHOLDERS: [&str; 8] = [
    "outcome",
    "policies",
    "kind",
    "namespace",
    "name",
    "operation",
    "patch",
    "reason",
];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the notices file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid notices file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// The whole notices file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NoticesFile {
    #[serde(default)]
    pub sinks: Vec<SinkConfig>,
}

/// Where a sink's messages go and what they look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    /// A DingTalk group robot; signed when `secretFile` is set.
    Dingtalk,
    /// A Feishu/Lark custom bot; signed when `secretFile` is set.
    Feishu,
    /// A Slack incoming webhook (the URL is the secret; no signature).
    Slack,
    /// Any HTTP endpoint taking a JSON body; signed in a header when `secretFile` is set.
    Webhook,
}

/// The body format of a DingTalk message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Text,
    Markdown,
}

/// What became of a review, as sinks subscribe to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// A policy changed the object.
    Mutated,
    /// A `failurePolicy: Fail` policy failed, so the object was denied.
    Denied,
    /// A `failurePolicy: Ignore` policy failed and was skipped.
    Failed,
    /// An audit-mode policy would have changed the object.
    Audited,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Mutated => "mutated",
            Outcome::Denied => "denied",
            Outcome::Failed => "failed",
            Outcome::Audited => "audited",
        }
    }
}

fn default_outcomes() -> Vec<Outcome> {
    vec![Outcome::Mutated, Outcome::Denied, Outcome::Failed]
}

fn default_timeout() -> u64 {
    10
}

fn default_queue() -> usize {
    256
}

fn default_per_minute() -> u32 {
    20
}

fn default_group_seconds() -> u64 {
    300
}

fn default_signature_header() -> String {
    "X-Graft-Signature".to_string()
}

/// One sink.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SinkConfig {
    /// The sink's name: the `sink` label of `graft_notices_total`.
    pub name: String,
    #[serde(rename = "type")]
    pub kind: SinkKind,
    /// A file holding the URL (a Secret key: the URL carries the robot's token).
    pub url_file: PathBuf,
    /// A file holding the signing secret; none: messages are not signed.
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    #[serde(default)]
    pub format: Format,
    /// The policies whose reviews the sink hears about; empty: all.
    #[serde(default)]
    pub policies: Vec<String>,
    #[serde(default = "default_outcomes")]
    pub outcomes: Vec<Outcome>,
    #[serde(default)]
    pub template: Option<String>,
    /// The header carrying a webhook's `sha256=HEX` HMAC of the body.
    #[serde(default = "default_signature_header")]
    pub signature_header: String,
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    /// Notices waiting for this sink; a full queue drops (and counts) the new one.
    #[serde(default = "default_queue")]
    pub queue: usize,
    /// Messages sent per minute at most (a burst of as many after a quiet minute).
    #[serde(default = "default_per_minute")]
    pub per_minute: u32,
    /// A repeat (same outcome, object and policies) within this many seconds of the
    /// last message about it is counted as grouped, not sent.
    #[serde(default = "default_group_seconds")]
    pub group_seconds: u64,
}

impl SinkConfig {
    pub fn template(&self) -> &str {
        self.template.as_deref().unwrap_or(DEFAULT_TEMPLATE)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds.max(1))
    }

    pub fn group_window(&self) -> Duration {
        Duration::from_secs(self.group_seconds)
    }

    /// Whether a review with these outcomes, by `policies`, is for this sink.
    pub fn wants(&self, outcomes: &[Outcome], policies: &[String]) -> bool {
        outcomes
            .iter()
            .any(|outcome| self.outcomes.contains(outcome))
            && (self.policies.is_empty()
                || policies.iter().any(|policy| self.policies.contains(policy)))
    }
}

/// Reads and checks the notices file.
pub fn load(path: &Path) -> Result<NoticesFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text).map_err(|message| ConfigError::Invalid {
        path: path.to_path_buf(),
        message,
    })
}

/// Parses and checks the text of a notices file.
pub fn parse(text: &str) -> Result<NoticesFile, String> {
    let file: NoticesFile = if text.trim().is_empty() {
        NoticesFile { sinks: Vec::new() }
    } else {
        serde_yaml::from_str(text).map_err(|error| error.to_string())?
    };
    let mut names = std::collections::HashSet::new();
    for sink in &file.sinks {
        if sink.name.is_empty() || !names.insert(sink.name.as_str()) {
            return Err(format!(
                "sink names must be unique and non-empty: {:?}",
                sink.name
            ));
        }
        check_template(sink.template())
            .map_err(|message| format!("sink {:?}: {message}", sink.name))?;
    }
    Ok(file)
}

/// Refuses unknown placeholders and unbalanced braces.
fn check_template(template: &str) -> Result<(), String> {
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| format!("unclosed '{{' in template {template:?}"))?;
        let name = &after[..close];
        if !PLACEHOLDERS.contains(&name) {
            return Err(format!(
                "unknown placeholder {{{name}}} in template (known: {}); object fields are \
                 never sent",
                PLACEHOLDERS.join(", ")
            ));
        }
        rest = &after[close + 1..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_checks() {
        let file = parse(
            "sinks:\n- {name: team, type: dingtalk, urlFile: /s/url, secretFile: /s/secret, format: markdown}\n",
        )
        .expect("valid");
        let sink = &file.sinks[0];
        assert_eq!(
            sink.outcomes,
            vec![Outcome::Mutated, Outcome::Denied, Outcome::Failed]
        );
        assert_eq!(sink.format, Format::Markdown);
        assert!(sink.wants(&[Outcome::Denied], &["any".to_string()]));
        assert!(
            parse("sinks:\n- {name: a, type: webhook, urlFile: u, template: '{spec}'}\n")
                .is_err_and(|e| e.contains("unknown placeholder {spec}"))
        );
        assert!(parse("sinks:\n- {name: a, type: webhook, urlFile: u}\n- {name: a, type: webhook, urlFile: u}\n").is_err());
        assert!(parse("sinks:\n- {name: a, type: webhook, url: http://x}\n").is_err());
        assert_eq!(parse("").map(|f| f.sinks.len()), Ok(0));
    }

    #[test]
    fn policies_filter() {
        let file = parse(
            "sinks:\n- {name: a, type: webhook, urlFile: u, policies: [pin], outcomes: [denied]}\n",
        )
        .expect("valid");
        let sink = &file.sinks[0];
        assert!(sink.wants(&[Outcome::Denied], &["pin".to_string()]));
        assert!(!sink.wants(&[Outcome::Mutated], &["pin".to_string()]));
        assert!(!sink.wants(&[Outcome::Denied], &["other".to_string()]));
    }
}
