//! `kpack index` and `kpack fetch` against a directory and a tiny HTTP
//! server on 127.0.0.1 started by the test (port 0, bounded connections
//! and time): only what the GPUs need is fetched, nothing twice, and a
//! tampered or truncated download leaves nothing behind.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kpack_tests::{fixture, stderr, stdout};

use crate::detect::{kpack_with, topology};

/// How the server spoils its answers.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Spoil {
    None,
    /// One byte of every archive flipped.
    Tamper,
    /// Half of every archive sent under the full Content-Length.
    Truncate,
    /// Every request (but those under `moved/`) redirected (302) to the
    /// same path under [`Server::redirect`].
    Redirect,
    /// Half of every archive sent, then nothing, the connection held open
    /// until the client closes it.
    Stall,
    /// Every archive sent one byte every 50 ms.
    Trickle,
}

struct Server {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
    spoil: Arc<Mutex<Spoil>>,
    /// Where [`Spoil::Redirect`] redirects to.
    redirect: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
}

impl Server {
    /// Serve the files of `root` on 127.0.0.1 (at most 64 connections,
    /// for at most 120 s).
    fn start(root: &Path) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let spoil = Arc::new(Mutex::new(Spoil::None));
        let stop = Arc::new(AtomicBool::new(false));
        let redirect = Arc::new(Mutex::new(String::new()));
        let (r, s, st, root, to) = (
            requests.clone(),
            spoil.clone(),
            stop.clone(),
            root.to_path_buf(),
            redirect.clone(),
        );
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut served = 0;
            while served < 64 && Instant::now() < deadline && !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        served += 1;
                        let spoil = *s.lock().unwrap();
                        let to = to.lock().unwrap().clone();
                        if let Some(path) = serve(&mut conn, &root, spoil, &to) {
                            r.lock().unwrap().push(path);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Server {
            url,
            requests,
            spoil,
            redirect,
            stop,
        }
    }

