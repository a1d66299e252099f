use std::path::Path;

use super::*;

fn write(p: &Path, text: &str) {
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(p, text).unwrap();
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_new_root_is_one_rename_and_nothing_else_is_left() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("out");
    let mut o = Outputs::create(&root, "test", Existing::Refuse).unwrap();
    write(&o.plan("host.whl", Order::Last).unwrap(), "host");
    write(&o.plan("sub/dev.whl", Order::First).unwrap(), "dev");
    assert!(!root.exists(), "nothing is in place before commit");
    let paths = o.commit().unwrap();
    assert_eq!(paths, vec![root.join("sub/dev.whl"), root.join("host.whl")]);
    assert_eq!(read(&root.join("host.whl")), "host");
    assert_eq!(names(d.path()), vec!["out"]);
    assert_eq!(names(&root), vec!["host.whl", "sub"]);
}

#[test]
fn a_dropped_plan_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("deep/out");
    let mut o = Outputs::create(&root, "test", Existing::Refuse).unwrap();
    write(&o.plan("x", Order::First).unwrap(), "x");
    drop(o);
    assert!(names(d.path()).is_empty(), "{:?}", names(d.path()));
}

#[test]
fn an_existing_output_is_refused_unless_replaced() {
    let d = tempfile::tempdir().unwrap();
    write(&d.path().join("a"), "old");
    let mut o = Outputs::create(d.path(), "test", Existing::Refuse).unwrap();
    write(&o.plan("b", Order::First).unwrap(), "new b");
    write(&o.plan("a", Order::Last).unwrap(), "new a");
    assert!(matches!(o.check_existing(), Err(Error::Exists { .. })));
    assert!(matches!(o.commit(), Err(Error::Exists { .. })));
    assert_eq!(names(d.path()), vec!["a"], "b was not moved in either");
    assert_eq!(read(&d.path().join("a")), "old");

    let mut o = Outputs::create(d.path(), "test", Existing::Replace).unwrap();
    write(&o.plan("a", Order::Last).unwrap(), "new a");
    o.commit().unwrap();
    assert_eq!(read(&d.path().join("a")), "new a");
    assert_eq!(names(d.path()), vec!["a"]);

    // The command's own record is updated whatever the rule.
    let mut o = Outputs::create(d.path(), "test", Existing::Refuse).unwrap();
    write(&o.plan_update("a", Order::Last).unwrap(), "record");
    o.check_existing().unwrap();
    o.commit().unwrap();
    assert_eq!(read(&d.path().join("a")), "record");
}

#[test]
fn a_failed_move_undoes_every_move_before_it() {
    let d = tempfile::tempdir().unwrap();
    write(&d.path().join("old"), "old");
    write(
        &d.path().join("blocker"),
        "a file where a directory must be",
    );
    let mut o = Outputs::create(d.path(), "test", Existing::Replace).unwrap();
    write(&o.plan("old", Order::First).unwrap(), "new");
    write(&o.plan("first/archive", Order::First).unwrap(), "archive");
    write(&o.plan("blocker/host", Order::Last).unwrap(), "host");
    let e = o.commit().unwrap_err();
    assert!(matches!(e, Error::Commit { .. }), "{e}");
    assert_eq!(names(d.path()), vec!["blocker", "old"]);
    assert_eq!(
        read(&d.path().join("old")),
        "old",
        "the replaced file is back"
    );
}

