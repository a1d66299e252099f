//! Handler authors are users too: a registry served over HTTP the way
//! cargo's sparse index is (from a local server on 127.0.0.1 inside the
//! test), and `kpack plugins new` scaffolding a handler crate that builds
//! with its one documented command and loads with `--plugin`.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kpack_guests::{GUEST_DEMO_1_2, GUEST_DEMO_1_3, GUEST_DEMO_2_0};
use kpack_tests::{stderr, stdout, workspace_root};

use crate::util::{KPACK, component_cache};

/// Run kpack with a private install directory, the shared component
/// cache and no proxy (the server is on 127.0.0.1).
fn run<S: AsRef<std::ffi::OsStr>>(data: &Path, args: &[S]) -> Output {
    let mut cmd = Command::new(KPACK);
    cmd.args(args)
        .env("XDG_CACHE_HOME", component_cache())
        .env("XDG_DATA_HOME", data);
    for proxy in [
        "http_proxy",
        "https_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
    ] {
        cmd.env_remove(proxy);
    }
    cmd.output().expect("run kpack")
}

/// A static file server for `root` on 127.0.0.1 (a thread answering one
/// request per connection): 200 with the file, 404 when there is none,
/// and 500 for everything under `/broken/`. Returns its base URL.
fn serve(root: PathBuf) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = answer(&root, stream);
        }
    });
    url
}

fn answer(root: &Path, mut stream: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // Read the headers up to the blank line, then ignore them.
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
    }
    let path = request.split(' ').nth(1).unwrap_or("/");
    let rel = path.trim_start_matches('/');
    let (status, body) = if rel.starts_with("broken/") {
        ("500 Internal Server Error", b"oops".to_vec())
    } else if rel.split('/').any(|c| c == "..") {
        ("404 Not Found", Vec::new())
    } else {
        match std::fs::read(root.join(rel)) {
            Ok(b) => ("200 OK", b),
            Err(_) => ("404 Not Found", Vec::new()),
        }
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(&body)?;
    stream.flush()
}