    /// Requests so far (paths), cleared.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.requests.lock().unwrap())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Answer one request (redirected to `to` under [`Spoil::Redirect`]);
/// the path asked for.
pub(crate) fn serve(
    conn: &mut std::net::TcpStream,
    root: &Path,
    spoil: Spoil,
    to: &str,
) -> Option<String> {
    conn.set_nonblocking(false).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16 << 10 {
        let n = conn.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        req.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&req);
    let path = text
        .split_whitespace()
        .nth(1)?
        .trim_start_matches('/')
        .to_owned();
    if spoil == Spoil::Redirect && !path.starts_with("moved/") {
        let head = format!(
            "HTTP/1.1 302 Found\r\nLocation: {to}{path}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        let _ = conn.write_all(head.as_bytes());
        return Some(path);
    }
    let Ok(mut body) = std::fs::read(root.join(&path)) else {
        let _ = conn
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return Some(path);
    };
    let full = body.len();
    if path.ends_with(".kpack") {
        match spoil {
            Spoil::None => {}
            Spoil::Tamper => body[full / 2] ^= 0xff,
            Spoil::Truncate => body.truncate(full / 2),
            Spoil::Redirect | Spoil::Stall | Spoil::Trickle => {}
        }
    }
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {full}\r\nConnection: close\r\n\r\n");
    let _ = conn.write_all(head.as_bytes());
    match spoil {
        Spoil::Stall if path.ends_with(".kpack") => {
            let _ = conn.write_all(&body[..full / 2]);
            let _ = conn.set_read_timeout(Some(Duration::from_secs(100)));
            let _ = conn.read(&mut buf);
        }
        Spoil::Trickle if path.ends_with(".kpack") => {
            for b in body.chunks(1) {
                if conn.write_all(b).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        _ => {
            let _ = conn.write_all(&body);
        }
    }
    Some(path)
}

/// An install tree (`lib/libaxpy.so`, no archives) and an index
/// directory holding its archives and listing.
pub(crate) fn tree_and_index(tmp: &Path) -> (PathBuf, PathBuf) {
    tree_and_index_grouped(tmp, &[])
}

/// [`tree_and_index`] with more `kpack offload` flags.
fn tree_and_index_grouped(tmp: &Path, extra: &[&str]) -> (PathBuf, PathBuf) {
    let tree = tmp.join("tree");
    let mut args: Vec<std::ffi::OsString> = vec![
        "offload".into(),
        fixture("clang19/libaxpy_generic.so").into_os_string(),
        "-o".into(),
        tree.join("lib/libaxpy.so").into_os_string(),
        "--archives".into(),
        tree.join("lib/.kpack").into_os_string(),
        "--name".into(),
        "axpy".into(),
    ];
    args.extend(extra.iter().map(|a| a.into()));
    let out = crate::util::kpack(args);
    assert!(out.status.success(), "{}", stderr(&out));
    let idx = tmp.join("index");
    std::fs::rename(tree.join("lib/.kpack"), &idx).unwrap();
    let o = crate::util::kpack(["index".as_ref(), idx.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("kpack-index.json: 5 archives"),
        "{}",
        stdout(&o)
    );
    (tree, idx)
}

fn fetch(tree: &Path, index: &str, gpu: &str) -> std::process::Output {
    fetch_with(tree, index, gpu, &[])
}

/// [`fetch`] with more flags.
fn fetch_with(tree: &Path, index: &str, gpu: &str, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "fetch".as_ref(),
        "--index".as_ref(),
        index.as_ref(),
        "--gpu".as_ref(),
        gpu.as_ref(),
        tree.as_os_str(),
    ];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    kpack_with(&args, &[])
}

/// Every kpack temp file under `dir`.
fn temps(dir: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".kpack-tmp-"))
        .map(|e| e.path().to_path_buf())
        .collect()
}

/// Set `name`'s listed size in `idx`'s listing to `size`.
fn list_size(idx: &Path, name: &str, size: u64) {
    let path = idx.join("kpack-index.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for f in v["files"].as_array_mut().unwrap() {
        if f["name"] == name {
            f["size"] = size.into();
        }
    }
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
}

/// The archives installed in the tree, and any other file there.
fn installed(tree: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(tree.join("lib/.kpack"))
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn fetches_only_what_the_gpu_needs_and_nothing_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let (tree, idx) = tree_and_index(tmp.path());
    let server = Server::start(&idx);
    let o = fetch(&tree, &server.url, "gfx1100");
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(server.take(), ["kpack-index.json", "axpy_gfx1100.kpack"]);
    assert_eq!(installed(&tree), ["axpy_gfx1100.kpack"]);
    assert!(
        stdout(&o).contains("0 kernels missing for gfx1100"),
        "{}",
        stdout(&o)
    );

    // Already complete: only the listing is read.
    let o = fetch(&tree, &server.url, "gfx1100");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(server.take(), ["kpack-index.json"]);
    assert!(
        stdout(&o).contains("present axpy_gfx1100.kpack"),
        "{}",
        stdout(&o)
    );

    // gfx1101 has no native archive: the loader's next choice, gfx11-generic.
    let o = fetch(&tree, &server.url, "gfx1101");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        server.take(),
        ["kpack-index.json", "axpy_gfx11-generic.kpack"]
    );

    // From a directory, for `auto` (this machine: a gfx1201).
    let sysfs = tmp.path().join("sys");
    topology(&sysfs, &[120001]);
    let o = kpack_with(
        &[
            "fetch".as_ref(),
            "--index".as_ref(),
            idx.as_os_str(),
            tree.as_os_str(),
            "--json".as_ref(),
        ],
        &[("KPACK_SYSFS_ROOT", sysfs.as_os_str())],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["gpus"], serde_json::json!(["gfx1201"]));
    assert_eq!(
        v["fetch"]["archives"][0]["name"],
        "axpy_gfx12-generic.kpack"
    );
    assert_eq!(v["fetch"]["archives"][0]["action"], "fetched");
    assert_eq!(
        installed(&tree),
        [
            "axpy_gfx11-generic.kpack",
            "axpy_gfx1100.kpack",
            "axpy_gfx12-generic.kpack"
        ]
    );
}

#[test]
fn refuses_tampered_and_truncated_downloads_leaving_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (tree, idx) = tree_and_index(tmp.path());
    let server = Server::start(&idx);
    for spoil in [Spoil::Tamper, Spoil::Truncate] {
        *server.spoil.lock().unwrap() = spoil;
        let o = fetch(&tree, &server.url, "gfx1100");
        assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
        let why = if spoil == Spoil::Tamper {
            "sha256"
        } else {
            "interrupted"
        };
        assert!(stderr(&o).contains(why), "{}", stderr(&o));
        assert!(installed(&tree).is_empty(), "{:?}", installed(&tree));
        server.take();
    }
    // Interrupted, then run again: the archive comes whole.
    *server.spoil.lock().unwrap() = Spoil::None;
    let o = fetch(&tree, &server.url, "gfx1100");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(installed(&tree), ["axpy_gfx1100.kpack"]);

