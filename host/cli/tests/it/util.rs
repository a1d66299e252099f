//! How the tests run the `kpack` binary cargo built for them, and where
//! they keep scratch files.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `kpack` binary of this build (debug or release, as cargo built it).
pub const KPACK: &str = env!("CARGO_BIN_EXE_kpack");

/// Run `kpack ARGS...` and return its output.
pub fn kpack<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new(KPACK).args(args).output().expect("run kpack")
}

/// Cargo's scratch directory for integration tests, shared by every test
/// binary of this target directory.
pub fn scratch() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// `XDG_CACHE_HOME` for runs that load handlers: shared between tests so
/// each component is compiled by wasmtime once.
pub fn component_cache() -> PathBuf {
    scratch().join("kpack-test-cache")
}

/// The stub HIP runtime (see [`kpack_tests::stub_hip`]); with `loading`,
/// it loads code objects through this build's `librocm_kpack.so`.
pub fn stub_hip(loading: bool) -> &'static Path {
    // kpack-capi is a dev-dependency: cargo writes its cdylib into the
    // directory it writes this test binary to.
    let capi = loading.then(|| {
        let exe = std::env::current_exe().expect("test binary path");
        exe.with_file_name("librocm_kpack.so")
    });
    kpack_tests::stub_hip(scratch(), capi.as_deref())
}

/// Make `art` a TheRock-style artifact (`artifact_manifest.txt` listing
/// `stage`) holding the library `lib` as `stage/lib/<name>`.
pub fn artifact_with_library(art: &Path, lib: impl AsRef<Path>, name: &str) {
    std::fs::create_dir_all(art.join("stage/lib")).unwrap();
    std::fs::write(art.join("artifact_manifest.txt"), "stage\n").unwrap();
    std::fs::copy(lib, art.join("stage/lib").join(name)).unwrap();
}

/// `kpack offload INPUT` into `dir` (the binary under its own name beside
/// `dir/.kpack/`) with `extra` flags; asserts success, returns the binary.
pub fn offload_into(input: &Path, dir: &Path, extra: &[&str]) -> PathBuf {
    let out_bin = dir.join(input.file_name().unwrap());
    let mut args: Vec<std::ffi::OsString> = vec![
        "offload".into(),
        input.into(),
        "-o".into(),
        out_bin.clone().into(),
        "--archives".into(),
        dir.join(".kpack").into(),
    ];
    args.extend(extra.iter().map(Into::into));
    let out = kpack(args);
    assert!(
        out.status.success(),
        "offload {} {extra:?}: {}",
        input.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out_bin
}

/// `kpack verify DIR` exits 0; its output (both streams in the message
/// when it does not).
pub fn verify_passes(dir: &Path) -> Output {
    let o = kpack(["verify".as_ref(), dir.as_os_str()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// `kpack verify --gpu GPU DIR` exits 0: every kernel of every marker
/// loads for that GPU (both streams in the message when it does not).
pub fn verify_gpu_passes(dir: &Path, gpu: &str) {
    let o = kpack([
        "verify".as_ref(),
        "--gpu".as_ref(),
        gpu.as_ref(),
        dir.as_os_str(),
    ]);
    assert!(
        o.status.success(),
        "verify --gpu {gpu}:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `kpack prune INPUT -o OUTPUT --keep KEEP EXTRA...` (its status is the
/// caller's to check).
pub fn kpack_prune(input: &Path, output: &Path, keep: &str, extra: &[&str]) -> Output {
    let mut args: Vec<&OsStr> = vec![
        "prune".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        output.as_os_str(),
        "--keep".as_ref(),
        keep.as_ref(),
    ];
    args.extend(extra.iter().map(OsStr::new));
    kpack(args)
}

/// A fresh Python virtual environment (`python3 -m venv`; scripts/test.sh
/// installs python3-venv), for tests that `pip install` wheels.
pub struct Venv {
    python: PathBuf,
}

impl Venv {
    /// Create one in `dir/venv`.
    pub fn create(dir: &Path) -> Venv {
        Venv::at(&dir.join("venv"))
    }

    /// Create one at `venv`.
    pub fn at(venv: &Path) -> Venv {
        let o = Command::new("python3")
            .args(["-m", "venv"])
            .arg(venv)
            .output()
            .expect("python3");
        assert!(
            o.status.success(),
            "python3 -m venv failed (install python3-venv):\n{}",
            kpack_tests::stderr(&o)
        );
        Venv {
            python: venv.join("bin/python"),
        }
    }

    /// `python -m pip ARGS` in it.
    pub fn pip(&self, args: &[&str]) -> Output {
        Command::new(&self.python)
            .args(["-m", "pip"])
            .args(args)
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
            .output()
            .unwrap()
    }

    /// `pip install --no-index --find-links DIR REQ`, which must succeed.
    pub fn install_from(&self, dir: &Path, req: &str) {
        let find = dir.to_str().unwrap();
        let o = self.pip(&["install", "--no-index", "--find-links", find, req]);
        assert!(
            o.status.success(),
            "pip install {req}:\n{}{}",
            kpack_tests::stdout(&o),
            kpack_tests::stderr(&o)
        );
    }

    /// `name==version` of each installed distribution whose name starts
    /// with `prefix`, sorted (`pip list --format=freeze`).
    pub fn installed(&self, prefix: &str) -> Vec<String> {
        let o = self.pip(&["list", "--format=freeze"]);
        assert!(o.status.success(), "pip list:\n{}", kpack_tests::stderr(&o));
        let mut names: Vec<String> = kpack_tests::stdout(&o)
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_string)
            .collect();
        names.sort();
        names
    }

    /// Its platlib directory (site-packages for native code).
    pub fn platlib(&self) -> PathBuf {
        let o = Command::new(&self.python)
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['platlib'])",
            ])
            .output()
            .unwrap();
        PathBuf::from(kpack_tests::stdout(&o).trim())
    }
}

/// Write a wheel at `path`: `members` (path, bytes, unix mode) in order,
/// deflated, then a correct `<dist_info>/RECORD`.
pub fn write_wheel<'a>(
    path: &Path,
    dist_info: &str,
    members: impl IntoIterator<Item = (&'a str, &'a [u8], u32)>,
) {
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let opts = |m: u32| zip::write::SimpleFileOptions::default().unix_permissions(m);
    let mut record = String::new();
    for (p, b, m) in members {
        z.start_file(p, opts(m)).unwrap();
        z.write_all(b).unwrap();
        let hash = kpack_wheel::record_hash(b);
        record.push_str(&format!("{p},{hash},{}\n", b.len()));
    }
    record.push_str(&format!("{dist_info}/RECORD,,\n"));
    z.start_file(format!("{dist_info}/RECORD"), opts(0o644))
        .unwrap();
    z.write_all(record.as_bytes()).unwrap();
    z.finish().unwrap();
}
