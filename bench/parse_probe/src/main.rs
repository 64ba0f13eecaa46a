//! `parse_probe MODE N`: parses the realistic pod's object N times.
//!
//! - `serde_json`: a `serde_json::Value` with ordered maps, as graft builds it today.
//! - `sonic`: sonic-rs's own `Value` (ordered maps kept as vectors, no hashing).
//! - `sonic-skip`: sonic-rs iterates the object's top level and the maps of `metadata`
//!   and `spec`, skipping their other fields; the fields the example policies read are
//!   built as `serde_json::Value`s.
//!
//! Instructions per parse: run it with N = 0 and N = 100 under callgrind and divide the
//! difference by 100 (`run.sh` does).

#![forbid(unsafe_code)]

use std::hint::black_box;

use sonic_rs::JsonValueTrait as _;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const REVIEW: &str = include_str!("../../../benches/fixtures/pod-create-realistic.json");

/// The fields of `metadata` and `spec` the example policies read.
const METADATA_READ: [&str; 6] = [
    "name",
    "namespace",
    "labels",
    "annotations",
    "generateName",
    "ownerReferences",
];
const SPEC_READ: [&str; 3] = ["nodeSelector", "containers", "volumes"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let n: usize = args.next().as_deref().unwrap_or("100").parse()?;
    let review: serde_json::Value = serde_json::from_str(REVIEW)?;
    let object = serde_json::to_string(&review["request"]["object"])?;
    // Both parsers read the object alike, key order included.
    let sonic: sonic_rs::Value = sonic_rs::from_str(&object)?;
    assert_eq!(sonic_rs::to_string(&sonic)?, object);
    let mut seen = 0usize;
    for _ in 0..n {
        let text = black_box(object.as_str());
        seen += match mode.as_str() {
            "serde_json" => {
                usize::from(serde_json::from_str::<serde_json::Value>(text)?.is_object())
            }
            "sonic" => usize::from(sonic_rs::from_str::<sonic_rs::Value>(text)?.is_object()),
            "sonic-skip" => read_fields(text)?,
            other => return Err(format!("unknown mode {other:?}").into()),
        };
    }
    println!("{mode}: {n} parses, {seen}");
    Ok(())
}

/// Builds the read fields of `metadata` and `spec`; the count of fields built.
fn read_fields(text: &str) -> Result<usize, Box<dyn std::error::Error>> {
    let mut built = 0;
    for entry in sonic_rs::to_object_iter(text) {
        let (key, value) = entry?;
        let wanted: &[&str] = match key.as_ref() {
            "metadata" => &METADATA_READ,
            "spec" => &SPEC_READ,
            _ => continue,
        };
        for field in sonic_rs::to_object_iter(value.as_raw_str()) {
            let (name, raw) = field?;
            if wanted.contains(&name.as_ref()) {
                black_box(serde_json::from_str::<serde_json::Value>(raw.as_raw_str())?);
                built += 1;
            }
        }
    }
    Ok(built)
}
