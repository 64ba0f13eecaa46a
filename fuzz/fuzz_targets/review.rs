//! Review handling: arbitrary bytes -> a BadReview error or a well-formed response to
//! the request's uid, under the four example policies. The server's lean parse (which
//! leaves the object of a request no policy is for as text) must refuse and answer
//! exactly alike; the objects the parse reads are what a plain serde_json parse of the
//! body holds.
#![no_main]

use libfuzzer_sys::fuzz_target;

const RAW_VALUE_KEY: &[u8] = b"$serde_json::private::RawValue";

fuzz_target!(|data: &[u8]| {
    let set = graft_fuzz::example_policies();
    let namespaces = graft_fuzz::namespaces();
    let source = graft::admission::ClusterSource::namespaces(namespaces);
    let lean = graft::admission::review(data, set, source);
    match graft::admission::read_request(data) {
        Ok(review) => {
            let plain: serde_json::Value =
                serde_json::from_slice(data).expect("the parse accepts what serde_json refuses");
            // serde_json's `Value` reads a map led by this key as more JSON text; graft
            // reads it as written (`graft::tree`), so such bodies differ by design.
            let raw_value_key = data
                .windows(RAW_VALUE_KEY.len())
                .any(|window| window == RAW_VALUE_KEY);
            for (built, pointer) in [
                (&review.request.object, "/request/object"),
                (&review.request.old_object, "/request/oldObject"),
            ] {
                let expected = plain.pointer(pointer).filter(|value| !value.is_null());
                if !raw_value_key {
                    let built = built.as_ref().map(graft::tree::Tree::to_value);
                    assert_eq!(
                        built.as_ref(),
                        expected,
                        "{pointer} differs from serde_json's"
                    );
                }
            }
            // The answer changes the request's object in place: keep the original to patch.
            let original = review.request.object.as_ref().map(graft::tree::Tree::to_value);
            let route = set.route(&review.request);
            let cluster = graft::admission::resolve(&review.request, route, source);
            let reviewed = graft::admission::answer(review, route, &cluster, set)
                .expect("an answer serialises");
            let uid = &reviewed.review.request.uid;
            let body = reviewed.to_json().expect("an answer serialises");
            graft_fuzz::check_response(&body, uid, original.as_ref());
            match lean {
                Ok(lean) => assert_eq!(
                    lean.to_json().expect("an answer serialises"),
                    body,
                    "the lean parse answers differently"
                ),
                Err(error) => panic!("the lean parse refuses what the full one answers: {error}"),
            }
        }
        Err(_) => assert!(
            lean.is_err(),
            "the lean parse answers what the full one refuses"
        ),
    }
});