#[test]
fn http_registry_resolves_semver_and_refuses_a_checksum_mismatch() {
    let data = tempfile::tempdir().unwrap();
    let reg = tempfile::tempdir().unwrap();
    for wasm in [GUEST_DEMO_1_2, GUEST_DEMO_1_3, GUEST_DEMO_2_0] {
        let o = run(
            data.path(),
            &[
                "plugins".as_ref(),
                "publish".as_ref(),
                wasm.as_ref(),
                "--registry".as_ref(),
                reg.path().as_os_str(),
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let url = serve(reg.path().to_path_buf());
    let tree = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tree.path().join("demo")).unwrap();
    std::fs::write(tree.path().join("demo/x"), b"x").unwrap();
    let tree = tree.path().display().to_string();

    // Semver over HTTP: the newest matching version, yanked ones skipped
    // (the index is read from the server at each run).
    let key = |registry: &str, req: &str| {
        let o = run(
            data.path(),
            &[
                "plugins",
                "classify",
                "--registry",
                registry,
                "--split-databases",
                req,
                tree.as_str(),
            ],
        );
        assert!(o.status.success(), "{req}: {}", stderr(&o));
        stdout(&o)
    };
    assert_eq!(key(&url, "demo@^1.2"), "v1.3.0\tdemo\tdemo/x\n");
    assert_eq!(key(&url, "demo"), "v2.0.0\tdemo\tdemo/x\n");
    // cargo's `sparse+` spelling and a base without its trailing slash.
    let sparse = format!("sparse+{}", url.trim_end_matches('/'));
    assert_eq!(key(&sparse, "demo@~1.2.0"), "v1.2.0\tdemo\tdemo/x\n");
    let yank = run(
        data.path(),
        &[
            "plugins".as_ref(),
            "yank".as_ref(),
            "demo@1.3.0".as_ref(),
            "--registry".as_ref(),
            reg.path().as_os_str(),
        ],
    );
    assert!(yank.status.success(), "{}", stderr(&yank));
    assert_eq!(key(&url, "demo@^1.2"), "v1.2.0\tdemo\tdemo/x\n");

    // `plugins add` over HTTP installs what the server holds.
    let o = run(
        data.path(),
        &["plugins", "add", "demo@^1", "--registry", url.as_str()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let installed = data.path().join("kpack/plugins/demo-1.2.0.wasm");
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(GUEST_DEMO_1_2).unwrap()
    );

    // A blob that does not match its index checksum is refused.
    std::fs::write(reg.path().join("blobs/demo/demo-2.0.0.wasm"), b"tampered").unwrap();
    let o = run(
        data.path(),
        &["plugins", "add", "demo@^2", "--registry", url.as_str()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("refusing to use it"), "{}", stderr(&o));
    assert!(!data.path().join("kpack/plugins/demo-2.0.0.wasm").exists());

    // A server error names the URL and the status.
    let broken = format!("{url}broken/");
    let o = run(
        data.path(),
        &["plugins", "add", "demo", "--registry", broken.as_str()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("{broken}de/mo/demo")) && err.contains("HTTP status 500"),
        "{err}"
    );

    // Nothing published there: the same message as a file registry.
    let o = run(
        data.path(),
        &["plugins", "add", "nosuch", "--registry", url.as_str()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("published: none"), "{}", stderr(&o));

    // Publishing goes to the directory the server serves, not over HTTP.
    let o = run(
        data.path(),
        &[
            "plugins",
            "publish",
            GUEST_DEMO_1_2,
            "--registry",
            url.as_str(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("over HTTP"), "{}", stderr(&o));
}

#[test]
fn plugins_new_scaffolds_a_handler_that_builds_and_classifies() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let krate = dir.path().join("mylib");
    let sdk = workspace_root().join("sdk");
    let o = run(
        &data,
        &[
            "plugins".as_ref(),
            "new".as_ref(),
            "mylib".as_ref(),
            "--path".as_ref(),
            krate.as_os_str(),
            "--sdk".as_ref(),
            sdk.as_os_str(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let toml = std::fs::read_to_string(krate.join("Cargo.toml")).unwrap();
    assert!(
        toml.contains(&format!("kpack-sdk = {{ path = \"{}\" }}", sdk.display())),
        "{toml}"
    );
    let readme = std::fs::read_to_string(krate.join("README.md")).unwrap();
    let build = "cargo build --release --target wasm32-wasip2";
    assert!(
        readme.contains(build) && readme.contains("--plugin"),
        "{readme}"
    );

    // The README's one command, offline: this workspace's lock file pins
    // what the SDK needs, and a target directory kept between test runs
    // makes the second run quick.
    std::fs::copy(
        workspace_root().join("Cargo.lock"),
        krate.join("Cargo.lock"),
    )
    .unwrap();
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugins-new");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&krate)
        .args(build.split(' ').skip(1))
        .arg("--offline")
        .env("CARGO_TARGET_DIR", &target);
    for name in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(name);
    }
    let built = cmd.output().unwrap();
    assert!(built.status.success(), "{}", stderr(&built));
    let wasm = target.join("wasm32-wasip2/release/kpack_handler_mylib.wasm");

    let tree = dir.path().join("tree");
    for rel in [
        "share/mylib/k_gfx942.co",
        "share/mylib/index.txt",
        "lib/other.so",
    ] {
        let p = tree.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"x").unwrap();
    }
    let o = run(
        &data,
        &[
            "plugins".as_ref(),
            "classify".as_ref(),
            "--plugin".as_ref(),
            wasm.as_os_str(),
            tree.as_os_str(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "generic\tmylib\tshare/mylib/index.txt\ngfx942\tmylib\tshare/mylib/k_gfx942.co\n"
    );

    // An existing directory is never overwritten.
    let o = run(
        &data,
        &[
            "plugins".as_ref(),
            "new".as_ref(),
            "mylib".as_ref(),
            "--path".as_ref(),
            krate.as_os_str(),
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));
}

#[test]
fn plugins_new_finds_the_sdk_of_the_checkout_it_runs_in() {
    let dir = tempfile::tempdir().unwrap();
    let checkout = dir.path().join("kpack");
    std::fs::create_dir_all(checkout.join("sdk")).unwrap();
    std::fs::write(
        checkout.join("sdk/Cargo.toml"),
        "[package]\nname = \"kpack-sdk\"\n",
    )
    .unwrap();
    let inside = checkout.join("handlers/foo");
    let outside = dir.path().join("elsewhere/foo");
    for krate in [&inside, &outside] {
        let o = run(
            dir.path(),
            &[
                "plugins".as_ref(),
                "new".as_ref(),
                "foo".as_ref(),
                "--path".as_ref(),
                krate.as_os_str(),
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let toml = |k: &Path| std::fs::read_to_string(k.join("Cargo.toml")).unwrap();
    assert!(
        toml(&inside).contains("kpack-sdk = { path = \"../../sdk\" }"),
        "{}",
        toml(&inside)
    );
    // Outside a checkout: the placeholder the README explains.
    assert!(
        toml(&outside).contains(&format!("kpack-sdk = \"{}\"", env!("CARGO_PKG_VERSION"))),
        "{}",
        toml(&outside)
    );
    let bad = run(dir.path(), &["plugins", "new", "Bad Name"]);
    assert_eq!(bad.status.code(), Some(2));
}
