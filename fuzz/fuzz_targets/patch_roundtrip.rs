//! The patch round trip: a captured request whose object is overlaid with arbitrary
//! JSON (so the example policies still match most inputs) -> the patch applies to the
//! original, equals the engine's mutation, and a second pass changes nothing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let fixtures = graft_fuzz::fixtures();
    let fixture = &fixtures[usize::from(selector) % fixtures.len()];
    let Ok(overlay) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let text = fixture["request"].to_string();
    let Ok(mut request) = serde_json::from_str::<graft::admission::AdmissionRequest<'_>>(&text)
    else {
        return;
    };
    let mut object = request
        .object
        .as_ref()
        .map_or_else(|| Value::Object(Default::default()), graft::tree::Tree::to_value);
    match overlay {
        // An object overlays the fixture's object (RFC 7386), so most inputs still match.
        Value::Object(_) => json_patch::merge(&mut object, &overlay),
        // Anything else replaces it: the engine must cope with any JSON as the object.
        other => object = other,
    }
    request.object = Some(graft::tree::Tree::from(object));
    graft_fuzz::check_round_trip(&request, graft_fuzz::example_policies());
});
