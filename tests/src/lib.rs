//! Shared helpers for kpack's integration tests: where the fixtures are,
//! what clang-offload-bundler found in them (the oracle), tree digests, and
//! the stub HIP runtime the offloaded fixtures run under, and Windows
//! builds under wine ([`wine`]).
//!
//! Running the `kpack` binary is the tests' own business: they sit next to
//! the CLI crate and use the binary cargo built for them
//! (`env!("CARGO_BIN_EXE_kpack")`), so nothing here builds or guesses it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test support code"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub mod wine;

/// Root of the workspace.
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// A file under `tests/fixtures/`.
pub fn fixture(rel: &str) -> PathBuf {
    let p = workspace_root().join("tests/fixtures").join(rel);
    assert!(p.exists(), "fixture {} is missing", p.display());
    p
}

/// SHA-256 of bytes, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// stdout of a run as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr of a run as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every entry below `root`, sorted: relative path → `dir`,
/// `link:<target>` or `file:<mode>:<sha256>`. Two trees are byte-identical
/// (contents, symlinks, modes) when their digests are equal.
pub fn tree_digest(root: &Path) -> std::collections::BTreeMap<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let v = if meta.file_type().is_symlink() {
                format!("link:{}", std::fs::read_link(&p).unwrap().display())
            } else if meta.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else {
                format!(
                    "file:{:o}:{}",
                    meta.permissions().mode() & 0o7777,
                    sha256_hex(&std::fs::read(&p).unwrap())
                )
            };
            out.insert(rel, v);
        }
    }
    out
}

/// Executables and shared libraries with device code among the fixtures.
pub const FAT_FIXTURES: &[&str] = &[
    "exe_axpy_gfx1030",
    "exe_axpy_2arch",
    "exe_axpy_2arch_nopie",
    "exe_axpy_wide",
    "exe_axpy_feat",
    "exe_2tu_wide",
    "exe_rdc_2arch",
    "libaxpy_gfx1030.so",
    "libaxpy_2arch.so",
    "libaxpy_wide.so",
    "libaxpy_wide_stripped.so",
    "libaxpy_feat.so",
    "lib2tu_2arch.so",
    "lib2tu_2arch_debug.so",
    "librdc_2arch.so",
    "libaxpy_2arch_align64k.so",
    "exe_axpy_2arch_noseparate",
    "libaxpy_2arch_lld.so",
    "exe_2tu_2arch_lld",
];

/// Executables and shared libraries with device code among the clang-19
/// fixtures (`tests/fixtures/clang19`, see its README), with the layout
/// `kpack offload` takes for each: `shared-page` where `.hip_fatbin`
/// holds no whole page (compressed bundles are a few KiB).
pub const CLANG19_FAT_FIXTURES: &[(&str, &str)] = &[
    ("libaxpy_plain.so", "in-place"),
    ("libaxpy_ccob.so", "shared-page"),
    ("libaxpy_ccob_l19.so", "shared-page"),
    ("libaxpy_ccob_lld.so", "shared-page"),
    ("libaxpy_cov6.so", "in-place"),
    ("libaxpy_cov6_ccob.so", "shared-page"),
    ("libaxpy_feat_ccob.so", "shared-page"),
    ("libaxpy_xnack.so", "in-place"),
    ("libaxpy_generic.so", "in-place"),
    ("libaxpy_generic_ccob.so", "shared-page"),
    ("libaxpy_small.so", "shared-page"),
    ("exe_axpy_ccob", "shared-page"),
    ("exe_axpy_plain", "in-place"),
    ("lib2tu_ccob.so", "in-place"),
    ("lib2tu_plain.so", "in-place"),
    ("librdc_ccob.so", "shared-page"),
    ("exe_rdc_plain", "in-place"),
    ("exe_newdriver", "in-place"),
    ("libaxpy_aarch64_ccob.so", "shared-page"),
    ("exe_axpy_aarch64", "in-place"),
];

