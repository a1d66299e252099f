//! The little URL arithmetic redirects need.

/// `scheme://host[:port]` of an absolute URL, lowercased.
pub fn origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    format!("{scheme}://{host}").to_ascii_lowercase()
}

/// `location` (absolute, scheme-relative, absolute-path or relative) made
/// absolute against `base`.
pub fn join_url(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    let scheme = base.split_once("://").map_or("https", |(s, _)| s);
    if let Some(rest) = location.strip_prefix("//") {
        return format!("{scheme}://{rest}");
    }
    if location.starts_with('/') {
        return format!("{}{location}", origin(base));
    }
    let o = origin(base);
    let path_end = base.find(['?', '#']).unwrap_or(base.len()).max(o.len());
    let path = &base[o.len()..path_end];
    let dir = path.rfind('/').map_or("/", |i| &path[..=i]);
    format!("{o}{dir}{location}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_targets_are_resolved_against_the_request() {
        let base = "http://a.example:8080/idx/de/mo/demo?x=1";
        assert_eq!(join_url(base, "/other"), "http://a.example:8080/other");
        assert_eq!(
            join_url(base, "demo2"),
            "http://a.example:8080/idx/de/mo/demo2"
        );
        assert_eq!(join_url(base, "//b.example/x"), "http://b.example/x");
        assert_eq!(join_url("http://a.example", "x"), "http://a.example/x");
        assert_eq!(origin("HTTP://A.example:80/x"), "http://a.example:80");
    }
}
