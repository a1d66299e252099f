//! `kpack split` on its own output is refused (exit 2, nothing written):
//! arch artifacts hold kpack archives, generic artifacts hold binaries
//! kpack already offloaded. (`kpack offload` of an offloaded binary is
//! copied and reported: `offload::host_only_and_already_offloaded_inputs_are_copied_and_reported`;
//! wheels: `wheel::refuses_to_split_its_own_host_and_device_wheels`.)

use std::path::Path;

use kpack_tests::{fixture, stderr};

use crate::util::kpack;

fn split(args: &[&Path], extra: &[&str], out: &Path) -> std::process::Output {
    let mut a: Vec<std::ffi::OsString> = vec!["split".into()];
    a.extend(extra.iter().map(|s| s.into()));
    a.extend(args.iter().map(|p| p.as_os_str().to_owned()));
    a.extend(["-o".into(), out.as_os_str().to_owned()]);
    kpack(a)
}

fn nothing_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn split_refuses_split_output() {
    let tmp = tempfile::tempdir().unwrap();
    let shard = tmp.path().join("shard");
    let art = shard.join("axpy_lib");
    crate::util::artifact_with_library(&art, fixture("corpus/libaxpy_2arch.so"), "libaxpy.so");
    let first = tmp.path().join("first");
    let o = split(&[&shard], &["--batch"], &first);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(first.join("axpy_gfx90a").is_dir() && first.join("axpy_generic").is_dir());

    // The whole output as a shard: the arch artifacts are refused, naming
    // the archive, before anything is written.
    let again = tmp.path().join("again");
    let o = split(&[&first], &["--batch"], &again);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(".kpack: a kpack archive: this is the output of a split"),
        "{err}"
    );
    assert_eq!(nothing_in(&again), Vec::<String>::new());

    // One arch artifact.
    let o = split(&[&first.join("axpy_gfx90a")], &[], &again);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a kpack archive"), "{}", stderr(&o));
    assert_eq!(nothing_in(&again), Vec::<String>::new());

    // The generic artifact (its binaries carry markers).
    let o = split(
        &[&first.join("axpy_generic")],
        &["--component", "axpy"],
        &again,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("libaxpy.so: already offloaded by kpack")
            && err.contains("this is the output of a split"),
        "{err}"
    );
    assert_eq!(nothing_in(&again), Vec::<String>::new());
}

#[test]
fn split_of_an_offloaded_dll_names_the_pe_marker() {
    let tmp = tempfile::tempdir().unwrap();
    let offloaded = crate::util::offload_into(&fixture("pe/dll_1tu.dll"), tmp.path(), &[]);
    let art = tmp.path().join("shard/x_lib");
    crate::util::artifact_with_library(&art, &offloaded, "x.dll");
    let again = tmp.path().join("again");
    let o = split(&[&art], &["--component", "x"], &again);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    // Each format's own marker: a PE image's is `.kpackrf`.
    assert!(
        err.contains("x.dll: already offloaded by kpack (HIPK wrappers, .kpackrf marker)"),
        "{err}"
    );
    assert!(!err.contains(".rocm_kpack_ref"), "{err}");
    assert_eq!(nothing_in(&again), Vec::<String>::new());
}