/// Executables and shared libraries with device code among the clang-22
/// fixtures (`tests/fixtures/clang22`, see its README), with the layout
/// `kpack offload` takes for each, as [`CLANG19_FAT_FIXTURES`].
pub const CLANG22_FAT_FIXTURES: &[(&str, &str)] = &[
    ("libaxpy_plain.so", "in-place"),
    ("libaxpy_ccob.so", "shared-page"),
    ("libaxpy_small.so", "shared-page"),
    ("exe_axpy_ccob", "shared-page"),
    ("exe_axpy_plain", "in-place"),
    ("libaxpy_spirv.so", "in-place"),
    ("libaxpy_spirv_ccob.so", "in-place"),
    ("libaxpy_spirv_only.so", "in-place"),
    ("exe_axpy_spirv", "in-place"),
    ("libaxpy_align32k.so", "in-place"),
    ("exe_newdriver", "in-place"),
];

/// `e_machine` of the ELF file at `path` (62 x86-64, 183 aarch64).
pub fn e_machine(path: &Path) -> u16 {
    let bytes = std::fs::read(path).unwrap();
    u16::from_le_bytes([bytes[18], bytes[19]])
}

/// One code object as clang-offload-bundler unbundled it (ORACLE.tsv).
#[derive(Debug, Clone)]
pub struct OracleEntry {
    /// Fixture file name.
    pub file: String,
    /// Bundle index in `.hip_fatbin` (the co_index).
    pub bundle: usize,
    /// Target id, e.g. `gfx90a:xnack+`.
    pub target: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256, lowercase hex.
    pub sha256: String,
}

/// Every code object of every fixture, from `tests/fixtures/corpus/ORACLE.tsv`.
pub fn oracle() -> &'static [OracleEntry] {
    static O: OnceLock<Vec<OracleEntry>> = OnceLock::new();
    O.get_or_init(|| read_oracle("corpus"))
}

/// Every code object of every clang-19 fixture, from
/// `tests/fixtures/clang19/ORACLE.tsv` (same columns).
pub fn clang19_oracle() -> &'static [OracleEntry] {
    static O: OnceLock<Vec<OracleEntry>> = OnceLock::new();
    O.get_or_init(|| read_oracle("clang19"))
}

/// Every device entry of every clang-22 fixture, from
/// `tests/fixtures/clang22/ORACLE.tsv` (same columns; SPIR-V modules too).
pub fn clang22_oracle() -> &'static [OracleEntry] {
    static O: OnceLock<Vec<OracleEntry>> = OnceLock::new();
    O.get_or_init(|| read_oracle("clang22"))
}

fn read_oracle(set: &str) -> Vec<OracleEntry> {
    {
        std::fs::read_to_string(fixture(&format!("{set}/ORACLE.tsv")))
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                OracleEntry {
                    file: f[0].into(),
                    bundle: f[1].parse().unwrap(),
                    target: f[2].rsplit("--").next().unwrap().into(),
                    size: f[3].parse().unwrap(),
                    sha256: f[4].into(),
                }
            })
            .collect()
    }
}

