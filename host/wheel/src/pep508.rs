//! Whether a string is one PEP 508 dependency specifier, as `packaging`
//! (the library pip and every installer reads `Requires-Dist` with)
//! accepts it: a name, extras, a version specifier (each clause's version
//! checked per operator, as `packaging.specifiers.Specifier` does) or a
//! URL, and an environment marker. Only a check: kpack writes the string
//! as it was given.

use crate::name::is_valid_name;

/// Why a string is not a PEP 508 requirement: a phrase that follows the
/// string in a message (`--device-requires-dist "x" is not PEP 508: …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Pep508Error {
    /// The string does not open with a distribution name.
    #[error("does not start with a valid distribution name: {name:?}")]
    Name {
        /// What stands where the name should.
        name: String,
    },
    /// A URL runs into the marker.
    #[error("needs a space between its URL and the marker")]
    UrlMarkerSpace,
    /// The grammar wanted `want` where `rest` begins.
    #[error("is not PEP 508: {want} expected at {rest:?}")]
    Expected {
        /// What was expected.
        want: &'static str,
        /// The rest of the string from there.
        rest: String,
    },
    /// The URL after `@` has no scheme and host (nor is `file:`).
    #[error("has an invalid URL {url:?}")]
    Url {
        /// The URL as given.
        url: String,
    },
    /// A version clause whose version its operator does not take.
    #[error("is not PEP 508: {op} {version:?} is not a valid version clause")]
    Clause {
        /// The operator (`==`, `~=`, ...).
        op: &'static str,
        /// The version as given.
        version: String,
    },
    /// A marker variable `packaging` does not know.
    #[error("is not PEP 508: {var:?} is not an environment marker")]
    Marker {
        /// The variable as given.
        var: String,
    },
}

/// Why `req` is not a PEP 508 requirement, or `Ok`.
pub(crate) fn check(req: &str) -> Result<(), Pep508Error> {
    let mut c = Cursor {
        s: req.as_bytes(),
        i: 0,
    };
    c.ws();
    let name = c.take(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    if !is_valid_name(name) {
        return Err(Pep508Error::Name { name: name.into() });
    }
    c.ws();
    if c.eat(b"[") {
        extras(&mut c)?;
    }
    c.ws();
    if c.eat(b"@") {
        c.ws();
        let url = c.take(|b| !b.is_ascii_whitespace());
        check_url(url)?;
        if c.ws() == 0 && !c.done() {
            return Err(Pep508Error::UrlMarkerSpace);
        }
    } else if c.eat(b"(") {
        versions(&mut c)?;
        c.ws();
        if !c.eat(b")") {
            return Err(c.error("`)` closing the version specifier"));
        }
    } else if matches!(c.peek(), Some(b'<' | b'>' | b'=' | b'!' | b'~')) {
        versions(&mut c)?;
    }
    c.ws();
    if c.eat(b";") {
        marker_or(&mut c)?;
        c.ws();
    }
    if !c.done() {
        return Err(c.error("the end, a version specifier or `; marker`"));
    }
    Ok(())
}

/// A position in the string.
struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn done(&self) -> bool {
        self.i >= self.s.len()
    }

    /// Skip spaces and tabs; how many.
    fn ws(&mut self) -> usize {
        let start = self.i;
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
        self.i - start
    }

    fn eat(&mut self, lit: &[u8]) -> bool {
        if self.s[self.i..].starts_with(lit) {
            self.i += lit.len();
            return true;
        }
        false
    }

    /// A keyword (`and`, `in`): `word` not followed by a name character.
    fn keyword(&mut self, word: &str) -> bool {
        let end = self.i + word.len();
        let follows = self.s.get(end).copied();
        if self.s[self.i..].starts_with(word.as_bytes())
            && !follows.is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
        {
            self.i = end;
            return true;
        }
        false
    }

    fn take(&mut self, f: impl Fn(u8) -> bool) -> &'a str {
        let start = self.i;
        while self.peek().is_some_and(&f) {
            self.i += 1;
        }
        std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default()
    }

    fn error(&self, want: &'static str) -> Pep508Error {
        Pep508Error::Expected {
            want,
            rest: String::from_utf8_lossy(&self.s[self.i..]).into_owned(),
        }
    }
}