#[cfg(unix)]
#[test]
fn a_symlink_inside_the_root_is_never_followed() {
    let d = tempfile::tempdir().unwrap();
    let (root, outside) = (d.path().join("root"), d.path().join("outside"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("lib")).unwrap();
    let mut o = Outputs::create(&root, "test", Existing::Replace).unwrap();
    write(&o.plan("lib/x.kpack", Order::First).unwrap(), "x");
    let e = o.commit().unwrap_err();
    assert!(e.to_string().contains("cannot move into place"), "{e}");
    assert!(names(&outside).is_empty());
}

#[test]
fn several_roots_commit_as_one() {
    let d = tempfile::tempdir().unwrap();
    let (archives, host) = (d.path().join("archives"), d.path().join("host"));
    std::fs::create_dir_all(&host).unwrap();
    std::fs::create_dir_all(host.join("lib.so")).unwrap();
    let mut a = Outputs::create(&archives, "test", Existing::Refuse).unwrap();
    write(&a.plan("lib_gfx942.kpack", Order::First).unwrap(), "a");
    let mut h = Outputs::create(&host, "test", Existing::Replace).unwrap();
    write(&h.plan("lib.so", Order::Last).unwrap(), "host");
    let e = commit_all(vec![a, h]).unwrap_err();
    assert!(matches!(e, Error::OutputIsDir { .. }), "{e}");
    assert!(!archives.exists(), "the archives' commit was not made");

    let mut a = Outputs::create(&archives, "test", Existing::Refuse).unwrap();
    write(&a.plan("lib_gfx942.kpack", Order::First).unwrap(), "a");
    let mut h = Outputs::create(&host, "test", Existing::Refuse).unwrap();
    write(&h.plan("other.so", Order::Last).unwrap(), "host");
    commit_all(vec![a, h]).unwrap();
    assert_eq!(read(&archives.join("lib_gfx942.kpack")), "a");
    assert_eq!(read(&host.join("other.so")), "host");
}

#[test]
fn plans_stay_inside_the_root_and_do_not_overlap() {
    let d = tempfile::tempdir().unwrap();
    let mut o = Outputs::create(d.path(), "test", Existing::Refuse).unwrap();
    for bad in ["", "../x", "/abs", "a/../b", "a\\b", "C:x", "a//b", "."] {
        assert!(o.plan(bad, Order::First).is_err(), "{bad:?}");
    }
    o.plan("a/b", Order::First).unwrap();
    for overlap in ["a/b", "a", "a/b/c"] {
        let e = o.plan(overlap, Order::First).unwrap_err();
        assert!(matches!(e, Error::PlannedTwice { .. }), "{overlap}: {e}");
    }
    assert!(matches!(o.commit(), Err(Error::NotStaged { .. })));
}

#[test]
fn input_names_are_plain_and_the_error_says_where_they_came_from() {
    let origin = Path::new("fat.whl");
    assert!(crate::input_name(origin, "METADATA Name", "fatpkg").is_ok());
    for bad in ["/var/tmp/esc/pwn", "..", "", "a/b", "a\\b", "C:x"] {
        let e = crate::input_name(origin, "METADATA Name", bad).unwrap_err();
        assert!(
            e.to_string().starts_with("fat.whl: METADATA Name"),
            "{bad:?}: {e}"
        );
    }
}

#[cfg(unix)]
#[test]
fn outputs_get_a_new_files_mode() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("out");
    let mut o = Outputs::create(&root, "test", Existing::Refuse).unwrap();
    let staged = o.plan("a.kpack", Order::First).unwrap();
    let mut f = crate::temp_file_in(staged.parent().unwrap(), "archive").unwrap();
    std::io::Write::write_all(&mut f, b"x").unwrap();
    f.persist(&staged).unwrap();
    o.commit().unwrap();
    let umask = crate::atomic::tests::umask();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&root.join("a.kpack")), 0o666 & !umask);
    assert_eq!(mode(&root), 0o777 & !umask);
}