/// The stub HIP runtime (`libamdhip64.so.5` from tests/stub-hip) and the
/// `dlopen_host`, built once per process with `cc` into a directory under
/// `scratch`. With `capi` (the path of the built `librocm_kpack.so`), the
/// stub also loads every HIPK wrapper's code object through a private copy
/// of that library.
pub fn stub_hip(scratch: &Path, capi: Option<&Path>) -> &'static Path {
    static PLAIN: OnceLock<PathBuf> = OnceLock::new();
    static LOADING: OnceLock<PathBuf> = OnceLock::new();
    let cell = if capi.is_some() { &LOADING } else { &PLAIN };
    cell.get_or_init(|| {
        let dir = scratch.join(if capi.is_some() {
            "stub-hip-load"
        } else {
            "stub-hip"
        });
        std::fs::create_dir_all(&dir).unwrap();
        let s = |p: PathBuf| p.to_str().unwrap().to_owned();
        let src = workspace_root().join("tests/stub-hip");
        let mut lib_args = vec![
            "-shared".to_owned(),
            "-fPIC".into(),
            "-O1".into(),
            "-Wall".into(),
            "-Werror".into(),
            "-o".into(),
            s(dir.join("libamdhip64.so.5")),
            s(src.join("hip_stub.c")),
            "-Wl,-soname,libamdhip64.so.5".into(),
            format!("-Wl,--version-script={}", s(src.join("hip.map"))),
        ];
        if let Some(capi) = capi {
            // A private copy so a later rebuild cannot swap it under a running test.
            std::fs::copy(capi, dir.join("librocm_kpack.so"))
                .unwrap_or_else(|e| panic!("copy {}: {e}", capi.display()));
            // The stub records the library's SONAME, librocm_kpack.so.0, as
            // NEEDED: that name must exist too, as in an installed prefix.
            let soname = dir.join("librocm_kpack.so.0");
            let _ = std::fs::remove_file(&soname);
            std::os::unix::fs::symlink("librocm_kpack.so", &soname)
                .unwrap_or_else(|e| panic!("symlink {}: {e}", soname.display()));
            lib_args.extend([
                "-DKPACK_LOAD".into(),
                format!("-I{}", s(workspace_root().join("host/capi/include"))),
                s(src.join("kpack_load.c")),
                format!("-L{}", s(dir.clone())),
                "-lrocm_kpack".into(),
                format!("-Wl,-rpath,{}", s(dir.clone())),
            ]);
        }
        cc(&lib_args);
        cc(&[
            "-O1".into(),
            "-o".into(),
            s(dir.join("dlopen_host")),
            s(src.join("dlopen_host.c")),
            "-ldl".into(),
        ]);
        dir
    })
}