/// `[a, b]` after its `[`.
fn extras(c: &mut Cursor<'_>) -> Result<(), Pep508Error> {
    c.ws();
    if c.eat(b"]") {
        return Ok(());
    }
    loop {
        c.ws();
        let e = c.take(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
        if !is_valid_name(e) {
            return Err(c.error("an extra's name"));
        }
        c.ws();
        if c.eat(b"]") {
            return Ok(());
        }
        if !c.eat(b",") {
            return Err(c.error("`,` or `]` in the extras"));
        }
    }
}

/// A URL as `packaging` takes it: a scheme and a host, or `file:`.
fn check_url(url: &str) -> Result<(), Pep508Error> {
    let ok = match url.split_once("://") {
        _ if url.starts_with("file:") => true,
        Some((scheme, rest)) => {
            scheme
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic())
                && scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
                && !rest.starts_with('/')
                && !rest.is_empty()
        }
        None => false,
    };
    if !ok {
        return Err(Pep508Error::Url { url: url.into() });
    }
    Ok(())
}

/// The comparison operators, longest first.
const OPERATORS: [&str; 8] = ["===", "~=", "==", "!=", "<=", ">=", "<", ">"];

/// `op version (, op version)*`.
fn versions(c: &mut Cursor<'_>) -> Result<(), Pep508Error> {
    loop {
        c.ws();
        let Some(op) = OPERATORS.iter().find(|o| c.eat(o.as_bytes())) else {
            return Err(c.error("a version operator"));
        };
        c.ws();
        let v = c.take(|b| b.is_ascii_alphanumeric() || b"-_.*+!".contains(&b));
        if !version_for(op, v) {
            return Err(Pep508Error::Clause {
                op,
                version: v.into(),
            });
        }
        c.ws();
        if !c.eat(b",") {
            return Ok(());
        }
    }
}

/// Whether `v` is a version `op` takes (`packaging.specifiers.Specifier`):
/// `==` and `!=` allow a `.*` right after the release numbers and a local
/// label, `~=` needs two release numbers, the orderings neither; `===`
/// takes any string.
fn version_for(op: &str, v: &str) -> bool {
    match op {
        "===" => !v.is_empty(),
        "==" | "!=" => pep440(v, true, true, 1),
        "~=" => pep440(v, false, false, 2),
        _ => pep440(v, false, false, 1),
    }
}

/// A PEP 440 version, in `packaging`'s spelling (case-insensitive, `v`
/// prefix and separators allowed).
fn pep440(v: &str, wildcard: bool, local: bool, min_release: usize) -> bool {
    let lower = v.to_ascii_lowercase();
    let mut c = Cursor {
        s: lower.as_bytes(),
        i: 0,
    };
    c.eat(b"v");
    let digits = |c: &mut Cursor<'_>| !c.take(|b| b.is_ascii_digit()).is_empty();
    // Epoch.
    let start = c.i;
    if !(digits(&mut c) && c.eat(b"!")) {
        c.i = start;
    }
    let mut release = 0;
    while digits(&mut c) {
        release += 1;
        let at = c.i;
        if !(c.eat(b".") && c.peek().is_some_and(|b| b.is_ascii_digit())) {
            c.i = at;
            break;
        }
    }
    if release < min_release {
        return false;
    }
    // A prefix match: `.*` right after the release numbers only.
    if wildcard && &c.s[c.i..] == b".*" {
        return true;
    }
    let sep = |c: &mut Cursor<'_>| {
        let _ = c.eat(b"-") || c.eat(b"_") || c.eat(b".");
    };
    let labelled = |c: &mut Cursor<'_>, words: &[&str]| {
        let at = c.i;
        sep(c);
        if words.iter().any(|w| c.eat(w.as_bytes())) {
            sep(c);
            c.take(|b| b.is_ascii_digit());
            return true;
        }
        c.i = at;
        false
    };
    labelled(
        &mut c,
        &["preview", "alpha", "beta", "pre", "rc", "a", "b", "c"],
    );
    let at = c.i;
    if !(c.eat(b"-") && digits(&mut c)) {
        c.i = at;
        labelled(&mut c, &["post", "rev", "r"]);
    }
    labelled(&mut c, &["dev"]);
    if local && c.eat(b"+") {
        loop {
            if c.take(|b| b.is_ascii_alphanumeric()).is_empty() {
                return false;
            }
            if !(c.eat(b"-") || c.eat(b"_") || c.eat(b".")) {
                break;
            }
        }
    }
    c.done()
}

