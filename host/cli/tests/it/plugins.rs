//! Database handlers end to end: the standard handlers on the seed layouts
//! they must recognise, the sandbox guests, WIT compatibility, the registry, and
//! cargo-style external subcommands. Everything goes through the built
//! `kpack` binary (`kpack plugins ...`).
//!
//! Components are built from source by kpack-guests' build script and named
//! by its constants; `KPACK_PLUGIN_DIR` points the binary at them.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use kpack_guests::{
    GUEST_ALLOC_4G, GUEST_AMBIENT, GUEST_DEMO_1_2, GUEST_DEMO_1_3, GUEST_DEMO_2_0,
    GUEST_LOOP_FOREVER, GUEST_OPEN_FILE, GUEST_PINNED_1_0, GUEST_TRAP, GUEST_WIT_2,
    HANDLER_ROCBLAS, HANDLERS,
};
use kpack_tests::{sha256_hex, stderr, stdout};

use crate::util::{KPACK, component_cache, scratch};

/// Every test guest names the test that runs it: with
/// `foreach_test_guest!`, a guest in tests/guests without one is a compile
/// error.
mod guest_tests {
    pub(super) use super::guest_built_for_a_newer_wit_major_is_refused as wit_2;
    pub(super) use super::guest_pinned_to_wit_1_0_keeps_working_next_to_1_1 as pinned_1_0;
    pub(super) use super::guest_that_allocates_4gb_hits_the_memory_cap as alloc_4g;
    pub(super) use super::guest_that_loops_forever_times_out as loop_forever;
    pub(super) use super::guest_that_panics_is_reported_with_its_message as trap;
    pub(super) use super::guest_that_reads_the_clock_is_stopped as ambient;
    pub(super) use super::guest_that_writes_a_file_is_stopped_before_writing as open_file;
    pub(super) use super::registry_resolves_semver_skips_yanked_and_verifies_checksums as demo_1_2;
    pub(super) use super::registry_resolves_semver_skips_yanked_and_verifies_checksums as demo_1_3;
    pub(super) use super::registry_resolves_semver_skips_yanked_and_verifies_checksums as demo_2_0;
}

macro_rules! guest_has_a_test {
    ($name:ident) => {
        #[allow(unused_imports, reason = "the import is the compile-time check")]
        use guest_tests::$name as _;
    };
}
kpack_guests::foreach_test_guest!(guest_has_a_test);

/// The standard handlers: one per `plugins/*` crate.
fn standard_handlers() -> Vec<String> {
    HANDLERS.iter().map(|h| h.name.to_string()).collect()
}

/// A sandboxed environment for one `kpack` run: plugins from the build,
/// a shared compiled-component cache, a private install directory.
struct Env {
    data: tempfile::TempDir,
    path: Option<std::ffi::OsString>,
}

impl Env {
    fn new() -> Env {
        Env {
            data: tempfile::tempdir().unwrap(),
            path: None,
        }
    }

    fn run<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Output {
        let mut cmd = Command::new(KPACK);
        cmd.args(args)
            .env("KPACK_PLUGIN_DIR", kpack_guests::DIR)
            .env("XDG_CACHE_HOME", component_cache())
            .env("XDG_DATA_HOME", self.data.path());
        if let Some(p) = &self.path {
            cmd.env("PATH", p);
        }
        cmd.output().expect("run kpack")
    }
}

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

