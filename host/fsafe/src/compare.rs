//! Whether an output that exists already is the one a run would write:
//! parallel shards that share an output location leave an identical output
//! alone and never silently replace a different one.

use std::path::{Path, PathBuf};

/// The first path (relative, in sorted order) where the trees `a` and `b`
/// differ: a file or symlink only one has, different bytes or link
/// targets, a file against a directory, or executable bits; `None` when
/// they are the same. Unreadable entries count as different.
pub fn first_difference(a: &Path, b: &Path) -> Option<PathBuf> {
    diff_at(a, b, Path::new(""))
}

fn diff_at(a: &Path, b: &Path, rel: &Path) -> Option<PathBuf> {
    // Not `a.join("")`: that ends in a separator, which a file's path
    // must not (the roots may be files).
    let at = |root: &Path| match rel.as_os_str().is_empty() {
        true => root.to_path_buf(),
        false => root.join(rel),
    };
    let (pa, pb) = (at(a), at(b));
    let (Ok(ma), Ok(mb)) = (
        std::fs::symlink_metadata(&pa),
        std::fs::symlink_metadata(&pb),
    ) else {
        return Some(rel.to_path_buf());
    };
    let (ta, tb) = (ma.file_type(), mb.file_type());
    if ta.is_symlink() || tb.is_symlink() {
        let same = ta.is_symlink()
            && tb.is_symlink()
            && std::fs::read_link(&pa).ok() == std::fs::read_link(&pb).ok();
        return (!same).then(|| rel.to_path_buf());
    }
    if ma.is_dir() != mb.is_dir() {
        return Some(rel.to_path_buf());
    }
    if !ma.is_dir() {
        let same =
            ma.len() == mb.len() && executable(&ma) == executable(&mb) && same_bytes(&pa, &pb);
        return (!same).then(|| rel.to_path_buf());
    }
    // kpack's temps sit beside outputs, never inside one: a `.kpack-tmp`
    // name inside is content, and compared like any other.
    let (Some(na), Some(nb)) = (names(&pa), names(&pb)) else {
        return Some(rel.to_path_buf());
    };
    let mut all: Vec<&std::ffi::OsString> = na.iter().chain(&nb).collect();
    all.sort();
    all.dedup();
    all.into_iter().find_map(|n| diff_at(a, b, &rel.join(n)))
}

/// The names in `dir`.
fn names(dir: &Path) -> Option<Vec<std::ffi::OsString>> {
    let rd = std::fs::read_dir(dir).ok()?;
    let mut v = Vec::new();
    for e in rd {
        let n = e.ok()?.file_name();
        v.push(n);
    }
    Some(v)
}

#[cfg(unix)]
fn executable(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    m.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn executable(_: &std::fs::Metadata) -> bool {
    false
}

/// Whether two files of one length have the same bytes, read in chunks.
fn same_bytes(a: &Path, b: &Path) -> bool {
    let (Ok(mut fa), Ok(mut fb)) = (std::fs::File::open(a), std::fs::File::open(b)) else {
        return false;
    };
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let (Ok(n), Ok(m)) = (read_full(&mut fa, &mut ba), read_full(&mut fb, &mut bb)) else {
            return false;
        };
        if n != m || ba[..n] != bb[..m] {
            return false;
        }
        if n == 0 {
            return true;
        }
    }
}

/// Fill `buf` as far as the file goes; the bytes read.
fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_differ_at_the_first_differing_path() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        for t in [&a, &b] {
            std::fs::create_dir_all(t.join("lib/.kpack")).unwrap();
            std::fs::write(t.join("lib/libx.so"), b"host").unwrap();
            std::fs::write(t.join("lib/.kpack/x_gfx942.kpack"), b"kernels").unwrap();
        }
        assert_eq!(first_difference(&a, &b), None);
        std::fs::write(b.join("lib/.kpack/x_gfx942.kpack"), b"other!!").unwrap();
        assert_eq!(
            first_difference(&a, &b),
            Some(PathBuf::from("lib/.kpack/x_gfx942.kpack"))
        );
        std::fs::write(a.join("lib/extra"), b"").unwrap();
        assert_eq!(
            first_difference(&a, &b),
            Some(PathBuf::from("lib/.kpack/x_gfx942.kpack"))
        );
        std::fs::write(b.join("lib/.kpack/x_gfx942.kpack"), b"kernels").unwrap();
        assert_eq!(first_difference(&a, &b), Some(PathBuf::from("lib/extra")));
        std::fs::remove_file(a.join("lib/extra")).unwrap();
        std::fs::create_dir(b.join(".kpack-tmp-1-split-x")).unwrap();
        assert_eq!(
            first_difference(&a, &b),
            Some(PathBuf::from(".kpack-tmp-1-split-x")),
            "a temp's name inside an output is content"
        );
    }

    #[test]
    fn files_compare_as_roots_too() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a.tar.zst"), d.path().join("b.tar.zst"));
        std::fs::write(&a, b"archive").unwrap();
        std::fs::write(&b, b"archive").unwrap();
        assert_eq!(first_difference(&a, &b), None);
        std::fs::write(&b, b"archivf").unwrap();
        assert_eq!(first_difference(&a, &b), Some(PathBuf::new()));
    }
}
