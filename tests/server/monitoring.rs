//! The monitoring in deploy/monitoring/ against the real thing: the alerts pass
//! `promtool check rules` and their unit tests (tests/monitoring/alerts_test.yaml), every
//! alert is tested firing and silent, and every metric and label an alert or a dashboard
//! query names is one a running server exports on /metrics.
//!
//! promtool comes from Prometheus (Debian: `apt-get install prometheus`). Without it the
//! promtool test skips with one line, unless `GRAFT_REQUIRE_PROMTOOL` is set (as .ci/run
//! sets it), when it fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::repo;
use crate::support::server::*;
use promql_parser::label::Matchers;
use promql_parser::parser::{self, Expr, LabelModifier, VectorMatchCardinality};
use serde_json::Value;

/// Labels Prometheus adds to every series it scrapes through the ServiceMonitor (target
/// labels), which queries may use although graft does not export them.
const TARGET_LABELS: [&str; 7] = [
    "namespace",
    "pod",
    "job",
    "instance",
    "service",
    "endpoint",
    "container",
];

fn monitoring(file: &str) -> PathBuf {
    repo().join("deploy/monitoring").join(file)
}

/// The rule groups: the `spec` of the PrometheusRule, which is a Prometheus rules file.
fn rule_groups() -> serde_yaml::Value {
    let text = std::fs::read_to_string(monitoring("prometheusrule.yaml")).expect("read rules");
    let rule: serde_yaml::Value = serde_yaml::from_str(&text).expect("rules are YAML");
    assert_eq!(rule["kind"].as_str(), Some("PrometheusRule"));
    rule["spec"].clone()
}

