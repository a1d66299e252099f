//! `kpack_discover_binary_path`: which file backs an address (Linux:
//! `/proc/self/maps`).

use crate::error::{Error, ErrorKind, Result};

/// The file mapped at `addr` in this process and the file offset that
/// `addr` corresponds to. Same rules as AMD: lines without a path or with a
/// `[...]` pseudo-path are skipped; a trailing ` (deleted)` is kept.
pub fn discover_binary_path(addr: usize) -> Result<(String, u64)> {
    if cfg!(target_os = "linux") {
        let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| {
            Error::new(
                ErrorKind::PathDiscoveryFailed,
                format!("cannot read /proc/self/maps: {e}"),
            )
        })?;
        find_in_maps(&maps, addr as u64).ok_or_else(|| {
            Error::new(
                ErrorKind::PathDiscoveryFailed,
                format!("no file mapping contains address {addr:#x}"),
            )
        })
    } else {
        Err(Error::new(
            ErrorKind::NotImplemented,
            "binary path discovery is implemented for Linux only",
        ))
    }
}

/// Find `addr` in the text of a `/proc/<pid>/maps` file.
pub fn find_in_maps(maps: &str, addr: u64) -> Option<(String, u64)> {
    for line in maps.lines() {
        let mut rest = line;
        let mut fields = [""; 5];
        for f in &mut fields {
            rest = rest.trim_start_matches(' ');
            let end = rest.find(' ').unwrap_or(rest.len());
            *f = &rest[..end];
            rest = &rest[end..];
        }
        let path = rest.trim_start_matches(' ');
        if path.is_empty() || path.starts_with('[') {
            continue;
        }
        let Some((lo, hi)) = fields[0].split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi), Ok(off)) = (
            u64::from_str_radix(lo, 16),
            u64::from_str_radix(hi, 16),
            u64::from_str_radix(fields[2], 16),
        ) else {
            continue;
        };
        if (lo..hi).contains(&addr) {
            return Some((path.to_owned(), off + (addr - lo)));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c000-55d0d000 r--p 00000000 08:01 123   /usr/bin/my app
55d0d000-55d0f000 r-xp 00001000 08:01 123   /usr/bin/my app
7ffd0000-7ffd1000 rw-p 00000000 00:00 0     [stack]
7f000000-7f001000 rw-p 00000000 00:00 0
7f100000-7f102000 r--p 00004000 08:01 9     /tmp/lib.so (deleted)
";

    #[test]
    fn finds_path_with_spaces_and_offset() {
        assert_eq!(
            find_in_maps(MAPS, 0x55d0d010),
            Some(("/usr/bin/my app".into(), 0x1010))
        );
        assert_eq!(
            find_in_maps(MAPS, 0x7f101000),
            Some(("/tmp/lib.so (deleted)".into(), 0x5000))
        );
        assert_eq!(find_in_maps(MAPS, 0x7ffd0010), None);
        assert_eq!(find_in_maps(MAPS, 0x7f000010), None);
        assert_eq!(find_in_maps(MAPS, 0x55d0f000), None);
    }

    #[test]
    fn finds_this_test_binary() {
        let (path, _) = discover_binary_path(finds_this_test_binary as fn() as usize).unwrap();
        let exe = std::env::current_exe().unwrap();
        assert_eq!(std::path::Path::new(&path).file_name(), exe.file_name());
    }
}