/// The environment markers `packaging` knows, with its dotted aliases.
const MARKER_VARIABLES: [&str; 18] = [
    "implementation_name",
    "implementation_version",
    "os_name",
    "platform_machine",
    "platform_python_implementation",
    "platform_release",
    "platform_system",
    "platform_version",
    "python_full_version",
    "python_version",
    "sys_platform",
    "extra",
    "os.name",
    "sys.platform",
    "platform.version",
    "platform.machine",
    "platform.python_implementation",
    "python_implementation",
];

fn marker_or(c: &mut Cursor<'_>) -> Result<(), Pep508Error> {
    marker_and(c)?;
    loop {
        c.ws();
        if !c.keyword("or") {
            return Ok(());
        }
        marker_and(c)?;
    }
}

fn marker_and(c: &mut Cursor<'_>) -> Result<(), Pep508Error> {
    marker_expr(c)?;
    loop {
        c.ws();
        if !c.keyword("and") {
            return Ok(());
        }
        marker_expr(c)?;
    }
}

fn marker_expr(c: &mut Cursor<'_>) -> Result<(), Pep508Error> {
    c.ws();
    if c.eat(b"(") {
        marker_or(c)?;
        c.ws();
        return if c.eat(b")") {
            Ok(())
        } else {
            Err(c.error("`)` in the marker"))
        };
    }
    marker_var(c)?;
    c.ws();
    let op = OPERATORS.iter().any(|o| c.eat(o.as_bytes()))
        || c.keyword("in")
        || (c.keyword("not") && c.ws() > 0 && c.keyword("in"));
    if !op {
        return Err(c.error("a marker operator"));
    }
    marker_var(c)
}

fn marker_var(c: &mut Cursor<'_>) -> Result<(), Pep508Error> {
    c.ws();
    if let Some(q @ (b'"' | b'\'')) = c.peek() {
        c.i += 1;
        c.take(|b| b != q && b >= b' ');
        return if c.eat(&[q]) {
            Ok(())
        } else {
            Err(c.error("a closing quote"))
        };
    }
    let var = c.take(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'));
    if MARKER_VARIABLES.contains(&var) {
        Ok(())
    } else {
        Err(Pep508Error::Marker { var: var.into() })
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn takes_what_packaging_takes() {
        for good in [
            "rocm-sdk-device-gfx942 == 7.1",
            "x_gfx942[extra]>=1; python_version >= \"3.9\"",
            "x-gfx942",
            "x (>=1.0, <2)",
            "x==1.0.*",
            "x!=1.*",
            "x~=1.4.5a1",
            "x===anything",
            "x @ https://example.com/x.whl ; os_name == 'posix'",
            "x; (os_name == 'nt' or extra == \"a\") and 'a' in platform_release",
            "x>=1.0.post1.dev2",
            "x==1.0+local.7",
            "x[]",
        ] {
            assert_eq!(check(good), Ok(()), "{good}");
        }
    }

    #[test]
    fn refuses_what_packaging_refuses() {
        for bad in [
            "x ==",
            "x == 1 junk",
            "x >= 1.*",
            "x ~= 1",
            "x < 1.0+local",
            "x == 1; garbage",
            "x; python_version >= \"3.9",
            "x[a,]",
            "x @ notaurl",
            "x == 1 ; extra == \"a\" and",
            "x (>= 1",
            "-x",
            "x ==1,",
            "x == 1.0a1.*",
            "x >= 1.0.dev1+local",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn refusals_read_as_the_phrase_after_the_requirement() {
        for (bad, why) in [
            (
                "-x",
                "does not start with a valid distribution name: \"-x\"",
            ),
            ("x @ notaurl", "has an invalid URL \"notaurl\""),
            (
                "x ~= 1",
                "is not PEP 508: ~= \"1\" is not a valid version clause",
            ),
            (
                "x; os == 'a'",
                "is not PEP 508: \"os\" is not an environment marker",
            ),
            (
                "x (>= 1",
                "is not PEP 508: `)` closing the version specifier expected at \"\"",
            ),
        ] {
            assert_eq!(
                check(bad).map_err(|e| e.to_string()),
                Err(why.into()),
                "{bad}"
            );
        }
    }
}