    // A tampered file already in the tree is replaced by the listed one.
    let dest = tree.join("lib/.kpack/axpy_gfx1100.kpack");
    let mut bytes = std::fs::read(&dest).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&dest, &bytes).unwrap();
    server.take();
    let o = fetch(&tree, &server.url, "gfx1100");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("replaced axpy_gfx1100.kpack"),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        std::fs::read(&dest).unwrap(),
        std::fs::read(idx.join("axpy_gfx1100.kpack")).unwrap()
    );
}

/// An index that redirects to another origin (here: another port) is not
/// followed there; one that redirects within its origin is.
#[test]
fn refuses_redirects_to_another_origin() {
    let tmp = tempfile::tempdir().unwrap();
    let (tree, idx) = tree_and_index(tmp.path());
    let real = Server::start(&idx);
    let front = Server::start(&idx);
    *front.spoil.lock().unwrap() = Spoil::Redirect;
    *front.redirect.lock().unwrap() = real.url.clone();
    let o = fetch(&tree, &front.url, "gfx1100");
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("another origin"), "{}", stderr(&o));
    assert_eq!(front.take(), ["kpack-index.json"]);
    assert!(real.take().is_empty());
    assert!(installed(&tree).is_empty());

    // Within the origin: `/moved/x` is served as `x`.
    std::fs::create_dir(idx.join("moved")).unwrap();
    for e in std::fs::read_dir(&idx).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, idx.join("moved").join(p.file_name().unwrap())).unwrap();
        }
    }
    *real.spoil.lock().unwrap() = Spoil::Redirect;
    *real.redirect.lock().unwrap() = "/moved/".into();
    let o = fetch(&tree, &real.url, "gfx1100");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(installed(&tree), ["axpy_gfx1100.kpack"]);
}

/// A GPU whose code the index does not have: exit 1, said.
#[test]
fn a_gpu_the_index_cannot_serve_is_a_finding() {
    let tmp = tempfile::tempdir().unwrap();
    let (tree, idx) = tree_and_index(tmp.path());
    let o = fetch(&tree, idx.to_str().unwrap(), "gfx90a");
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(installed(&tree).is_empty());
    assert!(
        stdout(&o).contains("kernels missing for gfx90a"),
        "{}",
        stdout(&o)
    );
    // It says what to do.
    assert!(
        stdout(&o).contains("gfx90a: the index has no archive that serves it (tried gfx90a"),
        "{}",
        stdout(&o)
    );
}

/// A tree without one offloaded binary has nothing to check: exit 1.
#[test]
fn a_tree_without_offloaded_binaries_is_nothing_to_check() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, idx) = tree_and_index(tmp.path());
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(empty.join("lib")).unwrap();
    std::fs::write(empty.join("lib/notes.txt"), b"x").unwrap();
    let o = fetch(&empty, idx.to_str().unwrap(), "gfx1100");
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("nothing to check: no offloaded binary"),
        "{}",
        stderr(&o)
    );
}

/// Archives grouped by sub-family (one search path per group): only the
/// group holding the GPU's native target is fetched, not the generic
/// family's that sorts before it.
#[test]
fn fetches_only_the_native_group() {
    let tmp = tempfile::tempdir().unwrap();
    let (tree, idx) = tree_and_index_grouped(tmp.path(), &["--archive-group", "sub-family"]);
    let server = Server::start(&idx);
    let o = fetch(&tree, &server.url, "gfx1100");
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(server.take(), ["kpack-index.json", "axpy_gfx110x.kpack"]);
    let o = fetch(&tree, &server.url, "gfx1201");
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(server.take(), ["kpack-index.json", "axpy_gfx12-0.kpack"]);
}

/// A search path leading out of the tree through a symlink is never
/// written to.
#[test]
fn never_writes_outside_the_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let (tree, idx) = tree_and_index(tmp.path());
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, tree.join("lib/.kpack")).unwrap();
    let o = fetch(&tree, idx.to_str().unwrap(), "gfx1100");
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("outside the tree"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}

