use k8s_openapi::chrono::{DateTime, TimeDelta, Utc};

use super::*;

fn notice(name: &str, reason: Reason) -> Notice {
    Notice {
        reason,
        regarding: Regarding {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some("ns".into()),
            name: name.into(),
            uid: None,
        },
        note: format!("note about {name}"),
    }
}

fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::<Utc>::UNIX_EPOCH + TimeDelta::seconds(1_700_000_000 + seconds)
}

/// A compact view of a write: `create NAME` or `series NAME COUNT`.
fn show(write: &Write) -> String {
    match write {
        Write::Create { key, .. } => format!("create {}", key.regarding.name),
        Write::Series { key, count, .. } => format!("series {} {count}", key.regarding.name),
    }
}

fn observe(series: &mut Series, name: &str, seconds: i64) -> Option<String> {
    series
        .observe(notice(name, Reason::Mutated), at(seconds))
        .as_ref()
        .map(show)
}

#[test]
fn repeats_create_then_start_a_series_then_only_count() {
    let mut series = Series::new(10);
    assert_eq!(observe(&mut series, "a", 0).as_deref(), Some("create a"));
    assert_eq!(observe(&mut series, "a", 1).as_deref(), Some("series a 2"));
    assert_eq!(observe(&mut series, "a", 2), None);
    assert_eq!(observe(&mut series, "a", 3), None);
    // The moved count is written once REFRESH has passed since the last write.
    assert!(series.due(at(30)).is_empty());
    let due: Vec<String> = series.due(at(61)).iter().map(show).collect();
    assert_eq!(due, ["series a 4"]);
    assert!(series.due(at(200)).is_empty(), "nothing moved since");
}

#[test]
fn the_series_keeps_the_first_name_and_the_last_observation() {
    let mut series = Series::new(10);
    let Some(Write::Create { name, .. }) = series.observe(notice("a", Reason::Mutated), at(0))
    else {
        panic!("a create");
    };
    let _ = series.observe(notice("a", Reason::Mutated), at(1));
    let _ = series.observe(notice("a", Reason::Mutated), at(5));
    match series.due(at(100)).as_slice() {
        [
            Write::Series {
                name: patched,
                last_observed,
                count: 3,
                ..
            },
        ] => {
            assert_eq!(patched, &name);
            assert_eq!(*last_observed, at(5));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn different_reasons_or_objects_are_different_events() {
    let mut series = Series::new(10);
    assert_eq!(observe(&mut series, "a", 0).as_deref(), Some("create a"));
    assert_eq!(observe(&mut series, "b", 0).as_deref(), Some("create b"));
    let denied = series.observe(notice("a", Reason::Denied), at(0));
    assert_eq!(denied.as_ref().map(show).as_deref(), Some("create a"));
    assert_eq!(series.len(), 3);
}

#[test]
fn a_series_ends_after_the_ttl_with_its_final_count() {
    let mut series = Series::new(10);
    let _ = observe(&mut series, "a", 0);
    let _ = observe(&mut series, "a", 1);
    let _ = observe(&mut series, "a", 2);
    let ttl = TTL.num_seconds();
    // Ended: the unwritten count is written once, and the Event forgotten.
    let due: Vec<String> = series.due(at(2 + ttl)).iter().map(show).collect();
    assert_eq!(due, ["series a 3"]);
    assert!(series.is_empty());
    assert_eq!(
        observe(&mut series, "a", 3 + ttl).as_deref(),
        Some("create a")
    );
}

#[test]
fn a_repeat_after_the_ttl_creates_a_new_event() {
    let mut series = Series::new(10);
    let _ = observe(&mut series, "a", 0);
    let later = TTL.num_seconds() + 1;
    assert_eq!(
        observe(&mut series, "a", later).as_deref(),
        Some("create a")
    );
    assert_eq!(
        observe(&mut series, "a", later + 1).as_deref(),
        Some("series a 2")
    );
}

#[test]
fn beyond_capacity_events_are_created_but_not_counted() {
    let mut series = Series::new(1);
    let _ = observe(&mut series, "a", 0);
    assert_eq!(observe(&mut series, "b", 0).as_deref(), Some("create b"));
    assert_eq!(observe(&mut series, "b", 1).as_deref(), Some("create b"));
    assert_eq!(series.len(), 1);
}

#[test]
fn a_forgotten_event_is_created_anew() {
    let mut series = Series::new(10);
    let Some(write) = series.observe(notice("a", Reason::Mutated), at(0)) else {
        panic!("a create");
    };
    series.forget(write.key());
    assert_eq!(observe(&mut series, "a", 1).as_deref(), Some("create a"));
}