fn cc(args: &[String]) {
    let out = Command::new("cc").args(args).output().expect("run cc");
    assert!(
        out.status.success(),
        "cc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A command running `binary` under a stub HIP runtime: executables
/// directly, shared libraries through `dlopen_host`.
pub fn stub_command(stub: &Path, binary: &Path) -> Command {
    let is_lib = binary
        .file_name()
        .unwrap()
        .to_string_lossy()
        .contains(".so");
    let mut cmd = if is_lib {
        let mut c = Command::new(stub.join("dlopen_host"));
        c.arg(binary);
        c
    } else {
        Command::new(binary)
    };
    cmd.env("LD_LIBRARY_PATH", stub);
    cmd
}

/// The text AMD's compiler for ROCm 10 writes before a target id in
/// `amdhsa.target` (four-field triple, environment `unknown`), where LLVM
/// writes `amdgcn-amd-amdhsa--`.
pub const FOUR_FIELD_PREFIX: &str = "amdgcn-amd-amdhsa-unknown-";

/// `code_object` (an AMDGPU ELF64 code object as clang writes it) with
/// its metadata note's `amdhsa.target` respelled the way AMD's compiler
/// for ROCm 10 writes it (`amdgcn-amd-amdhsa-unknown-gfx942...`).
///
/// The msgpack string grows, so the note section is rebuilt at the end of
/// the file and its section header and `PT_NOTE` point there (no longer
/// allocated: address 0); the old note's bytes stay where they were,
/// referenced by nothing. Other notes are copied unchanged.
pub fn with_four_field_target(code_object: &[u8]) -> Vec<u8> {
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes(b[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
    let mut out = code_object.to_vec();
    assert_eq!(&out[..5], b"\x7fELF\x02", "an ELF64 code object");
    let (phoff, shoff) = (u64_at(&out, 0x20), u64_at(&out, 0x28));
    let (phentsize, phnum) = (u16_at(&out, 0x36), u16_at(&out, 0x38));
    let (shentsize, shnum) = (u16_at(&out, 0x3a), u16_at(&out, 0x3c));
    let note_section = (0..shnum)
        .map(|i| shoff + i * shentsize)
        .find(|&sh| u32_at(&out, sh + 4) == 7)
        .expect("a SHT_NOTE section");
    let (old_off, old_size) = (
        u64_at(&out, note_section + 0x18),
        u64_at(&out, note_section + 0x20),
    );
    let mut notes = Vec::new();
    let mut at = old_off;
    let mut respelled = false;
    while at < old_off + old_size {
        let (namesz, descsz, kind) = (u32_at(&out, at), u32_at(&out, at + 4), u32_at(&out, at + 8));
        let name = &out[at + 12..at + 12 + namesz];
        let desc_at = at + 12 + namesz.next_multiple_of(4);
        let mut desc = out[desc_at..desc_at + descsz].to_vec();
        if name == b"AMDGPU\0" && kind == 32 {
            desc = respell_metadata_target(&desc);
            respelled = true;
        }
        notes.extend_from_slice(&(namesz as u32).to_le_bytes());
        notes.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        notes.extend_from_slice(&(kind as u32).to_le_bytes());
        notes.extend_from_slice(name);
        notes.resize(notes.len().next_multiple_of(4), 0);
        notes.extend_from_slice(&desc);
        notes.resize(notes.len().next_multiple_of(4), 0);
        at = desc_at + descsz.next_multiple_of(4);
    }
    assert!(respelled, "no AMDGPU metadata note");
    out.resize(out.len().next_multiple_of(8), 0);
    let new_off = out.len() as u64;
    out.extend_from_slice(&notes);
    let put = |out: &mut Vec<u8>, o: usize, v: u64| out[o..o + 8].copy_from_slice(&v.to_le_bytes());
    // sh_flags without SHF_ALLOC, sh_addr 0, sh_offset, sh_size
    let flags = u64_at(&out, note_section + 8) as u64 & !2;
    put(&mut out, note_section + 8, flags);
    put(&mut out, note_section + 0x10, 0);
    put(&mut out, note_section + 0x18, new_off);
    put(&mut out, note_section + 0x20, notes.len() as u64);
    for ph in (0..phnum).map(|i| phoff + i * phentsize) {
        if u32_at(&out, ph) == 4 && u64_at(&out, ph + 8) == old_off {
            put(&mut out, ph + 8, new_off);
            put(&mut out, ph + 0x10, 0);
            put(&mut out, ph + 0x18, 0);
            put(&mut out, ph + 0x20, notes.len() as u64);
            put(&mut out, ph + 0x28, notes.len() as u64);
        }
    }
    out
}

/// The msgpack metadata `desc` with the string after the key
/// `amdhsa.target` respelled with [`FOUR_FIELD_PREFIX`]. msgpack maps carry
/// no byte lengths, so only the string's own header changes.
fn respell_metadata_target(desc: &[u8]) -> Vec<u8> {
    let key = b"\xadamdhsa.target";
    let k = desc
        .windows(key.len())
        .position(|w| w == key)
        .expect("amdhsa.target in the metadata");
    let v = k + key.len();
    let (len, head) = match desc[v] {
        b @ 0xa0..=0xbf => (usize::from(b & 0x1f), 1),
        0xd9 => (usize::from(desc[v + 1]), 2),
        b => panic!("amdhsa.target value type {b:#x}"),
    };
    let old = std::str::from_utf8(&desc[v + head..v + head + len]).unwrap();
    let new = old.replacen("amdgcn-amd-amdhsa--", FOUR_FIELD_PREFIX, 1);
    assert_ne!(old, new, "amdhsa.target {old:?} has no two-dash prefix");
    let mut out = desc[..v].to_vec();
    if new.len() < 32 {
        out.push(0xa0 | new.len() as u8);
    } else {
        out.extend_from_slice(&[0xd9, u8::try_from(new.len()).unwrap()]);
    }
    out.extend_from_slice(new.as_bytes());
    out.extend_from_slice(&desc[v + head + len..]);
    out
}