/// Every rule of every group.
fn rules() -> Vec<serde_yaml::Value> {
    rule_groups()["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .flat_map(|group| group["rules"].as_sequence().expect("rules").clone())
        .collect()
}

fn alert_tests() -> serde_yaml::Value {
    let path = repo().join("tests/monitoring/alerts_test.yaml");
    serde_yaml::from_str(&std::fs::read_to_string(path).expect("read alert tests"))
        .expect("alert tests are YAML")
}

fn promtool(dir: &Path, args: &[&str]) {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run promtool");
    assert!(
        output.status.success(),
        "promtool {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn promtool_checks_the_rules_and_runs_their_unit_tests() {
    if Command::new("promtool").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("GRAFT_REQUIRE_PROMTOOL").is_none(),
            "GRAFT_REQUIRE_PROMTOOL is set but promtool is not on PATH"
        );
        println!("skipped: promtool is not on PATH (apt-get install prometheus)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = serde_yaml::to_string(&rule_groups()).expect("rules to YAML");
    std::fs::write(dir.path().join("rules.yaml"), rules).expect("write rules");
    std::fs::copy(
        repo().join("tests/monitoring/alerts_test.yaml"),
        dir.path().join("alerts_test.yaml"),
    )
    .expect("copy alert tests");
    promtool(dir.path(), &["check", "rules", "rules.yaml"]);
    promtool(dir.path(), &["test", "rules", "alerts_test.yaml"]);
}

#[test]
fn every_alert_says_how_bad_what_and_how_to_check() {
    for rule in rules() {
        let name = rule["alert"].as_str().expect("only alerting rules");
        let severity = rule["labels"]["severity"].as_str();
        assert!(
            matches!(severity, Some("warning" | "critical")),
            "{name}: severity {severity:?}"
        );
        let summary = rule["annotations"]["summary"].as_str().unwrap_or_default();
        let description = rule["annotations"]["description"]
            .as_str()
            .unwrap_or_default();
        assert!(!summary.is_empty(), "{name}: no summary");
        // The command to run is quoted in backticks.
        assert!(
            description.contains('`'),
            "{name}: the description names no command to check with"
        );
    }
}

#[test]
fn every_alert_is_tested_firing_and_silent() {
    let tests = alert_tests();
    let mut firing = BTreeSet::new();
    let mut silent = BTreeSet::new();
    for test in tests["tests"].as_sequence().expect("tests") {
        for case in test["alert_rule_test"].as_sequence().into_iter().flatten() {
            let name = case["alertname"].as_str().expect("alertname").to_string();
            let expected = case["exp_alerts"].as_sequence().map_or(0, Vec::len);
            if expected == 0 {
                silent.insert(name);
            } else {
                firing.insert(name);
            }
        }
    }
    for rule in rules() {
        let name = rule["alert"].as_str().expect("alert name");
        assert!(firing.contains(name), "no test where {name} fires");
        assert!(silent.contains(name), "no test where {name} stays silent");
    }
}

/// What /metrics exports: every sample name with the label names seen on it.
#[derive(Debug, Default)]
struct Exported(BTreeMap<String, BTreeSet<String>>);

impl Exported {
    /// Reads the OpenMetrics text. Families without a series yet still declare their
    /// samples' names by type (a counter `c` is sampled as `c_total`).
    fn parse(text: &str) -> Exported {
        let mut exported = Exported::default();
        for line in text.lines() {
            if let Some(declaration) = line.strip_prefix("# TYPE ") {
                let mut words = declaration.split(' ');
                let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                    continue;
                };
                let suffixes: &[&str] = match kind {
                    "counter" => &["_total"],
                    "histogram" => &["_bucket", "_sum", "_count"],
                    "info" => &["_info"],
                    "summary" => &["_sum", "_count", ""],
                    _ => &[""],
                };
                for suffix in suffixes {
                    exported.0.entry(format!("{name}{suffix}")).or_default();
                }
            } else if !line.starts_with('#') && !line.is_empty() {
                let name_end = line.find(['{', ' ']).unwrap_or(line.len());
                let labels = exported.0.entry(line[..name_end].to_string()).or_default();
                if let Some((_, rest)) = line.split_once('{') {
                    let set = rest.rsplit_once('}').map_or("", |(set, _)| set);
                    // Label values here are graft's own words, without `,` or `=`.
                    for pair in set.split(',') {
                        if let Some((label, _)) = pair.split_once('=') {
                            labels.insert(label.trim().to_string());
                        }
                    }
                }
            }
        }
        exported
    }

    /// The problems with one PromQL expression, as sentences; empty when it is sound.
    fn check(&self, expr: &str) -> Vec<String> {
        let ast = match parser::parse(expr) {
            Ok(ast) => ast,
            Err(error) => return vec![format!("does not parse: {error}")],
        };
        let mut used = Used::default();
        used.walk(&ast);
        let mut problems = Vec::new();
        let mut known: BTreeSet<&str> = TARGET_LABELS.into_iter().collect();
        for (name, labels) in &used.selectors {
            let Some(exported) = self.0.get(name) else {
                problems.push(format!("metric {name} is not exported"));
                continue;
            };
            known.extend(exported.iter().map(String::as_str));
            for label in labels {
                if !exported.contains(label) && !TARGET_LABELS.contains(&label.as_str()) {
                    problems.push(format!("{name} has no label {label}"));
                }
            }
        }
        for label in &used.grouping {
            if !known.contains(label.as_str()) {
                problems.push(format!("no metric of the query has the label {label}"));
            }
        }
        problems
    }
}

/// The metric selectors of an expression, with the labels they match on, and the labels
/// of its `by`, `without`, `on`, `ignoring` and `group_left/right` clauses.
#[derive(Debug, Default)]
struct Used {
    selectors: Vec<(String, BTreeSet<String>)>,
    grouping: BTreeSet<String>,
}

impl Used {
    fn walk(&mut self, expr: &Expr) {
        match expr {
            Expr::Aggregate(aggregate) => {
                if let Some(modifier) = &aggregate.modifier {
                    self.modifier(modifier);
                }
                self.walk(&aggregate.expr);
                if let Some(param) = &aggregate.param {
                    self.walk(param);
                }
            }
            Expr::Unary(unary) => self.walk(&unary.expr),
            Expr::Binary(binary) => {
                if let Some(modifier) = &binary.modifier {
                    if let Some(matching) = &modifier.matching {
                        self.modifier(matching);
                    }
                    if let VectorMatchCardinality::ManyToOne(labels)
                    | VectorMatchCardinality::OneToMany(labels) = &modifier.card
                    {
                        self.grouping.extend(labels.labels.iter().cloned());
                    }
                }
                self.walk(&binary.lhs);
                self.walk(&binary.rhs);
            }
            Expr::Paren(paren) => self.walk(&paren.expr),
            Expr::Subquery(subquery) => self.walk(&subquery.expr),
            Expr::VectorSelector(selector) => {
                self.selector(selector.name.as_deref(), &selector.matchers);
            }
            Expr::MatrixSelector(matrix) => {
                self.selector(matrix.vs.name.as_deref(), &matrix.vs.matchers);
            }
            Expr::Call(call) => {
                for arg in &call.args.args {
                    self.walk(arg);
                }
            }
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
        }
    }

    fn modifier(&mut self, modifier: &LabelModifier) {
        self.grouping
            .extend(modifier.labels().labels.iter().cloned());
    }

    fn selector(&mut self, name: Option<&str>, matchers: &Matchers) {
        let labels = matchers
            .matchers
            .iter()
            .chain(matchers.or_matchers.iter().flatten())
            .map(|matcher| matcher.name.clone())
            .collect();
        // A selector without a plain metric name cannot be checked; none is needed.
        let name = name.unwrap_or("<a selector without a metric name>");
        self.selectors.push((name.to_string(), labels));
    }
}

/// Every PromQL query of the dashboard, with Grafana's `$__rate_interval` made a range.
fn dashboard_queries() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(monitoring("dashboard.json")).expect("read dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("dashboard is JSON");
    let mut queries = Vec::new();
    let mut panels: Vec<&Value> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .collect();
    while let Some(panel) = panels.pop() {
        panels.extend(panel["panels"].as_array().into_iter().flatten());
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("a target without expr");
            let title = panel["title"].as_str().unwrap_or_default();
            queries.push((
                format!("dashboard panel {title:?}"),
                expr.replace("$__rate_interval", "5m"),
            ));
        }
    }
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if variable["type"] != "query" {
            continue;
        }
        let query = variable["query"]["query"]
            .as_str()
            .or(variable["query"].as_str())
            .expect("variable query");
        // Grafana's label_values(METRIC, LABEL) is METRIC{LABEL!=""} in PromQL.
        let inner = query
            .strip_prefix("label_values(")
            .and_then(|rest| rest.strip_suffix(')'))
            .expect("variables use label_values(METRIC, LABEL)");
        let (metric, label) = inner.split_once(',').expect("label_values(METRIC, LABEL)");
        queries.push((
            format!("dashboard variable {}", variable["name"]),
            format!("{}{{{}!=\"\"}}", metric.trim(), label.trim()),
        ));
    }
    queries
}