/// The database layouts of ROCm's libraries, and what the standard handlers must say
/// about each file: `key handler path` (`-` = no handler claims it).
const SEED: &[(&str, &str, &str)] = &[
    (
        "lib/rocblas/library/TensileLibrary_Type_HH_Contraction_l_Ailk_Bljk_Cijk_Dijk_gfx1100.co",
        "gfx1100",
        "rocblas",
    ),
    (
        "lib/rocblas/library/TensileLibrary_Type_HH_Contraction_l_Ailk_Bljk_Cijk_Dijk_gfx1100.dat",
        "gfx1100",
        "rocblas",
    ),
    (
        "lib/rocblas/library/TensileLibrary_Type_HH_Contraction_l_Ailk_Bljk_Cijk_Dijk_gfx1100.hsaco",
        "gfx1100",
        "rocblas",
    ),
    (
        "lib/rocblas/library/Kernels.so-000-gfx1100.hsaco",
        "gfx1100",
        "rocblas",
    ),
    (
        "lib/rocblas/library/TensileLibrary_lazy_gfx1100.dat",
        "gfx1100",
        "rocblas",
    ),
    (
        "lib/rocblas/library/TensileLibrary_Type_HH_Contraction_l_Ailk_Bljk_Cijk_Dijk_fallback.dat",
        "generic",
        "rocblas",
    ),
    ("lib/rocblas/library/README.txt", "-", "-"),
    (
        "lib/rocblas/library/Kernels.so-000-gfx90a-xnack+.hsaco",
        "gfx90a:xnack+",
        "rocblas",
    ),
    (
        "lib/rocblas/library/gfx942/TensileLibrary_lazy.dat",
        "gfx942",
        "rocblas",
    ),
    (
        "lib/rocblas/library/gfx942/TensileManifest.txt",
        "gfx942",
        "rocblas",
    ),
    (
        "lib/hipblaslt/library/hipblasltTransform.hsaco",
        "generic",
        "hipblaslt",
    ),
    (
        "lib/hipblaslt/library/hipblasltExtOpLibrary.dat",
        "generic",
        "hipblaslt",
    ),
    (
        "lib/hipblaslt/library/extop_gfx1100.co",
        "gfx1100",
        "hipblaslt",
    ),
    (
        "lib/hipblaslt/library/TensileLibrary_HH_gfx1100.co",
        "gfx1100",
        "hipblaslt",
    ),
    (
        "lib/hipblaslt/library/TensileLibrary_HH_gfx1100.dat",
        "gfx1100",
        "hipblaslt",
    ),
    (
        "lib/hipblaslt/library/gfx950/TensileLibrary_HH_fallback.dat",
        "gfx950",
        "hipblaslt",
    ),
    (
        "lib/hipsparselt/library/TensileLibrary_gfx942.co",
        "gfx942",
        "hipsparselt",
    ),
    (
        "lib/hipsparselt/library/TensileLibrary_gfx942.dat",
        "gfx942",
        "hipsparselt",
    ),
    (
        "lib/hipsparselt/library/Kernels.so-000-gfx942.hsaco",
        "gfx942",
        "hipsparselt",
    ),
    (
        "lib/aotriton.images/amd-gfx11xx/flash/attn_fwd/FONLY__^bf16@16,128,False.aks2",
        "gfx11",
        "aotriton",
    ),
    (
        "lib/aotriton.images/amd-gfx120x/flash/attn_fwd/FONLY__^fp16@16,64,True.aks2",
        "gfx12_0",
        "aotriton",
    ),
    (
        "lib/aotriton.images/amd-gfx942/flash/bwd_kernel_dk_dv/x.aks2",
        "gfx942",
        "aotriton",
    ),
    ("share/miopen/db/gfx90878.HIP.fdb.txt", "gfx908", "miopen"),
    ("share/miopen/db/gfx942130.db.txt", "gfx942", "miopen"),
    ("share/miopen/db/gfx1030_36.db.txt", "gfx1030", "miopen"),
    ("share/miopen/db/gfx908.tn.model", "gfx908", "miopen"),
    ("share/miopen/db/gfx90a68.kdb", "gfx90a", "miopen"),
    ("lib/libMIOpenCKGroupConv_gfx942.so", "gfx942", "miopen"),
    (
        "lib/libdevice_conv_operations_gfx950_xnackp.a",
        "gfx950:xnack+",
        "composablekernel",
    ),
    (
        "lib/libdevice_conv_operations.a",
        "generic",
        "composablekernel",
    ),
    ("lib/librocblas.so.4", "-", "-"),
    ("bin/hipcc", "-", "-"),
];

const SEED_HANDLERS: &[&str] = &[
    "rocblas",
    "hipblaslt",
    "hipsparselt",
    "aotriton",
    "miopen",
    "composablekernel",
];

fn seed_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, _, _) in SEED {
        write(dir.path(), rel, b"not a code object");
    }
    dir
}

fn expected_seed_lines(all: bool) -> BTreeSet<String> {
    SEED.iter()
        .filter(|(_, key, _)| all || *key != "-")
        .map(|(rel, key, handler)| format!("{key}\t{handler}\t{rel}"))
        .collect()
}

fn lines(o: &Output) -> BTreeSet<String> {
    stdout(o).lines().map(str::to_string).collect()
}

