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
        if let Ok(review) = graft::admission::read_request(&body) {
            // The answer changes the request's object in place: keep the original to patch.
            let original = review.request.object.as_ref().map(graft::tree::Tree::to_value);
            let route = loaded.set.route(&review.request);
            let source = graft::admission::ClusterSource::namespaces(graft_fuzz::namespaces());
            let cluster = graft::admission::resolve(&review.request, route, source);
            let reviewed = graft::admission::answer(review, route, &cluster, &loaded.set)
                .expect("an answer serialises");
            let uid = &reviewed.review.request.uid;
            let body = reviewed.to_json().expect("an answer serialises");
            graft_fuzz::check_response(&body, uid, original.as_ref());
        }
    }
});