/// A server with the test fixture policies and one notice sink (on a closed loopback
/// port), after one review, one refusal and one reload attempt, so every label graft uses
/// has a series.
async fn scrape_after_traffic() -> Result<String> {
    let pki = Pki::new("test CA")?;
    let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
    let policies = repo().join("tests/fixtures/policies");
    let notices = tempfile::tempdir()?;
    std::fs::write(notices.path().join("url"), "http://127.0.0.1:1/")?;
    std::fs::write(
        notices.path().join("notices.yaml"),
        format!(
            "sinks:\n- {{name: team, type: webhook, urlFile: {}}}\n",
            notices.path().join("url").display()
        ),
    )?;
    let mut config = config(&policies, &secret);
    config.notices = Some(notices.path().join("notices.yaml"));
    let server = start(config).await?;
    let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
    let mut sender = http1(connect(server.running.addr, client).await?).await?;
    let body = fixture("pod-create-multus-worker.json")?;
    let (status, _) = send1(
        &mut sender,
        mutate_request("POST", "application/json", body)?,
    )
    .await?;
    assert_eq!(status, 200);
    let (status, _) = send1(
        &mut sender,
        mutate_request("POST", "text/plain", b"{}".to_vec())?,
    )
    .await?;
    assert_eq!(status, 415);
    let (status, text) = get(server.running.metrics_addr, "/metrics").await?;
    assert_eq!(status, 200);
    drop(sender);
    server.shutdown().await?;
    Ok(text)
}

