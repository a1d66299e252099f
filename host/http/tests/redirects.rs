//! Requests against servers on 127.0.0.1: redirects within the origin are
//! followed, to another port or host refused, and bodies bounded.

#![allow(clippy::unwrap_used, reason = "test support")]

use std::io::Read;

use kpack_http::testing::serve;
use kpack_http::{Deadline, Error, get};

/// `here`: `/same/x` redirects to `/real/x` (200, "x"), `/loop` to
/// itself, `/bare` is a 302 without a Location, and anything else
/// redirects to the same path on `elsewhere`, a second server on another
/// port that answers 200.
fn servers() -> (String, String) {
    let elsewhere = serve(|_| ("200 OK".into(), b"elsewhere".to_vec())).unwrap();
    let to = elsewhere.clone();
    let here = serve(move |path| {
        if let Some(rest) = path.strip_prefix("/same/") {
            (format!("302 Found\r\nLocation: /real/{rest}"), Vec::new())
        } else if let Some(rest) = path.strip_prefix("/real/") {
            ("200 OK".into(), rest.as_bytes().to_vec())
        } else if path == "/loop" {
            ("302 Found\r\nLocation: loop".into(), Vec::new())
        } else if path == "/bare" {
            ("302 Found".into(), Vec::new())
        } else if path == "/missing" {
            ("404 Not Found".into(), Vec::new())
        } else {
            (format!("302 Found\r\nLocation: {to}x{path}"), Vec::new())
        }
    })
    .unwrap();
    (here, elsewhere)
}

#[test]
fn follows_redirects_within_the_origin() {
    let (here, _) = servers();
    let r = get(&format!("{here}same/abc"), Deadline::Whole).unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.read_to_vec(3).unwrap(), b"abc");
}

#[test]
fn refuses_a_redirect_to_another_port() {
    let (here, elsewhere) = servers();
    // The other server itself answers: only the redirect is refused.
    assert_eq!(
        get(&elsewhere, Deadline::Start(kpack_http::Pace::DEFAULT))
            .unwrap()
            .status(),
        200
    );
    for deadline in [Deadline::Whole, Deadline::Start(kpack_http::Pace::DEFAULT)] {
        let err = get(&format!("{here}other"), deadline).err().unwrap();
        assert!(matches!(err, Error::CrossOrigin { .. }), "{err}");
        assert!(err.to_string().contains("another origin"), "{err}");
    }
}

#[test]
fn bounded_redirects_bodies_and_statuses() {
    let (here, _) = servers();
    let err = get(&format!("{here}loop"), Deadline::Whole).err().unwrap();
    assert!(matches!(err, Error::TooManyRedirects { .. }), "{err}");
    let err = get(&format!("{here}bare"), Deadline::Whole).err().unwrap();
    assert!(
        matches!(err, Error::NoLocation { status: 302, .. }),
        "{err}"
    );
    let missing = get(&format!("{here}missing"), Deadline::Whole).unwrap();
    assert_eq!(missing.status(), 404);
    let err = missing.ok().err().unwrap();
    assert!(matches!(err, Error::Status { status: 404, .. }), "{err}");
    let long = get(&format!("{here}same/abcd"), Deadline::Whole).unwrap();
    assert!(matches!(
        long.read_to_vec(3),
        Err(Error::TooLong { limit: 3, .. })
    ));
    let mut read = Vec::new();
    let long = get(
        &format!("{here}same/abcd"),
        Deadline::Start(kpack_http::Pace::DEFAULT),
    )
    .unwrap();
    assert!(long.into_reader(3).read_to_end(&mut read).is_err());
}