fn classify_args(handlers: &[&str], dir: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "plugins".to_string(),
        "classify".into(),
        "--split-databases".into(),
    ];
    args.extend(handlers.iter().map(|s| s.to_string()));
    args.push(dir.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

#[test]
fn standard_handlers_classify_the_seed_layouts() {
    let tree = seed_tree();
    let o = Env::new().run(&classify_args(SEED_HANDLERS, tree.path(), &["--all"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(lines(&o), expected_seed_lines(true));
}

#[test]
fn handler_order_decides_who_claims_a_file() {
    // Only the handlers asked for run: rocblas alone leaves hipBLASLt files unclaimed.
    let tree = seed_tree();
    let o = Env::new().run(&classify_args(&["rocblas"], tree.path(), &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    let want: BTreeSet<String> = expected_seed_lines(false)
        .into_iter()
        .filter(|l| l.contains("\trocblas\t"))
        .collect();
    assert_eq!(lines(&o), want);
}

#[test]
fn json_output_names_handler_versions_and_wit() {
    let tree = seed_tree();
    let o = Env::new().run(&classify_args(
        &["rocblas", "miopen"],
        tree.path(),
        &["--json"],
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["schema_version"], 1);
    let hs = doc["handlers"].as_array().unwrap();
    assert_eq!(
        hs.iter()
            .map(|h| h["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["rocblas", "miopen"]
    );
    for h in hs {
        assert_eq!(h["wit"], "1.1.0");
        let path = HANDLERS.iter().find(|g| g.name == h["name"]).unwrap().path;
        assert_eq!(
            h["sha256"].as_str().unwrap(),
            sha256_hex(&std::fs::read(path).unwrap())
        );
    }
    let f = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "share/miopen/db/gfx90878.HIP.fdb.txt")
        .unwrap();
    assert_eq!(f["key"], "gfx908");
    assert_eq!(f["handler"], "miopen");
}

fn amdgpu_elf(mach: u8) -> Vec<u8> {
    let mut b = vec![0u8; 256];
    b[..4].copy_from_slice(b"\x7fELF");
    b[4] = 2;
    b[5] = 1;
    b[7] = 64;
    b[8] = 3;
    b[16] = 3;
    b[18..20].copy_from_slice(&224u16.to_le_bytes());
    b[48] = mach;
    b
}

fn offload_bundle(ids: &[&str]) -> Vec<u8> {
    let mut b = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    b.extend((ids.len() as u64).to_le_bytes());
    for id in ids {
        b.extend(4096u64.to_le_bytes());
        b.extend(16u64.to_le_bytes());
        b.extend((id.len() as u64).to_le_bytes());
        b.extend(id.as_bytes());
    }
    b.resize(8192, 0);
    b
}

#[test]
fn tensile_files_without_a_target_in_their_name_are_sniffed() {
    let tree = tempfile::tempdir().unwrap();
    write(
        tree.path(),
        "lib/rocblas/library/Kernels.co",
        &amdgpu_elf(0x4c),
    );
    write(
        tree.path(),
        "lib/rocblas/library/Kernels2.hsaco",
        &offload_bundle(&[
            "host-x86_64-unknown-linux-gnu-",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
        ]),
    );
    write(
        tree.path(),
        "lib/rocblas/library/Fat.hsaco",
        &offload_bundle(&[
            "hipv4-amdgcn-amd-amdhsa--gfx90a",
            "hipv4-amdgcn-amd-amdhsa--gfx942",
        ]),
    );
    write(
        tree.path(),
        "lib/rocblas/library/TensileLibrary.dat",
        b"\x93msgpack",
    );
    let o = Env::new().run(&classify_args(&["rocblas"], tree.path(), &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    let want: BTreeSet<String> = [
        "gfx942\trocblas\tlib/rocblas/library/Kernels.co",
        "gfx90a:xnack-\trocblas\tlib/rocblas/library/Kernels2.hsaco",
        "generic\trocblas\tlib/rocblas/library/Fat.hsaco",
        "generic\trocblas\tlib/rocblas/library/TensileLibrary.dat",
    ]
    .map(String::from)
    .into();
    assert_eq!(lines(&o), want);
}

#[test]
fn plugins_list_shows_every_standard_handler() {
    let o = Env::new().run(&["plugins", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let listed: Vec<&str> = doc["handlers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    for name in standard_handlers() {
        assert!(
            listed.contains(&name.as_str()),
            "{name} not listed: {listed:?}"
        );
    }
    let text = Env::new().run(&["plugins", "list"]);
    assert!(text.status.success(), "{}", stderr(&text));
    let out = stdout(&text);
    assert!(out.starts_with("NAME"), "{out}");
    let rocblas = out.lines().find(|l| l.starts_with("rocblas ")).unwrap();
    let sha = sha256_hex(&std::fs::read(HANDLER_ROCBLAS).unwrap());
    assert!(
        rocblas.contains(&sha) && rocblas.contains("1.1.0") && rocblas.contains("KPACK_PLUGIN_DIR"),
        "{rocblas}"
    );
}

#[test]
fn unknown_handler_names_what_is_available() {
    let tree = seed_tree();
    let o = Env::new().run(&classify_args(&["rocblass"], tree.path(), &[]));
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("no database handler named \"rocblass\"") && err.contains("rocblas"),
        "{err}"
    );
}

/// Run one sandbox guest on a small tree; it must fail with exit 2, print
/// nothing on stdout, and explain itself on stderr.
fn stopped(guest: &str, tree: &Path) -> String {
    let o = Env::new().run(&[
        "plugins".as_ref(),
        "classify".as_ref(),
        "--plugin".as_ref(),
        guest.as_ref(),
        tree.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{guest}: {}", stderr(&o));
    assert_eq!(stdout(&o), "", "{guest} must not produce output");
    stderr(&o)
}

fn small_tree() -> tempfile::TempDir {
    let tree = tempfile::tempdir().unwrap();
    write(tree.path(), "lib/a.co", b"x");
    tree
}

#[test]
fn guest_that_loops_forever_times_out() {
    let err = stopped(GUEST_LOOP_FOREVER, small_tree().path());
    assert!(
        err.contains("handler loop-forever 0.1.0 (kpack:handler@1.1.0) timed out"),
        "{err}"
    );
}

#[test]
fn guest_that_allocates_4gb_hits_the_memory_cap() {
    let err = stopped(GUEST_ALLOC_4G, small_tree().path());
    assert!(
        err.contains("handler alloc-4g 0.1.0 (kpack:handler@1.1.0) ran out of memory"),
        "{err}"
    );
    assert!(err.contains("the cap is 67108864 bytes"), "{err}");
}

#[test]
fn guest_that_panics_is_reported_with_its_message() {
    let err = stopped(GUEST_TRAP, small_tree().path());
    assert!(
        err.contains("handler trap 0.1.0 (kpack:handler@1.1.0) trapped"),
        "{err}"
    );
    assert!(
        err.contains("deliberate panic while classifying lib/a.co"),
        "{err}"
    );
}

#[test]
fn guest_that_writes_a_file_is_stopped_before_writing() {
    let tree = tempfile::tempdir().unwrap();
    let name = format!("kpack-sandbox-escape-{}.txt", std::process::id());
    write(tree.path(), &name, b"x");
    let escape = Path::new("/tmp").join(&name);
    let _ = std::fs::remove_file(&escape);
    let err = stopped(GUEST_OPEN_FILE, tree.path());
    assert!(
        err.contains("handler open-file 0.1.0 (kpack:handler@1.1.0) was stopped"),
        "{err}"
    );
    assert!(
        err.contains("sandbox does not provide") && err.contains("wasi:filesystem"),
        "{err}"
    );
    assert!(!escape.exists(), "the guest wrote {}", escape.display());
}

/// Runs the `ambient` guest on one file named after `capability` and
/// returns the error; the guest must be stopped by the sandbox, with the
/// WASI interface it reached for named.
fn ambient_is_stopped(capability: &str, interface: &str) {
    let tree = tempfile::tempdir().unwrap();
    write(tree.path(), &format!("lib/{capability}.co"), b"x");
    let err = stopped(GUEST_AMBIENT, tree.path());
    assert!(
        err.contains("handler ambient 0.1.0 (kpack:handler@1.1.0) was stopped"),
        "{capability}: {err}"
    );
    assert!(
        err.contains("sandbox does not provide") && err.contains(interface),
        "{capability}: {err}"
    );
}

#[test]
fn guest_that_reads_the_clock_is_stopped() {
    ambient_is_stopped("clock", "wasi:clocks/");
}

#[test]
fn guest_that_reads_the_environment_is_stopped() {
    ambient_is_stopped("env", "wasi:cli/environment");
}

#[test]
fn guest_that_asks_for_randomness_is_stopped() {
    ambient_is_stopped("random", "wasi:random/");
}

#[test]
fn guest_that_opens_a_socket_is_stopped() {
    ambient_is_stopped("net", "wasi:sockets/");
}

#[test]
fn guest_built_for_a_newer_wit_major_is_refused() {
    let err = stopped(GUEST_WIT_2, small_tree().path());
    assert!(
        err.contains("built against kpack:handler@2.0.0; this kpack supports up to 1.1.0"),
        "{err}"
    );
}

#[test]
fn guest_pinned_to_wit_1_0_keeps_working_next_to_1_1() {
    let tree = seed_tree();
    write(tree.path(), "pinned/gfx942/a.bin", b"data");
    write(tree.path(), "pinned/b.bin", b"data");
    write(tree.path(), "pinned/c.bin", &amdgpu_elf(0x4c));
    let pinned = Path::new(GUEST_PINNED_1_0);
    let mut args = classify_args(&["rocblas"], tree.path(), &["--json"]);
    args.extend(["--plugin".to_string(), pinned.display().to_string()]);
    let o = Env::new().run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let wit: Vec<(String, String)> = doc["handlers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["name"].as_str().unwrap().to_string(),
                h["wit"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        wit,
        [
            ("rocblas".into(), "1.1.0".into()),
            ("pinned".into(), "1.0.0".into())
        ]
    );
    let key = |p: &str| {
        doc["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == p)
            .map(|f| f["key"].as_str().unwrap().to_string())
    };
    assert_eq!(key("pinned/gfx942/a.bin").as_deref(), Some("gfx942"));
    assert_eq!(key("pinned/b.bin").as_deref(), Some("generic"));
    assert_eq!(
        key("pinned/c.bin").as_deref(),
        Some("elf"),
        "1.0 guests get their prefix bytes"
    );
    assert_eq!(
        key("lib/rocblas/library/TensileLibrary_lazy_gfx1100.dat").as_deref(),
        Some("gfx1100")
    );
}

fn publish(env: &Env, wasm: &Path, registry: &Path) -> Output {
    env.run(&[
        "plugins".as_ref(),
        "publish".as_ref(),
        wasm.as_os_str(),
        "--registry".as_ref(),
        registry.as_os_str(),
    ])
}

#[test]
fn registry_resolves_semver_skips_yanked_and_verifies_checksums() {
    let env = Env::new();
    let reg = tempfile::tempdir().unwrap();
    for wasm in [GUEST_DEMO_1_2, GUEST_DEMO_1_3, GUEST_DEMO_2_0] {
        let o = publish(&env, Path::new(wasm), reg.path());
        assert!(o.status.success(), "{}", stderr(&o));
    }
    // Published versions are immutable.
    let again = publish(&env, Path::new(GUEST_DEMO_1_3), reg.path());
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("already published"),
        "{}",
        stderr(&again)
    );
    // One JSON line per version, cargo's index path.
    let index = std::fs::read_to_string(reg.path().join("de/mo/demo")).unwrap();
    let vers: Vec<String> = index
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| {
            assert_eq!(v["wit"], "1.1.0");
            assert_eq!(v["yanked"], false);
            v["vers"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(vers, ["1.2.0", "1.3.0", "2.0.0"]);

    let tree = tempfile::tempdir().unwrap();
    write(tree.path(), "demo/x", b"x");
    let url = format!("file://{}", reg.path().display());
    let key = |req: &str| {
        let o = env.run(&[
            "plugins",
            "classify",
            "--registry",
            &url,
            "--split-databases",
            req,
            &tree.path().display().to_string(),
        ]);
        assert!(o.status.success(), "{req}: {}", stderr(&o));
        stdout(&o)
    };
    assert_eq!(key("demo@^1.2"), "v1.3.0\tdemo\tdemo/x\n");
    assert_eq!(key("demo"), "v2.0.0\tdemo\tdemo/x\n");
    let o = env.run(&["plugins", "yank", "demo@1.3.0", "--registry", &url]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(key("demo@^1.2"), "v1.2.0\tdemo\tdemo/x\n");

    // `plugins add` installs the resolved version where name lookup finds it.
    let o = env.run(&["plugins", "add", "demo@^1", "--registry", &url]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        env.data
            .path()
            .join("kpack/plugins/demo-1.2.0.wasm")
            .is_file(),
        "{}",
        stdout(&o)
    );
    let o = env.run(&[
        "plugins",
        "classify",
        "--split-databases",
        "demo@^1",
        &tree.path().display().to_string(),
    ]);
    assert_eq!(stdout(&o), "v1.2.0\tdemo\tdemo/x\n", "{}", stderr(&o));

    // A blob that does not match its checksum is refused.
    std::fs::write(reg.path().join("blobs/demo/demo-2.0.0.wasm"), b"tampered").unwrap();
    let o = env.run(&["plugins", "add", "demo@^2", "--registry", &url]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("refusing to use it"), "{}", stderr(&o));
    let o = env.run(&["plugins", "add", "demo@^3", "--registry", &url]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no version of \"demo\" matches ^3"),
        "{}",
        stderr(&o)
    );
}

/// CI's versioned registry: publish every handler in plugins/ to a registry
/// inside the build directory, then classify the seed tree resolving them
/// from it.
#[test]
fn every_standard_handler_resolves_from_a_registry_in_the_build_dir() {
    let env = Env::new();
    let reg = tempfile::Builder::new()
        .prefix("kpack-registry-")
        .tempdir_in(scratch())
        .unwrap();
    for h in HANDLERS {
        let o = publish(&env, Path::new(h.path), reg.path());
        assert!(o.status.success(), "{}: {}", h.name, stderr(&o));
    }
    let reqs: Vec<String> = SEED_HANDLERS
        .iter()
        .map(|n| format!("{n}@^{}", env!("CARGO_PKG_VERSION")))
        .collect();
    let reqs: Vec<&str> = reqs.iter().map(String::as_str).collect();
    let tree = seed_tree();
    let mut args = classify_args(&reqs, tree.path(), &["--all"]);
    args.extend(["--registry".to_string(), reg.path().display().to_string()]);
    let o = env.run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(lines(&o), expected_seed_lines(true));
    args.push("--json".into());
    let doc: serde_json::Value = serde_json::from_slice(&env.run(&args).stdout).unwrap();
    for h in doc["handlers"].as_array().unwrap() {
        assert!(
            h["origin"].as_str().unwrap().starts_with("registry "),
            "{h}"
        );
    }
}

#[test]
fn compiled_components_are_cached() {
    let cache = tempfile::tempdir().unwrap();
    let run = || {
        Command::new(KPACK)
            .args(["plugins", "list"])
            .env("KPACK_PLUGIN_DIR", kpack_guests::DIR)
            .env("XDG_CACHE_HOME", cache.path())
            .output()
            .unwrap()
    };
    let first = run();
    assert!(first.status.success(), "{}", stderr(&first));
    let cached = std::fs::read_dir(cache.path().join("kpack/components"))
        .unwrap()
        .count();
    assert!(
        cached >= standard_handlers().len(),
        "{cached} compiled components cached"
    );
    let second = run();
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(stdout(&second), stdout(&first));
}

#[cfg(unix)]
fn script(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[cfg(unix)]
#[test]
fn external_subcommands_run_from_path_and_cannot_shadow_builtins() {
    let bin = tempfile::tempdir().unwrap();
    script(bin.path(), "kpack-hello", "echo \"hello $*\"; exit 7");
    script(bin.path(), "kpack-plugins", "echo shadowed; exit 0");
    let mut env = Env::new();
    let mut path = std::ffi::OsString::from(bin.path());
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    env.path = Some(path);

    let o = env.run(&["hello", "a", "b c"]);
    assert_eq!(o.status.code(), Some(7), "exit status passes through");
    assert_eq!(stdout(&o), "hello a b c\n");

    let o = env.run(&["plugins", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !stdout(&o).contains("shadowed"),
        "built-in `plugins` must win"
    );

    let o = env.run(&["--list"]);
    let out = stdout(&o);
    assert!(o.status.success());
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("hello") && l.contains("external")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("plugins") && !l.contains("external")),
        "{out}"
    );
    assert!(
        !out.lines()
            .any(|l| l.trim_start().starts_with("plugins") && l.contains("external")),
        "{out}"
    );

    let o = env.run(&["no-such-command"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no such command: `no-such-command`"),
        "{}",
        stderr(&o)
    );
}

/// A compiled-handler cache kpack must not trust is said once per run by
/// the CLI (the library reports it, it does not print), and the handlers
/// still load, compiled afresh.
#[cfg(unix)]
#[test]
fn an_untrusted_cache_is_said_once_per_run() {
    use std::os::unix::fs::PermissionsExt;
    let home = scratch().join("untrusted-cache");
    let _ = std::fs::remove_dir_all(&home);
    let cache = home.join("kpack");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = Command::new(KPACK)
        .args(["plugins", "list", "--split-databases", "rocblas,miopen"])
        .env("XDG_CACHE_HOME", &home)
        .env("KPACK_PLUGIN_DIR", kpack_guests::DIR)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out)
        .matches("warning: compiled-handler cache not used")
        .count();
    assert_eq!(said, 1, "{}", stderr(&out));
}