#[test]
fn a_commit_killed_halfway_is_finished_by_the_next_run() {
    let d = tempfile::tempdir().unwrap();
    write(&d.path().join("host.whl"), "old host");
    // What a run killed after moving its first output leaves: its staging
    // directory with the journal and the outputs not yet moved.
    let holder = d.path().join(".kpack-tmp-99999999-wheel-abc");
    std::fs::create_dir_all(holder.join("out")).unwrap();
    write(&holder.join("out/host.whl"), "new host");
    write(&d.path().join("dev.whl"), "new dev");
    write(&holder.join(JOURNAL), "dev.whl\nhost.whl\n");
    let o = Outputs::create(d.path(), "test", Existing::Refuse).unwrap();
    drop(o);
    assert_eq!(names(d.path()), vec!["dev.whl", "host.whl"]);
    assert_eq!(read(&d.path().join("host.whl")), "new host");
}

/// A staging directory whose removal fails after the commit is recorded,
/// by name, for the command to report; the outputs stay in place.
#[cfg(target_os = "linux")]
#[test]
fn a_staging_directory_that_cannot_be_removed_is_reported() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    std::fs::create_dir(root.join("dir")).unwrap();
    let stuck = root.join("dir/stuck");
    write(&stuck, "old");
    // An immutable file inside the replaced output: the commit sets the
    // output aside in the staging directory, which then cannot be removed.
    let chattr = |flag: &str, p: &Path| {
        std::process::Command::new("chattr")
            .arg(flag)
            .arg(p)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !chattr("+i", &stuck) {
        eprintln!("skipped: chattr +i is not available here (root on ext4 needed)");
        return;
    }
    let mut o = Outputs::create(root, "test", Existing::Replace).unwrap();
    let staged = o.plan("dir", Order::First).unwrap();
    std::fs::create_dir(&staged).unwrap();
    write(&staged.join("new"), "new");
    let holder = o.holder.path().to_path_buf();
    let _ = take_left_behind();
    let committed = o.commit();
    let left = take_left_behind();
    let set_aside = holder.join(REPLACED).join("dir/stuck");
    chattr("-i", &set_aside);
    chattr("-i", &stuck);
    assert_eq!(committed.unwrap(), vec![root.join("dir")]);
    assert_eq!(read(&root.join("dir/new")), "new");
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].path, holder);
    std::fs::remove_dir_all(&holder).unwrap();
}