#[tokio::test]
async fn every_query_names_exported_metrics_and_labels() -> Result {
    let exported = Exported::parse(&tokio::time::timeout(DEADLINE, scrape_after_traffic()).await??);
    // The parse found what every server exports; if not, the check below proves nothing.
    assert!(
        exported
            .0
            .get("graft_admission_requests_total")
            .is_some_and(|labels| labels.contains("decision")),
        "{exported:?}"
    );
    let mut queries: Vec<(String, String)> = rules()
        .iter()
        .map(|rule| {
            let name = rule["alert"].as_str().unwrap_or("a rule");
            let expr = rule["expr"].as_str().expect("expr").to_string();
            (format!("alert {name}"), expr)
        })
        .collect();
    queries.extend(dashboard_queries());
    assert!(queries.len() > 20, "{queries:?}");
    let problems: Vec<String> = queries
        .iter()
        .flat_map(|(place, expr)| {
            exported
                .check(expr)
                .into_iter()
                .map(move |problem| format!("{place}: {problem}\n  {expr}"))
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    Ok(())
}

#[test]
fn the_check_catches_a_renamed_metric_or_label() {
    let exported = Exported::parse(
        "# TYPE graft_admission_requests counter\n\
         graft_admission_requests_total{operation=\"CREATE\",decision=\"allowed\"} 1\n\
         # TYPE graft_admission_duration_seconds histogram\n\
         # EOF\n",
    );
    let check = |expr: &str, expect: &[&str]| {
        assert_eq!(exported.check(expr), expect, "{expr}");
    };
    check(
        "sum by (namespace, decision) (rate(graft_admission_requests_total{decision=\"denied\"}[5m]))",
        &[],
    );
    check("graft_admission_duration_seconds_bucket", &[]);
    check(
        "rate(graft_admission_requests[5m])",
        &["metric graft_admission_requests is not exported"],
    );
    check(
        "graft_admission_requests_total{verdict=\"denied\"}",
        &["graft_admission_requests_total has no label verdict"],
    );
    check(
        "sum by (verdict) (graft_admission_requests_total)",
        &["no metric of the query has the label verdict"],
    );
    check(
        "a / on (policy) group_left (reason) graft_admission_requests_total",
        &[
            "metric a is not exported",
            "no metric of the query has the label policy",
            "no metric of the query has the label reason",
        ],
    );
}

/// Grafana imports the dashboard as it is: panel ids unique, every query on the
/// `datasource` variable (so it works with whatever the Prometheus data source is named),
/// and every query with a refId.
#[test]
fn the_dashboard_is_importable() {
    let text = std::fs::read_to_string(monitoring("dashboard.json")).expect("read dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("dashboard is JSON");
    assert!(dashboard["uid"].as_str().is_some_and(|uid| !uid.is_empty()));
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .expect("templating")
        .iter()
        .filter_map(|variable| variable["name"].as_str())
        .collect();
    assert!(variables.contains(&"datasource"), "{variables:?}");
    let mut ids = BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().unwrap_or_default();
        let id = panel["id"].as_u64().expect("panel id");
        assert!(ids.insert(id), "panel id {id} twice ({title})");
        assert!(
            panel["gridPos"]["w"].as_u64().is_some(),
            "{title}: no gridPos"
        );
        for target in panel["targets"].as_array().into_iter().flatten() {
            assert_eq!(target["datasource"]["uid"], "${datasource}", "{title}");
            assert!(target["refId"].as_str().is_some(), "{title}: no refId");
        }
    }
}