#[test]
fn a_download_that_stops_or_trickles_fails_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (tree, idx) = tree_and_index(tmp.path());
    let server = Server::start(&idx);
    for (spoil, why) in [
        (Spoil::Stall, "timeout"),
        (Spoil::Trickle, "below the minimum of 1024 bytes/s"),
    ] {
        *server.spoil.lock().unwrap() = spoil;
        let o = fetch_with(&tree, &server.url, "gfx1100", &["--idle-timeout", "1"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("download interrupted after"), "{err}");
        assert!(err.contains(why), "{err}");
        assert!(installed(&tree).is_empty(), "{:?}", installed(&tree));
        assert!(temps(&tree).is_empty(), "{:?}", temps(&tree));
        server.take();
    }
}

#[test]
fn a_listing_cannot_set_the_download_bound_or_fill_the_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let (tree, idx) = tree_and_index(tmp.path());
    let server = Server::start(&idx);
    // 1 TiB listed: over the default cap, refused before any byte is read.
    list_size(&idx, "axpy_gfx1100.kpack", 1 << 40);
    let o = fetch(&tree, &server.url, "gfx1100");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("listed as 1099511627776 bytes, more than the 8589934592 bytes")
            && err.contains("--max-archive-size"),
        "{err}"
    );
    assert_eq!(server.take(), ["kpack-index.json"]);
    // Under a raised cap, more than any disk holds: refused for want of space.
    list_size(&idx, "axpy_gfx1100.kpack", 1 << 60);
    let o = fetch_with(
        &tree,
        &server.url,
        "gfx1100",
        &["--max-archive-size", "2000000T"],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("1152921504606846976 bytes needed for axpy_gfx1100.kpack")
            && err.contains("bytes free"),
        "{err}"
    );
    assert_eq!(server.take(), ["kpack-index.json"]);
    assert!(installed(&tree).is_empty() && temps(&tree).is_empty());
}

#[test]
fn a_directory_index_serves_only_regular_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (tree, idx) = tree_and_index(tmp.path());
    let real = idx.join("axpy_gfx1100.kpack");
    std::fs::rename(&real, tmp.path().join("moved.kpack")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &real).unwrap();
    let o = fetch(&tree, idx.to_str().unwrap(), "gfx1100");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("axpy_gfx1100.kpack: not a regular file"),
        "{err}"
    );
    assert!(installed(&tree).is_empty() && temps(&tree).is_empty());
    // A symlink to a regular file is followed.
    std::fs::remove_file(&real).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("moved.kpack"), &real).unwrap();
    let o = fetch(&tree, idx.to_str().unwrap(), "gfx1100");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(installed(&tree), ["axpy_gfx1100.kpack"]);
}

#[test]
fn sigterm_and_sigint_remove_the_download_temp() {
    let tmp = tempfile::tempdir().unwrap();
    let (tree, idx) = tree_and_index(tmp.path());
    let server = Server::start(&idx);
    *server.spoil.lock().unwrap() = Spoil::Stall;
    for signal in ["TERM", "INT"] {
        let mut child = std::process::Command::new(crate::util::KPACK)
            .args(["fetch", "--index", &server.url, "--gpu", "gfx1100"])
            .arg(&tree)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Wait (at most 60 s) for the download's temp file to appear.
        let until = Instant::now() + Duration::from_secs(60);
        while temps(&tree).is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(temps(&tree).len(), 1, "no temp file while downloading");
        let killed = std::process::Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = child.wait().unwrap();
        assert!(!status.success(), "{status:?}");
        assert!(temps(&tree).is_empty(), "{signal}: {:?}", temps(&tree));
        assert!(installed(&tree).is_empty(), "{:?}", installed(&tree));
        server.take();
    }
}

/// A fetch killed after its commit leaves its staging directory in the
/// tree; the next fetch, with nothing left to download, removes it.
#[test]
fn a_fetch_with_nothing_to_do_removes_stale_temps_of_dead_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let (tree, idx) = tree_and_index(tmp.path());
    let idx = idx.to_str().unwrap();
    let o = fetch(&tree, idx, "gfx1100");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // What a run with pid 99999999 (above any pid_max) killed after its
    // commit leaves: its staging directory, the moved-in archive gone.
    let stale = tree.join(".kpack-tmp-99999999-fetch-abc123");
    std::fs::create_dir_all(stale.join("out/lib/.kpack")).unwrap();
    std::fs::write(stale.join("out/lib/.kpack/partial"), b"x").unwrap();
    let o = fetch(&tree, idx, "gfx1100");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("present axpy_gfx1100.kpack"),
        "{}",
        stdout(&o)
    );
    assert!(temps(&tree).is_empty(), "{:?}", temps(&tree));
    assert!(stderr(&o).contains("removed"), "{}", stderr(&o));
}