#[test]
fn identical_outputs_a_parallel_run_committed_first_are_kept() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("out");
    std::fs::create_dir(&root).unwrap();
    let stage = |text: &str| {
        let mut o = Outputs::create(&root, "test", Existing::KeepIdentical).unwrap();
        std::fs::create_dir_all(o.plan("art", Order::First).unwrap()).unwrap();
        write(&o.tree().join("art/a.txt"), text);
        write(&o.plan("b.txt", Order::Last).unwrap(), "b");
        o
    };
    // Both staged before either commits: the second finds the first's.
    let (first, second, third) = (stage("same"), stage("same"), stage("other"));
    let c = first.commit_report().unwrap();
    assert_eq!(c.written, vec![root.join("art"), root.join("b.txt")]);
    assert!(c.identical.is_empty());
    let c = second.commit_report().unwrap();
    assert_eq!(c.identical, vec![root.join("art"), root.join("b.txt")]);
    assert!(c.written.is_empty());
    match third.commit_report() {
        Err(Error::ExistsDiffering { path, first }) => {
            assert_eq!(path, root.join("art"));
            assert_eq!(first, Path::new("a.txt"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(read(&root.join("art/a.txt")), "same");
    assert_eq!(
        names(&root),
        vec!["art", "b.txt"],
        "no staging directory left"
    );
}

#[test]
fn a_staged_output_is_compared_early_under_the_runs_rule() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("out");
    write(&root.join("art/a.txt"), "old");
    let staged = |rule: Existing, text: &str| {
        let o = Outputs::create(&root, "test", rule).unwrap();
        write(&o.tree().join("art/a.txt"), text);
        write(&o.tree().join("new/a.txt"), text);
        o
    };
    for rule in [Existing::Refuse, Existing::KeepIdentical, Existing::Replace] {
        let same = staged(rule, "old");
        assert!(same.compare_staged("art").unwrap(), "{rule:?}: identical");
        assert!(!same.compare_staged("new").unwrap(), "{rule:?}: absent");
    }
    assert!(
        !staged(Existing::Replace, "new")
            .compare_staged("art")
            .unwrap()
    );
    for rule in [Existing::Refuse, Existing::KeepIdentical] {
        match staged(rule, "new").compare_staged("art") {
            Err(Error::ExistsDiffering { path, first }) => {
                assert_eq!((path, first), (root.join("art"), PathBuf::from("a.txt")));
            }
            other => panic!("{rule:?}: {other:?}"),
        }
    }
}

#[test]
fn a_planned_output_that_is_an_input_is_refused_at_plan() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in.bin");
    write(&input, "input");
    let linked = tempfile::tempdir().unwrap();
    std::fs::hard_link(&input, linked.path().join("link.bin")).unwrap();
    for root in [d.path(), linked.path()] {
        let mut o = Outputs::builder(root, "test", Existing::Replace)
            .inputs(&[&input])
            .create()
            .unwrap();
        let e = o.plan("link.bin", Order::Last).err();
        let e = e.or_else(|| o.plan("in.bin", Order::Last).err());
        assert!(matches!(e, Some(Error::SameFile { .. })), "{e:?}");
        assert!(o.plan("other.bin", Order::Last).is_ok());
    }
    assert_eq!(read(&input), "input");
}

#[cfg(target_os = "linux")]
#[test]
fn stale_temps_removed_are_listed() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join(".kpack-tmp-99999999-x-abc");
    let dir = d.path().join(".kpack-tmp-99999998-y-def");
    write(&file, "stale");
    std::fs::create_dir(&dir).unwrap();
    // A fresh root: the stale temps beside it, where it is staged.
    let o = Outputs::create(&d.path().join("new"), "test", Existing::Refuse).unwrap();
    let mut listed = o.removed_stale().to_vec();
    listed.sort();
    assert_eq!(listed, vec![dir.clone(), file.clone()]);
    assert!(!file.exists() && !dir.exists());
    drop(o);
    write(&file, "stale");
    let o = Outputs::create(d.path(), "test", Existing::Refuse).unwrap();
    assert_eq!(o.removed_stale(), [file]);
    let o = Outputs::create(d.path(), "test", Existing::Refuse).unwrap();
    assert!(o.removed_stale().is_empty());
}

#[test]
fn the_lock_is_held_until_drop() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let d = tempfile::tempdir().unwrap();
    let o = Outputs::builder(d.path(), "test", Existing::Refuse)
        .lock(|| panic!("the lock is free"))
        .create()
        .unwrap();
    let waited = AtomicBool::new(false);
    std::thread::scope(|s| {
        let t = s.spawn(|| crate::lock_dir(d.path(), || waited.store(true, Ordering::SeqCst)));
        while !waited.load(Ordering::SeqCst) && !t.is_finished() {
            std::thread::yield_now();
        }
        assert!(waited.load(Ordering::SeqCst), "the lock was not held");
        drop(o);
        assert!(t.join().unwrap().is_ok());
    });
}

#[test]
fn a_root_made_to_be_locked_stays_only_with_an_output_in_it() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("a/archives");
    let lock = || Outputs::builder(&root, "test", Existing::Refuse).lock(|| {});
    let o = lock().create().unwrap();
    assert!(root.is_dir(), "the root is made to be locked");
    assert!(o.commit().unwrap().is_empty());
    assert!(names(d.path()).is_empty(), "{:?}", names(d.path()));
    drop(lock().create().unwrap());
    assert!(names(d.path()).is_empty(), "{:?}", names(d.path()));
    let mut o = lock().create().unwrap();
    write(&o.plan("x.kpack", Order::First).unwrap(), "x");
    o.commit().unwrap();
    assert_eq!(names(&root), vec!["x.kpack"]);
}
