//! Policy loading: arbitrary text -> a compiled set or findings, never a panic, and a
//! set that loads answers the captured fixtures with well-formed responses.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(loaded) = graft::policy::load_str(std::path::Path::new("fuzz.yaml"), text) else {
        return;
    };
    for fixture in graft_fuzz::fixtures() {
        let Ok(body) = serde_json::to_vec(fixture) else {
            continue;
        };
        if let Ok(review) = graft::admission::parse(&body) {
            // The answer changes the request's object in place: keep the original to patch.
            let original = review.request.object.as_ref().map(graft::tree::Tree::to_value);
            let namespace = graft::admission::resolve_namespace(
                &review.request,
                &loaded.set,
                graft_fuzz::namespaces(),
            );
            let reviewed = graft::admission::answer(review, &namespace, &loaded.set);
            let uid = &reviewed.review.request.uid;
            graft_fuzz::check_response(&reviewed.to_json(), uid, original.as_ref());
        }
    }
});
